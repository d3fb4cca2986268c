package hivesched

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/devices"
	"github.com/hivesched/hivesched/plugins/metrics"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/plugins/podrequest"
	"github.com/hivesched/hivesched/plugins/recovery"
)

// awaitLeadership says that this process runs leader election: the plugin
// then recovers its state when the process starts leading, not in New
// (ensureRecovered says why). The scheduler command sets it from its
// configuration (cmd/hivesched-scheduler); a process without leader election
// (tests, a local cluster) recovers in New, as it is the only scheduler.
var awaitLeadership atomic.Bool

// AwaitLeadership makes plugins built from now on recover their state when
// the process starts leading (or first schedules, whichever comes first).
func AwaitLeadership(on bool) { awaitLeadership.Store(on) }

// ensureRecovered rebuilds the core's allocations (the seed's ec) the first
// time this process schedules, not when it starts: with leader election
// (the shipped configurations), a replica starts as a standby and only the
// leader schedules, so state read at process start would miss everything
// the old leader placed meanwhile (a standby, or the new pod of a rolling
// update, would double-allocate). Scheduling runs only in the leader, after
// the informers have synced, so the first PreFilter is the moment: the
// allocations are read from the pod informer, under the recovery gate, which
// the pod event handler also holds, so that no pod event is lost between the
// two. Until then the status writers write nothing (a standby's view is
// empty).
func (p *HiveSched) ensureRecovered(ctx context.Context) error {
	return p.recovery.Once(func() error { return p.recover(ctx) }, func() {
		p.seedAGs()
		p.vcs.Changed()
	})
}

// recover rebuilds from the informers' caches (the process leads, its
// informers run). Called under the recovery gate.
func (p *HiveSched) recover(ctx context.Context) error {
	f := p.handle.SharedInformerFactory()
	podInformer, nodeInformer := f.Core().V1().Pods(), f.Core().V1().Nodes()
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced, nodeInformer.Informer().HasSynced) {
		return fmt.Errorf("pod and node informers did not sync")
	}
	nodes, err := nodeInformer.Lister().List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := podInformer.Lister().List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	if p.dra != nil {
		// The claims and slices are read by their own handlers, which may
		// not have run yet: fed here first (updates are idempotent).
		slices, claims := f.Resource().V1().ResourceSlices(), f.Resource().V1().ResourceClaims()
		if !cache.WaitForCacheSync(ctx.Done(), slices.Informer().HasSynced, claims.Informer().HasSynced) {
			return fmt.Errorf("resource slice and claim informers did not sync")
		}
		sl, err := slices.Lister().List(labels.Everything())
		if err != nil {
			return fmt.Errorf("listing resource slices: %w", err)
		}
		cl, err := claims.Lister().List(labels.Everything())
		if err != nil {
			return fmt.Errorf("listing resource claims: %w", err)
		}
		p.dra.Feed(sl, cl)
	}
	return p.rebuild(ctx, nodes, pods, true)
}

// recoverFromAPI rebuilds from the API server, in New, before the informers
// start (a process without leader election).
func (p *HiveSched) recoverFromAPI(ctx context.Context) error {
	return p.recovery.Once(func() error { return p.rebuildFromAPI(ctx) }, p.seedAGs)
}

// rebuildFromAPI rebuilds from nodes and pods listed from the API server.
func (p *HiveSched) rebuildFromAPI(ctx context.Context) error {
	cs := p.handle.ClientSet()
	nl, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	pl, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	nodes, pods := pointers(nl.Items), pointers(pl.Items)
	if p.dra != nil {
		sl, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing resource slices: %w", err)
		}
		cl, err := cs.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing resource claims: %w", err)
		}
		claims := pointers(cl.Items)
		p.dra.Feed(pointers(sl.Items), claims)
		// The claim informer is not started yet: records are checked
		// against the listed claims.
		p.dra.ReadFromList(claims)
		defer p.dra.ReadFromInformer()
	}
	// Events recorded before the scheduler starts its event broadcaster
	// are dropped: the pod informer's first delivery reports untrusted
	// records instead.
	return p.rebuild(ctx, nodes, pods, false)
}

// pointers are pointers to a list's items, as listers return them.
func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// rebuild reads node health, the VCs, then every running group from its
// bound pods' signed placement records. Only Allocated groups are rebuilt;
// Pending and Preempting ones were not persisted and are simply scheduled
// again.
func (p *HiveSched) rebuild(ctx context.Context, nodes []*v1.Node, pods []*v1.Pod, report bool) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	present := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		present[n.Name] = true
		if _, known := p.core.NodeHealthOf(n.Name); known {
			_ = p.core.SetNodeHealth(n.Name, devices.NodeHealth(n))
			p.nodeDevices(logger, n)
		}
	}
	p.markAbsent(logger, p.core.NodeNames(), present)
	vcs, err := p.vcClient.HiveschedV1alpha1().VirtualClusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing virtual clusters (is the CRD installed?): %w", err)
	}
	for i := range vcs.Items {
		p.applyVC(logger, &vcs.Items[i])
	}
	untrusted := 0
	groups := recovery.Groups(pods, p.trustedRecord, func(pod *v1.Pod, err error) {
		untrusted++
		if report {
			p.refuseRecord(logger, pod, err)
		} else {
			logger.Info("placement record not trusted: the pod's cells are not counted as hivesched's", "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "err", err)
		}
	})
	recovered := 0
	for _, g := range groups {
		if p.recoverGroup(logger, g, "after a scheduler restart") == nil {
			recovered++
		}
	}
	// Every running pod the core does not hold now holds devices it must
	// not hand out: pods of other schedulers, pods created with
	// spec.nodeName or with an untrusted record, groups not taken back.
	p.devices.ResetForeign(logger)
	for _, pod := range pods {
		p.noteForeign(logger, pod, false, report)
	}
	if p.dra != nil {
		// The claims of recovered pods are hivesched's; every allocated
		// claim's devices are claimed: those no recovered group holds are
		// taken (other allocators', refused ones, not released yet).
		p.claimsRecovered(pods)
		for _, n := range nodes {
			p.draNode(logger, n.Name, false)
		}
	}
	metrics.Recovery(time.Since(start), recovered, len(groups)-recovered, untrusted)
	logger.Info("recovered allocations", "groups", recovered, "untrustedPlacements", untrusted, "nodes", len(nodes), "virtualClusters", len(vcs.Items))
	return nil
}

// refuseRecord reports a bound pod whose placement record is not trusted:
// its cells are not hivesched's allocation.
func (p *HiveSched) refuseRecord(logger klog.Logger, pod *v1.Pod, err error) {
	if !p.groups.FirstRefusal(pod) {
		return
	}
	logger.Info("placement record not trusted: the pod's cells are not counted as hivesched's", "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "err", err)
	p.event(pod, v1.EventTypeWarning, "PlacementNotTrusted", "hivesched does not count this pod's cells: "+err.Error())
}

// recoverGroup adds a running group back to the core from its pods' records
// (all from one group, trusted) and tracks the pods as its members, keyed by
// the records, whatever their labels say now.
func (p *HiveSched) recoverGroup(logger klog.Logger, g recovery.Group, when string) error {
	name := g.Name
	res, recorded, err := g.Recover(p.core)
	if err != nil {
		logger.Error(err, "affinity group not recovered", "group", name)
		for _, m := range g.Pods {
			p.event(m.Pod, v1.EventTypeWarning, "RecoveryFailed", err.Error())
		}
		return err
	}
	for _, m := range g.Pods {
		p.groups.TrackRecorded(m.Pod, m.Record.Request())
	}
	p.vcs.Changed()
	if res.Downgraded {
		logger.Info(res.Reason, "group", name)
		// Every pod's record is to say so (a restart may have come before
		// all of them were written); the pods hear of it only if it is news.
		note := ""
		if !recorded {
			note = when + ", " + res.Reason + "; it keeps running (priority -1), and any guaranteed group may preempt it"
		}
		p.downgraded(logger, name, note)
	}
	return nil
}

// adopt reconciles a bound pod the core does not hold (called from the pod
// informer once recovered): a pod whose bind the scheduler saw fail although
// it went through (a lost response), or one bound by another replica. If
// its group is unknown to the core, or Pending (rolled back), the group is
// rebuilt from its bound members' records, so that its cells are never
// handed out again; a group the core holds with other cells cannot take it,
// which is reported.
func (p *HiveSched) adopt(logger klog.Logger, pod *v1.Pod, rec placement.Record) {
	if rec.CellLess() || p.core.PodAssigned(rec.Group, podrequest.PodKey(pod)) {
		return // a member without cells holds nothing of the core's
	}
	st, known := p.core.AffinityGroupState(rec.Group)
	if known && st != cellcore.AGPending {
		msg := fmt.Sprintf("pod is bound with a placement of affinity group %s, which the scheduler holds on other cells (%s): its cells are not counted; delete the pod to reschedule it", rec.Group, st)
		logger.Error(nil, msg, "pod", klog.KObj(pod))
		p.event(pod, v1.EventTypeWarning, "PlacementNotInCache", msg)
		return
	}
	ms := []recovery.Recorded{{Pod: pod, Record: rec}}
	for _, other := range p.groups.Pods(rec.Group) {
		if other.UID == pod.UID || other.Spec.NodeName == "" || other.DeletionTimestamp != nil {
			continue
		}
		if r, err := p.trustedRecord(other); err == nil && r.Group == rec.Group {
			ms = append(ms, recovery.Recorded{Pod: other, Record: r})
		}
	}
	if known {
		// Pending: no cells held. Its pods waiting to schedule join the
		// rebuilt group's empty slots.
		if _, err := p.core.DeleteAffinityGroup(rec.Group); err != nil {
			logger.Error(err, "replacing a pending group by its bound pods", "group", rec.Group)
			return
		}
	}
	if p.recoverGroup(logger, recovery.Group{Name: rec.Group, Pods: ms}, "when a bound pod of it was found") == nil {
		logger.Info("adopted a bound affinity group the scheduler did not hold", "group", rec.Group, "pods", len(ms), "pod", klog.KObj(pod))
	}
}

// seedAGs notes every tracked member pod once this process has recovered
// (pods seen before were only indexed).
func (p *HiveSched) seedAGs() {
	if p.ags == nil {
		return
	}
	for _, pod := range p.groups.AllPods() {
		if req, err := p.request(pod); err == nil && req != nil {
			p.ags.Seen(pod, req)
		}
	}
}

// markAbsent counts the physical cluster's nodes that do not exist (not in
// present) as lost capacity, as a deleted node is (onNode): a node the
// configuration names that was never created or was deleted while no
// scheduler ran, a tray missing from an NVLink domain (docs/nvlink.md), an
// absent node padding a derived group short of its nodeGroupSizes. Not
// Unknown, which is capacity expected back and not counted: the VC whose
// virtual cells the loss leaves short gets doomed cells, and its status
// says so. The node joins as it is once it is created.
func (p *HiveSched) markAbsent(logger klog.Logger, names []string, present map[string]bool) {
	var absent []string
	for _, name := range names {
		if present[name] {
			continue
		}
		if h, known := p.core.NodeHealthOf(name); !known || h == cellcore.NodeBad {
			continue
		}
		if err := p.core.SetNodeHealth(name, cellcore.NodeBad); err != nil {
			logger.Error(err, "marking an absent node", "node", name)
			continue
		}
		metrics.NodeHealthChanged(cellcore.NodeBad)
		absent = append(absent, name)
	}
	if len(absent) > 0 {
		logger.Info("nodes of the physical cluster that do not exist: counted as lost capacity (health bad) until they are created", "nodes", absent)
		p.vcs.Changed()
	}
}

package hivesched

import (
	"context"
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/apis/generated/informers/externalversions"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/devices"
	"github.com/hivesched/hivesched/plugins/metrics"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// startInformers hands the informers' events to the handlers below and
// sets up what reads pods' requests from the objects their groups name.
func (p *HiveSched) startInformers(ctx context.Context) {
	logger := klog.FromContext(ctx)
	f := p.handle.SharedInformerFactory()
	_, _ = f.Core().V1().Nodes().Informer().AddEventHandler(handle(logger, p.onNode))
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(handle(logger, p.onPod))
	vf := externalversions.NewSharedInformerFactory(p.vcClient, 0)
	_, _ = vf.Hivesched().V1alpha1().VirtualClusters().Informer().AddEventHandler(handle(logger, p.onVC))
	agInf := vf.Hivesched().V1alpha1().AffinityGroups()
	_, _ = agInf.Informer().AddEventHandler(handleGroupObject(logger, p.onAG))
	p.startWorkloadInformers(logger)
	lookups := podrequest.Lookups{AffinityGroups: agInf.Lister(), PodGroups: p.pgs.listerOrNil, GangPods: p.groups.GangPods, RecordedRole: p.groups.RecordedRole}
	if p.wl != nil {
		lookups.Workloads = p.wl.listers
	}
	if p.dra != nil {
		lookups.Claims = func(pod *v1.Pod) (int64, bool, error) { return p.dra.PodLeaves(pod, p.resource) }
		_, _ = f.Resource().V1().ResourceSlices().Informer().AddEventHandler(handle(logger, p.onSlice))
		_, _ = f.Resource().V1().ResourceClaims().Informer().AddEventHandler(handle(logger, p.onClaim))
	}
	if p.topo != nil {
		nodes, slices := p.topologyHandlers()
		nodeInf, sliceInf := f.Core().V1().Nodes().Informer(), f.Resource().V1().ResourceSlices().Informer()
		_, _ = nodeInf.AddEventHandler(nodes)
		_, _ = sliceInf.AddEventHandler(slices)
		go p.runTopology(ctx, nodeInf.HasSynced, sliceInf.HasSynced)
	}
	p.groups.SetResolver(podrequest.NewResolver(p.resource, lookups))
	vf.Start(ctx.Done())
	p.startPodGroupInformer(ctx, logger)
}

// handle adapts on to an informer's event handler: on sees each object
// added, updated (its new version) or deleted (tombstones unwrapped).
func handle(logger klog.Logger, on func(logger klog.Logger, obj interface{}, deleted bool)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { on(logger, obj, false) },
		UpdateFunc: func(_, obj interface{}) { on(logger, obj, false) },
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			on(logger, obj, true)
		},
	}
}

// handleGroupObject adapts on, the handler of objects that describe pods'
// groups (AffinityGroups, PodGroups), as handle does, and tells it whether
// the refused pods they describe are to be read again (reread): on an add,
// and on an update that changed what a pod's request is read from, not on a
// status write or a resync, which kube-scheduler's and hivesched's own
// status writers make often (each re-read every refused pod the object
// describes).
func handleGroupObject(logger klog.Logger, on func(logger klog.Logger, obj interface{}, deleted, reread bool)) cache.ResourceEventHandlerFuncs {
	h := handle(logger, func(logger klog.Logger, obj interface{}, deleted bool) { on(logger, obj, deleted, !deleted) })
	h.UpdateFunc = func(old, obj interface{}) { on(logger, obj, false, requestInputsChanged(old, obj)) }
	return h
}

// requestInputsChanged: what a pod's request is read from in a group's
// object changed between two versions of it: its spec, its labels or
// annotations, whether it is being deleted. The spec is compared by its
// generation, which the API server raises on every change of a custom
// resource's spec; the Workload API's pod groups keep no generation, and
// their specs are compared; any other object without one counts as
// changed.
func requestInputsChanged(old, obj interface{}) bool {
	a, errA := meta.Accessor(old)
	b, errB := meta.Accessor(obj)
	if errA != nil || errB != nil {
		return true
	}
	if a.GetUID() != b.GetUID() || (a.GetDeletionTimestamp() == nil) != (b.GetDeletionTimestamp() == nil) ||
		!maps.Equal(a.GetLabels(), b.GetLabels()) || !maps.Equal(a.GetAnnotations(), b.GetAnnotations()) {
		return true
	}
	if b.GetGeneration() != 0 {
		return a.GetGeneration() != b.GetGeneration()
	}
	switch o := obj.(type) {
	case *schedv1beta1.PodGroup:
		if prev, ok := old.(*schedv1beta1.PodGroup); ok {
			return !apiequality.Semantic.DeepEqual(prev.Spec, o.Spec)
		}
	case *schedv1alpha3.CompositePodGroup:
		if prev, ok := old.(*schedv1alpha3.CompositePodGroup); ok {
			return !apiequality.Semantic.DeepEqual(prev.Spec, o.Spec)
		}
	}
	return true
}

// onNode hands a node's health and devices to the core.
func (p *HiveSched) onNode(logger klog.Logger, obj interface{}, deleted bool) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	h := devices.NodeHealth(n)
	if deleted {
		h = cellcore.NodeBad // gone from the cluster: its capacity is lost
	}
	old, known := p.core.NodeHealthOf(n.Name)
	if !known {
		logger.V(5).Info("node is not in the physical cluster", "node", n.Name)
		return
	}
	if !deleted && p.nodeDevices(logger, n) {
		p.vcs.Changed()
		p.activateWaiting(logger, "")
	}
	if old == h {
		return
	}
	if err := p.core.SetNodeHealth(n.Name, h); err != nil {
		logger.Error(err, "setting node health", "node", n.Name)
		return
	}
	metrics.NodeHealthChanged(h)
	logger.V(2).Info("node health", "node", n.Name, "from", old, "to", h)
	p.vcs.Changed()
	if h == cellcore.NodeHealthy {
		// Capacity came back. The queue's own node-update hint may have run
		// before this handler, so requeue the waiting pods here.
		p.activateWaiting(logger, "")
	}
}

// onPod keeps the group index and drives the core's pod deletions: a pod that
// is deleted or has finished frees its group's cells once the whole group is
// gone (AG e3/e4/e7/e8, cell e9 for a victim's Reserving cells). Until this
// process has recovered (it is not leading yet) only the index is kept: the
// core holds nothing a pod could free, and recovery reads the pods afresh.
func (p *HiveSched) onPod(logger klog.Logger, obj interface{}, deleted bool) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	p.groups.NoteGangPod(pod, deleted)
	if deleted || pod.DeletionTimestamp != nil {
		// An elastic gang not placed yet lost a pod: its extras may be
		// members now (elastic.go).
		p.rereadExtras(logger, pod)
	}
	if !deleted && podrequest.MayAsk(pod, p.resource) {
		// Read the request here, outside every lock (the recovery gate's
		// below, the queue's in the framework's callbacks, which only
		// read what was read here).
		req, err := p.groups.Request(pod)
		if err == nil && req != nil && pod.Spec.NodeName == "" {
			// A composite's request needs a pod of each of its pod
			// groups: its other pods, read before this one came, wait.
			p.compositeMemberRead(logger, pod)
			// A gang's shape needs all its pods (members without leaf
			// cells): its other pods, read before this one came, wait.
			p.gangMemberRead(logger, pod)
		}
		if err != nil {
			p.noteMissingPodGroup(logger, pod, err)
			if podrequest.IsWaiting(err) && pod.Spec.NodeName == "" {
				p.watchWaiting(pod)
			}
		}
	}
	if deleted {
		p.wl.noteMissing(pod.UID, false)
		p.waiting.Delete(pod.UID)
		p.groups.DropRefused(pod.UID)
	}
	p.recovery.Hold(func(recovered bool) { p.podChanged(logger, pod, deleted, recovered) })
	if !deleted && p.groups.Ungate(pod) {
		// PreEnqueue held it back until its request was read.
		p.handle.Activate(logger, map[string]*v1.Pod{pod.Namespace + "/" + pod.Name: pod})
	}
}

// podChanged is onPod's work, under the recovery gate (recovered: this
// process holds the allocations).
func (p *HiveSched) podChanged(logger klog.Logger, pod *v1.Pod, deleted, recovered bool) {
	if recovered {
		// After the pod's own handling below: a pod the core does not hold
		// (any more) that runs on a node holds devices all the same.
		defer p.noteForeign(logger, pod, deleted, true)
	}
	if !p.ours(pod) {
		if pod.Spec.NodeName != "" && !deleted {
			// Bound, and not by a hivesched (or its record was tampered
			// with): never a member of a group. Forget it if it was
			// tracked while pending.
			if req, _ := p.groups.Untrack(pod); req != nil && recovered {
				if _, err := p.core.DeletePod(req.Group.Name, podrequest.PodKey(pod)); err != nil {
					logger.Error(err, "releasing a pod's cells", "pod", klog.KObj(pod), "group", req.Group.Name)
				}
			}
			if _, placed := pod.Annotations[placement.Annotation]; placed && recovered {
				if _, err := p.signer.Trusted(pod); err != nil {
					p.refuseRecord(logger, pod, err)
				}
			}
		}
		if deleted {
			p.groups.ForgetRefusal(pod)
		}
		return
	}
	// A terminating pod still holds its devices until it is gone: its cells
	// are released on deletion (or once it has finished), not before.
	if !deleted && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed {
		if p.groups.SpecChanged(pod) {
			p.event(pod, v1.EventTypeWarning, "SchedulingSpecChangeIgnored", fmt.Sprintf(
				"the labels or annotations that make this pod's request changed after hivesched read them: a pod stays in the affinity group it first asked for (%s); delete and recreate the pod to change its request",
				p.groups.GroupOf(pod)))
		}
		if recovered && pod.Spec.NodeName != "" && !p.groups.IsPinned(pod) {
			// Bound: its group is the one its record names (the record
			// is what a restart reads).
			if rec, err := p.trustedRecord(pod); err == nil {
				p.groups.TrackRecorded(pod, rec.Request())
				p.adopt(logger, pod, rec)
			} else if _, signed := p.signer.Trusted(pod); signed == nil && !p.coreHolds(pod) {
				// Signed, but its GPU claims do not hold what hivesched
				// allocated: not hivesched's allocation.
				p.refuseRecord(logger, pod, err)
			}
		}
		if recovered {
			if how := deletedWhileRunning(pod); how != "" {
				// Deleted by anyone but HiveSched while it runs: its
				// gang ends whole now, not once its grace period is over.
				if group := p.groups.GroupOf(pod); group != "" {
					p.memberLost(logger, pod, group, how)
				}
			}
		}
		group, complete := p.groups.Track(pod)
		if group != "" && !complete && pod.Spec.NodeName == "" {
			if req, err, ok := p.groups.Cached(pod); ok && err == nil && req != nil && p.groups.MemberCount(group) < req.TotalPods() {
				p.watchWaiting(pod) // its gang waits for members: told if it still does later
			}
		}
		if group != "" && recovered {
			if req, err := p.request(pod); err == nil && req != nil {
				p.ags.Seen(pod, req)
			}
		}
		if complete {
			// The gang's last member exists: its gated members may go.
			go p.activate(logger, []string{group})
		}
		if group != "" && recovered && p.needsDowngradeRecord(pod, group) {
			// Bound after its group's downgrade (or a patch was lost): the
			// record writer checks with the core and records it.
			p.records.Add(pod)
		}
		return
	}
	if !recovered {
		p.groups.Untrack(pod)
		return
	}
	// A member taken while it ran ends its whole gang (memberloss.go);
	// asked before its cells are released, while its group is Allocated.
	if group := p.groups.GroupOf(pod); group != "" {
		if how := deletedWhileRunning(pod); how != "" {
			p.memberLost(logger, pod, group, how)
		} else if deleted {
			p.settleLost(logger, pod, group)
		}
	}
	if p.dra != nil && p.dra.DeferRelease(pod, deleted) {
		// Its GPU claims still hold its devices (the resourceclaim
		// controller releases them after the pod): its cells stay its
		// group's until they do (onClaim), so that no other claim is
		// given a device still allocated to, and prepared for, this one.
		logger.V(2).Info("pod gone, its GPU claims not released yet: its cells wait for them", "pod", klog.KObj(pod))
		return
	}
	if deleted {
		// A member of an elastic gang's minimum gives its slot to an extra
		// of its size before its cells go (elastic.go).
		p.promoteOnDeletion(logger, pod)
	}
	// Release the cells before the pod leaves the index: while it is in
	// the index the queue's pod-deleted hint leaves the waiting pods alone
	// (hintPodDeleted), so none is tried against cells about to be freed.
	var res cellcore.PodDeletion
	var err error
	if group := p.groups.GroupOf(pod); group != "" {
		res, err = p.core.DeletePod(group, podrequest.PodKey(pod))
	}
	req, empty := p.groups.Untrack(pod)
	if req == nil {
		return
	}
	group := req.Group.Name
	if err != nil {
		logger.Error(err, "releasing a pod's cells", "pod", klog.KObj(pod), "group", group)
	}
	p.ags.Gone(group, pod, deleted, empty)
	p.vcs.Changed()
	freed := res.FreedLeaves
	if empty {
		p.binds.retries.Forget(group)
	}
	if empty && !res.GroupDeleted {
		// Nothing of the group is left in Kubernetes: Pending (e8) or
		// Preempting (e7) groups, or allocations whose pods never bound.
		del, err := p.core.DeleteAffinityGroup(group)
		if err != nil {
			logger.Error(err, "deleting an affinity group", "group", group)
		}
		freed += del.FreedLeaves
	}
	if empty || res.GroupDeleted {
		p.lostGangGone(logger, group)
	}
	if len(res.ReadyPreemptors) > 0 {
		p.activate(logger, res.ReadyPreemptors)
	}
	if freed > 0 {
		// Cells went Free. The queue's own pod-deleted hint may have run
		// before this handler released them, so requeue who may use them.
		// A preempted victim's cells go Reserved for its preemptor instead
		// (activated above): nobody else can use them, and requeueing every
		// waiting pod for each victim would be wasted work.
		p.activateWaiting(logger, "")
	}
}

func (p *HiveSched) onVC(logger klog.Logger, obj interface{}, deleted bool) {
	vc, ok := obj.(*hv1.VirtualCluster)
	if !ok {
		return
	}
	if !deleted {
		if !p.vcs.Refresh(vc) { // unless only its status changed
			p.applyVC(logger, vc)
			p.topo.kickIfRefused() // a change of the physical cluster may fit it now
		}
		return
	}
	res, err := p.vcs.Remove(vc.Name)
	if err != nil {
		logger.V(2).Info("removing virtual cluster", "virtualCluster", vc.Name, "err", err)
	}
	for _, g := range res.Downgraded {
		logger.Info("virtual cluster deleted: affinity group runs on as opportunistic", "virtualCluster", vc.Name, "group", g)
		p.downgraded(logger, g, vcNote(g, vc.Name, "was deleted"))
	}
	p.vcs.Changed()
	p.topo.kickIfRefused()
}

// applyVC hands a VC's spec to the core. A spec the cluster cannot host is
// Rejected (status condition and event); the other VCs keep working.
func (p *HiveSched) applyVC(logger klog.Logger, vc *hv1.VirtualCluster) {
	res, newlyRejected, err := p.vcs.Apply(vc)
	if err != nil {
		logger.Error(err, "virtual cluster rejected", "virtualCluster", vc.Name)
		if newlyRejected {
			p.event(vc, "Warning", "Rejected", err.Error())
		}
		return
	}
	for _, g := range res.Downgraded {
		logger.Info("virtual cluster shrank: affinity group runs on as opportunistic (lazy preemption)", "virtualCluster", vc.Name, "group", g)
		p.event(vc, "Normal", "Downgraded", fmt.Sprintf("affinity group %s no longer fits the virtual cluster and runs on as opportunistic", g))
		p.downgraded(logger, g, vcNote(g, vc.Name, "shrank below what its groups use"))
	}
	p.activateWaiting(logger, vc.Name) // its capacity changed
}

func (p *HiveSched) onAG(logger klog.Logger, obj interface{}, deleted, reread bool) {
	ag, ok := obj.(*hv1.AffinityGroup)
	if !ok {
		return
	}
	p.ags.Object(ag, deleted)
	if reread && ag.Labels[hv1.LabelManagedBy] != hv1.ManagedByHivesched {
		// Pods that came before their explicit group are read again.
		p.rereadReleased(logger, "affinity_group", []string{podrequest.ReleaseKeyAffinityGroup(ag.Namespace, ag.Name)},
			func(pod *v1.Pod) bool { return pod.Labels[LabelAffinityGroup] == ag.Name })
	}
}

// rereadReleased re-reads the refused requests of the unbound pods that
// the objects keys name may release (podrequest.ReleaseKeys) and that
// match, and sends them back to the active queue, with the unbound
// members of each gang a re-read pod completes: PreEnqueue held those back
// ("waiting for the members"), and no other event releases them (the
// Track that completes a gang is the one that must say so). It costs the
// pods the keys concern (the index's refused pods), not the namespace's.
//
// kind names the object's kind for the metric of the time it takes.
func (p *HiveSched) rereadReleased(logger klog.Logger, kind string, keys []string, match func(*v1.Pod) bool) {
	start := time.Now()
	defer func() { metrics.GroupObjectReread(kind, time.Since(start)) }()
	refused := p.groups.Released(keys...)
	if len(refused) == 0 {
		return
	}
	// The index holds each pod as last read: read its current version.
	lister := p.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	pods := make([]*v1.Pod, 0, len(refused))
	for _, old := range refused {
		if cur, err := lister.Pods(old.Namespace).Get(old.Name); err == nil && cur.UID == old.UID {
			pods = append(pods, cur)
		}
	}
	p.rereadPods(logger, pods, match)
}

// gangMemberRead re-reads the refused (waiting) requests of the other
// unbound pods of a framework gang object once one of its pods was read:
// the gang's shape is read from all its pods (podrequest's gangShape),
// which the earlier ones waited for.
func (p *HiveSched) gangMemberRead(logger klog.Logger, pod *v1.Pod) {
	key, ok := podrequest.GangKeyOf(pod)
	if !ok {
		return
	}
	p.rereadPods(logger, p.groups.GangPods(key), func(other *v1.Pod) bool { return other.UID != pod.UID })
}

// rereadPods re-reads the refused requests of the unbound pods match
// selects, and sends those it makes complete gangs of back to the queue.
func (p *HiveSched) rereadPods(logger klog.Logger, pods []*v1.Pod, match func(*v1.Pod) bool) {
	activate := map[string]*v1.Pod{}
	for _, pod := range pods {
		if pod.Spec.NodeName != "" || !match(pod) || !p.groups.ForgetRefused(pod) {
			continue
		}
		// Read again, and counted for the gang gate.
		if group, complete := p.groups.Track(pod); complete {
			for _, m := range p.groups.Pods(group) {
				if m.Spec.NodeName == "" {
					activate[m.Namespace+"/"+m.Name] = m
				}
			}
		}
		activate[pod.Namespace+"/"+pod.Name] = pod
	}
	if len(activate) > 0 {
		p.handle.Activate(logger, activate)
	}
}

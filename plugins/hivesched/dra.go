package hivesched

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/hivesched/hivesched/apis/config"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/dra"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// GPU claims (DRA; docs/dra.md). plugins/dra's State allocates a pod's GPU
// claims with exactly the devices of its cells and keeps what that needs;
// here are its wiring, the informers' handlers that hand its facts to the
// core, and what the extension points sequence with it (the decision's
// allocation in flight, PreBind's writes, recovery's trust). The profile's
// DynamicResources runs wrapped (HiveSchedDRA, draplugin.go).

// newDRA is the DRA side for args, nil without GPU classes or a DRA
// manager.
func newDRA(args *config.HiveSchedArgs, h fwk.Handle) *dra.State {
	cfg := dra.NewConfig(args.DRA.GPUDeviceClasses, args.DRA.Driver)
	if !cfg.Enabled() || h.SharedDRAManager() == nil {
		return nil
	}
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	f := h.SharedInformerFactory()
	return dra.NewState(cfg, dra.Inputs{
		Manager:  h.SharedDRAManager(),
		Client:   h.ClientSet(),
		Claims:   f.Resource().V1().ResourceClaims().Lister(),
		Pods:     f.Core().V1().Pods().Lister(),
		Nodes:    f.Core().V1().Nodes().Lister(),
		Features: dynamicresources.AllocatorFeatures(fts),
	})
}

// onSlice hands a ResourceSlice change to the slice index and the nodes'
// devices (health from device taints, claimed devices) to the core.
func (p *HiveSched) onSlice(logger klog.Logger, obj interface{}, deleted bool) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return
	}
	for _, node := range p.dra.SliceChanged(s, deleted) {
		p.draNode(logger, node, true)
	}
}

// draNode hands a node's DRA inputs to the core: device health from its
// slices, devices its claims hold. freed: something may have gone free.
func (p *HiveSched) draNode(logger klog.Logger, node string, freed bool) {
	changed := p.devices.SetSliceHealth(logger, node, p.sliceHealth(node))
	changed = p.devices.SetClaimed(logger, node, p.dra.Claimed(node)) || changed
	if changed {
		p.vcs.Changed()
		if freed {
			p.activateWaiting(logger, "")
		}
	}
}

// onClaim tracks a claim's devices; a claim that releases its devices lets
// the pods gone before it go (their cells), and a claim allocated by
// someone else is announced on the pods it is reserved for.
func (p *HiveSched) onClaim(logger klog.Logger, obj interface{}, deleted bool) {
	c, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	released := deleted || c.Status.Allocation == nil
	nodes, gone := p.dra.ClaimChanged(c, deleted)
	for _, n := range nodes {
		p.draNode(logger, n, released)
	}
	for _, dp := range gone {
		logger.V(2).Info("GPU claims released: the pod's cells go", "pod", klog.KObj(dp.Pod))
		p.recovery.Hold(func(recovered bool) { p.podChanged(logger, dp.Pod, dp.Deleted, recovered) })
	}
	if !released && p.recovery.Done() {
		p.announceForeignClaim(logger, c)
	}
	if !deleted && p.dra.Appeared(c) {
		// Pods that came before their claim, or before the scheduler saw
		// it (PreEnqueue holds them until their request can be read), are
		// read again.
		// A claim made from a pod's template is owned by the pod.
		keys := []string{podrequest.ReleaseKeyClaim(c.Namespace, c.Name)}
		for _, o := range c.OwnerReferences {
			if o.Kind == "Pod" && o.APIVersion == "v1" {
				keys = append(keys, podrequest.ReleaseKeyPod(o.UID))
			}
		}
		p.rereadReleased(logger, "claim", keys, func(pod *v1.Pod) bool { return dra.PodNamesClaim(pod, c.Name) })
	}
}

// announceForeignClaim tells the pods a claim is reserved for, once, that
// hivesched counts its devices as taken: another allocator's claim on
// devices of hivesched's cells.
func (p *HiveSched) announceForeignClaim(logger klog.Logger, c *resourceapi.ResourceClaim) {
	f, ok := p.dra.AnnounceForeign(c.UID)
	if !ok {
		return
	}
	msg := fmt.Sprintf("ResourceClaim %s, which hivesched did not allocate, holds %s of node %s: hivesched counts them as taken and places nothing on them until the claim releases them",
		f.Name, strings.Join(f.Devices, ", "), f.Node)
	logger.Info("a claim hivesched did not allocate holds devices of its cells: counted as taken", "claim", f.Name, "node", f.Node, "devices", f.Devices)
	lister := p.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	for _, r := range f.Consumers {
		if r.Resource != "pods" {
			continue
		}
		ns, _, _ := strings.Cut(f.Name, "/")
		if pod, err := lister.Pods(ns).Get(r.Name); err == nil && pod.UID == r.UID {
			p.event(pod, v1.EventTypeNormal, "ForeignDevicesCounted", msg)
		}
	}
}

// notePending hands the core the devices the profile's DynamicResources
// just allocated in memory for the claims of a pod (its Reserve): they are
// claimed until the informer shows them written, or the pod is unreserved
// (drop). Called by HiveSchedDRA in the scheduling loop, so the next
// decision sees them.
func (p *HiveSched) notePending(logger klog.Logger, pod *v1.Pod, drop bool) {
	p.dra.NotePending(pod, drop, func(node string) { p.draNode(logger, node, drop) })
}

// beforeDecision runs before the core decides a group (in the scheduling
// loop): allocations in flight of groups that no longer hold their cells
// go, and the stale claims of the group's members are released.
func (p *HiveSched) beforeDecision(ctx context.Context, logger klog.Logger, group string) {
	p.dropStaleSignals()
	for _, pod := range p.groups.Pods(group) {
		if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
			p.dra.ReleaseStaleClaims(ctx, logger, pod)
		}
	}
}

// dropStaleSignals removes the allocations in flight of groups that no
// longer hold their cells, or whose members are all bound (their claims
// are written). An idle scheduler's janitor calls it too (New).
func (p *HiveSched) dropStaleSignals() {
	p.dra.DropStaleSignals(func(g string) bool {
		st, ok := p.core.AffinityGroupState(g)
		return !ok || (st != cellcore.AGAllocated && st != cellcore.AGBeingPreempted) || p.groups.BoundCount(g) >= p.groups.MemberCount(g)
	})
}

// trustedRecord is a bound pod's placement record as recovery and adoption
// trust it: signed for the pod, and, if the pod has GPU claims, listing
// each of them with exactly the devices the claim holds now and reserved
// for the pod (dra.State.CheckRecord).
func (p *HiveSched) trustedRecord(pod *v1.Pod) (placement.Record, error) {
	rec, err := p.signer.Trusted(pod)
	if err != nil || p.dra == nil {
		return rec, err
	}
	return rec, p.dra.CheckRecord(pod, rec.Claims)
}

// claimsRecovered marks the claims of recovered pods as hivesched's.
func (p *HiveSched) claimsRecovered(pods []*v1.Pod) {
	if p.dra == nil {
		return
	}
	for _, pod := range pods {
		if !p.coreHolds(pod) {
			continue
		}
		rec, err := p.signer.Trusted(pod)
		if err != nil {
			continue
		}
		p.dra.ClaimsRecovered(rec.Claims)
	}
}

// foreignOn names the pods and claims hivesched did not place that hold
// devices on the nodes (the VC status' CellsLost condition).
type foreignOn struct{ p *HiveSched }

func (f foreignOn) ForeignPodsOn(nodes []string, max int) ([]string, int) {
	names, more := f.p.devices.ForeignPodsOn(nodes, max)
	if f.p.dra == nil {
		return names, more
	}
	claims, cmore := f.p.dra.ForeignOn(nodes, max)
	names = append(names, claims...)
	more += cmore
	if len(names) > max {
		more += len(names) - max
		names = names[:max]
	}
	return names, more
}

// draFilter rejects a node that cannot back a GPU-claim pod's slot: the
// node publishes no (complete) ResourceSlice with a device for each of its
// leaf cells.
func (p *HiveSched) draFilter(s *cycleState, node string) *fwk.Status {
	if err := p.dra.CheckNode(node, s.indices); err != nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	return nil
}

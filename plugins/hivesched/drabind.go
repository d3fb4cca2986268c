package hivesched

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/dra"
	"github.com/hivesched/hivesched/plugins/placement"
)

// The binding path of GPU claims (dra.go has the state and the handlers):
// the group's allocation in flight, stale claims released, the claims
// checked and written before Bind, and what recovery trusts of them.

// beforeDecision runs before the core decides a group (in the scheduling
// loop): allocations in flight of groups that no longer hold their cells
// go, and the stale claims of the group's members are released.
func (p *HiveSched) beforeDecision(ctx context.Context, logger klog.Logger, group string) {
	p.dropStaleSignals()
	for _, pod := range p.groups.Pods(group) {
		if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
			p.releaseStaleClaims(ctx, logger, pod, nil)
		}
	}
}

// notePending hands the core the devices the profile's DynamicResources
// just allocated in memory for the claims of a pod (its Reserve): they are
// claimed until the informer shows them written, or the pod is unreserved
// (drop). Called by HiveSchedDRA in the scheduling loop, so the next
// decision sees them.
func (p *HiveSched) notePending(logger klog.Logger, pod *v1.Pod, drop bool) {
	d := p.dra
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		c, err := d.getClaim(pod.Namespace, *name)
		if err != nil {
			continue
		}
		var alloc *resourceapi.AllocationResult
		if !drop {
			alloc = d.manager.ResourceClaims().GetPendingAllocation(c.UID)
		}
		for _, n := range d.claims.SetPending(c.UID, alloc) {
			p.draNode(logger, n, drop)
		}
	}
}

// signalGroup makes a placed group's devices an allocation in flight in
// the shared DRA manager, under a claim UID of its own: every
// DynamicResources of this process leaves them alone until the group's
// claims are written (and assumed), or it no longer holds them. The
// manager looks a signalled claim up by namespace and name, so the entry
// is a copy of a real GPU claim of the group (anchor) with that UID.
func (p *HiveSched) signalGroup(logger klog.Logger, group string, pods []cellcore.PodPlacement, anchor *resourceapi.ResourceClaim) {
	d := p.dra
	var results []resourceapi.DeviceRequestAllocationResult
	for _, pp := range pods {
		for _, i := range pp.LeafCellIndices {
			if dev, ok := d.slices.Device(pp.Node, i); ok {
				results = append(results, resourceapi.DeviceRequestAllocationResult{Request: "hivesched", Driver: d.cfg.Driver, Pool: dev.Pool, Device: dev.Name})
			}
		}
	}
	p.dropSignal(group)
	if len(results) == 0 {
		return
	}
	d.mu.Lock()
	d.seq++
	uid := types.UID(fmt.Sprintf("hivesched.io/group/%s/%d", group, d.seq))
	d.mu.Unlock()
	c := anchor.DeepCopy()
	c.UID = uid
	c.Status = resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}}
	if err := d.manager.ResourceClaims().SignalClaimPendingAllocation(uid, c); err != nil {
		logger.Error(err, "signalling a group's devices in flight", "group", group)
		return
	}
	d.mu.Lock()
	d.signals[group] = uid
	d.mu.Unlock()
}

// dropSignal removes a group's allocation in flight.
func (p *HiveSched) dropSignal(group string) {
	d := p.dra
	d.mu.Lock()
	uid, ok := d.signals[group]
	delete(d.signals, group)
	d.mu.Unlock()
	if ok {
		d.manager.ResourceClaims().MaybeRemoveClaimPendingAllocation(uid, true)
	}
}

// dropStaleSignals removes the allocations in flight of groups that no
// longer hold their cells, or whose members are all bound (their claims
// are written).
func (p *HiveSched) dropStaleSignals() {
	d := p.dra
	d.mu.Lock()
	groups := make([]string, 0, len(d.signals))
	for g := range d.signals {
		groups = append(groups, g)
	}
	d.mu.Unlock()
	for _, g := range groups {
		st, ok := p.core.AffinityGroupState(g)
		if !ok || (st != cellcore.AGAllocated && st != cellcore.AGBeingPreempted) || p.groups.BoundCount(g) >= p.groups.MemberCount(g) {
			p.dropSignal(g)
		}
	}
}

// runSignalJanitor drops stale allocations in flight of an idle scheduler.
func (p *HiveSched) runSignalJanitor(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.dropStaleSignals()
		}
	}
}

// releaseStaleClaims clears, in the background, the allocations of an
// unbound pod's GPU claims that are not the ones its placement pp (nil: it
// has none now) needs and that nobody else uses: hivesched's own from an
// earlier placement (rolled back, or written before a restart), or one
// written by anyone for this unbound pod (hivesched does not take an
// allocation it did not make). It returns what the pod waits for ("" if
// nothing: no stale allocation), or an error for a claim used by others.
func (p *HiveSched) releaseStaleClaims(ctx context.Context, logger klog.Logger, pod *v1.Pod, want map[types.UID]bool) (string, error) {
	claims, _, err := p.dra.podClaims(pod)
	if err != nil {
		return "", nil // PreFilter says so
	}
	var waits []string
	for _, pc := range claims {
		c := pc.Claim
		if c.Status.Allocation == nil || want[c.UID] {
			continue
		}
		for _, r := range c.Status.ReservedFor {
			if r.UID != pod.UID {
				return "", fmt.Errorf("GPU claim %s/%s is allocated and reserved for %s %s: hivesched allocates a GPU claim itself, for one pod, and does not take an allocation it did not make; give this pod a claim of its own (a ResourceClaimTemplate)",
					c.Namespace, c.Name, r.Resource, r.Name)
			}
		}
		waits = append(waits, fmt.Sprintf("%s/%s (%s)", c.Namespace, c.Name, strings.Join(dra.DeviceIDs(c.Status.Allocation, ""), ", ")))
		p.releaseClaim(ctx, logger, pod, c)
	}
	if len(waits) == 0 {
		return "", nil
	}
	return fmt.Sprintf("waiting for GPU claim %s to release an allocation hivesched does not hold for this placement (an earlier placement's, or one it did not make): it is being released, then the pod is placed", strings.Join(waits, ", ")), nil
}

// releaseClaim clears a stale allocation of an unbound pod's claim in the
// background (once at a time per claim): only while the claim still holds
// that allocation, reserved for nobody but the pod, and the pod is unbound.
func (p *HiveSched) releaseClaim(ctx context.Context, logger klog.Logger, pod *v1.Pod, c *resourceapi.ResourceClaim) {
	d := p.dra
	d.mu.Lock()
	if d.releasing.Has(c.UID) {
		d.mu.Unlock()
		return
	}
	d.releasing.Insert(c.UID)
	d.mu.Unlock()
	stale := c.Status.Allocation.DeepCopy()
	podLister := p.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	go func() {
		defer func() {
			d.mu.Lock()
			d.releasing.Delete(c.UID)
			d.mu.Unlock()
		}()
		err := dra.Release(context.WithoutCancel(ctx), d.cs, c.Namespace, c.Name, func(now *resourceapi.ResourceClaim) bool {
			if now.UID != c.UID || !dra.SameDevices(now.Status.Allocation, stale) {
				return false
			}
			for _, r := range now.Status.ReservedFor {
				if r.UID != pod.UID {
					return false
				}
			}
			cur, err := podLister.Pods(pod.Namespace).Get(pod.Name)
			return err != nil || cur.UID != pod.UID || cur.Spec.NodeName == ""
		})
		if err != nil {
			logger.Error(err, "releasing a stale GPU claim allocation", "claim", klog.KObj(c), "pod", klog.KObj(pod))
			return
		}
		logger.Info("released a GPU claim's allocation that hivesched does not hold for its unbound pod", "claim", klog.KObj(c), "pod", klog.KObj(pod), "devices", dra.DeviceIDs(stale, ""))
		d.claims.SetOurs(c.UID, false)
	}()
}

// checkClaims is PreFilter's check of a placed member with GPU claims: the
// node's slices name a device for every leaf cell of its slot, and its
// claims hold no allocation but the one for this slot (a retried binding).
// It returns what the pod waits for or an error to refuse it with.
func (p *HiveSched) checkClaims(ctx context.Context, pod *v1.Pod, pp cellcore.PodPlacement) (string, error) {
	claims, _, err := p.dra.podClaims(pod)
	if err != nil || len(claims) == 0 {
		return "", err
	}
	devs, err := p.dra.alloc.DeviceNames(pp.Node, pp.LeafCellIndices)
	if err != nil {
		return "", nil // Filter rejects the node (PlacementRejected)
	}
	mine := sets.New[string]()
	for _, dv := range devs {
		mine.Insert(p.dra.cfg.Driver + "/" + dv.Pool + "/" + dv.Name)
	}
	keep := map[types.UID]bool{}
	for _, pc := range claims {
		c := pc.Claim
		if c.Status.Allocation == nil {
			continue
		}
		ids := dra.DeviceIDs(c.Status.Allocation, "")
		if p.dra.claims.Ours(c.UID) && mine.HasAll(ids...) && dra.ReservedFor(c, pod.UID) {
			keep[c.UID] = true // written for this placement; its binding is retried
		}
	}
	return p.releaseStaleClaims(ctx, klog.FromContext(ctx), pod, keep)
}

// allocateClaims is PreBind's work for a pod with GPU claims: each claim's
// allocation (exactly the devices of the pod's cells), written and
// reserved for the pod before it is bound, and assumed in the shared DRA
// manager so that every allocator of the process sees it at once. It
// returns the claims as the pod's placement record lists them.
func (p *HiveSched) allocateClaims(ctx context.Context, pod *v1.Pod, pp cellcore.PodPlacement) ([]placement.ClaimRecord, error) {
	d := p.dra
	claims, _, err := d.podClaims(pod)
	if err != nil {
		return nil, err
	}
	if len(claims) == 0 {
		return nil, nil
	}
	node, err := p.handle.SharedInformerFactory().Core().V1().Nodes().Lister().Get(pp.Node)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", pp.Node, err)
	}
	objs := make([]*resourceapi.ResourceClaim, len(claims))
	for i, c := range claims {
		objs[i] = c.Claim
	}
	results, err := d.alloc.Allocate(ctx, node, pp.LeafCellIndices, objs)
	if err != nil {
		return nil, err
	}
	recs := make([]placement.ClaimRecord, len(claims))
	for i, c := range objs {
		// Nobody else may hold these devices: a claim the informer shows,
		// or one written by another scheduler since the decision.
		var ids []int32
		for _, r := range results[i].Devices.Results {
			if _, idx, ok := d.slices.Leaf(r.Pool, r.Device); ok {
				ids = append(ids, idx)
			}
		}
		if others := d.claims.Holders(pp.Node, ids, c.UID); len(others) > 0 {
			return nil, fmt.Errorf("devices hivesched chose for GPU claim %s/%s are allocated in other claims: %s", c.Namespace, c.Name, strings.Join(others, ", "))
		}
		d.claims.SetOurs(c.UID, true)
		written, err := dra.Allocate(ctx, d.cs, c, &results[i], pod)
		if err != nil {
			if errors.Is(err, dra.ErrAllocatedElsewhere) || apierrors.IsNotFound(err) {
				d.claims.SetOurs(c.UID, false)
			}
			return nil, fmt.Errorf("allocating GPU claim %s/%s: %w", c.Namespace, c.Name, err)
		}
		if err := d.manager.ResourceClaims().AssumeClaimAfterAPICall(written); err != nil {
			klog.FromContext(ctx).V(2).Info("claim not assumed (the informer has a newer one)", "claim", klog.KObj(written), "err", err)
		}
		recs[i] = placement.ClaimRecord{Name: written.Name, UID: string(written.UID), Devices: dra.DeviceIDs(written.Status.Allocation, "")}
	}
	return recs, nil
}

// trustedRecord is a bound pod's placement record as recovery and adoption
// trust it: signed for the pod, and, if the pod has GPU claims, listing
// each of them with exactly the devices the claim holds now and reserved
// for the pod. Anything else is an allocation hivesched did not make (or
// no longer holds): the pod's cells are not hivesched's, and the claim's
// devices count as taken.
func (p *HiveSched) trustedRecord(pod *v1.Pod) (placement.Record, error) {
	rec, err := p.signer.Trusted(pod)
	if err != nil || p.dra == nil {
		return rec, err
	}
	byName := map[string]placement.ClaimRecord{}
	for _, c := range rec.Claims {
		byName[c.Name] = c
	}
	seen := 0
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		c, err := p.dra.claimNamed(pod.Namespace, *name)
		if err != nil {
			if r, listed := byName[*name]; listed {
				return rec, fmt.Errorf("its GPU claim %s/%s, allocated by hivesched (%s), is gone", pod.Namespace, r.Name, strings.Join(r.Devices, ", "))
			}
			continue
		}
		if !p.dra.cfg.IsGPUClaim(c) {
			continue
		}
		r, listed := byName[c.Name]
		got := dra.DeviceIDs(c.Status.Allocation, "")
		switch {
		case !listed:
			return rec, fmt.Errorf("its GPU claim %s/%s holds %s, which its placement record does not list: hivesched did not allocate them", c.Namespace, c.Name, orNone(got))
		case string(c.UID) != r.UID || strings.Join(got, ",") != strings.Join(r.Devices, ","):
			return rec, fmt.Errorf("its GPU claim %s/%s holds %s, not the %s hivesched allocated", c.Namespace, c.Name, orNone(got), strings.Join(r.Devices, ", "))
		case !dra.ReservedFor(c, pod.UID):
			return rec, fmt.Errorf("its GPU claim %s/%s is not reserved for it", c.Namespace, c.Name)
		}
		seen++
	}
	if seen != len(rec.Claims) {
		return rec, fmt.Errorf("its placement record lists %d GPU claims, the pod uses %d", len(rec.Claims), seen)
	}
	return rec, nil
}

func orNone(ids []string) string {
	if len(ids) == 0 {
		return "no device"
	}
	return strings.Join(ids, ", ")
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
		for _, c := range rec.Claims {
			p.dra.claims.SetOurs(types.UID(c.UID), true)
		}
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
	claims, cmore := f.p.dra.claims.ForeignOn(nodes, max)
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
// leaf cells. It reads the slice index only.
func (p *HiveSched) draFilter(s *cycleState, node string) *fwk.Status {
	if _, err := p.dra.alloc.DeviceNames(node, s.indices); err != nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	return nil
}

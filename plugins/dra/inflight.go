package dra

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// Allocations in flight: the devices of a placed group, signalled in the
// shared DRA manager until its claims are written, and the allocations the
// profile's DynamicResources made in memory and has not written yet.

// NotePending hands the claim index the devices the profile's
// DynamicResources just allocated in memory for the claims of a pod (its
// Reserve): they are claimed until the informer shows them written, or the
// pod is unreserved (drop). changed is called with each node whose claimed
// devices changed, as they change.
func (d *State) NotePending(pod *v1.Pod, drop bool, changed func(node string)) {
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
			changed(n)
		}
	}
}

// SignalGroup makes a placed group's devices an allocation in flight in
// the shared DRA manager, under a claim UID of its own, if pod (the member
// whose PreFilter decided) has GPU claims: every DynamicResources of this
// process leaves them alone until the group's claims are written (and
// assumed), or it no longer holds them. The manager looks a signalled
// claim up by namespace and name, so the entry is a copy of the pod's
// first GPU claim with that UID.
func (d *State) SignalGroup(logger klog.Logger, group string, pod *v1.Pod, pods []cellcore.PodPlacement) {
	claims, _, err := d.podClaims(pod)
	if err != nil || len(claims) == 0 {
		return
	}
	anchor := claims[0].Claim
	var results []resourceapi.DeviceRequestAllocationResult
	for _, pp := range pods {
		for _, i := range pp.LeafCellIndices {
			if dev, ok := d.slices.Device(pp.Node, i); ok {
				results = append(results, resourceapi.DeviceRequestAllocationResult{Request: "hivesched", Driver: d.cfg.Driver, Pool: dev.Pool, Device: dev.Name})
			}
		}
	}
	d.DropSignal(group)
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

// Untracked names the first GPU claim of pod that the shared DRA manager's
// claim tracker (its assume cache) does not hold yet, "" if it holds them
// all. The pod's request is read through the claim informer's lister as a
// fallback, and that lister (with this plugin's claim handler, which
// re-reads the pods that waited for the claim) is updated before the
// tracker's own handler runs: a pod can be read, released and decided
// while the tracker lacks its claim, and SignalGroup, which the tracker
// checks by the anchor claim's name, would then fail and leave the
// group's devices unprotected until its claims are written. The member
// that decides waits for it (PreFilter): the tracker's claim event, which
// is what requeues pods on claim changes, comes once it holds the claim.
func (d *State) Untracked(pod *v1.Pod) string {
	claims, _, err := d.podClaims(pod)
	if err != nil {
		return ""
	}
	for _, c := range claims {
		if got, err := d.manager.ResourceClaims().Get(c.Claim.Namespace, c.Claim.Name); err != nil || got == nil {
			return c.Claim.Namespace + "/" + c.Claim.Name
		}
	}
	return ""
}

// DropSignal removes a group's allocation in flight.
func (d *State) DropSignal(group string) {
	d.mu.Lock()
	uid, ok := d.signals[group]
	delete(d.signals, group)
	d.mu.Unlock()
	if ok {
		d.manager.ResourceClaims().MaybeRemoveClaimPendingAllocation(uid, true)
	}
}

// DropStaleSignals removes the allocations in flight of the groups for
// which stale is true (the plugin's: they no longer hold their cells, or
// all their members are bound).
func (d *State) DropStaleSignals(stale func(group string) bool) {
	d.mu.Lock()
	groups := make([]string, 0, len(d.signals))
	for g := range d.signals {
		groups = append(groups, g)
	}
	d.mu.Unlock()
	for _, g := range groups {
		if stale(g) {
			d.DropSignal(g)
		}
	}
}

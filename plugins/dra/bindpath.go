package dra

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/placement"
)

// The binding path of GPU claims: stale claims released, the claims
// checked and written before Bind, and what recovery trusts of them.

// ReleaseStaleClaims clears, in the background, the allocations of an
// unbound pod's GPU claims that nobody else uses (releaseStaleClaims with
// no placement): run before the core decides the pod's group.
func (d *State) ReleaseStaleClaims(ctx context.Context, logger klog.Logger, pod *v1.Pod) {
	_, _ = d.releaseStaleClaims(ctx, logger, pod, nil)
}

// releaseStaleClaims clears, in the background, the allocations of an
// unbound pod's GPU claims that are not the ones its placement (want: the
// claims written for it; nil: it has none now) needs and that nobody else
// uses: hivesched's own from an earlier placement (rolled back, or written
// before a restart), or one written by anyone for this unbound pod
// (hivesched does not take an allocation it did not make). It returns what
// the pod waits for ("" if nothing: no stale allocation), or an error for
// a claim used by others.
func (d *State) releaseStaleClaims(ctx context.Context, logger klog.Logger, pod *v1.Pod, want map[types.UID]bool) (string, error) {
	claims, _, err := d.podClaims(pod)
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
		waits = append(waits, fmt.Sprintf("%s/%s (%s)", c.Namespace, c.Name, strings.Join(DeviceIDs(c.Status.Allocation, ""), ", ")))
		d.releaseClaim(ctx, logger, pod, c)
	}
	if len(waits) == 0 {
		return "", nil
	}
	return fmt.Sprintf("waiting for GPU claim %s to release an allocation hivesched does not hold for this placement (an earlier placement's, or one it did not make): it is being released, then the pod is placed", strings.Join(waits, ", ")), nil
}

// releaseClaim clears a stale allocation of an unbound pod's claim in the
// background (once at a time per claim): only while the claim still holds
// that allocation, reserved for nobody but the pod, and the pod is unbound.
func (d *State) releaseClaim(ctx context.Context, logger klog.Logger, pod *v1.Pod, c *resourceapi.ResourceClaim) {
	d.mu.Lock()
	if d.releasing.Has(c.UID) {
		d.mu.Unlock()
		return
	}
	d.releasing.Insert(c.UID)
	d.mu.Unlock()
	stale := c.Status.Allocation.DeepCopy()
	go func() {
		defer func() {
			d.mu.Lock()
			d.releasing.Delete(c.UID)
			d.mu.Unlock()
		}()
		err := Release(context.WithoutCancel(ctx), d.cs, c.Namespace, c.Name, func(now *resourceapi.ResourceClaim) bool {
			if now.UID != c.UID || !SameDevices(now.Status.Allocation, stale) {
				return false
			}
			for _, r := range now.Status.ReservedFor {
				if r.UID != pod.UID {
					return false
				}
			}
			cur, err := d.pods.Pods(pod.Namespace).Get(pod.Name)
			return err != nil || cur.UID != pod.UID || cur.Spec.NodeName == ""
		})
		if err != nil {
			logger.Error(err, "releasing a stale GPU claim allocation", "claim", klog.KObj(c), "pod", klog.KObj(pod))
			return
		}
		logger.Info("released a GPU claim's allocation that hivesched does not hold for its unbound pod", "claim", klog.KObj(c), "pod", klog.KObj(pod), "devices", DeviceIDs(stale, ""))
		d.claims.SetOurs(c.UID, false)
	}()
}

// CheckClaims is PreFilter's check of a placed member with GPU claims: the
// node's slices name a device for every leaf cell of its slot, and its
// claims hold no allocation but the one for this slot (a retried binding).
// It returns what the pod waits for or an error to refuse it with.
func (d *State) CheckClaims(ctx context.Context, pod *v1.Pod, pp cellcore.PodPlacement) (string, error) {
	claims, _, err := d.podClaims(pod)
	if err != nil || len(claims) == 0 {
		return "", err
	}
	devs, err := d.alloc.DeviceNames(pp.Node, pp.LeafCellIndices)
	if err != nil {
		return "", nil // Filter rejects the node (PlacementRejected)
	}
	mine := sets.New[string]()
	for _, dv := range devs {
		mine.Insert(d.cfg.Driver + "/" + dv.Pool + "/" + dv.Name)
	}
	keep := map[types.UID]bool{}
	for _, pc := range claims {
		c := pc.Claim
		if c.Status.Allocation == nil {
			continue
		}
		ids := DeviceIDs(c.Status.Allocation, "")
		if d.claims.Ours(c.UID) && mine.HasAll(ids...) && ReservedFor(c, pod.UID) {
			keep[c.UID] = true // written for this placement; its binding is retried
		}
	}
	return d.releaseStaleClaims(ctx, klog.FromContext(ctx), pod, keep)
}

// CheckNode is Filter's check of a node for a GPU-claim pod's slot: an
// error says the node publishes no (complete) ResourceSlice with a device
// for each of the leaf cells indices. It reads the slice index only.
func (d *State) CheckNode(node string, indices []int32) error {
	_, err := d.alloc.DeviceNames(node, indices)
	return err
}

// AllocateClaims is PreBind's work for a pod with GPU claims: each claim's
// allocation (exactly the devices of the pod's cells), written and
// reserved for the pod before it is bound, and assumed in the shared DRA
// manager so that every allocator of the process sees it at once. It
// returns the claims as the pod's placement record lists them.
func (d *State) AllocateClaims(ctx context.Context, pod *v1.Pod, pp cellcore.PodPlacement) ([]placement.ClaimRecord, error) {
	claims, _, err := d.podClaims(pod)
	if err != nil {
		return nil, err
	}
	if len(claims) == 0 {
		return nil, nil
	}
	node, err := d.nodes.Get(pp.Node)
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
		written, err := Allocate(ctx, d.cs, c, &results[i], pod)
		if err != nil {
			if errors.Is(err, ErrAllocatedElsewhere) || apierrors.IsNotFound(err) {
				d.claims.SetOurs(c.UID, false)
			}
			return nil, fmt.Errorf("allocating GPU claim %s/%s: %w", c.Namespace, c.Name, err)
		}
		if err := d.manager.ResourceClaims().AssumeClaimAfterAPICall(written); err != nil {
			klog.FromContext(ctx).V(2).Info("claim not assumed (the informer has a newer one)", "claim", klog.KObj(written), "err", err)
		}
		recs[i] = placement.ClaimRecord{Name: written.Name, UID: string(written.UID), Devices: DeviceIDs(written.Status.Allocation, "")}
	}
	return recs, nil
}

// CheckRecord is what recovery and adoption trust of a bound pod's GPU
// claims, given the claims its (signed) placement record lists: each of
// them holds exactly the devices the record lists, and is reserved for the
// pod, and the record lists every GPU claim of the pod. Anything else is
// an allocation hivesched did not make (or no longer holds): the pod's
// cells are not hivesched's, and the claim's devices count as taken.
func (d *State) CheckRecord(pod *v1.Pod, recorded []placement.ClaimRecord) error {
	byName := map[string]placement.ClaimRecord{}
	for _, c := range recorded {
		byName[c.Name] = c
	}
	seen := 0
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		c, err := d.claimNamed(pod.Namespace, *name)
		if err != nil {
			if r, listed := byName[*name]; listed {
				return fmt.Errorf("its GPU claim %s/%s, allocated by hivesched (%s), is gone", pod.Namespace, r.Name, strings.Join(r.Devices, ", "))
			}
			continue
		}
		if !d.cfg.IsGPUClaim(c) {
			continue
		}
		r, listed := byName[c.Name]
		got := DeviceIDs(c.Status.Allocation, "")
		switch {
		case !listed:
			return fmt.Errorf("its GPU claim %s/%s holds %s, which its placement record does not list: hivesched did not allocate them", c.Namespace, c.Name, orNone(got))
		case string(c.UID) != r.UID || strings.Join(got, ",") != strings.Join(r.Devices, ","):
			return fmt.Errorf("its GPU claim %s/%s holds %s, not the %s hivesched allocated", c.Namespace, c.Name, orNone(got), strings.Join(r.Devices, ", "))
		case !ReservedFor(c, pod.UID):
			return fmt.Errorf("its GPU claim %s/%s is not reserved for it", c.Namespace, c.Name)
		}
		seen++
	}
	if seen != len(recorded) {
		return fmt.Errorf("its placement record lists %d GPU claims, the pod uses %d", len(recorded), seen)
	}
	return nil
}

func orNone(ids []string) string {
	if len(ids) == 0 {
		return "no device"
	}
	return strings.Join(ids, ", ")
}

// ClaimsRecovered marks the claims a recovered pod's record lists as
// hivesched's.
func (d *State) ClaimsRecovered(recorded []placement.ClaimRecord) {
	for _, c := range recorded {
		d.claims.SetOurs(types.UID(c.UID), true)
	}
}

package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// FieldManager is the field manager of hivesched's claim writes (shown in
// the claims' managedFields).
const FieldManager = "hivesched"

// ErrAllocatedElsewhere: the claim holds an allocation hivesched did not
// write for this pod (another allocator's, or one it refused).
var ErrAllocatedElsewhere = errors.New("allocated elsewhere")

// PodRef is the consumer reference of a pod.
func PodRef(pod *v1.Pod) resourceapi.ResourceClaimConsumerReference {
	return resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID}
}

// ReservedFor reports whether the claim is reserved for the pod.
func ReservedFor(claim *resourceapi.ResourceClaim, uid types.UID) bool {
	for _, r := range claim.Status.ReservedFor {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// SameDevices reports whether two allocations hold the same devices.
func SameDevices(a, b *resourceapi.AllocationResult) bool {
	return a != nil && b != nil && slices.Equal(DeviceIDs(a, ""), DeviceIDs(b, ""))
}

// Allocate writes a claim's allocation and reserves it for the pod, before
// the pod is bound: the finalizer resource.kubernetes.io/delete-protection
// first (an Update of the claim, unless it has it: the status subresource
// drops metadata changes), then status.allocation and status.reservedFor
// (an UpdateStatus). Both carry the claim's resourceVersion; on a conflict
// the claim is read again. A claim already allocated with these devices
// and reserved for the pod is left as it is (a retried binding); one
// allocated otherwise is not touched (ErrAllocatedElsewhere). It returns
// the claim as written.
func Allocate(ctx context.Context, cs kubernetes.Interface, claim *resourceapi.ResourceClaim, alloc *resourceapi.AllocationResult, pod *v1.Pod) (*resourceapi.ResourceClaim, error) {
	api := cs.ResourceV1().ResourceClaims(claim.Namespace)
	claim = claim.DeepCopy()
	for attempt := 0; attempt < 5; attempt++ {
		var err error
		switch {
		case claim.UID != "" && claim.DeletionTimestamp != nil:
			return nil, fmt.Errorf("claim %s/%s is being deleted", claim.Namespace, claim.Name)
		case claim.Status.Allocation != nil && !SameDevices(claim.Status.Allocation, alloc):
			return nil, fmt.Errorf("claim %s/%s: %w (devices %s, not the %s hivesched chose)", claim.Namespace, claim.Name, ErrAllocatedElsewhere,
				strings.Join(DeviceIDs(claim.Status.Allocation, ""), ", "), strings.Join(DeviceIDs(alloc, ""), ", "))
		case claim.Status.Allocation != nil && ReservedFor(claim, pod.UID):
			return claim, nil
		case claim.Status.Allocation != nil:
			for _, r := range claim.Status.ReservedFor {
				if r.UID != pod.UID {
					return nil, fmt.Errorf("claim %s/%s: %w: reserved for %s %s", claim.Namespace, claim.Name, ErrAllocatedElsewhere, r.Resource, r.Name)
				}
			}
			claim.Status.ReservedFor = append(claim.Status.ReservedFor, PodRef(pod))
			var out *resourceapi.ResourceClaim
			if out, err = api.UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldManager: FieldManager}); err == nil {
				return out, nil
			}
		case !slices.Contains(claim.Finalizers, resourceapi.Finalizer):
			claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
			var out *resourceapi.ResourceClaim
			if out, err = api.Update(ctx, claim, metav1.UpdateOptions{FieldManager: FieldManager}); err == nil {
				claim = out
				continue
			}
		default:
			if len(claim.Status.ReservedFor) > 0 {
				return nil, fmt.Errorf("claim %s/%s is reserved without an allocation", claim.Namespace, claim.Name)
			}
			claim.Status.Allocation = alloc.DeepCopy()
			claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{PodRef(pod)}
			var out *resourceapi.ResourceClaim
			if out, err = api.UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldManager: FieldManager}); err == nil {
				return out, nil
			}
		}
		if !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("claim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
		if claim, err = api.Get(ctx, claim.Name, metav1.GetOptions{}); err != nil {
			return nil, fmt.Errorf("claim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
	}
	return nil, fmt.Errorf("claim %s/%s: conflicting updates, retried", claim.Namespace, claim.Name)
}

// Release clears a claim's allocation and reservation that hivesched wrote
// for a pod that was never bound (its group was rolled back, or the
// scheduler restarted between the write and the binding): the devices were
// never prepared. ok says whether still holds for the claim as read (the
// caller's check that the allocation is the stale one: same devices,
// reserved only for that pod); the write carries the resourceVersion it
// was checked at, and a conflict reads the claim again and checks again.
func Release(ctx context.Context, cs kubernetes.Interface, namespace, name string, still func(*resourceapi.ResourceClaim) bool) error {
	api := cs.ResourceV1().ResourceClaims(namespace)
	for attempt := 0; attempt < 5; attempt++ {
		claim, err := api.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if claim.Status.Allocation == nil || !still(claim) {
			return nil
		}
		claim.Status.Allocation = nil
		claim.Status.ReservedFor = nil
		claim.Status.Devices = nil
		_, err = api.UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldManager: FieldManager})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("claim %s/%s: conflicting updates, retried", namespace, name)
}

package dra

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Allocator builds the allocation results of a pod's GPU claims with
// exactly the devices of the leaf cells hivesched decided. It runs the
// structured allocator that DynamicResources runs (so that a result is in
// the API's exact format: request names, the class's and the claim's
// config, tolerations, the node selector), on the node's slices of the GPU
// driver with every device but the chosen ones marked allocated: the
// chosen devices are the only answer, and the run checks that they satisfy
// the claims' classes (their CEL selectors) and are not tainted.
type Allocator struct {
	slices   *Slices
	classes  structured.DeviceClassLister
	features structured.Features
	cel      *cel.Cache
}

// NewAllocator allocates from slices, with the DeviceClasses of classes.
func NewAllocator(slices *Slices, classes structured.DeviceClassLister, features structured.Features) *Allocator {
	return &Allocator{slices: slices, classes: classes, features: features,
		cel: cel.NewCache(10, cel.Features{EnableConsumableCapacity: features.ConsumableCapacity, EnableListTypeAttributes: features.ListTypeAttributes})}
}

// DeviceNames are the devices of a node's leaf cells, in index order (an
// error names a leaf the node's slices have no device for).
func (a *Allocator) DeviceNames(node string, indices []int32) ([]Device, error) {
	has, complete := a.slices.HasDevices(node)
	switch {
	case !has:
		return nil, fmt.Errorf("node %s publishes no ResourceSlice of DRA driver %s: its GPUs cannot be allocated through a ResourceClaim", node, a.slices.Driver())
	case !complete:
		return nil, fmt.Errorf("node %s: the ResourceSlices of DRA driver %s are incomplete (a pool's slices of its newest generation are not all seen yet)", node, a.slices.Driver())
	}
	out := make([]Device, 0, len(indices))
	for _, i := range indices {
		d, ok := a.slices.Device(node, i)
		if !ok {
			return nil, fmt.Errorf("node %s: its ResourceSlices of DRA driver %s have no device for leaf cell %d", node, a.slices.Driver(), i)
		}
		out = append(out, d)
	}
	return out, nil
}

// Allocate returns one allocation result per claim, in the claims' order,
// that together hold exactly the devices of the node's leaf cells indices.
func (a *Allocator) Allocate(ctx context.Context, node *v1.Node, indices []int32, claims []*resourceapi.ResourceClaim) ([]resourceapi.AllocationResult, error) {
	chosen, err := a.DeviceNames(node.Name, indices)
	if err != nil {
		return nil, err
	}
	driver := a.slices.Driver()
	keep := sets.New[structured.DeviceID]()
	var names []string
	for _, d := range chosen {
		keep.Insert(structured.MakeDeviceID(driver, d.Pool, d.Name))
		names = append(names, d.Name)
	}
	slices := a.slices.NodeSlices(node.Name)
	others := sets.New[structured.DeviceID]()
	for _, s := range slices {
		for i := range s.Spec.Devices {
			id := structured.MakeDeviceID(driver, s.Spec.Pool.Name, s.Spec.Devices[i].Name)
			if !keep.Has(id) {
				others.Insert(id)
			}
		}
	}
	fresh := make([]*resourceapi.ResourceClaim, len(claims))
	for i, c := range claims {
		c = c.DeepCopy()
		c.Status = resourceapi.ResourceClaimStatus{}
		fresh[i] = c
	}
	state := structured.AllocatedState{AllocatedDevices: others, AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	alloc, err := structured.NewAllocator(ctx, a.features, state, a.classes, slices, a.cel)
	if err != nil {
		return nil, fmt.Errorf("allocating devices %s of node %s: %w", strings.Join(names, ", "), node.Name, err)
	}
	results, err := alloc.Allocate(ctx, node, fresh)
	if err != nil {
		return nil, fmt.Errorf("allocating devices %s of node %s: %w", strings.Join(names, ", "), node.Name, err)
	}
	if len(results) != len(claims) {
		return nil, fmt.Errorf("devices %s of node %s, which hivesched chose for the pod, do not satisfy its GPU claims (their DeviceClass's selectors, or a device taint the claims do not tolerate)",
			strings.Join(names, ", "), node.Name)
	}
	// Every chosen device once, nothing else.
	var got []string
	for _, r := range results {
		for _, d := range r.Devices.Results {
			if !keep.Has(structured.MakeDeviceID(d.Driver, d.Pool, d.Device)) {
				return nil, fmt.Errorf("internal error: the allocator chose device %s/%s/%s, which hivesched did not choose", d.Driver, d.Pool, d.Device)
			}
			got = append(got, d.Device)
		}
	}
	sort.Strings(got)
	want := append([]string(nil), names...)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		return nil, fmt.Errorf("the pod's GPU claims ask for %d devices, hivesched chose %d (%s)", len(got), len(want), strings.Join(want, ", "))
	}
	return results, nil
}

// DeviceIDs lists an allocation's devices of the driver as
// "driver/pool/device", sorted: what the placement record keeps.
func DeviceIDs(alloc *resourceapi.AllocationResult, driver string) []string {
	if alloc == nil {
		return nil
	}
	var out []string
	for _, r := range alloc.Devices.Results {
		if driver == "" || r.Driver == driver {
			out = append(out, r.Driver+"/"+r.Pool+"/"+r.Device)
		}
	}
	sort.Strings(out)
	return out
}

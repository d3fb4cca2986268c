package dra

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/dra/dratest"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

var cfg = NewConfig([]string{dratest.Class}, dratest.Driver)

func claimsOf(cs ...*resourceapi.ResourceClaim) ClaimGetter {
	return func(ns, name string) (*resourceapi.ResourceClaim, error) {
		for _, c := range cs {
			if c.Namespace == ns && c.Name == name {
				return c, nil
			}
		}
		return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
	}
}

func pod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid")},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main"}}}}
}

func TestClaimDevices(t *testing.T) {
	ok := dratest.Claim("ns", "c", 4)
	n, err := cfg.ClaimDevices(ok)
	require.NoError(t, err)
	require.EqualValues(t, 4, n)
	def := dratest.Claim("ns", "c", 0) // the API's default count
	n, err = cfg.ClaimDevices(def)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	for what, mutate := range map[string]func(*resourceapi.ResourceClaim){
		"has selectors": func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "true"}}}
		},
		"allocationMode All": func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
		},
		"asks for admin access": func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true) },
		"beside GPUs": func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: "nic", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nic.example.com"}})
		},
		"prioritized list": func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0] = resourceapi.DeviceRequest{Name: "gpus", FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "a", DeviceClassName: dratest.Class}}}
		},
		"has constraints": func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("resource.kubernetes.io/pcieRoot"))}}
		},
	} {
		c := dratest.Claim("ns", "c", 2)
		mutate(c)
		require.True(t, cfg.IsGPUClaim(c), what)
		_, err := cfg.ClaimDevices(c)
		require.ErrorContains(t, err, what)
	}
	require.False(t, cfg.IsGPUClaim(&resourceapi.ResourceClaim{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "nic", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nic.example.com"}}}}}}))
	require.False(t, NewConfig(nil, dratest.Driver).IsGPUClaim(ok), "no GPU class: nothing is a GPU claim")
}

func TestGPUClaims(t *testing.T) {
	gpu := dratest.Claim("ns", "gpus", 4)
	nic := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nic"}, Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "nic", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nic.example.com"}}}}}}

	p := pod("a")
	dratest.UseClaim(p, "gpus", false)
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: "nic", ResourceClaimName: ptr.To("nic")})
	claims, n, err := cfg.GPUClaims(p, claimsOf(gpu, nic))
	require.NoError(t, err)
	require.EqualValues(t, 4, n)
	require.Len(t, claims, 1)
	require.Equal(t, "gpus", claims[0].Name)

	// A claim not seen yet, and a template's claim not created yet: the
	// pod waits.
	_, _, err = cfg.GPUClaims(p, claimsOf(nic))
	require.True(t, podrequest.IsAwaiting(err), "%v", err)
	tp := pod("b")
	dratest.UseClaim(tp, "tmpl", true)
	_, _, err = cfg.GPUClaims(tp, claimsOf())
	require.True(t, podrequest.IsAwaiting(err), "%v", err)

	// The template's claim must be the pod's.
	generated := dratest.Claim("ns", "b-gpus-x", 2)
	tp.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To("b-gpus-x")}}
	_, _, err = cfg.GPUClaims(tp, claimsOf(generated))
	require.ErrorContains(t, err, "was not created for Pod")
	generated.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "b", UID: tp.UID, Controller: ptr.To(true)}}
	_, n, err = cfg.GPUClaims(tp, claimsOf(generated))
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	// A PodGroup's claim (DRAWorkloadResourceClaims): refused, saying why.
	pgc := dratest.Claim("ns", "pg-gpus", 8)
	pgc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: "pg", UID: "pg-uid", Controller: ptr.To(true)}}
	pp := pod("c")
	dratest.UseClaim(pp, "pg-gpus", false)
	_, _, err = cfg.GPUClaims(pp, claimsOf(pgc))
	require.ErrorContains(t, err, "claim of a whole PodGroup")
}

func TestSlicesNVIDIAShape(t *testing.T) {
	x := NewSlices(dratest.Driver)
	s := dratest.Slice("n0", "Tesla V100-SXM2-32GB", 8)
	// NVIDIA publishes MIG and passthrough devices of a GPU in the same
	// pool: not leaf cells.
	s.Spec.Devices = append(s.Spec.Devices,
		resourceapi.Device{Name: "gpu-0-mig-1g10gb-0-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": {StringValue: ptr.To("mig")}}},
		resourceapi.Device{Name: "gpu-vfio-1", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": {StringValue: ptr.To("vfio")}}})
	s.Spec.Devices[3].Taints = []resourceapi.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	s.Spec.Devices[5].Taints = []resourceapi.DeviceTaint{{Key: "gpu.nvidia.com/unmonitored", Effect: resourceapi.DeviceTaintEffectNone}}
	require.Equal(t, []string{"n0"}, x.Update(s, false))
	has, complete := x.HasDevices("n0")
	require.True(t, has && complete)
	require.Len(t, x.Devices("n0"), 8)
	d, ok := x.Device("n0", 7)
	require.True(t, ok)
	require.Equal(t, Device{Pool: "n0", Name: "gpu-7"}, d)
	node, idx, ok := x.Leaf("n0", "gpu-5")
	require.True(t, ok)
	require.Equal(t, "n0", node)
	require.EqualValues(t, 5, idx)
	_, _, ok = x.Leaf("n0", "gpu-vfio-1")
	require.False(t, ok)
	require.Equal(t, []cellcore.DeviceStatus{{Index: 3, Health: cellcore.DeviceBad}}, x.Health("n0"), "NoSchedule taints make a device bad, None ones do not")

	// A newer generation split over two slices counts once both are seen.
	a, b := dratest.Slice("n0", "V100", 4), dratest.Slice("n0", "V100", 8)
	a.Name, b.Name = "n0-a", "n0-b"
	b.Spec.Devices = b.Spec.Devices[4:]
	for _, ns := range []*resourceapi.ResourceSlice{a, b} {
		ns.Spec.Pool.Generation, ns.Spec.Pool.ResourceSliceCount = 2, 2
	}
	x.Update(a, false)
	has, complete = x.HasDevices("n0")
	require.True(t, has)
	require.False(t, complete, "generation 2 has one of its two slices")
	require.Len(t, x.Devices("n0"), 4, "generation 1's slice is superseded")
	x.Update(b, false)
	_, complete = x.HasDevices("n0")
	require.True(t, complete)
	require.Len(t, x.Devices("n0"), 8)
	require.Len(t, x.NodeSlices("n0"), 2)
	x.Update(s, true)
	x.Update(a, true)
	x.Update(b, true)
	has, _ = x.HasDevices("n0")
	require.False(t, has)

	// Another driver's slices are not leaf cells.
	other := dratest.Slice("n1", "X", 2)
	other.Spec.Driver = "nic.example.com"
	require.Empty(t, x.Update(other, false))
}

func allocated(claim *resourceapi.ResourceClaim, pool string, devs ...string) *resourceapi.ResourceClaim {
	c := claim.DeepCopy()
	c.UID = types.UID(c.Name + "-uid")
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range devs {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "gpus", Driver: dratest.Driver, Pool: pool, Device: d})
	}
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "p-uid"}}
	return c
}

func TestClaimsTrackClaimedDevices(t *testing.T) {
	x := NewSlices(dratest.Driver)
	x.Update(dratest.Slice("n0", "V100", 8), false)
	c := NewClaims(x)
	a := allocated(dratest.Claim("ns", "a", 2), "n0", "gpu-1", "gpu-2")
	require.Equal(t, []string{"n0"}, c.Update(a, false))
	require.Equal(t, []cellcore.DeviceRef{{Index: 1}, {Index: 2}}, c.Claimed("n0"))
	f, ok := c.ForeignClaim(a.UID)
	require.True(t, ok)
	require.Equal(t, []string{"gpu-1", "gpu-2"}, f.Devices)
	names, _ := c.ForeignOn([]string{"n0"}, 3)
	require.Equal(t, []string{"claim ns/a (for p)"}, names)
	require.Equal(t, []string{"ns/a (gpu-2)"}, c.Holders("n0", []int32{2, 3}, ""))
	require.Empty(t, c.Holders("n0", []int32{2}, a.UID))

	// Ours: not foreign; it stays ours across updates without devices
	// until it is released.
	c.SetOurs(a.UID, true)
	_, ok = c.ForeignClaim(a.UID)
	require.False(t, ok)
	names, _ = c.ForeignOn([]string{"n0"}, 3)
	require.Empty(t, names)

	// Allocated in this process and not written yet (DynamicResources
	// between Reserve and PreBind): claimed until the informer shows the
	// claim allocated, or it is dropped.
	pending := &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Driver: dratest.Driver, Pool: "n0", Device: "gpu-6"}, {Driver: "nic.example.com", Pool: "n0", Device: "nic-0"}}}}
	require.Equal(t, []string{"n0"}, c.SetPending("b-uid", pending))
	require.Equal(t, []cellcore.DeviceRef{{Index: 1}, {Index: 2}, {Index: 6}}, c.Claimed("n0"))
	written := allocated(dratest.Claim("ns", "b", 1), "n0", "gpu-6")
	c.Update(written, false)
	require.Equal(t, []cellcore.DeviceRef{{Index: 1}, {Index: 2}, {Index: 6}}, c.Claimed("n0"))
	require.Empty(t, c.SetPending("b-uid", nil), "nothing pending any more")
	require.Equal(t, []string{"n0"}, c.SetPending("c-uid", pending))
	require.Equal(t, []string{"n0"}, c.SetPending("c-uid", nil))
	c.Update(written, true)

	// Released (deallocated), then deleted.
	free := a.DeepCopy()
	free.Status = resourceapi.ResourceClaimStatus{}
	require.Equal(t, []string{"n0"}, c.Update(free, false))
	require.False(t, c.Ours(a.UID), "released: no longer ours")
	require.Empty(t, c.Claimed("n0"))
	c.Update(free, true)
	require.Empty(t, c.Claimed("n0"))
}

func TestView(t *testing.T) {
	gpu, nic := dratest.Claim("ns", "gpus", 4), dratest.Claim("ns", "nic", 1)
	nic.Spec.Devices.Requests[0].Exactly.DeviceClassName = "nic.example.com"
	p := pod("a")
	dratest.UseClaim(p, "gpus", false)
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: "nic", ResourceClaimName: ptr.To("nic")})
	p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: "nic"})
	v := cfg.View(p, "nvidia.com/gpu", claimsOf(gpu, nic))
	require.Equal(t, []v1.PodResourceClaim{{Name: "nic", ResourceClaimName: ptr.To("nic")}}, v.Spec.ResourceClaims)
	require.Equal(t, []v1.ResourceClaim{{Name: "nic"}}, v.Spec.Containers[0].Resources.Claims)
	require.Len(t, p.Spec.ResourceClaims, 2, "the pod itself is not changed")

	// The leaf cell resource is hidden (a DeviceClass may map it to DRA).
	q := resource.MustParse("2")
	r := pod("b")
	r.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{"nvidia.com/gpu": q, v1.ResourceCPU: q}, Limits: v1.ResourceList{"nvidia.com/gpu": q}}
	v = cfg.View(r, "nvidia.com/gpu", claimsOf())
	require.Equal(t, v1.ResourceList{v1.ResourceCPU: q}, v.Spec.Containers[0].Resources.Requests)
	require.Empty(t, v.Spec.Containers[0].Resources.Limits)
	require.Contains(t, r.Spec.Containers[0].Resources.Requests, v1.ResourceName("nvidia.com/gpu"))

	// Nothing to hide: the pod itself; a claim not seen yet stays.
	plain := pod("c")
	require.Same(t, plain, cfg.View(plain, "nvidia.com/gpu", claimsOf()))
	unseen := pod("d")
	dratest.UseClaim(unseen, "gpus", false)
	require.Same(t, unseen, cfg.View(unseen, "nvidia.com/gpu", claimsOf()))
}

// classes is a DeviceClass lister of NVIDIA's class.
type classes struct{}

func (classes) List() ([]*resourceapi.DeviceClass, error) {
	return []*resourceapi.DeviceClass{dratest.DeviceClass()}, nil
}

func (classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if name == dratest.Class {
		return dratest.DeviceClass(), nil
	}
	return nil, fmt.Errorf("no class %s", name)
}

func TestAllocateExactlyTheChosenDevices(t *testing.T) {
	x := NewSlices(dratest.Driver)
	x.Update(dratest.Slice("n0", "V100", 8), false)
	a := NewAllocator(x, classes{}, structured.Features{DeviceTaints: true})
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0"}}
	c1, c2 := dratest.Claim("ns", "c1", 2), dratest.Claim("ns", "c2", 1)
	c1.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
		Driver: dratest.Driver, Parameters: runtime.RawExtension{Raw: []byte(`{"sharing":{"strategy":"TimeSlicing"}}`)}}}}}
	res, err := a.Allocate(context.Background(), node, []int32{5, 2, 6}, []*resourceapi.ResourceClaim{c1, c2})
	require.NoError(t, err)
	require.Len(t, res, 2)
	got := append(DeviceIDs(&res[0], ""), DeviceIDs(&res[1], "")...)
	require.ElementsMatch(t, []string{"gpu.nvidia.com/n0/gpu-2", "gpu.nvidia.com/n0/gpu-5", "gpu.nvidia.com/n0/gpu-6"}, got)
	require.Len(t, res[0].Devices.Results, 2)
	require.Equal(t, "gpus", res[0].Devices.Results[0].Request)
	require.Len(t, res[0].Devices.Config, 1, "the claim's config is copied")
	require.Equal(t, resourceapi.AllocationConfigSourceClaim, res[0].Devices.Config[0].Source)
	require.Equal(t, []string{"n0"}, res[0].NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values)

	// Too few devices, a tainted one, a leaf without a device, no slices.
	_, err = a.Allocate(context.Background(), node, []int32{5, 2}, []*resourceapi.ResourceClaim{c1, c2})
	require.Error(t, err)
	s := dratest.Slice("n0", "V100", 8)
	s.Spec.Devices[2].Taints = []resourceapi.DeviceTaint{{Key: "gpu.nvidia.com/gpu-lost", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	x.Update(s, false)
	_, err = a.Allocate(context.Background(), node, []int32{5, 2, 6}, []*resourceapi.ResourceClaim{c1, c2})
	require.ErrorContains(t, err, "do not satisfy")
	_, err = a.Allocate(context.Background(), node, []int32{9}, []*resourceapi.ResourceClaim{c2})
	require.ErrorContains(t, err, "no device for leaf cell 9")
	_, err = a.Allocate(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n9"}}, []int32{0}, []*resourceapi.ResourceClaim{c2})
	require.ErrorContains(t, err, "publishes no ResourceSlice")
}

func TestAllocateWritesFinalizerThenStatus(t *testing.T) {
	claim := dratest.Claim("ns", "c", 1)
	claim.UID = "c-uid"
	cs := fake.NewClientset(claim)
	p := pod("p")
	alloc := &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpus", Driver: dratest.Driver, Pool: "n0", Device: "gpu-3"}}}}
	got, err := Allocate(context.Background(), cs, claim, alloc, p)
	require.NoError(t, err)
	require.Contains(t, got.Finalizers, resourceapi.Finalizer)
	require.Equal(t, []string{"gpu.nvidia.com/n0/gpu-3"}, DeviceIDs(got.Status.Allocation, ""))
	require.True(t, ReservedFor(got, p.UID))
	var verbs []string
	for _, a := range cs.Actions() {
		verbs = append(verbs, a.GetVerb()+"/"+a.GetSubresource())
	}
	require.Equal(t, []string{"update/", "update/status"}, verbs)

	// Again (a retried binding): nothing written.
	cs.ClearActions()
	_, err = Allocate(context.Background(), cs, got, alloc, p)
	require.NoError(t, err)
	require.Empty(t, cs.Actions())

	// Allocated otherwise: not touched.
	other := alloc.DeepCopy()
	other.Devices.Results[0].Device = "gpu-4"
	_, err = Allocate(context.Background(), cs, got, other, p)
	require.True(t, errors.Is(err, ErrAllocatedElsewhere), "%v", err)
	_, err = Allocate(context.Background(), cs, got, alloc, pod("q"))
	require.True(t, errors.Is(err, ErrAllocatedElsewhere), "reserved for another pod: %v", err)

	// Released while it still holds that allocation.
	require.NoError(t, Release(context.Background(), cs, "ns", "c", func(c *resourceapi.ResourceClaim) bool { return SameDevices(c.Status.Allocation, alloc) }))
	now, err := cs.ResourceV1().ResourceClaims("ns").Get(context.Background(), "c", metav1.GetOptions{})
	require.NoError(t, err)
	require.Nil(t, now.Status.Allocation)
	require.Empty(t, now.Status.ReservedFor)
}

func TestLeafIndex(t *testing.T) {
	for name, want := range map[string]int32{"gpu-0": 0, "gpu-15": 15, "gpu7": 7, "device-3": 3} {
		i, ok := LeafIndex(&resourceapi.Device{Name: name})
		require.True(t, ok, name)
		require.Equal(t, want, i, name)
	}
	for _, name := range []string{"gpu", "gpu-0-mig-1g.5gb-0", "99999999999"} {
		_, ok := LeafIndex(&resourceapi.Device{Name: name})
		require.False(t, ok, name)
	}
}

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/dra/dratest"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/test/util"
)

// Gangs that ask for GPUs with ResourceClaimTemplates get claims that hold
// exactly the devices of their cells, written by hivesched before the pods
// are bound; a pod that asks both ways is refused; the cells go when the
// claims are released after the pods.
func TestDRAGangClaimsHoldTheirCells(t *testing.T) {
	c := startCluster(t)
	const ns = "dra"
	c.createNamespace(t, ns)
	c.startClaimController(t)
	c.createDRANodes(t, ns, 1, 2)
	c.createVC(t, "dra-a", []string{ns}, "V100-NODE", 2)
	c.startScheduler(t, physicalCluster(ns, 1, 2, 0))

	// Two pods of 4 GPUs, then a pod of 8: three claims, disjoint devices.
	g4 := c.claimGangPods(t, ns, "g4", "dra-a", 0, 2, 4, schedulerName)
	c.createPods(t, g4)
	c.waitBound(t, g4, 30*time.Second)
	c.requireClaimsMatchCells(t, g4)
	g8 := c.claimGangPods(t, ns, "g8", "dra-a", 0, 1, 8, schedulerName)
	c.createPods(t, g8)
	c.waitBound(t, g8, 30*time.Second)
	c.requireClaimsMatchCells(t, g8)
	c.requireNoDeviceTwice(t)
	c.waitVCStatus(t, "dra-a", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 16 })

	// Both ways at once: refused, saying so.
	mixed := c.claimGangPods(t, ns, "mixed", "dra-a", 0, 1, 2, schedulerName)
	q := resource.MustParse("2")
	mixed[0].Spec.Containers[0].Resources.Requests = v1.ResourceList{"nvidia.com/gpu": q}
	mixed[0].Spec.Containers[0].Resources.Limits = v1.ResourceList{"nvidia.com/gpu": q}
	c.createPods(t, mixed)
	ev := c.waitEvent(t, mixed[0], "InvalidSchedulingSpec", 30*time.Second)
	require.Contains(t, ev, "asks for GPUs twice")

	// The 8-GPU pod finishes: its claim is released (the resourceclaim
	// controller, after the pod), then its cells: a new 8-GPU gang binds.
	c.deletePods(t, g8)
	g8b := c.claimGangPods(t, ns, "g8b", "dra-a", 0, 1, 8, schedulerName)
	c.createPods(t, g8b)
	c.waitBound(t, g8b, 60*time.Second)
	c.requireClaimsMatchCells(t, g8b)
	c.requireNoDeviceTwice(t)
	for _, p := range append(g4, g8b...) {
		for _, e := range c.events(t, p) {
			require.False(t, strings.Contains(e, "allocated elsewhere"), e)
			require.False(t, strings.Contains(e, "ForeignDevicesCounted"), e)
		}
	}
}

// The default scheduler's DynamicResources allocates claims beside
// hivesched: the devices it takes are taken for hivesched (never placed on,
// reported on the pod and in the VC's status), it never takes hivesched's,
// and no device is ever in two claims. With the fence (manifests/dra), it
// takes none of the GPUs unless a claim tolerates the fence, and such a
// claim's devices are foreign like any other.
func TestDRABesideTheDefaultScheduler(t *testing.T) {
	c := startCluster(t)
	const ns = "drad"
	c.createNamespace(t, ns)
	c.startClaimController(t)
	c.createDRANodes(t, ns, 1, 2)
	c.createVC(t, "drad-a", []string{ns}, "V100-NODE", 2)
	c.startDefaultScheduler(t)
	c.startScheduler(t, physicalCluster(ns, 1, 2, 0))

	// The default scheduler places a 1-GPU claim pod first.
	d1 := c.draPod(t, ns, "d1", 1, v1.DefaultSchedulerName)
	c.createPods(t, []*v1.Pod{d1})
	taken := c.waitBound(t, []*v1.Pod{d1}, 30*time.Second)[0]
	c.waitEvent(t, d1, "ForeignDevicesCounted: ResourceClaim drad/d1-gpus, which hivesched did not allocate, holds gpu-", 30*time.Second)
	st := c.waitVCStatus(t, "drad-a", func(st hv1.VirtualClusterStatus) bool { return st.ForeignLeafCells == 1 })
	cond := cellsLost(st)
	require.NotNil(t, cond)
	require.Contains(t, cond.Message, "claim drad/d1-gpus (for d1)")

	// A whole-node gang goes to the other node; a second one waits for
	// the foreign claim's GPU.
	h1 := c.claimGangPods(t, ns, "h1", "drad-a", 0, 1, 8, schedulerName)
	c.createPods(t, h1)
	require.NotEqual(t, taken, c.waitBound(t, h1, 30*time.Second)[0])
	c.requireClaimsMatchCells(t, h1)
	h2 := c.claimGangPods(t, ns, "h2", "drad-a", 0, 1, 8, schedulerName)
	c.createPods(t, h2)
	c.requireUnbound(t, h2, 3*time.Second)
	c.requireNoDeviceTwice(t)

	// The default pod goes; its claim is released; the gang binds there.
	c.deletePods(t, []*v1.Pod{d1})
	require.Equal(t, taken, c.waitBound(t, h2, 60*time.Second)[0])
	c.requireClaimsMatchCells(t, h2)
	c.waitVCStatus(t, "drad-a", func(st hv1.VirtualClusterStatus) bool { return st.ForeignLeafCells == 0 && st.UsedLeafCells == 16 })

	// Every GPU is hivesched's now: the default scheduler places nothing.
	d2 := c.draPod(t, ns, "d2", 1, v1.DefaultSchedulerName)
	c.createPods(t, []*v1.Pod{d2})
	c.requireUnbound(t, []*v1.Pod{d2}, 3*time.Second)
	c.requireNoDeviceTwice(t)
	c.deletePods(t, []*v1.Pod{d2})

	// The fence: with h1 gone, its node's GPUs are free, but the default
	// scheduler takes none unless its claim tolerates the fence.
	c.applyManifest(t, "manifests/dra/fence.yaml")
	c.deletePods(t, h1)
	c.waitVCStatus(t, "drad-a", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 8 })
	d3 := c.draPod(t, ns, "d3", 1, v1.DefaultSchedulerName)
	c.createPods(t, []*v1.Pod{d3})
	c.requireUnbound(t, []*v1.Pod{d3}, 3*time.Second)
	d4 := c.draPodTolerating(t, ns, "d4", 2)
	c.createPods(t, []*v1.Pod{d4})
	c.waitBound(t, []*v1.Pod{d4}, 30*time.Second)
	c.waitVCStatus(t, "drad-a", func(st hv1.VirtualClusterStatus) bool { return st.ForeignLeafCells == 2 })
	// hivesched itself is not fenced: a 4-GPU gang binds beside d4.
	h3 := c.claimGangPods(t, ns, "h3", "drad-a", 0, 1, 4, schedulerName)
	c.createPods(t, h3)
	c.waitBound(t, h3, 30*time.Second)
	c.requireClaimsMatchCells(t, h3)
	c.requireNoDeviceTwice(t)
}

// A restarted scheduler rebuilds its cells from its placement records and
// the claims: a gang whose claims hold what its records list is hivesched's
// again; a bound pod whose claim holds devices its record does not list is
// not (the allocation is not hivesched's: its devices are taken); an
// unbound hivesched pod whose claim someone else allocated gets it
// released and allocated with its own cells.
func TestDRARecovery(t *testing.T) {
	c := startCluster(t)
	const ns = "drar"
	c.createNamespace(t, ns)
	c.startClaimController(t)
	c.createDRANodes(t, ns, 1, 3)
	c.createVC(t, "drar-a", []string{ns}, "V100-NODE", 3)
	physical := physicalCluster(ns, 1, 3, 0)
	s := c.startScheduler(t, physical)

	g := c.claimGangPods(t, ns, "g", "drar-a", 0, 2, 4, schedulerName)
	c.createPods(t, g)
	gNodes := c.waitBound(t, g, 30*time.Second)
	c.requireClaimsMatchCells(t, g)
	s.stop()

	// While no scheduler runs: a bound pod whose record lists gpu-0..3 of
	// a node while its claim holds gpu-4..7 (its record is signed, the
	// allocation is someone else's) ...
	other := ""
	for _, n := range []string{ns + "-r0-n0", ns + "-r0-n1", ns + "-r0-n2"} {
		if n != gNodes[0] && n != gNodes[1] {
			other = n
			break
		}
	}
	fc := dratest.Claim(ns, "forged-gpus", 4)
	fc, err := c.kube.ResourceV1().ResourceClaims(ns).Create(t.Context(), fc, metav1.CreateOptions{})
	require.NoError(t, err)
	forged := util.GangPods(ns, "forged", "drar-a", 0, 1, 4, schedulerName)[0]
	forged.Spec.Containers[0].Resources = v1.ResourceRequirements{}
	dratest.UseClaim(forged, fc.Name, false)
	forged.Spec.NodeName = other
	rec := placement.Record{Group: ns + "/forged", VirtualCluster: "drar-a", Members: []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 4}},
		Node: other, LeafCellIndices: []int32{0, 1, 2, 3}, Claims: []placement.ClaimRecord{{Name: fc.Name, UID: string(fc.UID),
			Devices: []string{dratest.Driver + "/" + other + "/gpu-0", dratest.Driver + "/" + other + "/gpu-1", dratest.Driver + "/" + other + "/gpu-2", dratest.Driver + "/" + other + "/gpu-3"}}}}
	forged.Annotations[hivesched.AnnotationPlacement] = rec.Encode()
	c.createBoundPods(t, []*v1.Pod{forged})
	forged = c.getPod(t, forged)
	c.allocateAs(t, ns, fc.Name, other, []string{"gpu-4", "gpu-5", "gpu-6", "gpu-7"}, forged)
	// ... and an unbound hivesched pod whose claim someone allocated.
	uc := dratest.Claim(ns, "u-gpus", 4)
	_, err = c.kube.ResourceV1().ResourceClaims(ns).Create(t.Context(), uc, metav1.CreateOptions{})
	require.NoError(t, err)
	u := util.GangPods(ns, "u", "drar-a", 0, 1, 4, schedulerName)[0]
	u.Spec.Containers[0].Resources = v1.ResourceRequirements{}
	dratest.UseClaim(u, uc.Name, false)
	c.createPods(t, []*v1.Pod{u})
	u = c.getPod(t, u)
	c.allocateAs(t, ns, uc.Name, other, []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}, u)

	c.startScheduler(t, physical)
	// The gang is recovered as it was.
	c.waitVCStatus(t, "drar-a", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells >= 8 })
	for _, p := range g {
		c.noEvent(t, p, "PlacementNotTrusted")
	}
	// The forged pod's cells are not hivesched's; its claim's are taken.
	ev := c.waitEvent(t, forged, "PlacementNotTrusted", 30*time.Second)
	require.Contains(t, ev, "not the "+dratest.Driver+"/"+other+"/gpu-0")
	// The unbound pod's foreign allocation is released; it binds on cells
	// of its own, allocated by hivesched.
	c.waitBound(t, []*v1.Pod{u}, 60*time.Second)
	c.requireClaimsMatchCells(t, []*v1.Pod{u})
	st := c.waitVCStatus(t, "drar-a", func(st hv1.VirtualClusterStatus) bool { return st.ForeignLeafCells == 4 })
	require.Contains(t, cellsLost(st).Message, "claim drar/forged-gpus (for forged-0)")
	// The forged record's cells are not counted: the gang's 8 and u's 4.
	c.waitVCStatus(t, "drar-a", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 12 })
	c.requireNoDeviceTwice(t)

	// Nothing is booked twice: two 8-GPU gangs do not fit beside them
	// (one node is whole at most); when the gang goes, they do.
	big := c.claimGangPods(t, ns, "big", "drar-a", 0, 2, 8, schedulerName)
	c.createPods(t, big)
	c.requireUnbound(t, big, 3*time.Second)
	c.deletePods(t, g)
	c.deletePods(t, []*v1.Pod{u})
	c.waitBound(t, big, 60*time.Second)
	c.requireClaimsMatchCells(t, big)
	c.requireNoDeviceTwice(t)
	for _, n := range c.waitBound(t, big, time.Second) {
		require.NotEqual(t, other, n, "the node of the foreign claim")
	}
}

// hivesched and the profile's DynamicResources never both allocate one
// claim, and never one device twice: a gang's pods each have a GPU claim
// (hivesched's) and a NIC claim (DynamicResources'), while plain pods of the
// same profile claim GPUs through a class hivesched does not own (so its
// DynamicResources allocates them, from the same devices) at the same time.
// Every claim is allocated once, by the one allocator it belongs to.
func TestDRAClaimsNeverAllocatedTwice(t *testing.T) {
	c := startCluster(t)
	const ns = "dran"
	c.createNamespace(t, ns)
	c.startClaimController(t)
	c.createDRANodes(t, ns, 1, 2)
	for _, n := range []string{ns + "-r0-n0", ns + "-r0-n1"} {
		c.createSlice(t, nicSlice(n))
	}
	c.createClass(t, "nic.example.com", "nic.example.com")
	c.createClass(t, "any-gpu.example.com", dratest.Driver)
	c.createVC(t, "dran-a", []string{ns}, "V100-NODE", 2)
	watch := c.watchAllocations(t)
	c.startScheduler(t, physicalCluster(ns, 1, 2, 0))

	nic := dratest.Template(ns, "nic", 1)
	nic.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName = "nic.example.com"
	_, err := c.kube.ResourceV1().ResourceClaimTemplates(ns).Create(t.Context(), nic, metav1.CreateOptions{})
	require.NoError(t, err)
	any := dratest.Template(ns, "any-gpu", 1)
	any.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName = "any-gpu.example.com"
	_, err = c.kube.ResourceV1().ResourceClaimTemplates(ns).Create(t.Context(), any, metav1.CreateOptions{})
	require.NoError(t, err)

	for round := 0; round < 3; round++ {
		gang := c.claimGangPods(t, ns, fmt.Sprintf("g%d", round), "dran-a", 0, 2, 4, schedulerName)
		for _, p := range gang {
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: "nic", ResourceClaimTemplateName: &nic.Name})
			p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: "nic"})
		}
		var plain []*v1.Pod
		for i := 0; i < 4; i++ {
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("plain%d-%d", round, i)},
				Spec: v1.PodSpec{SchedulerName: schedulerName, Containers: []v1.Container{{Name: "main", Image: "busybox"}}}}
			dratest.UseClaim(p, any.Name, true)
			plain = append(plain, p)
		}
		// At once: the two allocators work on the same devices.
		c.createPods(t, append(append([]*v1.Pod{}, plain[:2]...), append(gang, plain[2:]...)...))
		c.waitBound(t, append(gang, plain...), 60*time.Second)
		c.requireClaimsMatchCells(t, gang)
		c.requireNoDeviceTwice(t)
		for _, p := range append(gang, plain...) {
			got := c.getPod(t, p)
			for _, st := range got.Status.ResourceClaimStatuses {
				key := ns + "/" + *st.ResourceClaimName
				require.Eventually(t, func() bool { n, _ := watch.get(key); return n > 0 }, 10*time.Second, 100*time.Millisecond, key)
				n, by := watch.get(key)
				require.Equal(t, 1, n, "claim %s allocated once", key)
				if st.Name == "gpus" && strings.HasPrefix(p.Name, "g") {
					require.Equal(t, "hivesched", by, "GPU claim %s allocated by hivesched", key)
				} else {
					require.NotEqual(t, "hivesched", by, "claim %s allocated by DynamicResources", key)
					require.NotEmpty(t, by)
				}
			}
			for _, e := range c.events(t, p) {
				require.NotContains(t, e, "allocated elsewhere")
			}
		}
		c.deletePods(t, append(gang, plain...))
		c.waitGone(t, append(gang, plain...), 30*time.Second)
	}
}

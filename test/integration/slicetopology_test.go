package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/dra/dratest"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// withSliceTopology derives the physical cluster from the ResourceSlices,
// grouping nodes by the node label keys given (physicalClusterFrom
// ResourceSlices): the profile's physicalCluster goes.
func withSliceTopology(nodeGroupLabels ...string) profileOption {
	return func(profile map[string]any) {
		for _, pc := range profile["pluginConfig"].([]any) {
			if pc.(map[string]any)["name"] == hivesched.Name {
				args := pc.(map[string]any)["args"].(map[string]any)
				delete(args, "physicalCluster")
				args["physicalClusterFrom"] = "ResourceSlices"
				labels := make([]any, len(nodeGroupLabels))
				for i, l := range nodeGroupLabels {
					labels[i] = l
				}
				args["sliceTopology"] = map[string]any{"nodeGroupLabels": labels}
			}
		}
	}
}

func (c *cluster) labelNode(t *testing.T, name, key, value string) {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	_, err := c.kube.CoreV1().Nodes().Patch(t.Context(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// TestDRATopologyFromSlices: with physicalClusterFrom ResourceSlices the
// cells come from the slices NVIDIA's driver publishes (8 GPUs in two PCIe
// roots per node) and the nodes' rack labels. A gang's claims hold the
// devices of its cells. A node's slice vanishing would leave a VC without
// its cells: the change is refused, the VC's status says Rejected naming
// the node, the running gang keeps its cells and claims, and nothing new
// is placed on the node's gone devices; the slice coming back makes the VC
// fit again. A node that joins with its slice is added to the cells.
func TestDRATopologyFromSlices(t *testing.T) {
	c := startCluster(t)
	const (
		ns      = "topo"
		rackKey = "topology.kubernetes.io/rack"
		rack    = "Tesla-V100-SXM2-32GB-pcie4-node2-rack2"
		node    = "Tesla-V100-SXM2-32GB-pcie4-node2"
	)
	c.createNamespace(t, ns)
	c.startClaimController(t)
	c.createDRANodes(t, ns, 2, 2) // topo-r<r>-n<n>, no nvidia.com/gpu, NVIDIA's slices
	for r := 0; r < 2; r++ {
		for n := 0; n < 2; n++ {
			c.labelNode(t, fmt.Sprintf("%s-r%d-n%d", ns, r, n), rackKey, fmt.Sprintf("rack%d", r))
		}
	}
	// The whole cluster given out: a rack, and two nodes of a rack.
	c.createVC(t, "topo-a", []string{ns}, rack, 1)
	c.createVC(t, "topo-b", []string{ns}, rack+"."+node, 2)
	c.startScheduler(t, nil, withSliceTopology(rackKey))
	for _, vc := range []string{"topo-a", "topo-b"} {
		c.waitVCStatus(t, vc, func(st hv1.VirtualClusterStatus) bool { return st.State == hv1.VirtualClusterActive })
	}

	g := c.claimGangPods(t, ns, "g", "topo-b", 0, 2, 8, schedulerName)
	c.createPods(t, g)
	nodes := c.waitBound(t, g, 30*time.Second)
	c.requireClaimsMatchCells(t, g)
	claimsBefore := map[string][]string{}
	for _, p := range g {
		claimsBefore[p.Name] = claimDevices(c.podClaim(t, p))
	}

	// A node the gang does not run on loses its slice (its driver is
	// uninstalled): the cluster would have one node less than the VCs
	// hold.
	used := map[string]bool{}
	for _, n := range nodes {
		used[n] = true
	}
	var gone string
	for r := 0; r < 2 && gone == ""; r++ {
		for n := 0; n < 2; n++ {
			if name := fmt.Sprintf("%s-r%d-n%d", ns, r, n); !used[name] {
				gone = name
				break
			}
		}
	}
	require.NotEmpty(t, gone)
	slice := dratest.Slice(gone, "Tesla V100-SXM2-32GB", 8)
	require.NoError(t, c.kube.ResourceV1().ResourceSlices().Delete(t.Context(), slice.Name, metav1.DeleteOptions{}))
	st := c.waitVCStatus(t, "topo-b", func(st hv1.VirtualClusterStatus) bool { return st.State == hv1.VirtualClusterRejected })
	cond := apimeta.FindStatusCondition(st.Conditions, hv1.ConditionRejected)
	require.NotNil(t, cond)
	require.Equal(t, metav1.ConditionTrue, cond.Status)
	require.Equal(t, "DoesNotFit", cond.Reason)
	require.Contains(t, cond.Message, "the physical cluster derived from ResourceSlices changed (nodes removed: "+gone)
	require.Contains(t, cond.Message, `virtual cluster "topo-b"`)
	t.Logf("topo-b: %s", cond.Message)
	// The running gang keeps its pods, cells and devices.
	for _, p := range g {
		got := c.getPod(t, p)
		require.NotEmpty(t, got.Spec.NodeName)
		require.Nil(t, got.DeletionTimestamp)
		require.Equal(t, claimsBefore[p.Name], claimDevices(c.podClaim(t, p)))
	}
	c.requireClaimsMatchCells(t, g)
	// The gone node's leaves are bad: nothing new is placed there. Of the
	// two nodes the gang left free, an opportunistic 8-GPU pod gets the
	// other one.
	o := c.claimGangPods(t, ns, "o", "topo-a", -1, 1, 8, schedulerName)
	c.createPods(t, o)
	on := c.waitBound(t, o, 30*time.Second)
	require.NotEqual(t, gone, on[0], "placed on the node whose devices are gone")
	c.requireClaimsMatchCells(t, o)

	// The slice comes back: the VC fits again.
	c.createSlice(t, slice)
	st = c.waitVCStatus(t, "topo-b", func(st hv1.VirtualClusterStatus) bool { return st.State == hv1.VirtualClusterActive })
	cond = apimeta.FindStatusCondition(st.Conditions, hv1.ConditionRejected)
	require.Equal(t, metav1.ConditionFalse, cond.Status)

	// A new rack of two nodes joins: a VC for it fits once its slices are
	// published, and a gang runs there.
	c.createVC(t, "topo-c", []string{ns}, rack, 1)
	c.waitVCStatus(t, "topo-c", func(st hv1.VirtualClusterStatus) bool { return st.State == hv1.VirtualClusterRejected })
	for n := 0; n < 2; n++ {
		name := fmt.Sprintf("%s-r2-n%d", ns, n)
		c.createNode(t, name, "nvidia.com/gpu", 0, true)
		c.labelNode(t, name, rackKey, "rack2")
		c.createSlice(t, dratest.Slice(name, "Tesla V100-SXM2-32GB", 8))
	}
	c.waitVCStatus(t, "topo-c", func(st hv1.VirtualClusterStatus) bool { return st.State == hv1.VirtualClusterActive })
	g2 := c.claimGangPods(t, ns, "g2", "topo-c", 0, 2, 8, schedulerName)
	c.createPods(t, g2)
	for _, n := range c.waitBound(t, g2, 30*time.Second) {
		require.True(t, strings.HasPrefix(n, ns+"-r2-"), "topo-c's gang runs on the new rack, not %s", n)
	}
	c.requireClaimsMatchCells(t, g2)
	c.requireNoDeviceTwice(t)
}

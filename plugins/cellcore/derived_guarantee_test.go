package cellcore

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// Clusters derived from NVIDIA-shaped ResourceSlices and rack labels by
// plugins/slicetopology (physicalClusterFrom: ResourceSlices), kept in
// testdata by its TestCoreFixtures (this package cannot import it):
// racks rack-a and rack-b of four 8-GPU V100 nodes in two PCIe roots, a
// rack of one node with 7 GPUs, an unracked 8-GPU node and two 4-GPU T4
// nodes; and the same after gpu-b3's slice is deleted.
func derivedConfig(t *testing.T, file string) Config {
	t.Helper()
	data, err := os.ReadFile("testdata/" + file)
	require.NoError(t, err)
	var cfg Config
	require.NoError(t, json.Unmarshal(data, &cfg))
	return cfg
}

// The derived type names (docs/dra.md, "Topology from ResourceSlices").
const (
	dRack  = "Tesla-V100-SXM2-32GB-pcie4-node2-rack4"
	dNode  = "Tesla-V100-SXM2-32GB-pcie4-node2"
	dPCIe  = "Tesla-V100-SXM2-32GB-pcie4"
	dNode7 = "Tesla-V100-SXM2-32GB-node7-rack1." + "Tesla-V100-SXM2-32GB-node7"
	dT4    = "Tesla-T4-pcie2-node2"
	dV100  = "Tesla-V100-SXM2-32GB"
	dT4L   = "Tesla-T4"
)

// TestGuaranteeOnDerivedConfig: the VC guarantee, with the core's oracle
// (guaranteeFits), on a derived cluster given out whole to VCs in derived
// types: every guaranteed probe the oracle says fits its VC is placed or
// preempts, never waits, with running and opportunistic work around it.
// Then the cluster loses gpu-b3's slice: the change is refused (a VC
// would not fit) and changes nothing; once the VC shrinks and nothing runs
// on gpu-b3, it applies, the running groups keep their cells, and the
// guarantee holds on the new cells.
func TestGuaranteeOnDerivedConfig(t *testing.T) {
	k := newHealthyCore(t, derivedConfig(t, "derived-cluster.json"))
	vcs := []VirtualClusterSpec{
		vcSpec("vc1", dRack, 1),
		vcSpec("vc2", dRack+"."+dNode, 3, dNode, 1, dNode7, 1),
		vcSpec("vc3", dRack+"."+dPCIe, 2, dT4, 2),
	}
	for _, s := range vcs {
		_, err := k.SetVirtualCluster(s)
		require.NoError(t, err, s.Name)
	}
	_, err := k.SetVirtualCluster(vcSpec("vc-more", dNode, 1))
	require.Error(t, err, "the cluster is given out whole")

	// Running work: vc1 half its rack, vc2 one node, vc3 a T4 node, and
	// opportunistic pods on what is left of the V100s.
	run1 := ag("run1", "vc1", 1, 2, 8)
	run1.LeafCellType = dV100
	vcPlace(t, k, run1)
	run2 := ag("run2", "vc2", 1, 1, 8)
	run2.LeafCellType = dV100
	vcPlace(t, k, run2)
	run3 := ag("run3", "vc3", 1, 1, 4)
	run3.LeafCellType = dT4L
	vcPlace(t, k, run3)
	for i := 0; i < 4; i++ {
		o := ag(fmt.Sprint("opp-", i), "vc2", -1, 1, 4)
		o.LeafCellType = dV100
		vcPlace(t, k, o)
	}
	running := map[string]AffinityGroupStatus{}
	for _, g := range []string{"run1", "run2", "run3", "opp-0", "opp-1", "opp-2", "opp-3"} {
		running[g], _ = k.AffinityGroupStatus(g)
	}

	check := func(step string) {
		t.Helper()
		mustCheck(t, k)
		requireKeepCells(t, k, running, step)
		checked := probeGuarantee(t, k, step, []int32{1, 2, 4, 7, 8}, func(vc string, pods, leaves int32) string {
			if vc == "vc3" && leaves <= 4 && pods%2 == 0 {
				return dT4L
			}
			return dV100
		})
		require.NotZero(t, checked, step)
	}
	check("derived cluster")

	// gpu-b3's slice goes: 8 V100s fewer, rack-b a rack of 3 (another
	// type). Refused while the VCs hold the whole cluster, and nothing
	// changes.
	without := derivedConfig(t, "derived-without-gpu-b3.json")
	before := k.Snapshot()
	res, err := k.ReplacePhysicalCluster(without)
	require.NoError(t, err)
	require.False(t, res.Applied)
	require.NotEmpty(t, res.Rejected, "%+v", res)
	require.Equal(t, []string{"gpu-b3"}, res.RemovedNodes)
	require.Equal(t, before, k.Snapshot(), "a refused change changes nothing")
	check("change refused")

	// vc2 keeps only its unracked and 7-GPU nodes, vc3 only its T4s: the
	// VCs fit the smaller cluster. What runs on gpu-b3 ends first.
	onB := false
	for g, st := range running {
		for _, p := range st.Pods {
			if p.Node == "gpu-b3" {
				_, err := k.DeleteAffinityGroup(g)
				require.NoError(t, err)
				delete(running, g)
			}
			onB = onB || (p.Node >= "gpu-b0" && p.Node <= "gpu-b3")
		}
	}
	_, err = k.SetVirtualCluster(vcSpec("vc2", dNode, 1, dNode7, 1))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("vc3", dT4, 2))
	require.NoError(t, err)
	res, err = k.ReplacePhysicalCluster(without)
	require.NoError(t, err)
	if !res.Applied {
		// Groups on rack-b's other nodes change chain (rack4 becomes
		// rack3): they would lose their cells, so the change waits for
		// them, as the plugin's retry does.
		require.True(t, onB, "%+v", res)
		require.NotEmpty(t, res.Stranded, "%+v", res)
		for _, g := range res.Stranded {
			_, err := k.DeleteAffinityGroup(g)
			require.NoError(t, err)
			delete(running, g)
		}
		res, err = k.ReplacePhysicalCluster(without)
		require.NoError(t, err)
	}
	require.True(t, res.Applied, "%+v", res)
	for _, g := range []string{"vc2", "vc3"} {
		_, ok := k.VirtualClusterStatus(g)
		require.True(t, ok)
	}
	check("gpu-b3 gone")
}

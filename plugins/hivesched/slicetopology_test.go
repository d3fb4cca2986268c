package hivesched

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/apis/config"
	"github.com/hivesched/hivesched/plugins/dra/dratest"
)

// TestDeriveCluster: New's derived physical cluster, and its refusal to
// start with no cells, saying why per node.
func TestDeriveCluster(t *testing.T) {
	args := &config.HiveSchedArgs{PhysicalClusterFrom: config.PhysicalClusterFromResourceSlices, DRA: config.DRAArgs{Driver: dratest.Driver},
		SliceTopology: &config.SliceTopologyArgs{NodeGroupLabels: []string{"topology.kubernetes.io/rack"}}}
	n0 := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0", Labels: map[string]string{"topology.kubernetes.io/rack": "r0"}}}
	pc, err := deriveCluster(klog.Background(), args, []*v1.Node{n0}, []*resourceapi.ResourceSlice{dratest.Slice("n0", "Tesla V100-SXM2-32GB", 8)})
	require.NoError(t, err)
	require.Equal(t, config.CellTypeSpec{ChildCellType: "Tesla-V100-SXM2-32GB-pcie4-node2", ChildCellNumber: 1, TopologyKey: "topology.kubernetes.io/rack"},
		pc.CellTypes["Tesla-V100-SXM2-32GB-pcie4-node2-rack1"])

	_, err = deriveCluster(klog.Background(), args, []*v1.Node{n0}, nil)
	require.EqualError(t, err, "physicalClusterFrom ResourceSlices: no node's ResourceSlices of driver gpu.nvidia.com give cells (no node publishes a ResourceSlice of the driver); the scheduler needs at least one (it starts again, and reads them again, after the driver publishes them)")
	incomplete := dratest.Slice("n0", "Tesla V100-SXM2-32GB", 8)
	incomplete.Spec.Pool.ResourceSliceCount = 2
	_, err = deriveCluster(klog.Background(), args, []*v1.Node{n0}, []*resourceapi.ResourceSlice{incomplete})
	require.ErrorContains(t, err, "(n0: its ResourceSlices of driver gpu.nvidia.com are incomplete")
}

// TestSafePartOfARefusedChange: the inputs of the safe part of a refused
// change keep the nodes it removes or changes as they were and take every
// other node as it is now; derived, a removed node is back in the cells
// and a new node is in them.
func TestSafePartOfARefusedChange(t *testing.T) {
	args := &config.HiveSchedArgs{PhysicalClusterFrom: config.PhysicalClusterFromResourceSlices, DRA: config.DRAArgs{Driver: dratest.Driver},
		SliceTopology: &config.SliceTopologyArgs{NodeGroupLabels: []string{"topology.kubernetes.io/rack"}}}
	node := func(name, rack string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"topology.kubernetes.io/rack": rack}}}
	}
	const v100 = "Tesla V100-SXM2-32GB"
	old := newTopoInputs([]*v1.Node{node("a0", "ra"), node("a1", "ra")},
		[]*resourceapi.ResourceSlice{dratest.Slice("a0", v100, 8), dratest.Slice("a1", v100, 8)}, dratest.Driver)
	derive := func(in topoInputs) (config.PhysicalClusterSpec, error) {
		nodes, slices := in.lists()
		return deriveCluster(klog.Background(), args, nodes, slices)
	}
	oldCfg, err := derive(old)
	require.NoError(t, err)
	// a1's slice is gone, b0 is new (another rack).
	now := newTopoInputs([]*v1.Node{node("a0", "ra"), node("a1", "ra"), node("b0", "rb")},
		[]*resourceapi.ResourceSlice{dratest.Slice("a0", v100, 8), dratest.Slice("b0", v100, 8)}, dratest.Driver)
	safe := now.holding(old, []string{"a1", "a0"}) // removed, changed (its rack's type changes)
	require.Len(t, safe.slices["a1"], 1, "the removed node's slice is the old one")
	safeCfg, err := derive(safe)
	require.NoError(t, err)
	// Top cells by type: the new rack of one (rack1) before the old rack.
	require.Equal(t, append([]config.PhysicalCellSpec{
		{CellType: "Tesla-V100-SXM2-32GB-pcie4-node2-rack1", CellAddress: "rb", CellChildren: []config.PhysicalCellSpec{{CellAddress: "b0"}}}},
		oldCfg.PhysicalCells...), safeCfg.PhysicalCells)
	// now itself is unchanged.
	require.Empty(t, now.slices["a1"])
}

package cellcore

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// gpuTypes is a DGX-like hierarchy: RACK > NODE (node level) > SOCKET >
// SWITCH > V100, 8 GPUs per node; plus a single-level T4 node chain.
func gpuTypes(nodesPerRack int32) map[string]CellTypeSpec {
	return map[string]CellTypeSpec{
		"V100-SWITCH": {ChildCellType: "V100", ChildCellNumber: 2},
		"V100-SOCKET": {ChildCellType: "V100-SWITCH", ChildCellNumber: 2},
		"V100-NODE":   {ChildCellType: "V100-SOCKET", ChildCellNumber: 2, IsNodeLevel: true},
		"V100-RACK":   {ChildCellType: "V100-NODE", ChildCellNumber: nodesPerRack},
		"T4-NODE":     {ChildCellType: "T4", ChildCellNumber: 4, IsNodeLevel: true},
	}
}

func rackSpec(name string, nodes []string) PhysicalCellSpec {
	r := PhysicalCellSpec{CellType: "V100-RACK", CellAddress: name}
	for _, n := range nodes {
		r.CellChildren = append(r.CellChildren, PhysicalCellSpec{CellAddress: n})
	}
	return r
}

// clusterConfig has racks x nodesPerRack V100 nodes (named r<i>-n<j>) and t4
// T4 nodes (t4-<i>).
func clusterConfig(racks, nodesPerRack, t4 int) Config {
	cfg := Config{CellTypes: gpuTypes(int32(nodesPerRack))}
	for r := 0; r < racks; r++ {
		var nodes []string
		for n := 0; n < nodesPerRack; n++ {
			nodes = append(nodes, fmt.Sprintf("r%d-n%d", r, n))
		}
		cfg.PhysicalCells = append(cfg.PhysicalCells, rackSpec(fmt.Sprintf("rack%d", r), nodes))
	}
	for i := 0; i < t4; i++ {
		cfg.PhysicalCells = append(cfg.PhysicalCells, PhysicalCellSpec{CellType: "T4-NODE", CellAddress: fmt.Sprintf("t4-%d", i)})
	}
	return cfg
}

func newHealthyCore(t testing.TB, cfg Config) *Core {
	t.Helper()
	k, err := New(cfg)
	require.NoError(t, err)
	// In name order: the order nodes come up in decides which of equally
	// good cells a search meets first, and a seed must replay the same.
	for _, name := range slices.Sorted(maps.Keys(k.nodes)) {
		require.NoError(t, k.SetNodeHealth(name, NodeHealthy))
	}
	return k
}

func vcSpec(name string, cells ...any) VirtualClusterSpec {
	s := VirtualClusterSpec{Name: name}
	for i := 0; i+1 < len(cells); i += 2 {
		s.VirtualCells = append(s.VirtualCells, VirtualCellSpec{CellType: cells[i].(string), CellNumber: int32(cells[i+1].(int))})
	}
	return s
}

func ag(name, vc string, prio int32, members ...int32) AffinityGroupSpec {
	s := AffinityGroupSpec{Name: name, VirtualCluster: vc, Priority: prio}
	for i := 0; i+1 < len(members); i += 2 {
		s.Members = append(s.Members, AffinityGroupMember{PodNumber: members[i], LeafCellNumber: members[i+1]})
	}
	return s
}

func mustCheck(t testing.TB, k *Core) {
	t.Helper()
	require.NoError(t, k.CheckInvariants())
}

// bindAll assigns a pod key to every slot of a placed group.
func bindAll(t testing.TB, k *Core, d Decision) {
	t.Helper()
	for i, p := range d.Pods {
		_, err := k.AssignPod(d.Group, fmt.Sprintf("%s-%d", d.Group, i), p.LeafCellNumber)
		require.NoError(t, err)
	}
}

func deleteAllPods(t testing.TB, k *Core, group string) PodDeletion {
	t.Helper()
	st, ok := k.AffinityGroupStatus(group)
	require.True(t, ok)
	var last PodDeletion
	for _, p := range st.Pods {
		if p.PodKey != "" {
			var err error
			last, err = k.DeletePod(group, p.PodKey)
			require.NoError(t, err)
		}
	}
	return last
}

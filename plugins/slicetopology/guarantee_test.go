package slicetopology

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
)

// TestGuaranteeOnDerivedCluster: the VC guarantee on a derived cluster. VCs
// that take the whole cluster in its derived types (a rack, nodes, PCIe
// roots, with a node that lost a GPU and one without a rack label) are
// accepted and one more node is refused; with the cluster full of
// opportunistic work, every guaranteed gang within its VC's cells is placed
// (preempting only opportunistic groups), in random orders, and the core's
// invariants hold after every step.
func TestGuaranteeOnDerivedCluster(t *testing.T) {
	nodes, slices := fixtureCluster()
	res, err := Build(opts(rackKey), nodes, slices)
	require.NoError(t, err)

	const (
		rack  = "Tesla-V100-SXM2-32GB-pcie4-node2-rack4"
		node8 = "Tesla-V100-SXM2-32GB-pcie4-node2"
		pcie  = "Tesla-V100-SXM2-32GB-pcie4"
		node7 = "Tesla-V100-SXM2-32GB-node7-rack1.Tesla-V100-SXM2-32GB-node7"
		t4    = "Tesla-T4-pcie2-node2"
	)
	// Capacity: 2 racks (64), gpu-x0 (8, a top-level node), gpu-c0 (7),
	// two T4 nodes (8 T4).
	vcs := []cellcore.VirtualClusterSpec{
		{Name: "vc-a", VirtualCells: []cellcore.VirtualCellSpec{{CellType: rack, CellNumber: 1}}},
		{Name: "vc-b", VirtualCells: []cellcore.VirtualCellSpec{{CellType: rack + "." + node8, CellNumber: 3}, {CellType: node8, CellNumber: 1}, {CellType: node7, CellNumber: 1}}},
		{Name: "vc-c", VirtualCells: []cellcore.VirtualCellSpec{{CellType: rack + "." + pcie, CellNumber: 2}, {CellType: t4, CellNumber: 2}}},
	}
	// vc-b's and vc-c's share of rack-b: 3 nodes and 2 roots of the fourth.
	type gang struct {
		vc      string
		leaf    string
		members []cellcore.AffinityGroupMember
	}
	gangs := []gang{
		{"vc-a", "Tesla-V100-SXM2-32GB", []cellcore.AffinityGroupMember{{PodNumber: 4, LeafCellNumber: 8}}},
		{"vc-b", "Tesla-V100-SXM2-32GB", []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 8}}},
		{"vc-b", "Tesla-V100-SXM2-32GB", []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}}},
		{"vc-b", "Tesla-V100-SXM2-32GB", []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 8}}},
		{"vc-b", "Tesla-V100-SXM2-32GB", []cellcore.AffinityGroupMember{{PodNumber: 7, LeafCellNumber: 1}}},
		{"vc-c", "Tesla-V100-SXM2-32GB", []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 4}}},
		{"vc-c", "Tesla-T4", []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 2}, {PodNumber: 1, LeafCellNumber: 4}}},
	}
	for seed := int64(0); seed < 20; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			k, err := cellcore.New(cellspec.Config(res.PhysicalCluster))
			require.NoError(t, err)
			for _, n := range res.Nodes {
				require.NoError(t, k.SetNodeHealth(n, cellcore.NodeHealthy))
			}
			for _, vc := range vcs {
				_, err := k.SetVirtualCluster(vc)
				require.NoError(t, err, vc.Name)
			}
			_, err = k.SetVirtualCluster(cellcore.VirtualClusterSpec{Name: "vc-more", VirtualCells: []cellcore.VirtualCellSpec{{CellType: node8, CellNumber: 1}}})
			require.Error(t, err, "the cluster is fully given out: one more node does not fit")

			pods := 0
			bind := func(d cellcore.Decision) {
				for _, p := range d.Pods {
					pods++
					_, err := k.AssignPod(d.Group, fmt.Sprintf("pod-%d", pods), p.LeafCellNumber)
					require.NoError(t, err)
				}
			}
			// Opportunistic work everywhere first.
			for i := 0; ; i++ {
				vc := vcs[r.Intn(len(vcs))].Name
				leaf := "Tesla-V100-SXM2-32GB"
				if r.Intn(4) == 0 {
					leaf = "Tesla-T4"
				}
				d, err := k.Schedule(cellcore.AffinityGroupSpec{Name: fmt.Sprint("opp-", i), VirtualCluster: vc, Priority: -1, LeafCellType: leaf,
					Members: []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: int32(1 + r.Intn(2))}}})
				require.NoError(t, err)
				if d.Kind != cellcore.Placed {
					_, _ = k.DeleteAffinityGroup(d.Group)
					if i > 200 {
						break
					}
					continue
				}
				bind(d)
			}
			require.NoError(t, k.CheckInvariants())
			for i, gi := range r.Perm(len(gangs)) {
				g := gangs[gi]
				spec := cellcore.AffinityGroupSpec{Name: fmt.Sprint("g-", i), VirtualCluster: g.vc, Priority: 10, LeafCellType: g.leaf, Members: g.members}
				for try := 0; ; try++ {
					d, err := k.Schedule(spec)
					require.NoError(t, err)
					require.NoError(t, k.CheckInvariants())
					if d.Kind == cellcore.Placed {
						bind(d)
						break
					}
					require.Equal(t, cellcore.Preempt, d.Kind, "%s of %s waits although it fits its VC: %s", spec.Name, g.vc, d.Reason)
					require.Less(t, try, 3, "preemption does not end: %s", d.Reason)
					for _, v := range d.Victims {
						require.Regexp(t, "^opp-", v, "only opportunistic groups are preempted")
						_, err := k.DeleteAffinityGroup(v)
						require.NoError(t, err)
					}
				}
			}
			require.NoError(t, k.CheckInvariants())
		})
	}
}

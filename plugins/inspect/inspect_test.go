package inspect

import (
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hivesched/hivesched/apis/config"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/groupindex"
	"github.com/hivesched/hivesched/plugins/virtualclusters"
)

// testServer is an inspect API server on a core of nodes 8-GPU nodes (racks of 8, RACK/NODE/SOCKET/SWITCH/GPU), two VCs of
// a quarter of the nodes each, and half of each VC's nodes used by 1x8
// groups; a 1x4 opportunistic group every 8 nodes outside them.
func testServer(tb testing.TB, nodes int) *Server {
	tb.Helper()
	pc := config.PhysicalClusterSpec{CellTypes: map[string]config.CellTypeSpec{
		"V100-SWITCH": {ChildCellType: "V100", ChildCellNumber: 2},
		"V100-SOCKET": {ChildCellType: "V100-SWITCH", ChildCellNumber: 2},
		"V100-NODE":   {ChildCellType: "V100-SOCKET", ChildCellNumber: 2, IsNodeLevel: true},
		"V100-RACK":   {ChildCellType: "V100-NODE", ChildCellNumber: 8},
	}}
	for r := 0; r < nodes/8; r++ {
		rack := config.PhysicalCellSpec{CellType: "V100-RACK", CellAddress: fmt.Sprintf("rack%d", r)}
		for n := 0; n < 8; n++ {
			rack.CellChildren = append(rack.CellChildren, config.PhysicalCellSpec{CellAddress: fmt.Sprintf("r%d-n%d", r, n)})
		}
		pc.PhysicalCells = append(pc.PhysicalCells, rack)
	}
	k, err := cellcore.New(cellspec.Config(pc))
	require.NoError(tb, err)
	for r := 0; r < nodes/8; r++ {
		for n := 0; n < 8; n++ {
			require.NoError(tb, k.SetNodeHealth(fmt.Sprintf("r%d-n%d", r, n), cellcore.NodeHealthy))
		}
	}
	vcs := virtualclusters.New(virtualclusters.Config{Core: k})
	p := New(Config{Core: k, Groups: groupindex.New("nvidia.com/gpu"), VirtualClusters: vcs, Access: testAccess()})
	for _, vc := range []string{"a", "b"} {
		obj := &hv1.VirtualCluster{ObjectMeta: metav1.ObjectMeta{Name: vc},
			Spec: hv1.VirtualClusterSpec{VirtualCells: []hv1.VirtualCellSpec{{CellType: "V100-NODE", CellNumber: int32(nodes / 4)}}}}
		_, _, err := vcs.Apply(obj)
		require.NoError(tb, err)
		for i := 0; i < nodes/8; i++ {
			place(tb, k, cellcore.AffinityGroupSpec{Name: fmt.Sprintf("ns/%s-%d", vc, i), VirtualCluster: vc,
				Members: []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 8}}})
		}
	}
	for i := 0; i < nodes/8; i++ {
		place(tb, k, cellcore.AffinityGroupSpec{Name: fmt.Sprintf("ns/opp-%d", i), VirtualCluster: "a", Priority: cellcore.OpportunisticPriority,
			Members: []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 4}}})
	}
	return p
}

func place(tb testing.TB, k *cellcore.Core, s cellcore.AffinityGroupSpec) {
	d, err := k.Schedule(s)
	require.NoError(tb, err)
	require.Equal(tb, cellcore.Placed, d.Kind, "%s: %s", s.Name, d.Reason)
}

func countLeaves(cells []iv1.Cell, keep func(*iv1.Cell) bool) (n int) {
	for i := range cells {
		if cells[i].Level == 1 && keep(&cells[i]) {
			n++
		}
		n += countLeaves(cells[i].Children, keep)
	}
	return n
}

// The tree keeps the configuration's order, every cell once, and the
// filters keep a VC's or a node's cells with their ancestors.
func TestInspectCells(t *testing.T) {
	p := testServer(t, 16)
	all := p.cells("", "")
	require.Len(t, all.Chains, 1)
	require.Equal(t, []string{"V100", "V100-SWITCH", "V100-SOCKET", "V100-NODE", "V100-RACK"}, all.Chains[0].Levels)
	racks := all.Chains[0].Cells
	require.Len(t, racks, 2)
	require.Equal(t, "V100-RACK/rack0", racks[0].ID)
	require.Equal(t, "V100-RACK/rack1", racks[1].ID)
	require.Equal(t, "r0-n0", racks[0].Children[0].Address)
	require.Equal(t, "V100-RACK/rack0/r0-n7", racks[0].Children[7].ID)
	leaf := racks[0].Children[0].Children[0].Children[0].Children[1]
	require.Equal(t, 1, leaf.Level)
	require.Equal(t, int32(1), *leaf.Index)
	require.Equal(t, "r0-n0", leaf.Node)
	require.Equal(t, 128, countLeaves(racks, func(*iv1.Cell) bool { return true }))
	require.Equal(t, 32, countLeaves(racks, func(c *iv1.Cell) bool { return c.Group != "" && *c.Priority == 0 }))
	require.Equal(t, 8, countLeaves(racks, func(c *iv1.Cell) bool { return c.Group != "" && *c.Priority == -1 }))
	require.Equal(t, int32(40), racks[0].UsedLeaves+racks[1].UsedLeaves)

	a := p.cells("a", "")
	// Cells are bound to a VC as its groups need them (HiveD's buddy
	// allocation): its two busy nodes so far.
	require.Equal(t, 16, countLeaves(a.Chains[0].Cells, func(*iv1.Cell) bool { return true }))
	require.Equal(t, 16, countLeaves(a.Chains[0].Cells, func(c *iv1.Cell) bool { return c.VirtualCluster == "a" }))
	n := p.cells("", "r1-n3")
	require.Len(t, n.Chains[0].Cells, 1, "the node's rack only")
	require.Len(t, n.Chains[0].Cells[0].Children, 1)
	require.Equal(t, 8, countLeaves(n.Chains[0].Cells, func(*iv1.Cell) bool { return true }))
	none := p.cells("nope", "")
	require.Empty(t, none.Chains)

	vcs := p.virtualClusters("")
	require.Len(t, vcs, 2)
	require.Equal(t, iv1.LeafCounts{Total: 32, Used: 16, Free: 16, Opportunistic: 8}, vcs[0].LeafCells)
	require.Len(t, vcs[0].Cells[0].Physical, 2, "two nodes bound so far")
}

// BenchmarkInspect measures the inspect API's answers on a half-full cluster:
// lock is the copy taken under the core's lock (all scheduling waits for it),
// cells the whole answer (copy, tree, JSON) with its size in bytes, vcs the
// VC list, usage what a metrics scrape reads.
func BenchmarkInspect(b *testing.B) {
	for _, nodes := range []int{1000, 10000} {
		p := testServer(b, nodes)
		b.Run(fmt.Sprintf("nodes=%d/lock", nodes), func(b *testing.B) {
			b.ReportAllocs()
			var buf []cellcore.CellRecord
			for i := 0; i < b.N; i++ {
				buf = p.core.CellRecords(buf, "", "")
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/cells", nodes), func(b *testing.B) {
			b.ReportAllocs()
			var cw countingWriter
			for i := 0; i < b.N; i++ {
				cw.n = 0
				if err := json.NewEncoder(&cw).Encode(p.cells("", "")); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cw.n), "json-bytes")
		})
		b.Run(fmt.Sprintf("nodes=%d/cells-one-node", nodes), func(b *testing.B) {
			b.ReportAllocs()
			var cw countingWriter
			for i := 0; i < b.N; i++ {
				cw.n = 0
				if err := json.NewEncoder(&cw).Encode(p.cells("", "r0-n0")); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cw.n), "json-bytes")
		})
		b.Run(fmt.Sprintf("nodes=%d/vcs", nodes), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := json.NewEncoder(io.Discard).Encode(p.virtualClusters("")); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/usage", nodes), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = p.core.LeafUsage()
			}
		})
	}
}

type countingWriter struct{ n int }

func (w *countingWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }

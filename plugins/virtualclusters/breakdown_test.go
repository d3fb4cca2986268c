package virtualclusters

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hivesched/hivesched/apis/config"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
)

// Issue 27: `kubectl get vc` showed TOTAL 28 USED 27 FREE 0, the missing GPU
// another VC's opportunistic job on the VC's free cell. The status names it
// (lentLeafCells), and lost hardware (unavailableLeafCells): the columns
// add up. Lent cells are counted from a copy of the tree at most once a
// second; until a count sees a change, it is Unavailable, and the sum
// holds all along.
func TestStatusAddsUp(t *testing.T) {
	pc := config.PhysicalClusterSpec{CellTypes: map[string]config.CellTypeSpec{
		"V100-NODE": {ChildCellType: "V100", ChildCellNumber: 8, IsNodeLevel: true},
	}, PhysicalCells: []config.PhysicalCellSpec{{CellType: "V100-NODE", CellAddress: "n0"}, {CellType: "V100-NODE", CellAddress: "n1"}}}
	k, err := cellcore.New(cellspec.Config(pc))
	require.NoError(t, err)
	require.NoError(t, k.SetNodeHealth("n0", cellcore.NodeHealthy))
	require.NoError(t, k.SetNodeHealth("n1", cellcore.NodeHealthy))
	r := New(Config{Core: k, Every: time.Minute})
	objs := map[string]*hv1.VirtualCluster{}
	for _, vc := range []string{"x", "y"} {
		objs[vc] = &hv1.VirtualCluster{ObjectMeta: metav1.ObjectMeta{Name: vc},
			Spec: hv1.VirtualClusterSpec{VirtualCells: []hv1.VirtualCellSpec{{CellType: "V100-NODE", CellNumber: 1}}}}
		_, _, err := r.Apply(objs[vc])
		require.NoError(t, err)
	}
	place := func(name, vc string, prio, gpus int32) {
		d, err := k.Schedule(cellcore.AffinityGroupSpec{Name: name, VirtualCluster: vc, Priority: prio,
			Members: []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: gpus}}})
		require.NoError(t, err)
		require.Equal(t, cellcore.Placed, d.Kind, d.Reason)
	}
	counts := func(st hv1.VirtualClusterStatus) [5]int32 {
		require.Equal(t, st.TotalLeafCells, st.UsedLeafCells+st.FreeLeafCells+st.LentLeafCells+st.UnavailableLeafCells, "the columns add up")
		return [5]int32{st.TotalLeafCells, st.UsedLeafCells, st.FreeLeafCells, st.LentLeafCells, st.UnavailableLeafCells}
	}
	t0 := time.Now()
	place("ns/x7", "x", 0, 7)
	place("ns/y8", "y", 0, 8)
	require.Equal(t, [5]int32{8, 7, 1, 0, 0}, counts(r.vcStatus(objs["x"], "", t0)))
	place("ns/yopp", "y", cellcore.OpportunisticPriority, 1) // the one free GPU: x's
	require.Equal(t, [5]int32{8, 7, 0, 1, 0}, counts(r.vcStatus(objs["x"], "", t0)), "lent")
	require.Equal(t, [5]int32{8, 8, 0, 0, 0}, counts(r.vcStatus(objs["y"], "", t0)))
	require.Equal(t, int32(1), r.vcStatus(objs["y"], "", t0).OpportunisticLeafCells, "outside its total")

	// The job ends and the GPU goes bad: within a second of the last count
	// the cell is still counted lent; then unavailable.
	_, err = k.DeleteAffinityGroup("ns/yopp")
	require.NoError(t, err)
	var free int32 = -1
	for _, rec := range k.CellRecords(nil, "x", "") {
		if rec.Level() == 1 && rec.Group == "" {
			free = rec.Index()
		}
	}
	require.NoError(t, k.SetLeafCellHealth("n0", "V100", free, true))
	require.Equal(t, [5]int32{8, 7, 0, 1, 0}, counts(r.vcStatus(objs["x"], "", t0.Add(500*time.Millisecond))), "not counted again yet")
	x := r.vcStatus(objs["x"], "", t0.Add(time.Second))
	require.Equal(t, [5]int32{8, 7, 0, 0, 1}, counts(x), "counted: unavailable")
	require.Equal(t, int32(1), x.LostLeafCells)
}

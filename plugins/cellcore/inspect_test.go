package cellcore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// CellRecords agrees with the leaf-level snapshot: every leaf once, its
// parent before it, counts summed up the tree; ExplainAffinityGroup names
// who holds a waiting group's VC cells.
func TestCellRecordsAndExplain(t *testing.T) {
	cfg := clusterConfig(1, 4, 0)
	k := newHealthyCore(t, cfg)
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	vcPlace(t, k, ag("low", "a", 1, 1, 8))
	require.NoError(t, k.SetLeafCellHealth("r0-n3", "V100", 2, true))

	recs := k.CellRecords(nil, "", "")
	snap := k.Snapshot()
	var leaves []CellRecord
	for i, r := range recs {
		require.Less(t, int(r.Parent), i)
		if r.Level() == 1 {
			leaves = append(leaves, r)
		}
	}
	require.Len(t, leaves, len(snap.LeafCells))
	used, bad := int32(0), int32(0)
	for i, l := range leaves {
		require.Equal(t, snap.LeafCells[i].Node, l.Node())
		require.Equal(t, snap.LeafCells[i].Index, l.Index())
		require.Equal(t, snap.LeafCells[i].State, l.State)
		require.Equal(t, snap.LeafCells[i].UsingGroup, l.Group)
		if l.Group != "" {
			used++
			require.Equal(t, "a", l.VirtualCluster)
		}
		if l.Health != "good" {
			bad++
		}
	}
	require.Equal(t, int32(8), used)
	require.Equal(t, int32(1), bad)
	var top CellRecord
	for _, r := range recs {
		if r.Parent == -1 {
			top = r
		}
	}
	require.Equal(t, int32(32), top.Leaves)
	require.Equal(t, int32(8), top.Used)
	require.Equal(t, int32(1), top.Bad)

	_, err = k.Schedule(ag("same", "a", 1, 1, 8))
	require.NoError(t, err)
	e, ok := k.ExplainAffinityGroup("same")
	require.True(t, ok)
	require.Equal(t, AGPending, e.State)
	require.NotEmpty(t, e.Reason)
	require.Equal(t, []GroupHolder{{Group: "low", Priority: 1, LeafCells: 8}}, e.Holders)
	_, ok = k.ExplainAffinityGroup("nope")
	require.False(t, ok)
	require.Equal(t, []string{"low", "same"}, k.AffinityGroupNames())
	mustCheck(t, k)
}

// LeafUsage counts each leaf once for the cluster, and per VC as the VC
// status does, plus reserved cells and opportunistic use.
func TestLeafUsage(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	vcPlace(t, k, ag("low", "a", 0, 1, 8))
	vcPlace(t, k, ag("low2", "a", 0, 1, 8))
	opp := ag("opp", "a", OpportunisticPriority, 1, 4)
	d, err := k.Schedule(opp)
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind)
	require.NoError(t, k.SetLeafCellHealth("r0-n3", "V100", 7, true))
	// A higher priority group preempts low: its cells are reserved.
	d, err = k.Schedule(ag("high", "a", 5, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind)

	u := k.LeafUsage()
	require.Equal(t, LeafUsage{Total: 32, Free: 32 - 16 - 4 - 1, Used: 20, Opportunistic: 4, Reserved: 8, Bad: 1}, u.Cluster["V100"])
	require.Equal(t, LeafUsage{Total: 16, Used: 16, Opportunistic: 4, Reserved: 8}, u.VCs["a"]["V100"])
	mustCheck(t, k)
}

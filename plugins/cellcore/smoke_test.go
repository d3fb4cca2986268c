package cellcore

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSmokeGangInOneRack(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(2, 4, 2))
	mustCheck(t, k)
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 2, "T4-NODE", 1))
	require.NoError(t, err)
	mustCheck(t, k)
	d, err := k.Schedule(ag("g1", "a", 0, 3, 8))
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind, d.Reason)
	racks := map[string]bool{}
	for _, p := range d.Pods {
		require.Len(t, p.LeafCellIndices, 8)
		racks[p.Node[:2]] = true
	}
	require.Len(t, racks, 1)
	mustCheck(t, k)
	bindAll(t, k, d)
	d2, err := k.Schedule(ag("g2", "a", 0, 1, 1))
	require.NoError(t, err)
	require.Equal(t, Placed, d2.Kind, d2.Reason)
	mustCheck(t, k)
	d3, err := k.Schedule(ag("g3", "b", 0, 2, 8))
	require.NoError(t, err)
	require.Equal(t, Placed, d3.Kind, d3.Reason)
	mustCheck(t, k)
	g4 := ag("g4", "b", 0, 1, 1)
	g4.LeafCellType = "V100"
	d4, err := k.Schedule(g4)
	require.NoError(t, err)
	require.Equal(t, Wait, d4.Kind)
	t.Log(d4.Reason)
	// Without a leaf type the T4 node of VC b serves it.
	d5, err := k.Schedule(ag("g5", "b", 0, 1, 1))
	require.NoError(t, err)
	require.Equal(t, Placed, d5.Kind)
	require.Equal(t, "T4", d5.Pods[0].LeafCellType)
	deleteAllPods(t, k, "g1")
	mustCheck(t, k)
}

// Opportunistic work stays away from the VCs' bound cells while unbound
// cells are free, even when a bound cell would give it better affinity.
func TestOpportunisticAvoidsBoundCells(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(2, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 2))
	require.NoError(t, err)
	d, err := k.Schedule(ag("ga", "a", 0, 2, 8)) // binds a whole rack to a
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind)
	boundRack := d.Pods[0].Node[:2]
	d, err = k.Schedule(ag("gb", "b", 0, 1, 8)) // binds a node of the other rack to b
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind)
	opp, err := k.Schedule(ag("opp", "b", -1, 2, 8))
	require.NoError(t, err)
	require.Equal(t, Placed, opp.Kind)
	for _, p := range opp.Pods {
		require.NotEqual(t, boundRack, p.Node[:2], "opportunistic pod on VC a's idle rack: %+v", opp.Pods)
		require.NotEqual(t, d.Pods[0].Node, p.Node)
	}
	// When only bound cells are idle, opportunistic work uses them.
	more, err := k.Schedule(ag("opp2", "b", -1, 2, 8))
	require.NoError(t, err)
	require.Equal(t, Placed, more.Kind)
	for _, p := range more.Pods {
		require.Equal(t, boundRack, p.Node[:2])
	}
	mustCheck(t, k)
}

// A group larger than any cell its VC owns binds its extra cells next to
// its first pod's: a 4x8 gang of a VC of nodes lands in one rack.
func TestSpanningGroupKeepsAffinity(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(4, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("nodes", "V100-NODE", 8))
	require.NoError(t, err)
	// Fragment the free pool: an opportunistic pod on one node of each rack.
	for i := 0; i < 4; i++ {
		d, err := k.Schedule(ag(fmt.Sprintf("o%d", i), "nodes", -1, 1, 8))
		require.NoError(t, err)
		require.Equal(t, Placed, d.Kind)
	}
	d, err := k.Schedule(ag("g", "nodes", 0, 3, 8))
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind, d.Reason)
	racks := map[string]bool{}
	for _, p := range d.Pods {
		racks[p.Node[:2]] = true
	}
	require.Len(t, racks, 1, "%+v", d.Pods)
	mustCheck(t, k)
}

func TestGroupStateAndMemberCheck(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 2, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	_, ok := k.AffinityGroupState("g")
	require.False(t, ok)
	spec := ag("g", "a", 0, 2, 8)
	require.NoError(t, k.CheckMember(spec)) // unknown groups are fine
	_, err = k.Schedule(spec)
	require.NoError(t, err)
	st, ok := k.AffinityGroupState("g")
	require.True(t, ok)
	require.Equal(t, AGAllocated, st)
	require.NoError(t, k.CheckMember(spec))
	other := spec
	other.Priority = 5
	require.ErrorContains(t, k.CheckMember(other), "different spec")
	mustCheck(t, k)
}

package cellcore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func extra(gang AffinityGroupSpec, pod string, leaves int32) AffinityGroupSpec {
	x := gang
	x.Name, x.ExtraOf = gang.Name+"+"+pod, gang.Name
	x.Members = []AffinityGroupMember{{PodNumber: 1, LeafCellNumber: leaves}}
	return x
}

// An elastic gang's extra pods: placed only once the minimum runs, next to
// it inside the VC, waiting with a reason when the VC is full; taken back
// before any gang is preempted, by a gang of any priority of the VC; and
// promoted into a slot of the minimum when a member goes.
func TestElasticExtras(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 2))
	require.NoError(t, err)

	gang := ag("ray", "a", 500, 1, 4)
	x1 := extra(gang, "w1", 4)
	d, err := k.Schedule(x1)
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	require.Contains(t, d.Reason, `waits for the gang's minimum to be placed (the gang is not known yet)`)

	g := place(t, k, gang)
	d = place(t, k, x1)
	require.Equal(t, g.Pods[0].Node, d.Pods[0].Node, "an extra goes next to its gang first")
	x2 := extra(gang, "w2", 8)
	place(t, k, x2)
	st, _ := k.AffinityGroupStatus(x2.Name)
	require.EqualValues(t, 500, st.Priority, "an extra reports its gang's priority")

	// The VC is full: the next extra waits, says why, preempts nobody.
	x3 := extra(gang, "w3", 4)
	d, err = k.Schedule(x3)
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind, d.Reason)
	require.Empty(t, d.Victims)

	// An extra of another VC's gang never takes a's cells.
	other := place(t, k, ag("other", "b", 0, 1, 8))
	_ = other
	require.Equal(t, []string{x1.Name, x2.Name}, k.ExtrasOf(gang.Name))

	// A priority-0 gang of a takes back extras, never the priority-500
	// gang: extras rank below every gang's minimum.
	low := ag("low", "a", 0, 1, 8)
	d, err = k.Schedule(low)
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	for _, v := range d.Victims {
		require.NotEqual(t, gang.Name, v, "the gang is never a victim while its extras can be taken")
		require.Equal(t, gang.Name, k.groups[v].spec.ExtraOf)
	}
	mustCheck(t, k)
	for _, v := range d.Victims {
		deleteAllPods(t, k, v)
	}
	d, err = k.Schedule(low)
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind, d.Reason)
	bindAll(t, k, d)
	mustCheck(t, k)
}

func TestElasticPromotion(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 3))
	require.NoError(t, err)
	gang := ag("job", "a", 10, 2, 8)
	place(t, k, gang)
	x := extra(gang, "w", 8)
	dx := place(t, k, x)
	other := extra(gang, "small", 2)
	d, err := k.Schedule(other)
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind, "the VC's three nodes are used")

	_, err = k.PromoteExtra(gang.Name, "job-0", other.Name)
	require.Error(t, err, "a Pending extra is not promoted")
	pp, err := k.PromoteExtra(gang.Name, "job-0", x.Name)
	require.NoError(t, err)
	require.Equal(t, dx.Pods[0].Node, pp.Node, "the extra keeps its cells")
	require.Equal(t, x.Name+"-0", pp.PodKey)
	mustCheck(t, k)
	_, known := k.AffinityGroupState(x.Name)
	require.False(t, known, "the extra's own group is gone")
	st, _ := k.AffinityGroupStatus(gang.Name)
	require.Equal(t, AGAllocated, st.State)
	// The member's old node is free: the waiting extra fits now.
	d, err = k.Schedule(other)
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind, d.Reason)
	mustCheck(t, k)
}

// An extra of a gang that asked to stay inside one rack stays in the
// gang's rack, and waits when it has no room left.
func TestElasticWithin(t *testing.T) {
	k := newHealthyCore(t, withinConfig(2, 2, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 4))
	require.NoError(t, err)
	gang := within(ag("g", "a", 0, 1, 8), "topology.kubernetes.io/rack")
	d := place(t, k, gang)
	rack := rackOfNode(d.Pods[0].Node)
	x := extra(gang, "w1", 8)
	requireOneRack(t, place(t, k, x), rack)
	d, err = k.Schedule(extra(gang, "w2", 8))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	require.Contains(t, d.Reason, "inside the gang's topology.kubernetes.io/rack cell")
	mustCheck(t, k)
}

// An extra that asked for it (ExtraOverflow) runs beyond its full VC as
// opportunistic, next to its gang, and is the first taken back by another
// VC's guaranteed group; without it, it waits.
func TestElasticOverflow(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 2))
	require.NoError(t, err)
	gang := ag("ray", "a", 10, 2, 8)
	place(t, k, gang)

	plain := extra(gang, "w1", 8)
	d, err := k.Schedule(plain)
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind, "without ExtraOverflow an extra waits for room in its VC")
	_, err = k.DeleteAffinityGroup(plain.Name)
	require.NoError(t, err)

	over := extra(gang, "w2", 8)
	over.ExtraOverflow = true
	d = place(t, k, over)
	st, _ := k.AffinityGroupStatus(over.Name)
	require.True(t, st.Downgraded, "it runs as opportunistic")
	require.EqualValues(t, OpportunisticPriority, st.Priority)
	vcst := mustStatus(t, k, "a")
	require.EqualValues(t, 8, vcst.OpportunisticLeafCells, "a's extra beyond its cells is counted as opportunistic: %+v", vcst)
	require.Equal(t, 1, vcst.OpportunisticGroups)

	// b claims its cells: the overflow extra is the victim, not a's gang.
	d, err = k.Schedule(ag("b1", "b", 0, 2, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Equal(t, []string{over.Name}, d.Victims)
	mustCheck(t, k)
}

package cellcore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// issue9Core is the cluster of the lazy-preemption report: racks rack0
// (r0-n0..n3) and rack1 (r1-n0..n3), r1-n3 pinned for vc-b; vc-a owns one
// rack, vc-b two V100 nodes and the pinned node.
func issue9Core(t *testing.T) *Core {
	t.Helper()
	cfg := clusterConfig(2, 4, 0)
	cfg.PhysicalCells[1].CellChildren[3].PinnedCellID = "pin-b"
	k := newHealthyCore(t, cfg)
	_, err := k.SetVirtualCluster(vcSpec("vc-a", "V100-RACK", 1))
	require.NoError(t, err)
	b := vcSpec("vc-b", "V100-NODE", 2)
	b.PinnedCells = []PinnedCellSpec{{PinnedCellID: "pin-b"}}
	_, err = k.SetVirtualCluster(b)
	require.NoError(t, err)
	return k
}

func lazyAG(name, vc string, prio int32, members ...int32) AffinityGroupSpec {
	s := ag(name, vc, prio, members...)
	s.LazyPreemptionEnable = true
	return s
}

// TestLazyPreemptionKeepsTheGuarantee: a guaranteed group within its VC's
// cells never waits behind groups that lazy preemption made opportunistic.
func TestLazyPreemptionKeepsTheGuarantee(t *testing.T) {
	t.Run("single pods", func(t *testing.T) {
		k := issue9Core(t)
		vcPlace(t, k, lazyAG("l0", "vc-b", 0, 1, 8))
		vcPlace(t, k, lazyAG("l1", "vc-b", 0, 1, 8))
		mustCheck(t, k)
		d, err := k.Schedule(ag("h0", "vc-b", 5, 1, 8))
		require.NoError(t, err)
		require.Equal(t, Placed, d.Kind, d.Reason)
		require.Equal(t, []string{"l0"}, d.Downgraded)
		bindAll(t, k, d)
		mustCheck(t, k)
		d, err = k.Schedule(ag("h1", "vc-b", 5, 1, 8))
		require.NoError(t, err)
		require.Equal(t, Preempt, d.Kind, d.Reason)
		require.Equal(t, []string{"l1"}, d.Downgraded)
		require.Len(t, d.Victims, 1, "one opportunistic group makes room")
		mustCheck(t, k)
		deleteAllPods(t, k, d.Victims[0])
		d = vcPlace(t, k, ag("h1", "vc-b", 5, 1, 8))
		mustCheck(t, k)
		st, _ := k.VirtualClusterStatus("vc-b")
		require.Equal(t, int32(2), st.Cells[0].Bound, "both of vc-b's nodes are bound to h0 and h1")
	})
	t.Run("gang", func(t *testing.T) {
		k := issue9Core(t)
		vcPlace(t, k, lazyAG("l0", "vc-b", 0, 1, 8))
		vcPlace(t, k, lazyAG("l1", "vc-b", 0, 1, 8))
		d, err := k.Schedule(ag("h", "vc-b", 5, 2, 8))
		require.NoError(t, err)
		require.Equal(t, Preempt, d.Kind, d.Reason)
		require.Equal(t, []string{"l0", "l1"}, d.Downgraded, "the gang takes both of vc-b's nodes")
		require.Len(t, d.Victims, 1, "the third r1 node is free: one opportunistic group makes room")
		mustCheck(t, k)
		deleteAllPods(t, k, d.Victims[0])
		d = vcPlace(t, k, ag("h", "vc-b", 5, 2, 8))
		require.NotEqual(t, d.Pods[0].Node, d.Pods[1].Node)
		for _, p := range d.Pods {
			require.Regexp(t, "^r1-", p.Node, "vc-a's rack stays whole")
		}
		mustCheck(t, k)
	})
}

// TestRecoveryKeepsALazyDowngrade: a group whose record says it had been
// lazily preempted comes back opportunistic, so its former VC cells stay
// free for the group that preempted it; the VC status counts it.
func TestRecoveryKeepsALazyDowngrade(t *testing.T) {
	k := issue9Core(t)
	vcPlace(t, k, lazyAG("l0", "vc-b", 0, 1, 8))
	vcPlace(t, k, lazyAG("l1", "vc-b", 0, 1, 8))
	vcPlace(t, k, ag("h0", "vc-b", 5, 1, 8))
	d, err := k.Schedule(ag("h1", "vc-b", 5, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	st, _ := k.VirtualClusterStatus("vc-b")
	require.Equal(t, 2, st.OpportunisticGroups)
	require.Equal(t, 2, st.DowngradedGroups)
	require.Equal(t, int32(16), st.OpportunisticLeafCells)

	// The scheduler restarts before the victim is gone: every running group
	// is recovered from what its pods record (h1 was Preempting: volatile).
	snap := k.Snapshot()
	recoverAll := func(useRecord bool) *Core {
		k2 := issue9Core(t)
		for _, gs := range snap.AffinityGroups {
			if gs.Name == "h1" {
				continue
			}
			var pods []RecoveredPod
			for _, p := range gs.Pods {
				pods = append(pods, RecoveredPod{PodKey: p.PodKey, Node: p.Node, LeafCellIndices: p.LeafCellIndices, Downgraded: useRecord && gs.Downgraded})
			}
			spec := lazyAG(gs.Name, "vc-b", 0, 1, 8)
			if gs.Name == "h0" {
				spec = ag("h0", "vc-b", 5, 1, 8)
			}
			_, err := k2.RecoverAffinityGroup(spec, pods)
			require.NoError(t, err)
			mustCheck(t, k2)
		}
		return k2
	}
	// Without the record, l0 comes back guaranteed and takes the cell h1 was
	// promised (the restart half of the report).
	k2 := recoverAll(false)
	st2, _ := k2.VirtualClusterStatus("vc-b")
	require.Equal(t, 1, st2.OpportunisticGroups)
	k2 = recoverAll(true)
	st2, _ = k2.VirtualClusterStatus("vc-b")
	require.Equal(t, 2, st2.OpportunisticGroups)
	require.Equal(t, 2, st2.DowngradedGroups)
	require.Equal(t, int32(1), st2.Cells[0].Bound, "only h0 holds a cell of vc-b")
	d, err = k2.Schedule(ag("h1", "vc-b", 5, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Empty(t, d.Downgraded)
	mustCheck(t, k2)
}

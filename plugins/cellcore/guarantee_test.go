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

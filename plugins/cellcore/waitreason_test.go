package cellcore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// waitFor schedules a group that must wait and returns the core's reason.
func waitFor(t *testing.T, k *Core, spec AffinityGroupSpec) string {
	t.Helper()
	d, err := k.Schedule(spec)
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind, d.Reason)
	requireOneSentence(t, d.Reason)
	return d.Reason
}

// requireOneSentence: the reason is one clause chain without a period of its
// own (the scheduler's message ends it) and names cell types as specs do.
func requireOneSentence(t *testing.T, reason string) {
	t.Helper()
	require.NotContains(t, reason, ".", "no period inside or at the end (the scheduler adds one): %s", reason)
	require.False(t, strings.HasSuffix(reason, ";") || strings.HasSuffix(reason, ":") || strings.HasSuffix(reason, ","), reason)
	require.NotContains(t, reason, ";;")
}

func TestWaitReason(t *testing.T) {
	t.Run("a full VC names the groups that hold it and what frees them", func(t *testing.T) {
		k := newHealthyCore(t, clusterConfig(1, 2, 0))
		_, err := k.SetVirtualCluster(vcSpec("vc", "V100-NODE", 2))
		require.NoError(t, err)
		for _, n := range []string{"ns/a", "ns/b"} {
			d, err := k.Schedule(ag(n, "vc", 5, 1, 8))
			require.NoError(t, err)
			require.Equal(t, Placed, d.Kind, d.Reason)
		}
		got := waitFor(t, k, ag("ns/c", "vc", 5, 1, 8))
		require.Equal(t, `affinity group "ns/c" (priority 5) needs 1 pod of 8 V100 in virtual cluster "vc": `+
			`of its 16 V100 (2 V100-NODE), 16 are used by groups of priority 5 or higher (ns/a and ns/b) and none is free; `+
			`it binds when enough of those groups finish`, got)
	})

	t.Run("a top-level cell type is named alone, not as a chain path", func(t *testing.T) {
		k := newHealthyCore(t, clusterConfig(1, 2, 0))
		_, err := k.SetVirtualCluster(vcSpec("vc", "V100-RACK", 1))
		require.NoError(t, err)
		for _, n := range []string{"g1", "g2"} {
			d, err := k.Schedule(ag(n, "vc", 10, 1, 8))
			require.NoError(t, err)
			require.Equal(t, Placed, d.Kind, d.Reason)
		}
		got := waitFor(t, k, ag("g3", "vc", 0, 2, 4))
		require.Contains(t, got, "needs 2 pods of 4 V100")
		require.Contains(t, got, "of its 16 V100 (1 V100-RACK)")
		require.NotContains(t, got, "V100-RACK.V100-RACK")
		require.Contains(t, got, "16 are used by groups of priority 0 or higher")
	})

	t.Run("equal priority users", func(t *testing.T) {
		k := newHealthyCore(t, clusterConfig(1, 2, 0))
		_, err := k.SetVirtualCluster(vcSpec("vc", "V100-NODE", 2))
		require.NoError(t, err)
		d, err := k.Schedule(ag("big", "vc", 9, 2, 4))
		require.NoError(t, err)
		require.Equal(t, Placed, d.Kind, d.Reason)
		require.Equal(t, d.Pods[0].Node, d.Pods[1].Node, "2x4 packs into one node")
		d2, err := k.Schedule(ag("other", "vc", 9, 1, 4))
		require.NoError(t, err)
		require.Equal(t, Placed, d2.Kind, d2.Reason)
		require.NotEqual(t, d.Pods[0].Node, d2.Pods[0].Node)
		// 4 leaves free on the second node; a 1x8 of priority 9 preempts nobody.
		got := waitFor(t, k, ag("eight", "vc", 9, 1, 8))
		require.Contains(t, got, "of its 16 V100 (2 V100-NODE), 12 are used by groups of priority 9 or higher (big and other) and 4 are free; it binds when enough of those groups finish")
	})

	t.Run("lower priority users count as takeable", func(t *testing.T) {
		k := newHealthyCore(t, clusterConfig(1, 2, 0))
		_, err := k.SetVirtualCluster(vcSpec("vc", "V100-NODE", 2))
		require.NoError(t, err)
		for _, s := range []AffinityGroupSpec{ag("low", "vc", 1, 1, 4), ag("high", "vc", 7, 1, 8), ag("mid", "vc", 7, 1, 4)} {
			d, err := k.Schedule(s)
			require.NoError(t, err)
			require.Equal(t, Placed, d.Kind, d.Reason)
		}
		// 16 used: 12 by priority 7, 4 by priority 1. A 2x4 gang of priority 7
		// may take the 4 of "low" but needs 8.
		got := waitFor(t, k, ag("gang", "vc", 7, 2, 4))
		require.Contains(t, got, "12 are used by groups of priority 7 or higher (high and mid), 4 by lower priority groups and none is free; it binds when enough of those groups finish")
	})

	t.Run("free leaves that do not hold a pod together", func(t *testing.T) {
		k := newHealthyCore(t, clusterConfig(1, 2, 0))
		_, err := k.SetVirtualCluster(vcSpec("vc", "V100-NODE", 2))
		require.NoError(t, err)
		// Half of each node, as a restarted scheduler finds them.
		for i, node := range []string{"r0-n0", "r0-n1"} {
			res, err := k.RecoverAffinityGroup(ag([]string{"a", "b"}[i], "vc", 9, 1, 4),
				[]RecoveredPod{{PodKey: node, Node: node, LeafCellIndices: []int32{0, 1, 2, 3}}})
			require.NoError(t, err)
			require.False(t, res.Downgraded, res.Reason)
		}
		got := waitFor(t, k, ag("eight", "vc", 9, 1, 8))
		require.Contains(t, got, "8 are used by groups of priority 9 or higher (a and b) and 8 are free; "+
			"its pods do not fit together in those cells (each pod needs its leaf cells on one node), so it binds when groups next to the free cells finish")
	})

	t.Run("cells smaller than a pod", func(t *testing.T) {
		k := newHealthyCore(t, clusterConfig(1, 2, 0))
		_, err := k.SetVirtualCluster(vcSpec("vc", "V100-SOCKET", 2))
		require.NoError(t, err)
		got := waitFor(t, k, ag("wide", "vc", 0, 1, 8))
		require.Equal(t, `affinity group "wide" (priority 0) needs 1 pod of 8 V100 in virtual cluster "vc": of its 8 V100 (2 V100-SOCKET), 8 are free; `+
			`none of its cells holds a pod of 8 (the largest holds 4), so the group never binds there: ask for smaller pods or for larger cells`, got)
	})

	t.Run("bad hardware is named as such", func(t *testing.T) {
		k := newHealthyCore(t, clusterConfig(1, 2, 0))
		_, err := k.SetVirtualCluster(vcSpec("vc", "V100-NODE", 2))
		require.NoError(t, err)
		d, err := k.Schedule(ag("a", "vc", 0, 1, 8))
		require.NoError(t, err)
		require.Equal(t, Placed, d.Kind, d.Reason)
		busy := d.Pods[0].Node
		other := "r0-n0"
		if busy == other {
			other = "r0-n1"
		}
		require.NoError(t, k.SetNodeHealth(other, NodeBad))
		got := waitFor(t, k, ag("b", "vc", 0, 1, 8))
		require.Contains(t, got, "8 are used by groups of priority 0 or higher (a), 8 are on unhealthy hardware and none is free")
		require.True(t, strings.HasSuffix(got, "it binds when enough of those groups finish or the unhealthy hardware is back"), got)
	})

	t.Run("a pinned cell", func(t *testing.T) {
		k := issue9Core(t)
		d, err := k.Schedule(AffinityGroupSpec{Name: "p1", VirtualCluster: "vc-b", PinnedCellID: "pin-b", Members: []AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 8}}})
		require.NoError(t, err)
		require.Equal(t, Placed, d.Kind, d.Reason)
		got := waitFor(t, k, AffinityGroupSpec{Name: "p2", VirtualCluster: "vc-b", PinnedCellID: "pin-b", Members: []AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 4}}})
		require.Contains(t, got, "of its 8 V100 (pinned cell pin-b), 8 are used by groups of priority 0 or higher (p1) and none is free")
	})

	t.Run("many holders are counted, not listed", func(t *testing.T) {
		k := newHealthyCore(t, clusterConfig(1, 1, 0))
		_, err := k.SetVirtualCluster(vcSpec("vc", "V100-NODE", 1))
		require.NoError(t, err)
		for _, n := range []string{"g1", "g2", "g3", "g4", "g5"} {
			d, err := k.Schedule(ag(n, "vc", 3, 1, 1))
			require.NoError(t, err)
			require.Equal(t, Placed, d.Kind, d.Reason)
		}
		got := waitFor(t, k, ag("g6", "vc", 3, 1, 8))
		require.Contains(t, got, "5 are used by groups of priority 3 or higher (g1, g2, g3 and 2 more) and 3 are free")
		require.True(t, strings.HasSuffix(got, "it binds when enough of those groups finish"), got)
	})

	t.Run("an opportunistic group", func(t *testing.T) {
		k := newHealthyCore(t, clusterConfig(1, 2, 0))
		_, err := k.SetVirtualCluster(vcSpec("vc", "V100-NODE", 2))
		require.NoError(t, err)
		d, err := k.Schedule(ag("a", "vc", 0, 1, 8))
		require.NoError(t, err)
		require.Equal(t, Placed, d.Kind, d.Reason)
		d, err = k.Schedule(ag("b", "vc", 0, 1, 4))
		require.NoError(t, err)
		require.Equal(t, Placed, d.Kind, d.Reason)
		got := waitFor(t, k, ag("o", "vc", -1, 1, 8))
		require.Equal(t, `affinity group "o" (opportunistic) needs 1 pod of 8 V100 on idle cells, and the cluster has 4 free healthy V100, at most 4 on one node; `+
			`it binds when other groups finish (an opportunistic group never preempts)`, got)
	})
}

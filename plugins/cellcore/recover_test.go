package cellcore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// recoveredPods turns a group's status into the pods a restart recovers.
func recoveredPods(st AffinityGroupStatus) []RecoveredPod {
	var pods []RecoveredPod
	for _, p := range st.Pods {
		if p.PodKey != "" {
			pods = append(pods, RecoveredPod{PodKey: p.PodKey, Node: p.Node, LeafCellIndices: p.LeafCellIndices})
		}
	}
	return pods
}

func rpod(key, node string, idx ...int32) RecoveredPod {
	return RecoveredPod{PodKey: key, Node: node, LeafCellIndices: idx}
}

func seq(from, n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = from + int32(i)
	}
	return out
}

// runningCluster runs g1 (1x8) and g2 (2x2) of VC a (2 nodes) on a rack of 4
// nodes and returns the specs and statuses to recover.
func runningCluster(t *testing.T) (Config, map[string]AffinityGroupSpec, map[string]AffinityGroupStatus) {
	cfg := clusterConfig(1, 4, 0)
	k := newHealthyCore(t, cfg)
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	specs := map[string]AffinityGroupSpec{"g1": ag("g1", "a", 0, 1, 8), "g2": ag("g2", "a", 1, 2, 2)}
	sts := map[string]AffinityGroupStatus{}
	for _, n := range []string{"g1", "g2"} {
		vcPlace(t, k, specs[n])
		sts[n], _ = k.AffinityGroupStatus(n)
	}
	mustCheck(t, k)
	require.NotEqual(t, sts["g1"].Pods[0].Node, sts["g2"].Pods[0].Node)
	require.Equal(t, sts["g2"].Pods[0].Node, sts["g2"].Pods[1].Node)
	return cfg, specs, sts
}

func TestRecoverOntoVCCells(t *testing.T) {
	cfg, specs, sts := runningCluster(t)
	k := newHealthyCore(t, cfg)
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	for _, n := range []string{"g1", "g2"} {
		res, err := k.RecoverAffinityGroup(specs[n], recoveredPods(sts[n]))
		require.NoError(t, err)
		require.False(t, res.Downgraded, res.Reason)
		require.Empty(t, res.Reason)
		st, ok := k.AffinityGroupStatus(n)
		require.True(t, ok)
		require.Equal(t, AGAllocated, st.State)
		require.False(t, st.Downgraded)
		require.Equal(t, specs[n].Priority, st.Priority)
		require.Equal(t, sts[n].Pods, st.Pods, "same nodes, indices and pod keys")
		mustCheck(t, k)
	}
	for _, l := range k.Snapshot().LeafCells {
		if l.UsingGroup != "" {
			require.Equal(t, "a", l.VirtualCluster, l.ID)
		}
	}
	vst, _ := k.VirtualClusterStatus("a")
	require.Equal(t, map[AGState]int{AGAllocated: 2}, vst.AffinityGroups)
	require.Equal(t, int32(2), vst.Cells[0].Bound)
	require.Equal(t, int32(12), vst.Cells[0].UsedLeafCells)

	// Recovered groups behave like scheduled ones: Schedule returns their
	// placement, AssignPod their slots, deleting pods deletes them.
	d, err := k.Schedule(specs["g1"])
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind)
	require.Equal(t, sts["g1"].Pods, d.Pods)
	pp, err := k.AssignPod("g2", "g2-1", 2)
	require.NoError(t, err)
	require.Equal(t, sts["g2"].Pods[1], pp)
	_, err = k.AssignPod("g2", "g2-extra", 2)
	require.Error(t, err, "both slots are taken")
	require.True(t, IsSpecError(err), "more pods than members: the user's")
	_, err = k.AssignPod("nope", "x", 2)
	require.Error(t, err)
	require.False(t, IsSpecError(err), "a group the core does not know: internal")
	deleteAllPods(t, k, "g1")
	_, ok := k.AffinityGroupStatus("g1")
	require.False(t, ok)
	mustCheck(t, k)
	vst, _ = k.VirtualClusterStatus("a")
	require.Equal(t, int32(1), vst.Cells[0].Bound, "g1's node is unbound when it goes")
	mustCheck(t, k)
}

func TestRecoverPartialGroup(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 2, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	// Only one of the two pods was running.
	res, err := k.RecoverAffinityGroup(ag("g", "a", 0, 2, 4), []RecoveredPod{rpod("p0", "r0-n1", 4, 5, 6, 7)})
	require.NoError(t, err)
	require.False(t, res.Downgraded, res.Reason)
	st, _ := k.AffinityGroupStatus("g")
	require.Equal(t, AGAllocated, st.State)
	require.Len(t, st.Pods, 2)
	require.Equal(t, PodPlacement{PodKey: "p0", Node: "r0-n1", LeafCellType: "V100", LeafCellNumber: 4, LeafCellIndices: []int32{4, 5, 6, 7}}, st.Pods[0])
	require.Equal(t, PodPlacement{LeafCellNumber: 4}, st.Pods[1], "the missing pod has no cells")
	mustCheck(t, k)
	// The VC's node was bound where the pod runs.
	d := vcPlace(t, k, ag("h", "a", 0, 1, 4))
	require.Equal(t, "r0-n1", d.Pods[0].Node)
	require.Equal(t, []int32{0, 1, 2, 3}, d.Pods[0].LeafCellIndices)
	mustCheck(t, k)
}

func TestRecoverDowngraded(t *testing.T) {
	cfg, specs, sts := runningCluster(t)
	cases := []struct {
		name   string
		setup  func(t *testing.T, k *Core)
		want   map[string]bool // group -> downgraded
		reason string
	}{
		{
			name: "VC shrunk",
			setup: func(t *testing.T, k *Core) {
				_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
				require.NoError(t, err)
			},
			want:   map[string]bool{"g1": false, "g2": true},
			reason: `virtual cluster "a" has no free virtual cell left`,
		},
		{
			name:   "VC removed",
			setup:  func(t *testing.T, k *Core) {},
			want:   map[string]bool{"g1": true, "g2": true},
			reason: `virtual cluster "a" no longer exists`,
		},
		{
			name: "VC now in another chain",
			setup: func(t *testing.T, k *Core) {
				_, err := k.SetVirtualCluster(vcSpec("a", "T4-NODE", 1))
				require.NoError(t, err)
			},
			want:   map[string]bool{"g1": true, "g2": true},
			reason: `virtual cluster "a" has no cells in chain V100-RACK`,
		},
		{
			name: "cells bound to another VC",
			setup: func(t *testing.T, k *Core) {
				_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
				require.NoError(t, err)
				_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 2))
				require.NoError(t, err)
				// b's running group was recovered first, on a leaf of
				// g2's node that g2 does not use: the node is b's now.
				used := map[int32]bool{}
				for _, p := range sts["g2"].Pods {
					for _, x := range p.LeafCellIndices {
						used[x] = true
					}
				}
				free := int32(0)
				for used[free] {
					free++
				}
				res, err := k.RecoverAffinityGroup(ag("b1", "b", 0, 1, 1), []RecoveredPod{rpod("b1-0", sts["g2"].Pods[0].Node, free)})
				require.NoError(t, err)
				require.False(t, res.Downgraded, res.Reason)
			},
			want:   map[string]bool{"g1": false, "g2": true},
			reason: `virtual cluster "a" has no free virtual cell left`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cfg
			cfg.PhysicalCells = append([]PhysicalCellSpec(nil), cfg.PhysicalCells...)
			cfg.PhysicalCells = append(cfg.PhysicalCells, PhysicalCellSpec{CellType: "T4-NODE", CellAddress: "t4-0"})
			k := newHealthyCore(t, cfg)
			tc.setup(t, k)
			mustCheck(t, k)
			for _, n := range []string{"g1", "g2"} {
				res, err := k.RecoverAffinityGroup(specs[n], recoveredPods(sts[n]))
				require.NoError(t, err)
				require.Equal(t, tc.want[n], res.Downgraded, "%s: %s", n, res.Reason)
				st, ok := k.AffinityGroupStatus(n)
				require.True(t, ok)
				require.Equal(t, AGAllocated, st.State)
				require.Equal(t, sts[n].Pods, st.Pods, "%s keeps its cells", n)
				require.Equal(t, tc.want[n], st.Downgraded)
				if tc.want[n] {
					require.Contains(t, res.Reason, fmt.Sprintf("affinity group %q runs on as opportunistic", n))
					require.Contains(t, res.Reason, tc.reason)
					require.Equal(t, OpportunisticPriority, st.Priority)
					require.NotContains(t, leafOwnersOf(k, n), "a", "a downgraded group's cells are not its VC's")
				} else {
					require.Empty(t, res.Reason)
					require.Equal(t, specs[n].Priority, st.Priority)
				}
				mustCheck(t, k)
			}
			// The downgraded groups are preemptible by guaranteed groups.
			if _, ok := k.VirtualClusterStatus("a"); ok {
				for i := 0; i < 2; i++ {
					d, err := k.Schedule(ag(fmt.Sprintf("new%d", i), "a", 0, 1, 8))
					if err != nil {
						continue // a VC smaller than a node's worth in this chain
					}
					require.NotContains(t, d.Victims, "g1")
					require.NotContains(t, d.Victims, "b1")
					mustCheck(t, k)
				}
			}
			mustCheck(t, k)
		})
	}
}

func TestRecoverPinned(t *testing.T) {
	cfg := pinnedConfig() // r0-n3 is pinned cell pin1
	a := vcSpec("a", "V100-NODE", 1)
	a.PinnedCells = []PinnedCellSpec{{PinnedCellID: "pin1"}}
	spec := ag("p", "a", 0, 1, 4)
	spec.PinnedCellID = "pin1"

	k := newHealthyCore(t, cfg)
	_, err := k.SetVirtualCluster(a)
	require.NoError(t, err)
	res, err := k.RecoverAffinityGroup(spec, []RecoveredPod{rpod("p-0", "r0-n3", 0, 1, 2, 3)})
	require.NoError(t, err)
	require.False(t, res.Downgraded, res.Reason)
	st, _ := k.VirtualClusterStatus("a")
	require.Equal(t, int32(4), st.PinnedCells[0].UsedLeafCells)
	require.Equal(t, int32(0), st.Cells[0].Bound, "the pinned group binds no virtual cell")
	mustCheck(t, k)

	// Outside the pinned cell: downgraded.
	res, err = k.RecoverAffinityGroup(func() AffinityGroupSpec { s := spec; s.Name = "p2"; return s }(),
		[]RecoveredPod{rpod("p2-0", "r0-n2", 0, 1, 2, 3)})
	require.NoError(t, err)
	require.True(t, res.Downgraded)
	require.Contains(t, res.Reason, `outside pinned cell "pin1"`)
	mustCheck(t, k)

	// The VC lost the pinned cell: downgraded.
	k = newHealthyCore(t, cfg)
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	res, err = k.RecoverAffinityGroup(spec, []RecoveredPod{rpod("p-0", "r0-n3", 0, 1, 2, 3)})
	require.NoError(t, err)
	require.True(t, res.Downgraded)
	require.Contains(t, res.Reason, `pinned cell "pin1" is not in virtual cluster "a"`)
	mustCheck(t, k)
}

func TestRecoverDoubleBookingRefused(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 2, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	res, err := k.RecoverAffinityGroup(ag("g1", "a", 0, 1, 8), []RecoveredPod{rpod("g1-0", "r0-n0", seq(0, 8)...)})
	require.NoError(t, err)
	require.False(t, res.Downgraded)
	mustCheck(t, k)
	before := fingerprint(k)

	cases := []struct {
		name string
		spec AffinityGroupSpec
		pods []RecoveredPod
		want []string
	}{
		{"same leaf as another group", ag("g2", "a", 0, 2, 1), []RecoveredPod{rpod("g2-0", "r0-n1", 0), rpod("g2-1", "r0-n0", 7)},
			[]string{"double booking", "affinity group g1", "V100-RACK/rack0/r0-n0"}},
		{"opportunistic too", ag("o", "a", -1, 1, 1), []RecoveredPod{rpod("o-0", "r0-n0", 3)}, []string{"double booking", "affinity group g1"}},
		{"same leaf twice in the group", ag("g3", "a", 0, 2, 1), []RecoveredPod{rpod("g3-0", "r0-n1", 2), rpod("g3-1", "r0-n1", 2)},
			[]string{"double booking", "another pod of the group"}},
		{"same leaf twice in a pod", ag("g3", "a", 0, 1, 2), []RecoveredPod{rpod("g3-0", "r0-n1", 2, 2)}, []string{"double booking"}},
		{"group already known", ag("g1", "a", 0, 1, 8), []RecoveredPod{rpod("g1-0", "r0-n1", seq(0, 8)...)}, []string{"already known"}},
		{"unknown node", ag("g4", "a", 0, 1, 1), []RecoveredPod{rpod("g4-0", "nope", 0)}, []string{`node "nope"`}},
		{"unknown device", ag("g4", "a", 0, 1, 1), []RecoveredPod{rpod("g4-0", "r0-n1", 8)}, []string{"no leaf cell 8"}},
		{"wrong leaf type", func() AffinityGroupSpec { s := ag("g4", "a", 0, 1, 1); s.LeafCellType = "T4"; return s }(),
			[]RecoveredPod{rpod("g4-0", "r0-n1", 0)}, []string{"no leaf cell 0"}},
		{"pod of no member's size", ag("g4", "a", 0, 1, 2), []RecoveredPod{rpod("g4-0", "r0-n1", 0)}, []string{"no member of that size"}},
		{"more pods than members", ag("g4", "a", 0, 1, 1), []RecoveredPod{rpod("g4-0", "r0-n1", 0), rpod("g4-1", "r0-n1", 1)}, []string{"2 recovered pods for 1 members"}},
		{"no pods", ag("g4", "a", 0, 1, 1), nil, []string{"0 recovered pods"}},
		{"no name", ag("", "a", 0, 1, 1), []RecoveredPod{rpod("x", "r0-n1", 0)}, []string{"needs a name"}},
		{"no members", ag("g4", "a", 0), []RecoveredPod{rpod("x", "r0-n1", 0)}, []string{"needs a name and members"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := k.RecoverAffinityGroup(tc.spec, tc.pods)
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.Equal(t, before, fingerprint(k), "a refused recovery changes nothing")
			mustCheck(t, k)
		})
	}
}

// A refused recovery must not leave bindings behind: the first pod maps onto
// a fresh virtual cell, the second is a double booking.
func TestRecoverDoubleBookingAfterBinding(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	_, err = k.RecoverAffinityGroup(ag("g1", "a", 0, 1, 8), []RecoveredPod{rpod("g1-0", "r0-n0", seq(0, 8)...)})
	require.NoError(t, err)
	before := fingerprint(k)
	_, err = k.RecoverAffinityGroup(ag("g2", "a", 0, 2, 4), []RecoveredPod{rpod("g2-0", "r0-n2", 0, 1, 2, 3), rpod("g2-1", "r0-n0", 0, 1, 2, 3)})
	require.Error(t, err)
	require.Contains(t, err.Error(), "double booking")
	require.Equal(t, before, fingerprint(k))
	mustCheck(t, k)
}

func TestRecoverOpportunistic(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 2, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	res, err := k.RecoverAffinityGroup(ag("o", "a", -1, 2, 2), []RecoveredPod{rpod("o-0", "r0-n0", 0, 1), rpod("o-1", "r0-n1", 6, 7)})
	require.NoError(t, err)
	require.False(t, res.Downgraded)
	require.Empty(t, res.Reason)
	st, _ := k.AffinityGroupStatus("o")
	require.Equal(t, AGAllocated, st.State)
	require.Equal(t, OpportunisticPriority, st.Priority)
	require.False(t, st.Downgraded)
	require.Empty(t, leafOwnersOf(k, "o"), "opportunistic groups bind no virtual cell")
	vst, _ := k.VirtualClusterStatus("a")
	require.Equal(t, int32(0), vst.Cells[0].Bound)
	require.Equal(t, map[AGState]int{AGAllocated: 1}, vst.AffinityGroups)
	mustCheck(t, k)

	// An opportunistic group of a VC that is gone comes back too.
	res, err = k.RecoverAffinityGroup(ag("o2", "gone", -1, 1, 1), []RecoveredPod{rpod("o2-0", "r0-n0", 5)})
	require.NoError(t, err)
	require.False(t, res.Downgraded)
	mustCheck(t, k)

	// a's guaranteed group preempts it if needed.
	d, err := k.Schedule(ag("g", "a", 0, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Subset(t, []string{"o", "o2"}, d.Victims)
	mustCheck(t, k)
	for _, v := range d.Victims {
		deleteAllPods(t, k, v)
	}
	d, err = k.Schedule(ag("g", "a", 0, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind, d.Reason)
	mustCheck(t, k)
}

// After recovery, scheduling goes on without giving a recovered cell twice.
func TestRecoverThenSchedule(t *testing.T) {
	cfg := clusterConfig(2, 4, 1)
	k1 := newHealthyCore(t, cfg)
	vcs := []VirtualClusterSpec{vcSpec("a", "V100-RACK", 1), vcSpec("b", "V100-NODE", 3, "T4-NODE", 1)}
	for _, v := range vcs {
		_, err := k1.SetVirtualCluster(v)
		require.NoError(t, err)
	}
	specs := map[string]AffinityGroupSpec{}
	for i, s := range []AffinityGroupSpec{
		ag("a-gang", "a", 2, 2, 8), ag("a-small", "a", 0, 3, 2), ag("b-1", "b", 0, 1, 8),
		ag("b-2", "b", 1, 2, 3), ag("b-t4", "b", 0, 1, 4), ag("opp-1", "a", -1, 1, 8), ag("opp-2", "b", -1, 4, 1),
	} {
		specs[s.Name] = s
		d, err := k1.Schedule(s)
		require.NoError(t, err, "%d", i)
		require.Equal(t, Placed, d.Kind, "%s: %s", s.Name, d.Reason)
		bindAll(t, k1, d)
	}
	mustCheck(t, k1)
	snap := k1.Snapshot()

	k := newHealthyCore(t, cfg)
	for _, v := range vcs {
		_, err := k.SetVirtualCluster(v)
		require.NoError(t, err)
	}
	// Recover in reverse name order: the order must not matter.
	for i := len(snap.AffinityGroups) - 1; i >= 0; i-- {
		g := snap.AffinityGroups[i]
		res, err := k.RecoverAffinityGroup(specs[g.Name], recoveredPods(g))
		require.NoError(t, err, g.Name)
		require.False(t, res.Downgraded, "%s: %s", g.Name, res.Reason)
		mustCheck(t, k)
	}
	snap2 := k.Snapshot()
	require.Equal(t, snap.AffinityGroups, snap2.AffinityGroups)
	require.Equal(t, snap.VirtualClusters, snap2.VirtualClusters)

	taken := map[string]string{} // leaf type/node/index -> group
	for _, l := range snap2.LeafCells {
		if l.UsingGroup != "" {
			taken[snapLeafKey(l)] = l.UsingGroup
		}
	}
	// Fill everything that is left, guaranteed and opportunistic.
	newGroups := []AffinityGroupSpec{
		ag("a-more", "a", 0, 1, 8), ag("a-more2", "a", 0, 2, 1), ag("b-more", "b", 0, 1, 8),
		ag("b-more2", "b", 0, 1, 4), ag("opp-more", "a", -1, 1, 8),
	}
	for i := 0; i < 40; i++ {
		newGroups = append(newGroups, ag(fmt.Sprintf("opp-fill%d", i), "b", -1, 1, 1))
	}
	placed := 0
	for _, s := range newGroups {
		d, err := k.Schedule(s)
		require.NoError(t, err)
		if d.Kind == Preempt {
			for _, v := range d.Victims {
				require.Equal(t, OpportunisticPriority, specs[v].Priority, "%s preempts %s", s.Name, v)
				deleteAllPods(t, k, v)
				for key, g := range taken {
					if g == v {
						delete(taken, key)
					}
				}
			}
			d, err = k.Schedule(s)
			require.NoError(t, err)
		}
		if d.Kind != Placed {
			continue
		}
		placed++
		bindAll(t, k, d)
		for _, p := range d.Pods {
			for _, x := range p.LeafCellIndices {
				key := fmt.Sprintf("%s/%s/%d", p.LeafCellType, p.Node, x)
				require.Empty(t, taken[key], "%s got %s, already %s's", s.Name, key, taken[key])
				taken[key] = s.Name
			}
		}
		mustCheck(t, k)
	}
	require.Greater(t, placed, 3)
	n := 0
	for _, l := range k.Snapshot().LeafCells {
		require.NotEqual(t, CellFree, l.State, "the fill used every leaf: %s", l.ID)
		if l.UsingGroup != "" {
			n++
			require.Equal(t, l.UsingGroup, taken[snapLeafKey(l)], l.ID)
		}
	}
	require.Len(t, taken, n)
	mustCheck(t, k)
}

// snapLeafKey is leaf type/node/index of a snapshot leaf.
func snapLeafKey(l LeafCellStatus) string {
	lt := "V100"
	if strings.HasPrefix(l.ID, "T4-") {
		lt = "T4"
	}
	return fmt.Sprintf("%s/%s/%d", lt, l.Node, l.Index)
}

// At a restart nodes are Unknown until their health is first reported:
// recovery does not depend on it, and nothing is doomed meanwhile.
func TestRecoverBeforeHealthIsKnown(t *testing.T) {
	cfg, specs, sts := runningCluster(t)
	k, err := New(cfg)
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	for _, n := range []string{"g1", "g2"} {
		res, err := k.RecoverAffinityGroup(specs[n], recoveredPods(sts[n]))
		require.NoError(t, err)
		require.False(t, res.Downgraded, res.Reason)
		mustCheck(t, k)
	}
	vst, _ := k.VirtualClusterStatus("a")
	require.Equal(t, int32(0), vst.Cells[0].Bad)
	require.Equal(t, int32(2), vst.Cells[0].Bound)
	for name := range k.nodes {
		require.NoError(t, k.SetNodeHealth(name, NodeHealthy))
	}
	mustCheck(t, k)
	// g2's node has 4 free leaves for a's next group; g1's none.
	d := vcPlace(t, k, ag("g3", "a", 0, 1, 4))
	require.Equal(t, sts["g2"].Pods[0].Node, d.Pods[0].Node)
	d, err = k.Schedule(ag("g4", "a", 0, 1, 1))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	mustCheck(t, k)
}

// A member that was not running when its group was recovered (the scheduler
// restarted while the gang was binding) gets cells next to the group (x3).
func TestRecoverLateMemberGetsCells(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	spec := ag("g", "a", 0, 2, 8)
	_, err = k.RecoverAffinityGroup(spec, []RecoveredPod{{PodKey: "p0", Node: "r0-n1", LeafCellIndices: []int32{0, 1, 2, 3, 4, 5, 6, 7}}})
	require.NoError(t, err)
	var events []AGEvent
	k.OnTransition = func(_ string, ev AGEvent, _, _ AGState) { events = append(events, ev) }
	pp, err := k.AssignPod("g", "p1", 8)
	require.NoError(t, err)
	require.NotEqual(t, "r0-n1", pp.Node)
	require.Len(t, pp.LeafCellIndices, 8)
	require.Equal(t, []AGEvent{AGx3}, events)
	st, _ := k.VirtualClusterStatus("a")
	require.EqualValues(t, 16, st.Cells[0].UsedLeafCells)
	// No third member: the gang has two.
	_, err = k.AssignPod("g", "p2", 8)
	require.Error(t, err)
	mustCheck(t, k)
}

// A member joining a recovered group takes the cells of a member that is
// gone (JoinsPlacement), or needs new cells for a member that was never
// running (the plugin admits it like a new group).
func TestJoinsPlacement(t *testing.T) {
	cfg, specs, sts := runningCluster(t)
	k := newHealthyCore(t, cfg)
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	pods := recoveredPods(sts["g2"])
	_, err = k.RecoverAffinityGroup(specs["g2"], pods[:1]) // one of its two members was running
	require.NoError(t, err)
	require.True(t, k.PodAssigned("g2", pods[0].PodKey))
	require.False(t, k.PodAssigned("g2", "new"))
	require.False(t, k.PodAssigned("unknown", pods[0].PodKey))
	require.True(t, k.JoinsPlacement("g2", pods[0].PodKey, 2), "a member holding its slot")
	require.False(t, k.JoinsPlacement("g2", "new", 2), "the missing member needs new cells")
	require.False(t, k.JoinsPlacement("unknown", "new", 2))

	// Once the running member is gone its cells stay with the group: its
	// replacement takes them.
	_, err = k.AssignPod("g2", "new", 2)
	require.NoError(t, err)
	_, err = k.DeletePod("g2", pods[0].PodKey)
	require.NoError(t, err)
	require.True(t, k.JoinsPlacement("g2", "replacement", 2))
	require.False(t, k.JoinsPlacement("g2", "replacement", 8), "no member of that size")
	mustCheck(t, k)
}

package cellcore

import (
	"fmt"
	"maps"
	"slices"
	"strings"
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

// TestGuaranteeAfterPhysicalChanges: the VC guarantee holds after each of a
// sequence of applied physical cluster changes (a rack added, a free node
// of a VC's bound rack replaced, a free rack removed, a T4 node added and
// another reshaped): every group the oracle (guaranteeFits) says fits its
// VC is placed or preempts, never waits, and the VCs' running groups keep
// their cells throughout.
func TestGuaranteeAfterPhysicalChanges(t *testing.T) {
	cfg := clusterConfig(2, 4, 1)
	k := newHealthyCore(t, cfg)
	for _, s := range []VirtualClusterSpec{vcSpec("vc1", "V100-RACK", 1), vcSpec("vc2", "V100-NODE", 2), vcSpec("vc3", "T4-NODE", 1)} {
		_, err := k.SetVirtualCluster(s)
		require.NoError(t, err)
	}
	// vc1's rack half used, vc2 one node, opportunistic work on the rest.
	vcPlace(t, k, ag("run1", "vc1", 1, 2, 8))
	vcPlace(t, k, ag("run2", "vc2", 1, 1, 8))
	opp := ag("opp", "vc3", -1, 1, 4)
	opp.LeafCellType = "T4"
	vcPlace(t, k, opp)
	running := map[string]AffinityGroupStatus{}
	for _, g := range []string{"run1", "run2", "opp"} {
		running[g], _ = k.AffinityGroupStatus(g)
	}
	rackOf := func(g string) string { return strings.SplitN(running[g].Pods[0].Node, "-", 2)[0] }
	// A free node of run1's rack, replaced below.
	used := map[string]bool{}
	for _, st := range running {
		for _, p := range st.Pods {
			used[p.Node] = true
		}
	}
	var freeInBound string
	for j := 0; j < 4; j++ {
		if n := fmt.Sprintf("%s-n%d", rackOf("run1"), j); !used[n] {
			freeInBound = n
			break
		}
	}
	require.NotEmpty(t, freeInBound)

	check := func(step string) {
		t.Helper()
		mustCheck(t, k)
		requireKeepCells(t, k, running, step)
		checked := probeGuarantee(t, k, step, []int32{1, 2, 4, 8}, func(vc string, _, _ int32) string {
			if vc == "vc3" {
				return "T4"
			}
			return ""
		})
		require.NotZero(t, checked, step)
	}
	apply := func(step string, cfg Config) {
		t.Helper()
		res, err := k.ReplacePhysicalCluster(cfg)
		require.NoError(t, err)
		require.True(t, res.Applied, "%s: %+v", step, res)
		for _, n := range res.AddedNodes {
			require.NoError(t, k.SetNodeHealth(n, NodeHealthy))
		}
		check(step)
	}
	check("start")
	cfg = withRack(cfg, "rack2", "r2-n0", "r2-n1", "r2-n2", "r2-n3")
	apply("rack added", cfg)
	cfg = renameNode(cfg, freeInBound, rackOf("run1")+"-new")
	apply("free node of a bound rack replaced", cfg)
	st, _ := k.VirtualClusterStatus("vc1")
	require.Equal(t, int32(1), st.Cells[0].Bound, "vc1's rack stays bound")
	for _, r := range []string{"rack0", "rack1", "rack2"} {
		if r != "rack"+rackOf("run1")[1:] && r != "rack"+rackOf("run2")[1:] {
			cfg = withoutTop(cfg, r)
			break
		}
	}
	apply("free rack removed", cfg)
	cfg.PhysicalCells = append(cfg.PhysicalCells, PhysicalCellSpec{CellType: "T4-NODE", CellAddress: "t4-1"})
	apply("T4 node added", cfg)
	// The T4 node opp does not use becomes a 2-device node of its own chain.
	cfg.CellTypes = maps.Clone(cfg.CellTypes)
	cfg.CellTypes["T4X2-NODE"] = CellTypeSpec{ChildCellType: "T4", ChildCellNumber: 2, IsNodeLevel: true}
	cfg.PhysicalCells = slices.Clone(cfg.PhysicalCells)
	for i, c := range cfg.PhysicalCells {
		if c.CellType == "T4-NODE" && c.CellAddress != running["opp"].Pods[0].Node {
			cfg.PhysicalCells[i].CellType = "T4X2-NODE"
		}
	}
	apply("T4 node reshaped", cfg)
}

// probeGuarantee schedules, one at a time, a probe group of every shape
// (1-4 pods of each of leaves) in vc1, vc2 and vc3, with the leaf cell type
// leafType gives ("" leaves ag's), and requires every probe the oracle
// says fits to be placed or to preempt, never to wait; a refusal must be
// of a probe that does not fit. Each probe is deleted again and the
// invariants checked. It returns how many fitting probes it checked.
// requireKeepCells: every group of running still has the status it had
// (its state and its pods' cells) after step.
func requireKeepCells(t *testing.T, k *Core, running map[string]AffinityGroupStatus, step string) {
	t.Helper()
	for g, want := range running {
		st, ok := k.AffinityGroupStatus(g)
		require.True(t, ok)
		require.Equal(t, want, st, "%s: group %s keeps its cells", step, g)
	}
}

func probeGuarantee(t *testing.T, k *Core, step string, leaves []int32, leafType func(vc string, pods, leaves int32) string) int {
	t.Helper()
	checked := 0
	for _, vc := range []string{"vc1", "vc2", "vc3"} {
		for pods := int32(1); pods <= 4; pods++ {
			for _, l := range leaves {
				s := ag(fmt.Sprintf("probe-%s-%dx%d", vc, pods, l), vc, 5, pods, l)
				if lt := leafType(vc, pods, l); lt != "" {
					s.LeafCellType = lt
				}
				v := k.guaranteeFits(s)
				d, err := k.Schedule(s)
				if err != nil {
					require.False(t, v.fits, "%s: %s refused although it fits: %v", step, s.Name, err)
					continue
				}
				if v.fits {
					checked++
					require.NotEqual(t, Wait, d.Kind, "%s: guarantee broken for %s: %s (%s)", step, s.Name, d.Reason, v.why)
				}
				_, err = k.DeleteAffinityGroup(s.Name)
				require.NoError(t, err)
				mustCheck(t, k)
			}
		}
	}
	return checked
}

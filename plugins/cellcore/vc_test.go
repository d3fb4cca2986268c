package cellcore

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fingerprint is the whole observable state, to check that a refused
// operation changed nothing.
func fingerprint(k *Core) string { return fmt.Sprintf("%+v", k.Snapshot()) }

// vcPlace schedules a group that must be placed at once and binds its pods.
func vcPlace(t *testing.T, k *Core, s AffinityGroupSpec) Decision {
	t.Helper()
	d, err := k.Schedule(s)
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind, d.Reason)
	bindAll(t, k, d)
	return d
}

// leafOwners returns the leaf cells by node/index.
func leafOwners(k *Core) map[string]LeafCellStatus {
	out := map[string]LeafCellStatus{}
	for _, l := range k.Snapshot().LeafCells {
		out[fmt.Sprintf("%s/%d", l.Node, l.Index)] = l
	}
	return out
}

// leafOwnersOf returns the VCs of the leaf cells a group uses.
func leafOwnersOf(k *Core, group string) []string {
	var out []string
	for _, l := range k.Snapshot().LeafCells {
		if l.UsingGroup == group && l.VirtualCluster != "" {
			out = append(out, l.VirtualCluster)
		}
	}
	return out
}

// placeOrPreempt schedules a group; if it preempts, it checks the victims,
// deletes them and schedules it again. The group must end up placed.
func placeOrPreempt(t *testing.T, k *Core, s AffinityGroupSpec, victimOK func(string) bool) Decision {
	t.Helper()
	d, err := k.Schedule(s)
	require.NoError(t, err)
	if d.Kind == Preempt {
		for _, v := range d.Victims {
			require.True(t, victimOK(v), "%s must not preempt %s", s.Name, v)
			deleteAllPods(t, k, v)
		}
		mustCheck(t, k)
		d, err = k.Schedule(s)
		require.NoError(t, err)
	}
	require.Equal(t, Placed, d.Kind, d.Reason)
	bindAll(t, k, d)
	mustCheck(t, k)
	return d
}

// withKeys sets the pod keys bindAll gives to a decision's pods.
func withKeys(pods []PodPlacement, group string) []PodPlacement {
	out := append([]PodPlacement(nil), pods...)
	for i := range out {
		out[i].PodKey = fmt.Sprintf("%s-%d", group, i)
	}
	return out
}

func statusCells(t *testing.T, k *Core, vc string) []CellLevelStatus {
	t.Helper()
	st, ok := k.VirtualClusterStatus(vc)
	require.True(t, ok, "VC %q", vc)
	return st.Cells
}

// twoRackChainsConfig has two chains sharing their node types: V100-RACK (2
// nodes per rack) and V100-BIGRACK (4 nodes), plus T4 nodes.
func twoRackChainsConfig() Config {
	types := gpuTypes(2)
	types["V100-BIGRACK"] = CellTypeSpec{ChildCellType: "V100-NODE", ChildCellNumber: 4}
	cfg := Config{CellTypes: types}
	cfg.PhysicalCells = append(cfg.PhysicalCells,
		rackSpec("small0", []string{"s0", "s1"}),
		PhysicalCellSpec{CellType: "V100-BIGRACK", CellAddress: "big0", CellChildren: rackSpec("", []string{"b0", "b1", "b2", "b3"}).CellChildren},
		PhysicalCellSpec{CellType: "T4-NODE", CellAddress: "t0"},
	)
	return cfg
}

func TestVCCellTypeResolution(t *testing.T) {
	k := newHealthyCore(t, twoRackChainsConfig())
	cases := []struct {
		cellType  string
		wantChain string
		wantType  string
		wantErr   []string
	}{
		{cellType: "T4-NODE", wantChain: "T4-NODE", wantType: "T4-NODE"},
		{cellType: "T4", wantChain: "T4-NODE", wantType: "T4"},
		{cellType: "V100-RACK", wantChain: "V100-RACK", wantType: "V100-RACK"},
		{cellType: "V100-BIGRACK", wantChain: "V100-BIGRACK", wantType: "V100-BIGRACK"},
		{cellType: "V100-RACK.V100-NODE", wantChain: "V100-RACK", wantType: "V100-NODE"},
		{cellType: "V100-BIGRACK.V100-NODE", wantChain: "V100-BIGRACK", wantType: "V100-NODE"},
		{cellType: "V100-BIGRACK.V100-NODE.V100-SOCKET", wantChain: "V100-BIGRACK", wantType: "V100-SOCKET"},
		{cellType: "V100-RACK.V100", wantChain: "V100-RACK", wantType: "V100"},
		{cellType: "T4-NODE.T4", wantChain: "T4-NODE", wantType: "T4"},
		{cellType: "V100-NODE", wantErr: []string{"several chains", "V100-BIGRACK.V100-NODE", "V100-RACK.V100-NODE"}},
		{cellType: "V100", wantErr: []string{"several chains", "V100-BIGRACK.V100", "V100-RACK.V100"}},
		{cellType: "A100-NODE", wantErr: []string{`"A100-NODE"`, "unknown cell type"}},
		{cellType: "V100-NODE.V100-SOCKET", wantErr: []string{`"V100-NODE"`, "is not a chain"}},
		{cellType: "V100-RACK.T4", wantErr: []string{`"T4"`, "chain V100-RACK"}},
		{cellType: "V100-RACK.V100-SOCKET.V100-NODE", wantErr: []string{`"V100-NODE"`, "is not below"}},
		{cellType: "V100-RACK.V100-RACK", wantErr: []string{"is not below"}},
		{cellType: "", wantErr: []string{"cellType is empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.cellType, func(t *testing.T) {
			before := fingerprint(k)
			_, err := k.SetVirtualCluster(vcSpec("vc", tc.cellType, 1))
			if tc.wantErr != nil {
				require.Error(t, err)
				require.Contains(t, err.Error(), `virtual cluster "vc": virtualCells[0]`)
				for _, w := range tc.wantErr {
					require.Contains(t, err.Error(), w)
				}
				require.Equal(t, before, fingerprint(k))
				_, ok := k.VirtualClusterStatus("vc")
				require.False(t, ok)
				mustCheck(t, k)
				return
			}
			require.NoError(t, err)
			cells := statusCells(t, k, "vc")
			require.Len(t, cells, 1)
			require.Equal(t, tc.wantChain, cells[0].Chain)
			require.Equal(t, tc.wantType, cells[0].CellType)
			require.Equal(t, int32(1), cells[0].Total)
			mustCheck(t, k)
			_, err = k.RemoveVirtualCluster("vc")
			require.NoError(t, err)
			mustCheck(t, k)
		})
	}
	// A type that is itself a chain's top type resolves to that chain.
	cfg := twoRackChainsConfig()
	cfg.PhysicalCells = append(cfg.PhysicalCells, PhysicalCellSpec{CellType: "V100-NODE", CellAddress: "lone"})
	k2 := newHealthyCore(t, cfg)
	_, err := k2.SetVirtualCluster(vcSpec("vc", "V100-NODE", 1))
	require.NoError(t, err)
	require.Equal(t, "V100-NODE", statusCells(t, k2, "vc")[0].Chain)
	mustCheck(t, k2)
}

func TestVCSpecErrors(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 2, 0))
	before := fingerprint(k)
	for _, tc := range []struct {
		spec VirtualClusterSpec
		want string
	}{
		{VirtualClusterSpec{}, "name is empty"},
		{vcSpec("a", "V100-NODE", 0), "cellNumber must be positive"},
		{vcSpec("a", "V100-NODE", -1), "cellNumber must be positive"},
		{VirtualClusterSpec{Name: "a", PinnedCells: []PinnedCellSpec{{PinnedCellID: "nope"}}}, `unknown pinned cell "nope"`},
	} {
		_, err := k.SetVirtualCluster(tc.spec)
		require.Error(t, err)
		require.Contains(t, err.Error(), tc.want)
		require.Equal(t, before, fingerprint(k))
	}
	_, err := k.RemoveVirtualCluster("nope")
	require.Error(t, err)
	require.Equal(t, before, fingerprint(k))
	mustCheck(t, k)
}

func TestVCTooLargeIsRefused(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(2, 4, 1))
	before := fingerprint(k)
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 3))
	require.Error(t, err)
	require.Contains(t, err.Error(), `virtual cluster "a" does not fit`)
	require.Contains(t, err.Error(), "chain V100-RACK lacks 1 free V100-RACK cell(s) at level 5")
	require.Equal(t, before, fingerprint(k))

	_, err = k.SetVirtualCluster(vcSpec("a", "T4-NODE", 2))
	require.Error(t, err)
	require.Contains(t, err.Error(), "chain T4-NODE lacks 1 free T4-NODE cell(s) at level 2")
	require.Equal(t, before, fingerprint(k))

	// Several entries of one VC add up.
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1, "V100-NODE", 4, "V100", 1))
	require.Error(t, err)
	require.Contains(t, err.Error(), "chain V100-RACK lacks 1 free V100 cell(s) at level 1")
	require.Equal(t, before, fingerprint(k))

	// Against other VCs: b owns a rack, a may still get 4 nodes, not 5.
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-RACK", 1))
	require.NoError(t, err)
	before = fingerprint(k)
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-NODE", 5))
	require.Error(t, err)
	require.Contains(t, err.Error(), "chain V100-RACK lacks 1 free V100-NODE cell(s) at level 4")
	require.Equal(t, before, fingerprint(k))
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-NODE", 4))
	require.NoError(t, err)
	mustCheck(t, k)
}

func TestVCGrowThatNoLongerFitsIsRefused(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(2, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 3))
	require.NoError(t, err)
	vcPlace(t, k, ag("a1", "a", 0, 2, 8))
	vcPlace(t, k, ag("b1", "b", 0, 1, 8))
	mustCheck(t, k)

	before := fingerprint(k)
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-RACK", 2))
	require.Error(t, err)
	require.Contains(t, err.Error(), "chain V100-RACK lacks 1 free V100-RACK cell(s) at level 5")
	require.Equal(t, before, fingerprint(k))
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 5))
	require.Error(t, err)
	require.Contains(t, err.Error(), "V100-NODE cell(s) at level 4")
	require.Equal(t, before, fingerprint(k))
	// Growing by what is left is fine.
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 4))
	require.NoError(t, err)
	mustCheck(t, k)
	before = fingerprint(k)
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1, "V100", 1))
	require.Error(t, err)
	require.Equal(t, before, fingerprint(k))
	mustCheck(t, k)
}

func TestVCShrinkDowngradesRunningGroups(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 3))
	require.NoError(t, err)
	placed := map[string]Decision{}
	for _, n := range []string{"g1", "g2", "g3"} {
		placed[n] = vcPlace(t, k, ag(n, "a", 0, 1, 8))
	}
	small := vcPlace(t, k, ag("opp", "a", -1, 1, 2))
	mustCheck(t, k)

	res, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	require.Len(t, res.Downgraded, 2)
	require.Empty(t, res.Cancelled)
	require.True(t, sort.StringsAreSorted(res.Downgraded))
	mustCheck(t, k)

	kept := 0
	for n, d := range placed {
		st, ok := k.AffinityGroupStatus(n)
		require.True(t, ok)
		require.Equal(t, AGAllocated, st.State)
		require.Equal(t, d.Pods[0].Node, st.Pods[0].Node, "%s keeps its cells", n)
		require.Equal(t, d.Pods[0].LeafCellIndices, st.Pods[0].LeafCellIndices, "%s keeps its cells", n)
		require.Equal(t, n+"-0", st.Pods[0].PodKey)
		down := false
		for _, x := range res.Downgraded {
			down = down || x == n
		}
		require.Equal(t, down, st.Downgraded, n)
		if down {
			require.Equal(t, OpportunisticPriority, st.Priority, n)
		} else {
			require.Equal(t, int32(0), st.Priority, n)
			kept++
		}
	}
	require.Equal(t, 1, kept)
	owners := leafOwners(k)
	for n := range placed {
		st, _ := k.AffinityGroupStatus(n)
		for _, idx := range st.Pods[0].LeafCellIndices {
			l := owners[fmt.Sprintf("%s/%d", st.Pods[0].Node, idx)]
			require.Equal(t, n, l.UsingGroup)
			require.Equal(t, st.Priority, l.Priority)
			if st.Downgraded {
				require.Empty(t, l.VirtualCluster, "%s's cell is no longer the VC's", n)
			} else {
				require.Equal(t, "a", l.VirtualCluster)
			}
		}
	}
	cells := statusCells(t, k, "a")
	require.Len(t, cells, 1)
	require.Equal(t, CellLevelStatus{Chain: "V100-RACK", LeafCellType: "V100", CellType: "V100-NODE", Level: 4, Total: 1, Bound: 1,
		LeafCells: 8, UsedLeafCells: 8}, cells[0])
	st, _ := k.VirtualClusterStatus("a")
	require.Equal(t, map[AGState]int{AGAllocated: 4}, st.AffinityGroups)

	// The freed virtual cells can be claimed again: a new guaranteed group
	// preempts the downgraded ones (they are opportunistic now).
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	d, err := k.Schedule(ag("g4", "a", 0, 1, 8))
	require.NoError(t, err)
	if d.Kind == Preempt {
		require.Len(t, d.Victims, 1)
		require.Contains(t, append(res.Downgraded, "opp"), d.Victims[0])
	} else {
		require.Equal(t, Placed, d.Kind, d.Reason)
		require.Equal(t, small.Pods[0].Node, d.Pods[0].Node, "the only node left with no guaranteed group")
	}
	mustCheck(t, k)
}

func TestVCShrinkCancelsPreemptors(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 2, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	vcPlace(t, k, ag("low", "a", 0, 1, 8))
	d, err := k.Schedule(ag("high", "a", 5, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Equal(t, []string{"low"}, d.Victims)
	mustCheck(t, k)

	// A change that does not fit is refused and cancels nothing.
	before := fingerprint(k)
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-NODE", 3))
	require.Error(t, err)
	require.Equal(t, before, fingerprint(k))

	res, err := k.SetVirtualCluster(vcSpec("a", "V100-SOCKET", 1))
	require.NoError(t, err)
	require.Equal(t, []string{"high"}, res.Cancelled)
	require.Equal(t, []string{"low"}, res.Downgraded)
	stH, _ := k.AffinityGroupStatus("high")
	require.Equal(t, AGPending, stH.State)
	stL, _ := k.AffinityGroupStatus("low")
	require.Equal(t, AGAllocated, stL.State, "preemption cancelled (x2)")
	require.True(t, stL.Downgraded)
	mustCheck(t, k)
}

func TestVCRemove(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 2))
	require.NoError(t, err)
	run1 := vcPlace(t, k, ag("run1", "a", 0, 1, 8))
	run2 := vcPlace(t, k, ag("run2", "a", 3, 2, 4))
	opp := vcPlace(t, k, ag("opp", "a", -1, 1, 8))
	d, err := k.Schedule(ag("pend", "a", 0, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind, d.Reason)
	d, err = k.Schedule(ag("pre", "a", 10, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	bRun := vcPlace(t, k, ag("b1", "b", 0, 1, 8))
	st, _ := k.VirtualClusterStatus("a")
	require.Equal(t, map[AGState]int{AGPending: 1, AGPreempting: 1, AGAllocated: 2, AGBeingPreempted: 1}, st.AffinityGroups)
	mustCheck(t, k)

	require.Equal(t, []string{"run1"}, d.Victims, "the lowest priority")
	res, err := k.RemoveVirtualCluster("a")
	require.NoError(t, err)
	mustCheck(t, k)
	require.Subset(t, res.Downgraded, []string{"run1", "run2"})
	require.Equal(t, []string{"pre"}, res.Cancelled)
	_, ok := k.VirtualClusterStatus("a")
	require.False(t, ok)
	for _, n := range []string{"pend", "pre"} {
		_, ok := k.AffinityGroupStatus(n)
		require.False(t, ok, "%s is deleted", n)
	}
	for n, dd := range map[string]Decision{"run1": run1, "run2": run2, "opp": opp} {
		st, ok := k.AffinityGroupStatus(n)
		require.True(t, ok, n)
		require.Equal(t, AGAllocated, st.State, n)
		require.Equal(t, OpportunisticPriority, st.Priority, n)
		require.Equal(t, n != "opp", st.Downgraded, n)
		require.Equal(t, withKeys(dd.Pods, n), st.Pods, "%s keeps its cells and pods", n)
		require.Empty(t, leafOwnersOf(k, n), "%s's cells are no VC's", n)
	}
	stB, ok := k.AffinityGroupStatus("b1")
	require.True(t, ok)
	require.False(t, stB.Downgraded)
	require.Equal(t, withKeys(bRun.Pods, "b1"), stB.Pods)
	for _, l := range k.Snapshot().LeafCells {
		require.NotEqual(t, "a", l.VirtualCluster)
		require.NotEqual(t, CellReserving, l.State)
		require.NotEqual(t, CellReserved, l.State)
	}
	// The VC is gone for new groups, and its name can be reused.
	_, err = k.Schedule(ag("new", "a", 0, 1, 1))
	require.Error(t, err)
	require.Contains(t, err.Error(), `unknown virtual cluster "a"`)
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	st, _ = k.VirtualClusterStatus("a")
	require.Empty(t, st.AffinityGroups, "the downgraded groups no longer count for the new VC")
	// The new VC's groups preempt the old downgraded ones if needed.
	for i := 0; i < 2; i++ {
		d, err := k.Schedule(ag(fmt.Sprintf("a-new%d", i), "a", 0, 1, 8))
		require.NoError(t, err)
		require.NotEqual(t, Wait, d.Kind, d.Reason)
		require.NotContains(t, d.Victims, "b1")
		mustCheck(t, k)
	}
	// The old groups go away normally.
	for _, n := range []string{"run1", "run2", "opp"} {
		if _, ok := k.AffinityGroupStatus(n); ok {
			_, err := k.DeleteAffinityGroup(n)
			require.NoError(t, err)
		}
	}
	mustCheck(t, k)
}

// Sharing safety: VC a owns one rack it does not use; VC b owns nodes and
// opportunistic groups fill every leaf. a can still get a whole rack for a
// gang, only ever preempting opportunistic groups.
func TestVCSharingSafety(t *testing.T) {
	for _, bFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("bFirst=%v", bFirst), func(t *testing.T) {
			k := newHealthyCore(t, clusterConfig(2, 4, 0))
			_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1))
			require.NoError(t, err)
			_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 4))
			require.NoError(t, err)
			bGroups := map[string]bool{}
			isOpp := func(v string) bool { return strings.HasPrefix(v, "opp-") }
			placeB := func(n int) {
				for i := 0; i < n; i++ {
					name := fmt.Sprintf("b%d", len(bGroups))
					placeOrPreempt(t, k, ag(name, "b", 0, 2, 4), isOpp)
					bGroups[name] = true
				}
			}
			fillOpp := func() {
				for i := 0; ; i++ {
					vc := []string{"a", "b"}[i%2]
					name := fmt.Sprintf("opp-%s-%d", vc, i)
					d, err := k.Schedule(ag(name, vc, -1, 1, 2))
					require.NoError(t, err)
					if d.Kind == Wait {
						_, err := k.DeleteAffinityGroup(name)
						require.NoError(t, err)
						return
					}
					require.Equal(t, Placed, d.Kind)
					bindAll(t, k, d)
				}
			}
			if bFirst {
				placeB(2)
				fillOpp()
			} else {
				fillOpp()
				placeB(2) // preempts opportunistic groups
				fillOpp()
			}
			mustCheck(t, k)
			for _, l := range k.Snapshot().LeafCells {
				require.NotEqual(t, CellFree, l.State, "the cluster is full: %s", l.ID)
			}

			// a's gang of a whole rack, at the highest priority.
			gang := ag("gang", "a", MaxPriority, 4, 8)
			d, err := k.Schedule(gang)
			require.NoError(t, err)
			require.Equal(t, Preempt, d.Kind, d.Reason)
			require.NotEmpty(t, d.Victims)
			for _, v := range d.Victims {
				require.True(t, isOpp(v), "victim %s is not opportunistic", v)
			}
			mustCheck(t, k)
			for _, v := range d.Victims {
				deleteAllPods(t, k, v)
			}
			d = placeOrPreempt(t, k, gang, isOpp)
			racks := map[string]bool{}
			for _, p := range d.Pods {
				require.Len(t, p.LeafCellIndices, 8)
				racks[p.Node[:2]] = true
			}
			require.Len(t, racks, 1, "the gang fills one rack")
			for n := range bGroups {
				st, ok := k.AffinityGroupStatus(n)
				require.True(t, ok)
				require.Equal(t, AGAllocated, st.State, n)
				require.False(t, st.Downgraded, n)
			}
			// b can still get its remaining 2 nodes.
			for i := 0; i < 2; i++ {
				placeOrPreempt(t, k, ag(fmt.Sprintf("b-late%d", i), "b", MaxPriority, 1, 8), isOpp)
			}
			st, _ := k.VirtualClusterStatus("b")
			require.Equal(t, int32(4), st.Cells[0].Bound)
			require.Equal(t, int32(32), st.Cells[0].UsedLeafCells)
			mustCheck(t, k)
		})
	}
}

// VC isolation: a full VC waits although another VC has idle cells.
func TestVCIsolation(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("vc1", "V100-NODE", 1))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("vc2", "V100-NODE", 2))
	require.NoError(t, err)
	vcPlace(t, k, ag("one", "vc1", 0, 1, 6))
	vcPlace(t, k, ag("two", "vc1", 0, 2, 1))
	d, err := k.Schedule(ag("three", "vc1", 0, 1, 1))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	require.Contains(t, d.Reason, `virtual cluster "vc1"`)
	require.Contains(t, d.Reason, "of its 8 V100 (1 V100-NODE), 8 are used by groups of priority 0 or higher (one and two) and none is free")
	// Higher priority preempts inside vc1, not in vc2's idle cells.
	d, err = k.Schedule(ag("urgent", "vc1", 10, 1, 2))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Len(t, d.Victims, 1)
	require.Contains(t, []string{"one", "two"}, d.Victims[0])
	// A group larger than the VC is refused outright.
	_, err = k.Schedule(ag("huge", "vc1", 0, 2, 8))
	require.Error(t, err)
	require.Contains(t, err.Error(), `virtual cluster "vc1" has at most 8`)
	// An opportunistic group of vc1 may use idle cells outside vc1.
	o := vcPlace(t, k, ag("o1", "vc1", -1, 1, 8))
	require.Empty(t, leafOwnersOf(k, "o1"), "on cells of no VC")
	_ = o
	// vc2 still has both its nodes.
	vcPlace(t, k, ag("v2", "vc2", 0, 2, 8))
	mustCheck(t, k)
	for _, l := range k.Snapshot().LeafCells {
		switch l.UsingGroup {
		case "one", "two":
			require.Equal(t, "vc1", l.VirtualCluster, l.ID)
		case "v2":
			require.Equal(t, "vc2", l.VirtualCluster, l.ID)
		}
		if l.ReservingGroup == "urgent" {
			require.Equal(t, "vc1", l.VirtualCluster, l.ID)
		}
	}
	mustCheck(t, k)
}

func pinnedConfig() Config {
	cfg := clusterConfig(1, 4, 0)
	cfg.PhysicalCells[0].CellChildren[3].PinnedCellID = "pin1"
	return cfg
}

func TestVCPinnedCells(t *testing.T) {
	k := newHealthyCore(t, pinnedConfig())
	// The pinned node is not in the free pool: 3 nodes are left.
	_, err := k.SetVirtualCluster(vcSpec("x", "V100-NODE", 4))
	require.Error(t, err)
	a := vcSpec("a", "V100-NODE", 1)
	a.PinnedCells = []PinnedCellSpec{{PinnedCellID: "pin1"}}
	_, err = k.SetVirtualCluster(a)
	require.NoError(t, err)
	st, _ := k.VirtualClusterStatus("a")
	require.Equal(t, []PinnedCellStatus{{PinnedCellID: "pin1", CellType: "V100-NODE", LeafCellType: "V100", LeafCells: 8, FreeLeafCells: 8}}, st.PinnedCells)

	// The pinned cell cannot be given to a second VC.
	b := vcSpec("b", "V100-NODE", 1)
	b.PinnedCells = []PinnedCellSpec{{PinnedCellID: "pin1"}}
	before := fingerprint(k)
	_, err = k.SetVirtualCluster(b)
	require.Error(t, err)
	require.Contains(t, err.Error(), `pinned cell "pin1" already belongs to virtual cluster "a"`)
	require.Equal(t, before, fingerprint(k))
	a2 := a
	a2.PinnedCells = []PinnedCellSpec{{PinnedCellID: "pin1"}, {PinnedCellID: "pin1"}}
	_, err = k.SetVirtualCluster(a2)
	require.Error(t, err)
	require.Contains(t, err.Error(), "listed twice")
	require.Equal(t, before, fingerprint(k))
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 2))
	require.NoError(t, err)

	// Groups of a without the pinned id use a's node only.
	vcPlace(t, k, ag("plain1", "a", 0, 1, 8))
	d, err := k.Schedule(ag("plain2", "a", 0, 1, 4))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind, "the pinned cell is idle but reserved to pinned groups")
	_, err = k.Schedule(ag("plain3", "a", 0, 2, 8))
	require.Error(t, err, "larger than a's non-pinned cells")

	pinned := func(name string, prio int32, members ...int32) AffinityGroupSpec {
		s := ag(name, "a", prio, members...)
		s.PinnedCellID = "pin1"
		return s
	}
	p1 := vcPlace(t, k, pinned("pin-g1", 0, 1, 4))
	require.Equal(t, "r0-n3", p1.Pods[0].Node)
	p2 := vcPlace(t, k, pinned("pin-g2", 0, 2, 2))
	for _, p := range p2.Pods {
		require.Equal(t, "r0-n3", p.Node)
	}
	d, err = k.Schedule(pinned("pin-g3", 0, 1, 1))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind, "the pinned cell is full; a's other node is not used")
	require.Contains(t, d.Reason, "of its 8 V100 (pinned cell pin1), 8 are used by groups of priority 0 or higher (pin-g1 and pin-g2) and none is free")
	_, err = k.Schedule(pinned("pin-big", 0, 2, 8))
	require.Error(t, err)

	// Invalid uses of the pinned cell.
	for _, tc := range []struct {
		spec AffinityGroupSpec
		want string
	}{
		{func() AffinityGroupSpec { s := ag("o", "a", -1, 1, 1); s.PinnedCellID = "pin1"; return s }(), "opportunistic group cannot use pinned cell"},
		{func() AffinityGroupSpec { s := ag("o", "b", 0, 1, 1); s.PinnedCellID = "pin1"; return s }(), `does not belong to virtual cluster "b"`},
		{func() AffinityGroupSpec { s := ag("o", "a", 0, 1, 1); s.PinnedCellID = "pin2"; return s }(), `unknown pinned cell "pin2"`},
		{func() AffinityGroupSpec {
			s := ag("o", "a", 0, 1, 1)
			s.PinnedCellID, s.LeafCellType = "pin1", "T4"
			return s
		}(), "unknown leaf cell type"},
	} {
		before := fingerprint(k)
		_, err := k.Schedule(tc.spec)
		require.Error(t, err)
		require.Contains(t, err.Error(), tc.want)
		require.Equal(t, before, fingerprint(k))
	}

	// b never lands in the pinned cell.
	vcPlace(t, k, ag("b1", "b", 0, 2, 8))
	for _, l := range k.Snapshot().LeafCells {
		if l.Node == "r0-n3" {
			require.Contains(t, []string{"", "pin-g1", "pin-g2"}, l.UsingGroup, l.ID)
			require.Equal(t, "a", l.VirtualCluster, l.ID)
		}
	}
	mustCheck(t, k)

	// Higher priority pinned groups preempt inside the pinned cell only.
	d, err = k.Schedule(pinned("pin-high", 9, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Equal(t, []string{"pin-g1", "pin-g2"}, d.Victims)
	mustCheck(t, k)

	// Giving the pinned cell up downgrades its groups and frees it for b.
	res, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	require.Equal(t, []string{"pin-g1", "pin-g2"}, res.Downgraded)
	require.Equal(t, []string{"pin-high"}, res.Cancelled)
	mustCheck(t, k)
	b.VirtualCells = []VirtualCellSpec{{CellType: "V100-NODE", CellNumber: 2}}
	_, err = k.SetVirtualCluster(b)
	require.NoError(t, err)
	st, _ = k.VirtualClusterStatus("b")
	require.Len(t, st.PinnedCells, 1)
	mustCheck(t, k)
}

func TestVCLazyPreemption(t *testing.T) {
	setup := func(t *testing.T, nodes int, lazy bool) *Core {
		k := newHealthyCore(t, clusterConfig(1, nodes, 0))
		_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
		require.NoError(t, err)
		low := ag("low", "a", 0, 1, 8)
		low.LazyPreemptionEnable = lazy
		vcPlace(t, k, low)
		mustCheck(t, k)
		return k
	}
	t.Run("free capacity elsewhere: downgraded, not a victim", func(t *testing.T) {
		k := setup(t, 2, true)
		lowBefore, _ := k.AffinityGroupStatus("low")
		d, err := k.Schedule(ag("high", "a", 10, 1, 8))
		require.NoError(t, err)
		require.Equal(t, Placed, d.Kind, d.Reason)
		require.Empty(t, d.Victims)
		require.Equal(t, []string{"low"}, d.Downgraded)
		require.NotEqual(t, lowBefore.Pods[0].Node, d.Pods[0].Node)
		st, _ := k.AffinityGroupStatus("low")
		require.Equal(t, AGAllocated, st.State)
		require.True(t, st.Downgraded)
		require.Equal(t, OpportunisticPriority, st.Priority)
		require.Equal(t, lowBefore.Pods, st.Pods, "low keeps running where it was")
		vst, _ := k.VirtualClusterStatus("a")
		require.Equal(t, map[AGState]int{AGAllocated: 2}, vst.AffinityGroups)
		require.Equal(t, int32(1), vst.Cells[0].Bound)
		mustCheck(t, k)
	})
	t.Run("without lazy preemption: a victim", func(t *testing.T) {
		k := setup(t, 2, false)
		d, err := k.Schedule(ag("high", "a", 10, 1, 8))
		require.NoError(t, err)
		require.Equal(t, Preempt, d.Kind, d.Reason)
		require.Equal(t, []string{"low"}, d.Victims)
		require.Empty(t, d.Downgraded)
		mustCheck(t, k)
	})
	t.Run("no free capacity: downgraded, then preempted as opportunistic", func(t *testing.T) {
		k := setup(t, 1, true)
		d, err := k.Schedule(ag("high", "a", 10, 1, 8))
		require.NoError(t, err)
		require.Equal(t, []string{"low"}, d.Downgraded)
		require.Equal(t, Preempt, d.Kind, d.Reason)
		require.Equal(t, []string{"low"}, d.Victims)
		st, _ := k.AffinityGroupStatus("low")
		require.True(t, st.Downgraded)
		mustCheck(t, k)
		deleteAllPods(t, k, "low")
		d, err = k.Schedule(ag("high", "a", 10, 1, 8))
		require.NoError(t, err)
		require.Equal(t, Placed, d.Kind, d.Reason)
		mustCheck(t, k)
	})
	t.Run("same priority: no downgrade", func(t *testing.T) {
		k := setup(t, 2, true)
		d, err := k.Schedule(ag("same", "a", 0, 1, 8))
		require.NoError(t, err)
		require.Equal(t, Wait, d.Kind)
		require.Empty(t, d.Downgraded)
		st, _ := k.AffinityGroupStatus("low")
		require.False(t, st.Downgraded)
		mustCheck(t, k)
	})
}

func TestVCStatusCounts(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(2, 4, 1))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1, "T4-NODE", 1))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 2))
	require.NoError(t, err)
	st, ok := k.VirtualClusterStatus("a")
	require.True(t, ok)
	require.Equal(t, "a", st.Name)
	require.Equal(t, []CellLevelStatus{
		{Chain: "T4-NODE", LeafCellType: "T4", CellType: "T4-NODE", Level: 2, Total: 1, LeafCells: 4, FreeLeafCells: 4},
		{Chain: "V100-RACK", LeafCellType: "V100", CellType: "V100-RACK", Level: 5, Total: 1, LeafCells: 32, FreeLeafCells: 32},
	}, st.Cells)
	require.Empty(t, st.AffinityGroups)

	vcPlace(t, k, ag("g1", "a", 0, 1, 8))
	d := vcPlace(t, k, ag("g2", "a", 0, 2, 8))
	_ = d
	d, err = k.Schedule(ag("g3", "a", 0, 2, 8))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	vcPlace(t, k, ag("opp", "a", -1, 1, 4)) // outside a's cells: not counted in its leaves
	vcPlace(t, k, ag("b1", "b", 0, 1, 4))
	mustCheck(t, k)

	st, _ = k.VirtualClusterStatus("a")
	require.Equal(t, map[AGState]int{AGAllocated: 3, AGPending: 1}, st.AffinityGroups)
	require.Equal(t, []CellLevelStatus{
		{Chain: "T4-NODE", LeafCellType: "T4", CellType: "T4-NODE", Level: 2, Total: 1, LeafCells: 4, FreeLeafCells: 4},
		{Chain: "V100-RACK", LeafCellType: "V100", CellType: "V100-RACK", Level: 5, Total: 1, Bound: 1, LeafCells: 32, UsedLeafCells: 24, FreeLeafCells: 8},
	}, st.Cells)
	stb, _ := k.VirtualClusterStatus("b")
	require.Equal(t, []CellLevelStatus{
		{Chain: "V100-RACK", LeafCellType: "V100", CellType: "V100-NODE", Level: 4, Total: 2, Bound: 1, LeafCells: 16, UsedLeafCells: 4, FreeLeafCells: 12},
	}, stb.Cells)
	require.Equal(t, map[AGState]int{AGAllocated: 1}, stb.AffinityGroups)

	// Preemption states.
	d, err = k.Schedule(ag("hi", "a", 5, 3, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	st, _ = k.VirtualClusterStatus("a")
	want := map[AGState]int{AGPending: 1, AGPreempting: 1}
	allocated := 3
	for range d.Victims {
		want[AGBeingPreempted]++
		allocated--
	}
	want[AGAllocated] = allocated
	require.Equal(t, want, st.AffinityGroups)
	require.Subset(t, []string{"g1", "g2"}, d.Victims)
	// Used and reserved leaves (how many depends on the victims chosen, see
	// TestVCPreemptionAvoidsNeedlessVictims).
	require.GreaterOrEqual(t, st.Cells[1].UsedLeafCells, int32(24))
	mustCheck(t, k)

	// Everything deleted: bound cells are released lazily.
	for _, n := range k.groupNames() {
		_, err := k.DeleteAffinityGroup(n)
		require.NoError(t, err)
	}
	st, _ = k.VirtualClusterStatus("a")
	require.Empty(t, st.AffinityGroups)
	require.Equal(t, int32(0), st.Cells[1].Bound)
	require.Equal(t, int32(32), st.Cells[1].FreeLeafCells)
	snap := k.Snapshot()
	require.Len(t, snap.VirtualClusters, 2)
	require.Empty(t, snap.AffinityGroups)
	mustCheck(t, k)
}

// A preemptor should not make more victims than it needs: with one free
// node and two groups in its VC's rack, a gang of three nodes needs to
// preempt one group only (the two-node one), not both.
func TestVCPreemptionAvoidsNeedlessVictims(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1))
	require.NoError(t, err)
	vcPlace(t, k, ag("g1", "a", 0, 1, 8))
	vcPlace(t, k, ag("g2", "a", 0, 2, 8))
	mustCheck(t, k)
	d, err := k.Schedule(ag("hi", "a", 5, 3, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	mustCheck(t, k)
	require.Equal(t, []string{"g2"}, d.Victims, "g2 and the free node hold the gang; preempting g1 too is needless")
}

// VCChangeResult.Downgraded lists "the guaranteed groups that now run as
// opportunistic". Removing a VC must not list its groups that were
// opportunistic all along (their status says Downgraded=false), and the
// list should be sorted like SetVirtualCluster's.
func TestVCRemoveDowngradedListsOnlyGuaranteedGroups(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	vcPlace(t, k, ag("g1", "a", 0, 1, 8))
	vcPlace(t, k, ag("g2", "a", 0, 1, 8))
	vcPlace(t, k, ag("a-opp", "a", -1, 1, 8))
	res, err := k.RemoveVirtualCluster("a")
	require.NoError(t, err)
	mustCheck(t, k)
	st, _ := k.AffinityGroupStatus("a-opp")
	require.False(t, st.Downgraded)
	require.Equal(t, []string{"g1", "g2"}, res.Downgraded)
}

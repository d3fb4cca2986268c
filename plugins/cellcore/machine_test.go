package cellcore

// Tests of the AG and cell state machines of the HiveD state-machine document
// (seed 000), one per event, driven through the public API only: each test
// sets up the event's condition, fires it, and checks the operation the seed
// lists on the AG states, the leaf cells and the transitions reported through
// Core.OnTransition.

import (
	"errors"
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// --- helpers ---------------------------------------------------------------

// mtTransition is one AG transition reported by Core.OnTransition.
type mtTransition struct {
	Group string
	Event AGEvent
	To    AGState
}

func (x mtTransition) String() string { return fmt.Sprintf("%s:%s->%s", x.Group, x.Event, x.To) }

// mtRecorder keeps the AG transitions of a core in order.
type mtRecorder struct{ log []mtTransition }

func mtRecord(k *Core) *mtRecorder {
	r := &mtRecorder{}
	k.OnTransition = func(group string, ev AGEvent, _, to AGState) {
		r.log = append(r.log, mtTransition{group, ev, to})
	}
	return r
}

// takeRaw returns the transitions since the last take.
func (r *mtRecorder) takeRaw() []mtTransition {
	out := r.log
	r.log = nil
	return out
}

// take returns the transitions since the last take as strings, with runs of
// the same transition collapsed: AG e6 fires once per leaf cell that goes
// Used -> Reserving (seed: its condition is one cell), so a victim of n cells
// reports it n times in a row.
func (r *mtRecorder) take() []string {
	out := []string{}
	for _, x := range r.takeRaw() {
		s := x.String()
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

// mtCore is one rack of two 8-GPU nodes (r0-n0, r0-n1), all healthy, and a
// VC "a" owning one node.
func mtCore(t *testing.T) (*Core, *mtRecorder) {
	t.Helper()
	k := newHealthyCore(t, clusterConfig(1, 2, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	mustCheck(t, k)
	r := mtRecord(k)
	t.Cleanup(func() { mustCheck(t, k) })
	return k, r
}

// mtPlace schedules a group that must be placed at once, binds all its pods
// and returns the decision.
func mtPlace(t *testing.T, k *Core, spec AffinityGroupSpec) Decision {
	t.Helper()
	d, err := k.Schedule(spec)
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind, d.Reason)
	require.Equal(t, AGAllocated, d.State)
	bindAll(t, k, d)
	mustCheck(t, k)
	return d
}

// mtPreempt schedules a group that must start preempting exactly victims.
func mtPreempt(t *testing.T, k *Core, spec AffinityGroupSpec, victims ...string) Decision {
	t.Helper()
	d, err := k.Schedule(spec)
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Equal(t, AGPreempting, d.State)
	sort.Strings(victims)
	require.Equal(t, victims, d.Victims)
	mustCheck(t, k)
	return d
}

// mtWait schedules a group that must wait Pending.
func mtWait(t *testing.T, k *Core, spec AffinityGroupSpec) Decision {
	t.Helper()
	d, err := k.Schedule(spec)
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind, d.Reason)
	require.Equal(t, AGPending, d.State)
	mustCheck(t, k)
	return d
}

func mtState(t *testing.T, k *Core, group string) AGState {
	t.Helper()
	st, ok := k.AffinityGroupStatus(group)
	require.True(t, ok, "affinity group %q is not known", group)
	return st.State
}

func mtRequireState(t *testing.T, k *Core, group string, want AGState) {
	t.Helper()
	require.Equal(t, want, mtState(t, k, group), "state of %s", group)
}

func mtRequireGone(t *testing.T, k *Core, group string) {
	t.Helper()
	_, ok := k.AffinityGroupStatus(group)
	require.False(t, ok, "deleted affinity group %q is still known", group)
}

// mtLeaf is a leaf cell's state and the groups on it.
type mtLeaf struct {
	State     CellState
	Using     string
	Reserving string
}

func (l mtLeaf) String() string {
	switch l.State {
	case CellUsed:
		return fmt.Sprintf("Used(%s)", l.Using)
	case CellReserving:
		return fmt.Sprintf("Reserving(%s>%s)", l.Using, l.Reserving)
	case CellReserved:
		return fmt.Sprintf("Reserved(%s)", l.Reserving)
	}
	return l.State.String()
}

var mtFree = mtLeaf{State: CellFree}

func mtUsed(g string) mtLeaf     { return mtLeaf{State: CellUsed, Using: g} }
func mtReserved(g string) mtLeaf { return mtLeaf{State: CellReserved, Reserving: g} }
func mtReserving(victim, by string) mtLeaf {
	return mtLeaf{State: CellReserving, Using: victim, Reserving: by}
}

// mtLeaves returns the leaf cells of a node by leaf ID.
func mtLeaves(k *Core, node string) map[string]mtLeaf {
	out := map[string]mtLeaf{}
	for _, l := range k.Snapshot().LeafCells {
		if l.Node == node {
			out[l.ID] = mtLeaf{l.State, l.UsingGroup, l.ReservingGroup}
		}
	}
	return out
}

// mtRequireLeaves checks how many leaves of a node are in each state.
func mtRequireLeaves(t *testing.T, k *Core, node string, want map[mtLeaf]int) {
	t.Helper()
	got := map[mtLeaf]int{}
	for _, l := range mtLeaves(k, node) {
		got[l]++
	}
	require.Equal(t, want, got, "leaf cells of node %s", node)
}

func mtOtherNode(node string) string {
	if node == "r0-n0" {
		return "r0-n1"
	}
	return "r0-n0"
}

// mtHistory records each leaf's sequence of states (runs collapsed).
type mtHistory map[string][]string

func (h mtHistory) add(k *Core, node string) {
	for id, l := range mtLeaves(k, node) {
		s := l.String()
		if seq := h[id]; len(seq) == 0 || seq[len(seq)-1] != s {
			h[id] = append(seq, s)
		}
	}
}

// --- AG events -------------------------------------------------------------

// e0: all chosen cells Free (or Reserved by a lower priority, see cell e8 (i))
// -> Allocated; Free -> Used (cell e0).
func TestAGEvent_e0(t *testing.T) {
	k, r := mtCore(t)
	mtRequireLeaves(t, k, "r0-n0", map[mtLeaf]int{mtFree: 8})
	mtRequireLeaves(t, k, "r0-n1", map[mtLeaf]int{mtFree: 8})
	d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
	node := d.Pods[0].Node
	require.Equal(t, []string{"low:e0->Allocated"}, r.take())
	mtRequireState(t, k, "low", AGAllocated)
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("low"): 8})
	mtRequireLeaves(t, k, mtOtherNode(node), map[mtLeaf]int{mtFree: 8})
	mustCheck(t, k)
}

// e1: some chosen cell is Used (or Reserving) -> Preempting; Used by others ->
// Reserving (cell e2), Free -> Reserved (cell e5).
func TestAGEvent_e1(t *testing.T) {
	t.Run("guaranteed victim", func(t *testing.T) {
		k, r := mtCore(t)
		d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
		node := d.Pods[0].Node
		r.take()
		mtPreempt(t, k, ag("high", "a", 10, 1, 8), "low")
		raw := r.takeRaw()
		require.Equal(t, mtTransition{"high", AGe1, AGPreempting}, raw[0])
		for _, x := range raw[1:] {
			require.Equal(t, mtTransition{"low", AGe6, AGBeingPreempted}, x)
		}
		require.Len(t, raw, 1+8, "one AG e6 per cell of the victim going Reserving: %v", raw)
		mtRequireState(t, k, "high", AGPreempting)
		mtRequireState(t, k, "low", AGBeingPreempted)
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "high"): 8})
		mustCheck(t, k)
	})
	t.Run("free and used cells", func(t *testing.T) {
		k, r := mtCore(t)
		d := mtPlace(t, k, ag("low", "a", 0, 1, 4))
		node := d.Pods[0].Node
		r.take()
		mtPreempt(t, k, ag("high", "a", 10, 1, 8), "low")
		require.Equal(t, []string{"high:e1->Preempting", "low:e6->Being preempted"}, r.take())
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "high"): 4, mtReserved("high"): 4})
		mustCheck(t, k)
	})
	t.Run("opportunistic victim", func(t *testing.T) {
		k, r := mtCore(t)
		// An opportunistic gang (priority -1) takes both nodes, outside any VC.
		d := mtPlace(t, k, ag("opp", "a", -1, 2, 8))
		require.ElementsMatch(t, []string{"r0-n0", "r0-n1"}, []string{d.Pods[0].Node, d.Pods[1].Node})
		require.Equal(t, []string{"opp:e0->Allocated"}, r.take())
		pd := mtPreempt(t, k, ag("g", "a", 0, 1, 8), "opp")
		require.Equal(t, []string{"g:e1->Preempting", "opp:e6->Being preempted"}, r.take())
		st, ok := k.AffinityGroupStatus("g")
		require.True(t, ok)
		node := st.Pods[0].Node
		require.NotEmpty(t, node, "%+v", pd)
		mtRequireState(t, k, "opp", AGBeingPreempted)
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("opp", "g"): 8})
		mtRequireLeaves(t, k, mtOtherNode(node), map[mtLeaf]int{mtUsed("opp"): 8})
		mustCheck(t, k)
	})
}

// e2: all the preemptor's cells Reserved -> Allocated; Reserved -> Used (cell e8 (ii)).
func TestAGEvent_e2(t *testing.T) {
	k, r := mtCore(t)
	d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
	node := d.Pods[0].Node
	high := ag("high", "a", 10, 1, 8)
	mtPreempt(t, k, high, "low")
	r.take()

	// Not yet: a cell is still Reserving. The preemptor keeps waiting.
	w, err := k.Schedule(high)
	require.NoError(t, err)
	require.Equal(t, Wait, w.Kind)
	require.Equal(t, AGPreempting, w.State)
	require.Equal(t, []string{"low"}, w.Victims)
	require.Empty(t, r.take())

	res := deleteAllPods(t, k, "low")
	require.True(t, res.GroupDeleted)
	require.Equal(t, []string{"high"}, res.ReadyPreemptors)
	require.Zero(t, res.FreedLeaves, "every cell went Reserved for the preemptor")
	require.Equal(t, []string{"low:e4->Deleted"}, r.take())
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserved("high"): 8})
	mustCheck(t, k)

	p, err := k.Schedule(high)
	require.NoError(t, err)
	require.Equal(t, Placed, p.Kind, p.Reason)
	require.Equal(t, AGAllocated, p.State)
	require.Equal(t, node, p.Pods[0].Node)
	require.Equal(t, []string{"high:e2->Allocated"}, r.take())
	mtRequireState(t, k, "high", AGAllocated)
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("high"): 8})
	mustCheck(t, k)
}

// e3: all pods of an Allocated AG deleted -> Deleted; Used -> Free (cell e1).
func TestAGEvent_e3(t *testing.T) {
	k, r := mtCore(t)
	d := mtPlace(t, k, ag("low", "a", 0, 2, 4))
	node := d.Pods[0].Node
	r.take()

	// One pod of two gone: the condition does not hold yet.
	res, err := k.DeletePod("low", d.Group+"-0")
	require.NoError(t, err)
	require.False(t, res.GroupDeleted)
	require.Empty(t, r.take())
	mtRequireState(t, k, "low", AGAllocated)
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("low"): 8})
	mustCheck(t, k)

	res, err = k.DeletePod("low", d.Group+"-1")
	require.NoError(t, err)
	require.True(t, res.GroupDeleted)
	require.Equal(t, int32(8), res.FreedLeaves)
	require.Equal(t, []string{"low:e3->Deleted"}, r.take())
	mtRequireGone(t, k, "low")
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtFree: 8})
	mustCheck(t, k)
}

// e4: all pods of a Being preempted AG deleted -> Deleted; its cells Used ->
// Free (cell e1), its Reserving cells end Reserved by the preemptor (cell e9).
func TestAGEvent_e4(t *testing.T) {
	k, r := mtCore(t)
	d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
	node := d.Pods[0].Node
	mtPreempt(t, k, ag("high", "a", 10, 1, 4), "low")
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "high"): 4, mtUsed("low"): 4})
	r.take()

	res := deleteAllPods(t, k, "low")
	require.True(t, res.GroupDeleted)
	require.Equal(t, []string{"high"}, res.ReadyPreemptors)
	require.Equal(t, int32(4), res.FreedLeaves, "half Reserved for the preemptor, half Free")
	require.Equal(t, []string{"low:e4->Deleted"}, r.take())
	mtRequireGone(t, k, "low")
	mtRequireState(t, k, "high", AGPreempting)
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserved("high"): 4, mtFree: 4})
	mustCheck(t, k)

	// The same through DeleteAffinityGroup, whatever the victim's pods.
	d = mtPlace(t, k, ag("low2", "a", 0, 1, 4))
	require.Equal(t, node, d.Pods[0].Node)
	mtPreempt(t, k, ag("high2", "a", 20, 1, 8), "low2")
	r.take()
	res, err := k.DeleteAffinityGroup("low2")
	require.NoError(t, err)
	require.True(t, res.GroupDeleted)
	require.Equal(t, []string{"low2:e4->Deleted"}, r.take())
	mtRequireGone(t, k, "low2")
	mustCheck(t, k)
}

// e5: a cell of a Preempting AG is overwritten by a higher AG (cell e3/e6)
// -> Pending; its other Reserving cells go back Used by the victim (cell e4).
func TestAGEvent_e5(t *testing.T) {
	k, r := mtCore(t)
	d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
	node := d.Pods[0].Node
	mtPreempt(t, k, ag("mid", "a", 5, 1, 8), "low")
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "mid"): 8})
	r.take()

	mtPreempt(t, k, ag("high", "a", 10, 1, 4), "low")
	// Overwriting Reserving cells is cell e3: no AG e6 for the victim.
	require.Equal(t, []string{"high:e1->Preempting", "mid:e5->Pending"}, r.take())
	mtRequireState(t, k, "mid", AGPending)
	st, _ := k.AffinityGroupStatus("mid")
	require.Nil(t, st.Pods, "a Pending group holds no cells")
	mtRequireState(t, k, "low", AGBeingPreempted)
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "high"): 4, mtUsed("low"): 4})
	mustCheck(t, k)

	// Pending again, mid is scheduled like a new group: it cannot take the
	// cells of the higher preemptor, so it waits.
	mtWait(t, k, ag("mid", "a", 5, 1, 8))
	require.Empty(t, r.take())
	mustCheck(t, k)
}

// e6: a cell of an Allocated AG goes Used -> Reserving (cell e2) -> Being
// preempted. Operation: none (the victim keeps its cells and pods).
func TestAGEvent_e6(t *testing.T) {
	k, r := mtCore(t)
	d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
	node := d.Pods[0].Node
	before, _ := k.AffinityGroupStatus("low")
	r.take()
	mtPreempt(t, k, ag("high", "a", 10, 1, 8), "low")
	raw := r.takeRaw()
	require.Len(t, raw, 9)
	require.Equal(t, mtTransition{"low", AGe6, AGBeingPreempted}, raw[1])
	mtRequireState(t, k, "low", AGBeingPreempted)
	after, _ := k.AffinityGroupStatus("low")
	require.Equal(t, before.Pods, after.Pods, "e6 changes nothing of the victim's placement or pods")
	// Its pods are still bound to it.
	pp, err := k.AssignPod("low", "low-0", 8)
	require.NoError(t, err)
	require.Equal(t, node, pp.Node)
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "high"): 8})
	mustCheck(t, k)
}

// e7: a Preempting AG deleted -> Deleted; its Reserving cells go back Used by
// the victim (cell e4), its Reserved cells Free (cell e7).
func TestAGEvent_e7(t *testing.T) {
	k, r := mtCore(t)
	d := mtPlace(t, k, ag("low", "a", 0, 1, 4))
	node := d.Pods[0].Node
	mtPreempt(t, k, ag("high", "a", 10, 1, 8), "low")
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "high"): 4, mtReserved("high"): 4})
	r.take()

	res, err := k.DeleteAffinityGroup("high")
	require.NoError(t, err)
	require.True(t, res.GroupDeleted)
	require.Equal(t, int32(4), res.FreedLeaves, "its Reserved cells go Free; the Reserving ones go back to the victim")
	// The victim has no preemptor left: extension x2 gives it back.
	require.Equal(t, []string{"low:x2->Allocated", "high:e7->Deleted"}, r.take())
	mtRequireGone(t, k, "high")
	mtRequireState(t, k, "low", AGAllocated)
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("low"): 4, mtFree: 4})
	mustCheck(t, k)
}

// e8: a Pending AG deleted -> Deleted. Operation: none.
func TestAGEvent_e8(t *testing.T) {
	k, r := mtCore(t)
	d := mtPlace(t, k, ag("blocker", "a", 10, 1, 8))
	node := d.Pods[0].Node
	mtWait(t, k, ag("pend", "a", 5, 1, 8))
	mtRequireState(t, k, "pend", AGPending)
	r.take()
	before := mtLeaves(k, node)

	res, err := k.DeleteAffinityGroup("pend")
	require.NoError(t, err)
	require.True(t, res.GroupDeleted)
	require.Equal(t, []string{"pend:e8->Deleted"}, r.take())
	mtRequireGone(t, k, "pend")
	require.Equal(t, before, mtLeaves(k, node), "e8 changes no cell")
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("blocker"): 8})
	mustCheck(t, k)
}

// ec: restart. Only Pending, Allocated and Deleted are persistent: a Being
// preempted group comes back Allocated, a Preempting group Pending (it is
// scheduled again as new), a Deleted group not at all.
func TestAGEvent_ec(t *testing.T) {
	// The recovery table itself.
	for s, want := range map[AGState]AGState{
		AGPending: AGPending, AGPreempting: AGPending, AGAllocated: AGAllocated,
		AGBeingPreempted: AGAllocated, AGDeleted: AGDeleted,
	} {
		got, err := agNext(s, AGec, "x")
		require.NoError(t, err)
		require.Equal(t, want, got, "ec from %s", s)
		require.True(t, got.Persistent(), "ec from %s leads to volatile %s", s, got)
		require.Equal(t, s != AGPreempting && s != AGBeingPreempted, s.Persistent(), "%s", s)
	}

	cfg := clusterConfig(1, 2, 0)
	vc := vcSpec("a", "V100-NODE", 2)
	k1 := newHealthyCore(t, cfg)
	_, err := k1.SetVirtualCluster(vc)
	require.NoError(t, err)
	specs := map[string]AffinityGroupSpec{
		"gone": ag("gone", "a", 0, 1, 8),
		"g1":   ag("g1", "a", 0, 1, 8),
		"g2":   ag("g2", "a", 0, 1, 8),
		"high": ag("high", "a", 10, 1, 8),
		"pend": ag("pend", "a", 0, 1, 8),
	}
	mtPlace(t, k1, specs["gone"])
	deleteAllPods(t, k1, "gone") // Deleted
	mtPlace(t, k1, specs["g1"])
	mtPlace(t, k1, specs["g2"])
	d, err := k1.Schedule(specs["high"])
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Len(t, d.Victims, 1)
	victim := d.Victims[0]
	survivor := map[string]string{"g1": "g2", "g2": "g1"}[victim]
	mtWait(t, k1, specs["pend"])
	want := map[string]AGState{victim: AGBeingPreempted, survivor: AGAllocated, "high": AGPreempting, "pend": AGPending}
	snap := k1.Snapshot()
	got := map[string]AGState{}
	for _, g := range snap.AffinityGroups {
		got[g.Name] = g.State
	}
	require.Equal(t, want, got)
	mustCheck(t, k1)

	// Restart: a fresh core learns the VC and the running pods only.
	k2 := newHealthyCore(t, cfg)
	_, err = k2.SetVirtualCluster(vc)
	require.NoError(t, err)
	r := mtRecord(k2)
	for _, g := range snap.AffinityGroups {
		var pods []RecoveredPod
		for _, p := range g.Pods {
			if p.PodKey != "" {
				pods = append(pods, RecoveredPod{PodKey: p.PodKey, Node: p.Node, LeafCellIndices: p.LeafCellIndices})
			}
		}
		if len(pods) == 0 {
			require.Contains(t, []AGState{AGPending, AGPreempting}, g.State, "%s has no running pod", g.Name)
			continue
		}
		res, err := k2.RecoverAffinityGroup(specs[g.Name], pods)
		require.NoError(t, err)
		require.False(t, res.Downgraded, res.Reason)
		require.Equal(t, []string{g.Name + ":e0->Allocated", g.Name + ":ec->Allocated"}, r.take())
		st, ok := k2.AffinityGroupStatus(g.Name)
		require.True(t, ok)
		require.Equal(t, agRecoveryState[g.State], st.State)
		require.Equal(t, g.Pods, st.Pods, "%s keeps its cells and pods", g.Name)
		mustCheck(t, k2)
	}
	snap2 := k2.Snapshot()
	got = map[string]AGState{}
	for _, g := range snap2.AffinityGroups {
		got[g.Name] = g.State
	}
	// Being preempted came back Allocated; the Preempting, Pending and
	// Deleted groups are not known until scheduled again.
	require.Equal(t, map[string]AGState{victim: AGAllocated, survivor: AGAllocated}, got)
	for _, l := range snap2.LeafCells {
		require.NotEqual(t, CellReserving, l.State, "no reservation survives a restart: %+v", l)
		require.NotEqual(t, CellReserved, l.State, "no reservation survives a restart: %+v", l)
	}
	mtRequireGone(t, k2, "gone")

	// The Preempting group starts over from Pending and preempts again.
	mtPreempt(t, k2, specs["high"], victim)
	require.Equal(t, []string{"high:e1->Preempting", victim + ":e6->Being preempted"}, r.take())
	mtWait(t, k2, specs["pend"])
	mtRequireState(t, k2, "pend", AGPending)
	mustCheck(t, k2)
}

// --- cell events -----------------------------------------------------------

// cell e0: AG e0 -> Free -> Used, allocated to the AG.
func TestCellEvent_e0(t *testing.T) {
	k, r := mtCore(t)
	d := mtPlace(t, k, ag("g", "a", 0, 1, 4))
	node := d.Pods[0].Node
	require.Equal(t, []string{"g:e0->Allocated"}, r.take())
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("g"): 4, mtFree: 4})
	for _, l := range k.Snapshot().LeafCells {
		if l.UsingGroup == "g" {
			require.Equal(t, "a", l.VirtualCluster, "guaranteed leaf %s lies in its VC's cells", l.ID)
			require.Equal(t, int32(0), l.Priority)
		}
	}
	mustCheck(t, k)
}

// cell e1: the Allocated AG on the cell deleted (AG e3) -> Free, released.
func TestCellEvent_e1(t *testing.T) {
	k, r := mtCore(t)
	d := mtPlace(t, k, ag("g", "a", 0, 1, 8))
	node := d.Pods[0].Node
	r.take()
	res := deleteAllPods(t, k, "g")
	require.True(t, res.GroupDeleted)
	require.Equal(t, []string{"g:e3->Deleted"}, r.take())
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtFree: 8})
	for _, l := range k.Snapshot().LeafCells {
		require.Equal(t, int32(-2), l.Priority, "released leaf %s", l.ID)
	}
	// Released: the cells can be allocated again.
	mtPlace(t, k, ag("g2", "a", 0, 1, 8))
	mustCheck(t, k)
}

// cell e2: another AG's e1 -> Used -> Reserving; the Allocated AG on it goes
// Being preempted (AG e6).
func TestCellEvent_e2(t *testing.T) {
	k, r := mtCore(t)
	d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
	node := d.Pods[0].Node
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("low"): 8})
	r.take()
	mtPreempt(t, k, ag("high", "a", 10, 1, 8), "low")
	require.Equal(t, []string{"high:e1->Preempting", "low:e6->Being preempted"}, r.take())
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "high"): 8})
	for _, l := range k.Snapshot().LeafCells {
		if l.Node == node {
			require.Equal(t, int32(0), l.Priority, "a Reserving leaf reports its user's priority")
		}
	}
	mustCheck(t, k)
}

// cell e3: a higher AG's e1 overwrites a Reserving cell: the old preemptor
// goes Pending (AG e5), the cell is Reserving for the new one, and the victim
// stays Being preempted.
func TestCellEvent_e3(t *testing.T) {
	k, r := mtCore(t)
	d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
	node := d.Pods[0].Node
	mtPreempt(t, k, ag("mid", "a", 5, 1, 8), "low")
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "mid"): 8})
	r.take()

	mtPreempt(t, k, ag("high", "a", 10, 1, 8), "low")
	raw := r.takeRaw()
	// Overwriting Reserving cells is cell e3: no AG e6 for the victim.
	require.Equal(t, []string{"high:e1->Preempting", "mid:e5->Pending"}, mtCollapse(raw))
	for _, x := range raw {
		require.NotEqual(t, AGx2, x.Event, "the victim stays Being preempted throughout: %v", raw)
	}
	mtRequireState(t, k, "mid", AGPending)
	mtRequireState(t, k, "low", AGBeingPreempted)
	mtRequireState(t, k, "high", AGPreempting)
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "high"): 8})
	mustCheck(t, k)
}

// cell e3 and e6 in one AG e1: the new preemptor overwrites a preemptor
// that holds both Reserved and Reserving cells. Whichever cell it meets first,
// the seed overwrites every cell (e3 on the Reserving ones, e6 on the
// Reserved ones): the victim stays Being preempted throughout, it is never
// given back (extension x2, preemption cancelled) only to be preempted again
// (AG e6) within the same operation.
func TestCellEvent_e3e6Mixed(t *testing.T) {
	for _, reservedFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("reserved cell first=%v", reservedFirst), func(t *testing.T) {
			k, r := mtCore(t)
			var node string
			if reservedFirst {
				// low lands on the second socket, so the free first socket
				// is what mid reserves and what high meets first.
				tmp := mtPlace(t, k, ag("tmp", "a", 0, 1, 4))
				d := mtPlace(t, k, ag("low", "a", 0, 1, 4))
				require.NotEqual(t, tmp.Pods[0].LeafCellIndices, d.Pods[0].LeafCellIndices)
				deleteAllPods(t, k, "tmp")
				node = d.Pods[0].Node
			} else {
				node = mtPlace(t, k, ag("low", "a", 0, 1, 4)).Pods[0].Node
			}
			mtPreempt(t, k, ag("mid", "a", 5, 1, 8), "low")
			mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "mid"): 4, mtReserved("mid"): 4})
			r.take()

			mtPreempt(t, k, ag("high", "a", 10, 1, 8), "low")
			raw := r.takeRaw()
			require.Equal(t, mtTransition{"high", AGe1, AGPreempting}, raw[0], "%v", raw)
			var others []string
			for _, x := range raw[1:] {
				if x.Group == "low" {
					// Read literally, the seed lets mid's e5 give its other
					// Reserving cells back (cell e4) and high take them again
					// (cell e2, AG e6 on a group already Being preempted):
					// allowed. Giving low back (x2) is not: it never stopped
					// being preempted.
					require.Equal(t, mtTransition{"low", AGe6, AGBeingPreempted}, x,
						"the victim low stays Being preempted throughout: %v", raw)
					continue
				}
				others = append(others, x.String())
			}
			require.Equal(t, []string{"mid:e5->Pending"}, others)
			mtRequireState(t, k, "low", AGBeingPreempted)
			mtRequireState(t, k, "mid", AGPending)
			mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "high"): 4, mtReserved("high"): 4})
			mustCheck(t, k)
		})
	}
}

func mtCollapse(raw []mtTransition) []string {
	r := &mtRecorder{log: raw}
	return r.take()
}

// cell e4: the Preempting AG on a Reserving cell goes Pending (AG e5) or
// Deleted (AG e7) -> Used, allocated back to the victim.
func TestCellEvent_e4(t *testing.T) {
	t.Run("preemptor deleted (AG e7)", func(t *testing.T) {
		k, r := mtCore(t)
		d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
		node := d.Pods[0].Node
		mtPreempt(t, k, ag("high", "a", 10, 1, 8), "low")
		r.take()
		_, err := k.DeleteAffinityGroup("high")
		require.NoError(t, err)
		require.Equal(t, []string{"low:x2->Allocated", "high:e7->Deleted"}, r.take())
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("low"): 8})
		mustCheck(t, k)
	})
	t.Run("preemptor to Pending (AG e5)", func(t *testing.T) {
		k, r := mtCore(t)
		d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
		node := d.Pods[0].Node
		mtPreempt(t, k, ag("mid", "a", 5, 1, 8), "low")
		r.take()
		// high overwrites one of mid's cells and takes 4 in all: mid's other
		// Reserving cells go back to low.
		mtPreempt(t, k, ag("high", "a", 10, 1, 4), "low")
		// Overwriting Reserving cells is cell e3: no AG e6 for the victim.
		require.Equal(t, []string{"high:e1->Preempting", "mid:e5->Pending"}, r.take())
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "high"): 4, mtUsed("low"): 4})
		mustCheck(t, k)
	})
}

// cell e5: AG e1 -> Free -> Reserved for the Preempting AG.
func TestCellEvent_e5(t *testing.T) {
	k, r := mtCore(t)
	d := mtPlace(t, k, ag("low", "a", 0, 1, 4))
	node := d.Pods[0].Node
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("low"): 4, mtFree: 4})
	r.take()
	mtPreempt(t, k, ag("high", "a", 10, 1, 8), "low")
	require.Equal(t, []string{"high:e1->Preempting", "low:e6->Being preempted"}, r.take())
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "high"): 4, mtReserved("high"): 4})
	for _, l := range k.Snapshot().LeafCells {
		if l.Node == node && l.State == CellReserved {
			require.Equal(t, int32(10), l.Priority, "a Reserved leaf reports its preemptor's priority")
		}
	}
	mustCheck(t, k)
}

// cell e6: a higher AG's e1 overwrites a Reserved cell: the old preemptor
// goes Pending (AG e5), the cell is Reserved for the new one. The new AG must
// preempt elsewhere too (else it is AG e0 and cell e8 (i)), so the VC owns
// both nodes: one Reserved by mid, the other Used by l2.
func TestCellEvent_e6(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 2, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	r := mtRecord(k)
	t.Cleanup(func() { mustCheck(t, k) })
	d1 := mtPlace(t, k, ag("l1", "a", 0, 1, 8))
	d2 := mtPlace(t, k, ag("l2", "a", 0, 1, 8))
	require.NotEqual(t, d1.Pods[0].Node, d2.Pods[0].Node)
	d, err := k.Schedule(ag("mid", "a", 5, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Len(t, d.Victims, 1)
	victim := d.Victims[0]
	other := map[string]string{"l1": "l2", "l2": "l1"}[victim]
	nodeOf := map[string]string{"l1": d1.Pods[0].Node, "l2": d2.Pods[0].Node}
	deleteAllPods(t, k, victim)
	reservedNode, usedNode := nodeOf[victim], nodeOf[other]
	mtRequireLeaves(t, k, reservedNode, map[mtLeaf]int{mtReserved("mid"): 8})
	mtRequireLeaves(t, k, usedNode, map[mtLeaf]int{mtUsed(other): 8})
	mtRequireState(t, k, "mid", AGPreempting)
	r.take()

	mtPreempt(t, k, ag("high", "a", 10, 2, 8), other)
	got := r.take()
	require.Equal(t, "high:e1->Preempting", got[0])
	require.ElementsMatch(t, []string{"mid:e5->Pending", other + ":e6->Being preempted"}, got[1:])
	mtRequireState(t, k, "mid", AGPending)
	mtRequireState(t, k, other, AGBeingPreempted)
	mtRequireLeaves(t, k, reservedNode, map[mtLeaf]int{mtReserved("high"): 8})
	mtRequireLeaves(t, k, usedNode, map[mtLeaf]int{mtReserving(other, "high"): 8})
	mustCheck(t, k)
}

// cell e7: the Preempting AG on a Reserved cell goes Pending (AG e5) or
// Deleted (AG e7) -> Free, released.
func TestCellEvent_e7(t *testing.T) {
	t.Run("preemptor deleted (AG e7)", func(t *testing.T) {
		k, r := mtCore(t)
		d := mtPlace(t, k, ag("low", "a", 0, 1, 4))
		node := d.Pods[0].Node
		mtPreempt(t, k, ag("high", "a", 10, 1, 8), "low")
		r.take()
		_, err := k.DeleteAffinityGroup("high")
		require.NoError(t, err)
		require.Equal(t, []string{"low:x2->Allocated", "high:e7->Deleted"}, r.take())
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("low"): 4, mtFree: 4})
		mustCheck(t, k)
	})
	t.Run("preemptor to Pending (AG e5)", func(t *testing.T) {
		k, r := mtCore(t)
		d := mtPlace(t, k, ag("low", "a", 0, 1, 4))
		node := d.Pods[0].Node
		mtPreempt(t, k, ag("mid", "a", 5, 1, 8), "low")
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "mid"): 4, mtReserved("mid"): 4})
		r.take()
		// high takes 2 of mid's Reserved cells (AG e0, cell e8 (i)): mid
		// goes Pending and its 2 other Reserved cells are released.
		p := mtPlace(t, k, ag("high", "a", 10, 1, 2))
		require.Equal(t, node, p.Pods[0].Node)
		require.Equal(t, []string{"low:x2->Allocated", "mid:e5->Pending", "high:e0->Allocated"}, r.take())
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("low"): 4, mtUsed("high"): 2, mtFree: 2})
		mustCheck(t, k)
	})
}

// cell e8: Reserved -> Used. (i) another AG's e0 takes a cell Reserved by a
// lower Preempting AG, which goes Pending (AG e5); (ii) the Preempting AG's
// own e2.
func TestCellEvent_e8(t *testing.T) {
	t.Run("(i) AG e0 of a higher group", func(t *testing.T) {
		k, r := mtCore(t)
		d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
		node := d.Pods[0].Node
		mtPreempt(t, k, ag("mid", "a", 5, 1, 8), "low")
		deleteAllPods(t, k, "low")
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserved("mid"): 8})
		r.take()

		p := mtPlace(t, k, ag("high", "a", 10, 1, 8))
		require.Equal(t, node, p.Pods[0].Node)
		require.Equal(t, []string{"mid:e5->Pending", "high:e0->Allocated"}, r.take())
		mtRequireState(t, k, "mid", AGPending)
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("high"): 8})
		mustCheck(t, k)
	})
	t.Run("(i) a lower group cannot take it", func(t *testing.T) {
		k, r := mtCore(t)
		d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
		node := d.Pods[0].Node
		mtPreempt(t, k, ag("mid", "a", 5, 1, 8), "low")
		deleteAllPods(t, k, "low")
		r.take()
		mtWait(t, k, ag("low2", "a", 3, 1, 8))
		mtWait(t, k, ag("same", "a", 5, 1, 8))
		require.Empty(t, r.take())
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserved("mid"): 8})
		mustCheck(t, k)
	})
	t.Run("(ii) AG e2 of the preemptor", func(t *testing.T) {
		k, r := mtCore(t)
		d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
		node := d.Pods[0].Node
		high := ag("high", "a", 10, 1, 8)
		mtPreempt(t, k, high, "low")
		deleteAllPods(t, k, "low")
		r.take()
		p := mtPlace(t, k, high)
		require.Equal(t, node, p.Pods[0].Node)
		require.Equal(t, []string{"high:e2->Allocated"}, r.take())
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("high"): 8})
		mustCheck(t, k)
	})
}

// cell e9: the victim's pod on a Reserving cell deleted -> Reserved (by the
// preemptor). No AG transition until the victim's last pod is gone (AG e4).
func TestCellEvent_e9(t *testing.T) {
	k, r := mtCore(t)
	d := mtPlace(t, k, ag("low", "a", 0, 2, 4))
	node := d.Pods[0].Node
	require.Equal(t, node, d.Pods[1].Node)
	mtPreempt(t, k, ag("high", "a", 10, 1, 8), "low")
	r.take()

	st, _ := k.AffinityGroupStatus("low")
	first := st.Pods[0]
	res, err := k.DeletePod("low", first.PodKey)
	require.NoError(t, err)
	require.False(t, res.GroupDeleted)
	require.Empty(t, res.ReadyPreemptors)
	require.Empty(t, r.take(), "cell e9 fires no AG event")
	mtRequireState(t, k, "low", AGBeingPreempted)
	mtRequireState(t, k, "high", AGPreempting)
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserved("high"): 4, mtReserving("low", "high"): 4})
	gone := map[int32]bool{}
	for _, i := range first.LeafCellIndices {
		gone[i] = true
	}
	for _, l := range k.Snapshot().LeafCells {
		if l.Node == node {
			require.Equal(t, gone[l.Index], l.State == CellReserved, "leaf %s: %s", l.ID, l.State)
		}
	}
	mustCheck(t, k)

	res, err = k.DeletePod("low", st.Pods[1].PodKey)
	require.NoError(t, err)
	require.True(t, res.GroupDeleted)
	require.Equal(t, []string{"high"}, res.ReadyPreemptors)
	require.Equal(t, []string{"low:e4->Deleted"}, r.take())
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserved("high"): 8})
	mustCheck(t, k)
}

// --- extensions ------------------------------------------------------------

// x1 (rollback): Allocated -> Pending, its cells Used -> Free.
func TestExtension_x1(t *testing.T) {
	k, r := mtCore(t)
	spec := ag("g", "a", 0, 2, 4)
	d, err := k.Schedule(spec)
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind)
	node := d.Pods[0].Node
	// Only one member of the gang arrived before the Permit timeout.
	_, err = k.AssignPod("g", "g-0", 4)
	require.NoError(t, err)
	r.take()

	require.NoError(t, k.RollbackAffinityGroup("g"))
	require.Equal(t, []string{"g:x1->Pending"}, r.take())
	st, ok := k.AffinityGroupStatus("g")
	require.True(t, ok)
	require.Equal(t, AGPending, st.State)
	require.Nil(t, st.Pods)
	mtRequireLeaves(t, k, node, map[mtLeaf]int{mtFree: 8})
	_, err = k.AssignPod("g", "g-1", 4)
	require.Error(t, err, "a Pending group takes no pod")
	mustCheck(t, k)

	// Pending again, it is placed again (AG e0).
	mtPlace(t, k, spec)
	require.Equal(t, []string{"g:e0->Allocated"}, r.take())
	mustCheck(t, k)
}

// x2 (preemption cancelled): Being preempted -> Allocated when no preemptor
// holds a cell of the victim any more.
func TestExtension_x2(t *testing.T) {
	t.Run("only preemptor deleted", func(t *testing.T) {
		k, r := mtCore(t)
		d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
		node := d.Pods[0].Node
		mtPreempt(t, k, ag("high", "a", 10, 1, 4), "low")
		r.take()
		_, err := k.DeleteAffinityGroup("high")
		require.NoError(t, err)
		require.Equal(t, []string{"low:x2->Allocated", "high:e7->Deleted"}, r.take())
		mtRequireState(t, k, "low", AGAllocated)
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("low"): 8})
		// Allocated again, it can be preempted again, and deleted as Allocated.
		mtPreempt(t, k, ag("high2", "a", 10, 1, 8), "low")
		require.Equal(t, []string{"high2:e1->Preempting", "low:e6->Being preempted"}, r.take())
		mustCheck(t, k)
	})
	t.Run("only preemptor overwritten", func(t *testing.T) {
		k, r := mtCore(t)
		d := mtPlace(t, k, ag("low", "a", 0, 1, 4))
		node := d.Pods[0].Node
		mtPreempt(t, k, ag("mid", "a", 5, 1, 8), "low")
		r.take()
		mtPlace(t, k, ag("high", "a", 10, 1, 4)) // takes mid's Reserved cells only
		require.Equal(t, []string{"low:x2->Allocated", "mid:e5->Pending", "high:e0->Allocated"}, r.take())
		mtRequireState(t, k, "low", AGAllocated)
		mtRequireState(t, k, "mid", AGPending)
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("low"): 4, mtUsed("high"): 4})
		mustCheck(t, k)
	})
	t.Run("one of two preemptors deleted", func(t *testing.T) {
		k, r := mtCore(t)
		d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
		node := d.Pods[0].Node
		mtPreempt(t, k, ag("p1", "a", 10, 1, 4), "low")
		mtPreempt(t, k, ag("p2", "a", 5, 1, 4), "low") // cannot take p1's cells
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "p1"): 4, mtReserving("low", "p2"): 4})
		r.take()
		_, err := k.DeleteAffinityGroup("p2")
		require.NoError(t, err)
		require.Equal(t, []string{"p2:e7->Deleted"}, r.take(), "low is still preempted by p1")
		mtRequireState(t, k, "low", AGBeingPreempted)
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtReserving("low", "p1"): 4, mtUsed("low"): 4})
		_, err = k.DeleteAffinityGroup("p1")
		require.NoError(t, err)
		require.Equal(t, []string{"low:x2->Allocated", "p1:e7->Deleted"}, r.take())
		mtRequireLeaves(t, k, node, map[mtLeaf]int{mtUsed("low"): 8})
		mustCheck(t, k)
	})
}

// x2 on a victim that already lost a pod: a pod of the victim was deleted
// (cell e9: its cells went Reserved by the preemptor, and are no longer the
// victim's), then the only preemptor is deleted (AG e7: those Reserved cells
// go Free, cell e7). The seed defines Allocated as "the AG is fully allocated
// cells": if the victim is given back as Allocated, every pod of it must have
// its cells again, and Schedule must not answer Placed with a pod that has no
// node.
func TestExtension_x2VictimWithDeletedPod(t *testing.T) {
	k, r := mtCore(t)
	spec := ag("low", "a", 0, 2, 4)
	mtPlace(t, k, spec)
	mtPreempt(t, k, ag("high", "a", 10, 1, 8), "low")
	st, _ := k.AffinityGroupStatus("low")
	_, err := k.DeletePod("low", st.Pods[0].PodKey) // cell e9 on its 4 cells
	require.NoError(t, err)
	r.take()
	_, err = k.DeleteAffinityGroup("high")
	require.NoError(t, err)
	require.Contains(t, r.take(), "high:e7->Deleted")
	mustCheck(t, k)

	st, ok := k.AffinityGroupStatus("low")
	require.True(t, ok)
	if st.State == AGAllocated {
		for i, p := range st.Pods {
			require.Len(t, p.LeafCellIndices, int(p.LeafCellNumber),
				"pod %d of the Allocated group low has no cells: %+v", i, st)
			require.NotEmpty(t, p.Node, "pod %d of the Allocated group low: %+v", i, st)
		}
		d, err := k.Schedule(spec)
		require.NoError(t, err)
		if d.Kind == Placed {
			for i, p := range d.Pods {
				require.NotEmpty(t, p.Node, "Placed decision with pod %d on no node: %+v", i, d)
			}
		}
	}
	mustCheck(t, k)
}

// --- common life cycles ----------------------------------------------------

// Pending -> Allocated -> Deleted; cells Free -> Used -> Free.
func TestAGLifeCycle_NoPreemption(t *testing.T) {
	// Nodes start Unknown: the group waits Pending until they are healthy.
	k, err := New(clusterConfig(1, 2, 0))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	r := mtRecord(k)
	t.Cleanup(func() { mustCheck(t, k) })
	hist := mtHistory{}
	var states []AGState
	step := func(group string) {
		t.Helper()
		hist.add(k, "r0-n0")
		hist.add(k, "r0-n1")
		if st, ok := k.AffinityGroupStatus(group); ok {
			states = append(states, st.State)
		}
		for _, x := range r.takeRaw() {
			require.Equal(t, group, x.Group)
			if len(states) == 0 || states[len(states)-1] != x.To {
				states = append(states, x.To)
			}
		}
		mustCheck(t, k)
	}
	spec := ag("g", "a", 0, 1, 8)
	step("g")
	mtWait(t, k, spec)
	step("g")
	for _, n := range []string{"r0-n0", "r0-n1"} {
		require.NoError(t, k.SetNodeHealth(n, NodeHealthy))
	}
	d := mtPlace(t, k, spec)
	node := d.Pods[0].Node
	step("g")
	res := deleteAllPods(t, k, "g")
	require.True(t, res.GroupDeleted)
	mtRequireGone(t, k, "g")
	step("g")

	require.Equal(t, []AGState{AGPending, AGAllocated, AGDeleted}, states)
	onNode := mtLeaves(k, node)
	require.Len(t, hist, 16)
	for id, seq := range hist {
		if mtHasKey(onNode, id) {
			require.Equal(t, []string{"Free", "Used(g)", "Free"}, seq, "leaf %s", id)
		} else {
			require.Equal(t, []string{"Free"}, seq, "leaf %s of the other node", id)
		}
	}
}

// Pending -> Preempting -> Allocated -> Being preempted -> Deleted; cells
// Free -> Used -> Reserving -> Reserved -> Used -> Free.
func TestAGLifeCycle_Preemption(t *testing.T) {
	k, r := mtCore(t)
	hist := mtHistory{}
	var states []AGState // of the group p
	var events []string  // of the group p
	step := func() {
		t.Helper()
		hist.add(k, "r0-n0")
		hist.add(k, "r0-n1")
		if st, ok := k.AffinityGroupStatus("p"); ok && (len(states) == 0 || states[len(states)-1] != st.State) {
			states = append(states, st.State)
		}
		for _, x := range r.takeRaw() {
			if x.Group != "p" {
				continue
			}
			if len(states) == 0 || states[len(states)-1] != x.To {
				states = append(states, x.To)
			}
			if len(events) == 0 || events[len(events)-1] != string(x.Event) {
				events = append(events, string(x.Event))
			}
		}
		mustCheck(t, k)
	}
	step()
	d := mtPlace(t, k, ag("low", "a", 0, 1, 8)) // Free -> Used(low)
	node := d.Pods[0].Node
	step()

	// p is Pending first: while the node is not healthy it cannot even
	// preempt.
	pSpec := ag("p", "a", 5, 1, 8)
	require.NoError(t, k.SetNodeHealth(node, NodeUnknown))
	mtWait(t, k, pSpec)
	step()
	require.NoError(t, k.SetNodeHealth(node, NodeHealthy))

	mtPreempt(t, k, pSpec, "low") // p: Pending -> Preempting (e1); Used -> Reserving (e2)
	step()
	deleteAllPods(t, k, "low") // Reserving -> Reserved (e9)
	step()
	mtPlace(t, k, pSpec) // p: Preempting -> Allocated (e2); Reserved -> Used (e8)
	step()
	mtPreempt(t, k, ag("high", "a", 10, 1, 4), "p") // p: Allocated -> Being preempted (e6)
	step()
	res := deleteAllPods(t, k, "p") // p: Being preempted -> Deleted (e4); Used -> Free (e1)
	require.True(t, res.GroupDeleted)
	require.Equal(t, []string{"high"}, res.ReadyPreemptors)
	step()
	mtRequireGone(t, k, "p")

	require.Equal(t, []AGState{AGPending, AGPreempting, AGAllocated, AGBeingPreempted, AGDeleted}, states)
	require.Equal(t, []string{"e1", "e2", "e6", "e4"}, events)

	seed := []string{"Free", "Used(low)", "Reserving(low>p)", "Reserved(p)", "Used(p)", "Free"}
	taken := []string{"Free", "Used(low)", "Reserving(low>p)", "Reserved(p)", "Used(p)", "Reserving(p>high)", "Reserved(high)"}
	count := map[string]int{}
	onNode := mtLeaves(k, node)
	for id, seq := range hist {
		switch {
		case !mtHasKey(onNode, id):
			require.Equal(t, []string{"Free"}, seq, "leaf %s of the other node", id)
		case len(seq) == len(seed):
			require.Equal(t, seed, seq, "leaf %s", id)
			count["seed"]++
		default:
			require.Equal(t, taken, seq, "leaf %s", id)
			count["taken"]++
		}
	}
	require.Equal(t, map[string]int{"seed": 4, "taken": 4}, count)
}

// --- illegal transitions ---------------------------------------------------

// An event that does not fire in the current state is a TransitionError value,
// never a panic, and changes nothing.
func TestIllegalTransitions(t *testing.T) {
	states := []AGState{AGPending, AGPreempting, AGAllocated, AGBeingPreempted, AGDeleted}
	// The legal AG transitions: the seed's, plus e6 again on a group already
	// Being preempted (a second cell of it), and the extensions x1, x2, x3.
	legal := map[AGEvent]map[AGState]AGState{
		AGe0: {AGPending: AGAllocated},
		AGe1: {AGPending: AGPreempting},
		AGe2: {AGPreempting: AGAllocated},
		AGe3: {AGAllocated: AGDeleted},
		AGe4: {AGBeingPreempted: AGDeleted},
		AGe5: {AGPreempting: AGPending},
		AGe6: {AGAllocated: AGBeingPreempted, AGBeingPreempted: AGBeingPreempted},
		AGe7: {AGPreempting: AGDeleted},
		AGe8: {AGPending: AGDeleted},
		AGx1: {AGAllocated: AGPending},
		AGx2: {AGBeingPreempted: AGAllocated},
		AGx3: {AGAllocated: AGAllocated},
		AGx4: {AGAllocated: AGAllocated},
		"zz": {},
	}
	t.Run("agNext", func(t *testing.T) {
		for ev, from := range legal {
			for _, s := range states {
				var got AGState
				var err error
				require.NotPanics(t, func() { got, err = agNext(s, ev, "g") })
				if to, ok := from[s]; ok {
					require.NoError(t, err, "%s in %s", ev, s)
					require.Equal(t, to, got, "%s in %s", ev, s)
					continue
				}
				var te *TransitionError
				require.True(t, errors.As(err, &te), "%s in %s: %v", ev, s, err)
				require.Equal(t, "affinity group", te.Machine)
				require.Equal(t, s.String(), te.State)
				require.Equal(t, string(ev), te.Event)
				require.Equal(t, s, got, "an illegal event leaves the state")
			}
		}
		// The table in machine.go has no other transition.
		for ev, tr := range agTransitions {
			for _, f := range tr.from {
				require.Equal(t, tr.to, legal[ev][f], "agTransitions %s from %s", ev, f)
			}
			require.Len(t, tr.from, len(legal[ev]), "agTransitions %s", ev)
		}
	})
	t.Run("cellCheck", func(t *testing.T) {
		k := newHealthyCore(t, clusterConfig(1, 2, 0))
		var leaf *Cell
		k.nodes["r0-n0"].cells[0].forEachLeaf(func(l *Cell) {
			if leaf == nil {
				leaf = l
			}
		})
		cellLegal := map[CellEvent][2]CellState{
			Celle0: {CellFree, CellUsed}, Celle1: {CellUsed, CellFree}, Celle2: {CellUsed, CellReserving},
			Celle3: {CellReserving, CellReserving}, Celle4: {CellReserving, CellUsed}, Celle5: {CellFree, CellReserved},
			Celle6: {CellReserved, CellReserved}, Celle7: {CellReserved, CellFree}, Celle8: {CellReserved, CellUsed},
			Celle9: {CellReserving, CellReserved},
		}
		require.Len(t, cellTransitions, len(cellLegal))
		for ev, tr := range cellLegal {
			require.Equal(t, cellTransition{tr[0], tr[1]}, cellTransitions[ev], "cell %s", ev)
		}
		for _, ev := range []CellEvent{Celle0, Celle1, Celle2, Celle3, Celle4, Celle5, Celle6, Celle7, Celle8, Celle9, Cellec, "zz"} {
			for _, s := range []CellState{CellFree, CellUsed, CellReserving, CellReserved} {
				c := *leaf // a copy: the core's cell is not touched
				c.state = s
				var next CellState
				var err error
				require.NotPanics(t, func() { next, err = cellCheck(&c, ev) })
				if tr, ok := cellLegal[ev]; ok && tr[0] == s {
					require.NoError(t, err, "cell %s in %s", ev, s)
					require.Equal(t, tr[1], next, "cell %s in %s", ev, s)
					continue
				}
				var te *TransitionError
				require.True(t, errors.As(err, &te), "cell %s in %s: %v", ev, s, err)
				require.Equal(t, "cell", te.Machine)
				require.Equal(t, s.String(), te.State)
				require.Equal(t, leaf.ID(), te.Object)
			}
		}
		mustCheck(t, k)
	})
	t.Run("public API", func(t *testing.T) {
		k, r := mtCore(t)
		d := mtPlace(t, k, ag("low", "a", 0, 1, 8))
		mtPreempt(t, k, ag("high", "a", 10, 1, 8), "low")
		mtWait(t, k, ag("pend", "a", 5, 1, 8))
		r.take()
		before := fmt.Sprintf("%+v", k.Snapshot())
		isTE := func(err error, state AGState) {
			t.Helper()
			var te *TransitionError
			require.True(t, errors.As(err, &te), "%v", err)
			require.Equal(t, state.String(), te.State)
			require.Equal(t, string(AGx1), te.Event)
		}
		for _, c := range []struct {
			group string
			state AGState
		}{{"pend", AGPending}, {"high", AGPreempting}, {"low", AGBeingPreempted}} {
			var err error
			require.NotPanics(t, func() { err = k.RollbackAffinityGroup(c.group) })
			isTE(err, c.state)
			mtRequireState(t, k, c.group, c.state)
		}
		// Not transitions, but refused without a change all the same.
		require.Error(t, k.RollbackAffinityGroup("nobody"))
		_, err := k.AssignPod("pend", "pend-0", 8)
		require.Error(t, err)
		_, err = k.AssignPod("high", "high-0", 8)
		require.Error(t, err)
		res, err := k.DeletePod("pend", "no-such-pod")
		require.NoError(t, err)
		require.False(t, res.GroupDeleted)
		_, err = k.Schedule(ag("low", "a", 1, 1, 8)) // same name, another spec
		require.Error(t, err)
		require.Empty(t, r.take(), "no transition fired")
		require.Equal(t, before, fmt.Sprintf("%+v", k.Snapshot()), "refused calls change nothing")
		mtRequireLeaves(t, k, d.Pods[0].Node, map[mtLeaf]int{mtReserving("low", "high"): 8})
		mustCheck(t, k)
	})
}

func mtHasKey(m map[string]mtLeaf, id string) bool {
	_, ok := m[id]
	return ok
}

package cellcore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
)

func nsAG(name, vc, ns string, prio int32, members ...int32) AffinityGroupSpec {
	s := ag(name, vc, prio, members...)
	s.Namespace = ns
	return s
}

// Concurrency and usage limits make a namespace's group wait, naming the
// limit; the group goes once the namespace's use falls. Other namespaces
// are not held back.
func TestNamespaceLimitsWait(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	spec := vcSpec("a", "V100-NODE", 4)
	spec.Limits = map[string]NamespaceLimits{
		"team-1":      {MaxRunningGroups: ptr.To[int32](2)},
		AllNamespaces: {MaxLeafCells: ptr.To[int32](8)},
	}
	_, err := k.SetVirtualCluster(spec)
	require.NoError(t, err)
	vcPlace(t, k, nsAG("t1-a", "a", "team-1", 0, 1, 8))
	vcPlace(t, k, nsAG("t1-b", "a", "team-1", 0, 1, 8))
	d, err := k.Schedule(nsAG("t1-c", "a", "team-1", 0, 1, 1))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	require.True(t, d.OverLimit)
	require.Contains(t, d.Reason, "namespace team-1 already runs 2 affinity groups in virtual cluster \"a\", its limit (maxRunningGroups 2)")
	require.NotContains(t, d.Reason, ".")
	mustCheck(t, k)
	// team-2 falls under "*": 8 leaf cells at most.
	vcPlace(t, k, nsAG("t2-a", "a", "team-2", 0, 1, 4))
	d, err = k.Schedule(nsAG("t2-b", "a", "team-2", 0, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	require.Contains(t, d.Reason, "namespace team-2 holds 4 leaf cells in virtual cluster \"a\" and the group needs 8 more, above its limit (maxLeafCells 8): the group waits until the namespace's groups free 4")
	u := k.NamespaceUsageOf("a", "team-2")
	require.Equal(t, NamespaceUsage{Groups: 1, LeafCells: 4, VCLeaves: 32, Share: 0.125, Configured: true}, u)
	// A group without a namespace has no limits (the simulator, tests).
	vcPlace(t, k, ag("free", "a", 0, 1, 4))
	// team-1's group ends: its waiting group goes.
	deleteAllPods(t, k, "t1-a")
	d, err = k.Schedule(nsAG("t1-c", "a", "team-1", 0, 1, 1))
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind)
	mustCheck(t, k)
	// Lifting the limit lets team-2's group go.
	spec.Limits = nil
	_, err = k.SetVirtualCluster(spec)
	require.NoError(t, err)
	d, err = k.Schedule(nsAG("t2-b", "a", "team-2", 0, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind, d.Reason)
	mustCheck(t, k)
}

// Limits a group can never fit are refused up front, naming the limit; a
// namespace's own entry overrides "*".
func TestNamespaceLimitsRefuse(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 3, 0))
	spec := vcSpec("a", "V100-NODE", 2)
	spec.Limits = map[string]NamespaceLimits{
		AllNamespaces: {MaxPriority: ptr.To[int32](10), MaxGroupLeafCells: ptr.To[int32](8)},
		"admin":       {},
		"frozen":      {MaxRunningGroups: ptr.To[int32](0)},
		"small":       {MaxLeafCells: ptr.To[int32](4)},
	}
	_, err := k.SetVirtualCluster(spec)
	require.NoError(t, err)
	_, err = k.Schedule(nsAG("hi", "a", "team", 11, 1, 1))
	require.ErrorContains(t, err, `priority 11 is above the highest priority namespace team may use in virtual cluster "a" (maxPriority 10)`)
	_, err = k.Schedule(nsAG("big", "a", "team", 0, 2, 8))
	require.ErrorContains(t, err, "asks for 16 leaf cells in all, more than one group of namespace team may have")
	_, err = k.Schedule(nsAG("none", "a", "frozen", 0, 1, 1))
	require.ErrorContains(t, err, "namespace frozen may run no group")
	_, err = k.Schedule(nsAG("toobig", "a", "small", 0, 1, 8))
	require.ErrorContains(t, err, "more than namespace small may hold")
	vcPlace(t, k, nsAG("ok", "a", "admin", 1000, 2, 8))
	vcPlace(t, k, nsAG("opp", "a", "team", -1, 1, 1))
	mustCheck(t, k)
	_, known := k.AffinityGroupState("hi")
	require.False(t, known, "a refused group is not kept")
}

func TestPolicyValidation(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 1, 0))
	for _, s := range []VirtualClusterSpec{
		{Name: "a", Sequencer: "Random"},
		{Name: "a", Selector: "Scatter"},
		{Name: "a", Limits: map[string]NamespaceLimits{"": {}}},
		{Name: "a", Limits: map[string]NamespaceLimits{"x": {MaxLeafCells: ptr.To[int32](-1)}}},
		{Name: "a", Limits: map[string]NamespaceLimits{"x": {MaxPriority: ptr.To[int32](1001)}}},
		{Name: "a", Limits: map[string]NamespaceLimits{"x": {MaxPriority: ptr.To[int32](-2)}}},
	} {
		_, err := k.SetVirtualCluster(s)
		require.Error(t, err, "%+v", s)
	}
	_, err := k.SetVirtualCluster(VirtualClusterSpec{Name: "a", Sequencer: SequencerDRF, Selector: SelectorSpread,
		Limits: map[string]NamespaceLimits{"x": {MaxPriority: ptr.To[int32](-1)}}})
	require.NoError(t, err)
	mustCheck(t, k)
}

// Each VC's sequencer orders its own pending groups; every key has the same
// shape, so the queue's order is total across VCs.
func TestSequenceKeys(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	for _, s := range []VirtualClusterSpec{
		{Name: "fifo", VirtualCells: []VirtualCellSpec{{CellType: "V100-NODE", CellNumber: 1}}},
		{Name: "lifo", Sequencer: SequencerPriorityLIFO, VirtualCells: []VirtualCellSpec{{CellType: "V100-NODE", CellNumber: 1}}},
		{Name: "drf", Sequencer: SequencerDRF, VirtualCells: []VirtualCellSpec{{CellType: "V100-NODE", CellNumber: 2}}},
	} {
		_, err := k.SetVirtualCluster(s)
		require.NoError(t, err)
	}
	t0 := time.Unix(1000, 0)
	t1 := t0.Add(time.Second)
	less := func(a, b SequenceKey) bool { return SequenceLess(a, b) }
	require.True(t, less(k.SequenceKeyOf("fifo", "x", 0, t0), k.SequenceKeyOf("fifo", "x", 0, t1)), "FIFO: older first")
	require.True(t, less(k.SequenceKeyOf("lifo", "x", 0, t1), k.SequenceKeyOf("lifo", "x", 0, t0)), "LIFO: newer first")
	require.True(t, less(k.SequenceKeyOf("lifo", "x", 5, t0), k.SequenceKeyOf("lifo", "x", 0, t1)), "priority first")
	// DRF: the namespace using more of the VC goes after, whatever its age.
	vcPlace(t, k, nsAG("heavy-1", "drf", "heavy", 0, 1, 8))
	require.True(t, less(k.SequenceKeyOf("drf", "light", 0, t1), k.SequenceKeyOf("drf", "heavy", 0, t0)))
	require.InDelta(t, 0.5, k.SequenceKeyOf("drf", "heavy", 0, t0).Share, 1e-9)
	require.True(t, less(k.SequenceKeyOf("drf", "heavy", 0, t0), k.SequenceKeyOf("drf", "heavy", 0, t1)), "FIFO inside a namespace")
	// Opportunistic groups across VCs: the VC holding fewer idle cells first.
	vcPlace(t, k, nsAG("opp-1", "fifo", "x", -1, 1, 4))
	require.True(t, less(k.SequenceKeyOf("lifo", "y", -1, t1), k.SequenceKeyOf("fifo", "x", -1, t0)))
	deleteAllPods(t, k, "opp-1")
	deleteAllPods(t, k, "heavy-1")
	require.Zero(t, k.SequenceKeyOf("drf", "heavy", 0, t0).Share)
	require.Zero(t, k.SequenceKeyOf("fifo", "x", -1, t0).Share)
	mustCheck(t, k)
}

func nodesOf(d Decision) []string {
	var out []string
	for _, p := range d.Pods {
		out = append(out, p.Node)
	}
	return out
}

// Spread: a group's pods, and groups sharing a spread key, go to different
// nodes, then different racks, as far as the VC's cells allow; beyond that
// they are packed.
func TestSelectorSpread(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(2, 2, 0)) // racks r0, r1 of 2 nodes
	spread := vcSpec("inf", "V100-NODE", 3)
	spread.Selector = SelectorSpread
	_, err := k.SetVirtualCluster(spread)
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("train", "V100-NODE", 1))
	require.NoError(t, err)
	// Two replicas of one group: two nodes in two racks.
	d := vcPlace(t, k, ag("replicas", "inf", 0, 2, 1))
	n := nodesOf(d)
	require.NotEqual(t, n[0], n[1])
	require.NotEqual(t, n[0][:2], n[1][:2], "different racks: %v", n)
	// A group sharing a spread key with another lands on a third node.
	a := ag("web-a", "inf", 0, 1, 1)
	a.SpreadKey = "web"
	b := ag("web-b", "inf", 0, 1, 1)
	b.SpreadKey = "web"
	da := vcPlace(t, k, a)
	db := vcPlace(t, k, b)
	require.NotEqual(t, nodesOf(da)[0], nodesOf(db)[0])
	mustCheck(t, k)
	// Four replicas in a VC of three nodes: spread over all three, one
	// shared.
	d = vcPlace(t, k, ag("four", "inf", 0, 4, 1))
	seen := map[string]bool{}
	for _, x := range nodesOf(d) {
		seen[x] = true
	}
	require.Len(t, seen, 3)
	// The Pack VC packs the same shape on one node.
	d = vcPlace(t, k, ag("packed", "train", 0, 2, 1))
	require.Equal(t, nodesOf(d)[0], nodesOf(d)[1])
	mustCheck(t, k)
}

// Issue 28, finding 12: a spread key is the namespace's own. Another
// namespace of the VC that takes the same key on every node must not make
// the namespace's replicas share one.
func TestSpreadKeyIsPerNamespace(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 3, 0)) // one rack of 3 nodes
	spread := vcSpec("inf", "V100-NODE", 3)
	spread.Selector = SelectorSpread
	_, err := k.SetVirtualCluster(spread)
	require.NoError(t, err)
	keyed := func(name, ns string, gpus int32) AffinityGroupSpec {
		g := ag(name, "inf", 0, 1, gpus)
		g.Namespace, g.SpreadKey = ns, "web"
		return g
	}
	// The other namespace takes the key on every node.
	evil := map[string]bool{}
	for _, n := range []string{"evil-1", "evil-2", "evil-3"} {
		evil[nodesOf(vcPlace(t, k, keyed(n, "evil", 1)))[0]] = true
	}
	require.Len(t, evil, 3)
	a := nodesOf(vcPlace(t, k, keyed("web-a", "good", 1)))[0]
	b := nodesOf(vcPlace(t, k, keyed("web-b", "good", 1)))[0]
	require.NotEqual(t, a, b, "the namespace's own replicas stay apart whatever another namespace labels")
	mustCheck(t, k)
}

// RoundRobin: successive groups of equal shape start at rotating cells
// among equally good ones; Pack keeps taking the first.
func TestSelectorRoundRobin(t *testing.T) {
	place := func(sel Selector) map[string]int {
		k := newHealthyCore(t, clusterConfig(1, 4, 0))
		spec := vcSpec("a", "V100-RACK", 1)
		spec.Selector = sel
		_, err := k.SetVirtualCluster(spec)
		require.NoError(t, err)
		used := map[string]int{}
		for i := 0; i < 4; i++ {
			d := vcPlace(t, k, ag(fmt.Sprintf("g%d", i), "a", 0, 1, 8))
			used[nodesOf(d)[0]]++
			deleteAllPods(t, k, d.Group)
			mustCheck(t, k)
		}
		return used
	}
	require.Len(t, place(SelectorPack), 1, "packing reuses the first node")
	require.Greater(t, len(place(SelectorRoundRobin)), 1, "round robin rotates")
}

package cellcore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// withinConfig is clusterConfig with the model test's topology keys: rack
// on V100-RACK, hostname on both node types, socket on V100-SOCKET.
func withinConfig(racks, nodesPerRack, t4 int) Config {
	cfg := clusterConfig(racks, nodesPerRack, t4)
	modelConfigHook(&cfg)
	return cfg
}

func within(s AffinityGroupSpec, key string) AffinityGroupSpec {
	s.WithinTopologyKey = key
	return s
}

// rackOfNode is the rack of a model node name (r<rack>-n<node>).
func rackOfNode(node string) string { return strings.SplitN(node, "-", 2)[0] }

// podRacks lists the racks of a decision's pods, in pod order.
func podRacks(d Decision) []string {
	var out []string
	for _, p := range d.Pods {
		out = append(out, rackOfNode(p.Node))
	}
	return out
}

func requireOneRack(t *testing.T, d Decision, rack string) {
	t.Helper()
	for _, p := range d.Pods {
		require.Equal(t, rack, rackOfNode(p.Node), "pods %+v", d.Pods)
	}
}

func place(t *testing.T, k *Core, s AffinityGroupSpec) Decision {
	t.Helper()
	d, err := k.Schedule(s)
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind, d.Reason)
	bindAll(t, k, d)
	mustCheck(t, k)
	return d
}

func TestWithinConfigKeys(t *testing.T) {
	types := func(mod func(map[string]CellTypeSpec)) Config {
		cfg := clusterConfig(1, 2, 1)
		mod(cfg.CellTypes)
		return cfg
	}
	set := func(m map[string]CellTypeSpec, name, key string) {
		x := m[name]
		x.TopologyKey = key
		m[name] = x
	}
	_, err := New(types(func(m map[string]CellTypeSpec) {
		set(m, "V100-RACK", "k")
		set(m, "V100-SOCKET", "k")
	}))
	require.EqualError(t, err, `cell type "V100-RACK": topologyKey "k" already names its descendant type "V100-SOCKET" (a key names at most one level of a chain)`)

	// One key on levels of several chains is fine: two rack types, and
	// both node types.
	cfg := types(func(m map[string]CellTypeSpec) {
		set(m, "V100-RACK", rackKey)
		set(m, "V100-NODE", hostKey)
		set(m, "T4-NODE", hostKey)
		m["T4-RACK"] = CellTypeSpec{ChildCellType: "T4-NODE", ChildCellNumber: 2, TopologyKey: rackKey}
	})
	cfg.PhysicalCells = append(cfg.PhysicalCells[:1], PhysicalCellSpec{CellType: "T4-RACK", CellAddress: "t4-rack",
		CellChildren: []PhysicalCellSpec{{CellAddress: "t4-0"}, {CellAddress: "t4-1"}}})
	k := newHealthyCore(t, cfg)
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1, "T4-RACK", 1))
	require.NoError(t, err)
	d := place(t, k, within(ag("t4", "a", 0, 2, 4), rackKey))
	require.Equal(t, "T4", d.Pods[0].LeafCellType, "chain T4-RACK comes first (chains by name)")
	require.ElementsMatch(t, []string{"t4-0", "t4-1"}, []string{d.Pods[0].Node, d.Pods[1].Node})
}

// Refusals name the key and the cell type; a refused request changes
// nothing.
func TestWithinRefusals(t *testing.T) {
	k := newHealthyCore(t, withinConfig(3, 4, 4))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 2))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "T4-NODE", 4, "V100-NODE", 1))
	require.NoError(t, err)
	before := fingerprint(k)
	for _, tc := range []struct {
		spec AffinityGroupSpec
		want string
	}{
		{within(ag("z", "a", 0, 1, 1), zoneKey),
			`affinity group "z": withinTopologyKey "topology.kubernetes.io/zone" names no cell level of a chain it may use (the cell types declare "hivesched.io/socket", "kubernetes.io/hostname", "topology.kubernetes.io/rack")`},
		{within(ag("z", "a", -1, 1, 1), zoneKey), `withinTopologyKey "topology.kubernetes.io/zone" names no cell level`},
		{within(ag("big", "a", 0, 5, 8), rackKey),
			`affinity group "big": asks for 40 leaf cells in total, which does not fit in one V100-RACK (32 leaf cells), the level withinTopologyKey "topology.kubernetes.io/rack" names`},
		{within(ag("two", "a", 0, 2, 8), hostKey), `asks for 16 leaf cells in total, which does not fit in one V100-NODE (8 leaf cells)`},
		{within(ag("sock", "a", -1, 1, 8), socketKey), `asks for 8 leaf cells in total, which does not fit in one V100-SOCKET (4 leaf cells)`},
		// The T4 chain has no rack: only the V100 chain may hold it, where
		// VC b has one node.
		{within(ag("b16", "b", 0, 4, 4), rackKey),
			`affinity group "b16": asks for 16 leaf cells within one cell of withinTopologyKey "topology.kubernetes.io/rack", but virtual cluster "b" could hold at most 8 under one`},
	} {
		_, err := k.Schedule(tc.spec)
		require.ErrorContains(t, err, tc.want)
		require.True(t, IsSpecError(err))
		require.Equal(t, before, fingerprint(k))
	}
	// Pods of one group must agree on the constraint.
	d, err := k.Schedule(within(ag("g", "a", 0, 1, 8), rackKey))
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind)
	_, err = k.Schedule(ag("g", "a", 0, 1, 8))
	require.ErrorContains(t, err, "already exists with a different spec")
	require.ErrorContains(t, k.CheckMember(within(ag("g", "a", 0, 1, 8), hostKey)), "topology constraint")
	require.NoError(t, k.CheckMember(within(ag("g", "a", 0, 1, 8), rackKey)))
	mustCheck(t, k)
}

// A pinned cell below the keyed level is one cell: the constraint holds by
// itself; above it, the constraint applies inside the pinned cell.
func TestWithinPinned(t *testing.T) {
	cfg := withinConfig(2, 4, 0)
	cfg.PhysicalCells[0].CellChildren[1].PinnedCellID = "node"
	cfg.PhysicalCells[1].PinnedCellID = "rack"
	k := newHealthyCore(t, cfg)
	_, err := k.SetVirtualCluster(VirtualClusterSpec{Name: "a", PinnedCells: []PinnedCellSpec{{PinnedCellID: "node"}, {PinnedCellID: "rack"}}})
	require.NoError(t, err)
	pin := func(s AffinityGroupSpec, id string) AffinityGroupSpec { s.PinnedCellID = id; return s }
	d := place(t, k, pin(within(ag("n", "a", 0, 2, 4), rackKey), "node"))
	require.Equal(t, []string{"r0-n1", "r0-n1"}, []string{d.Pods[0].Node, d.Pods[1].Node})
	_, err = k.Schedule(pin(within(ag("r", "a", 0, 2, 8), hostKey), "rack"))
	require.ErrorContains(t, err, "does not fit in one V100-NODE (8 leaf cells)")
	d = place(t, k, pin(within(ag("r", "a", 0, 2, 4), hostKey), "rack"))
	require.Equal(t, d.Pods[0].Node, d.Pods[1].Node, "two pods of 4 on one node of the pinned rack")
	require.Equal(t, "r1", rackOfNode(d.Pods[0].Node))
}

// fillRacks places one 1x8 group of VC vc per node and returns the node of
// each group; prio gives each group's priority by its index.
func fillRacks(t *testing.T, k *Core, vc string, n int, prio func(i int) int32) map[string]string {
	t.Helper()
	nodeOf := map[string]string{}
	for i := 0; i < n; i++ {
		d := place(t, k, ag(fmt.Sprintf("f%d", i), vc, prio(i), 1, 8))
		nodeOf[d.Group] = d.Pods[0].Node
	}
	return nodeOf
}

// The fast path: a VC of racks places a gang in one rack, or waits, where
// without the constraint it spans racks.
func TestWithinFastPathRack(t *testing.T) {
	var groupOn map[string]string
	setup := func() *Core {
		k := newHealthyCore(t, withinConfig(2, 4, 0))
		_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 2))
		require.NoError(t, err)
		groupOn = map[string]string{}
		for g, n := range fillRacks(t, k, "a", 8, func(int) int32 { return 0 }) {
			groupOn[n] = g
			// Two free nodes in each rack.
			if strings.HasSuffix(n, "-n2") || strings.HasSuffix(n, "-n3") {
				_, err := k.DeleteAffinityGroup(g)
				require.NoError(t, err)
			}
		}
		mustCheck(t, k)
		return k
	}
	k := setup()
	d := place(t, k, ag("free", "a", 0, 3, 8))
	require.NotEqual(t, podRacks(d)[0], podRacks(d)[2], "without the constraint the gang spans racks: %v", podRacks(d))

	k = setup()
	d, err := k.Schedule(within(ag("g", "a", 0, 3, 8), rackKey))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	require.Contains(t, d.Reason, `needs 3 pods of 8 V100 within one V100-RACK (withinTopologyKey "topology.kubernetes.io/rack") in virtual cluster "a"`)
	require.Contains(t, d.Reason, "its pods do not fit together within one V100-RACK of those cells")
	require.NotContains(t, d.Reason, "does not guarantee", "the VC reserves racks")
	mustCheck(t, k)
	// A third node of rack1 frees up.
	deleteAllPods(t, k, groupOn["r1-n1"])
	d = place(t, k, within(ag("g", "a", 0, 3, 8), rackKey))
	requireOneRack(t, d, "r1")
	// Two pods of 4 within a node: one node, the tightest.
	d = place(t, k, within(ag("h", "a", 0, 2, 4), hostKey))
	require.Equal(t, d.Pods[0].Node, d.Pods[1].Node)
}

// The span: a VC of node cells asked for two nodes in one rack binds both
// inside one rack, where a free rack has room, not next to its first node.
func TestWithinSpanInsideOneRack(t *testing.T) {
	setup := func() *Core {
		k := newHealthyCore(t, withinConfig(2, 4, 0))
		_, err := k.SetVirtualCluster(vcSpec("other", "V100-NODE", 3))
		require.NoError(t, err)
		_, err = k.SetVirtualCluster(vcSpec("a", "V100-NODE", 4))
		require.NoError(t, err)
		for i := 0; i < 3; i++ {
			d := place(t, k, ag(fmt.Sprintf("o%d", i), "other", 0, 1, 8))
			require.Equal(t, "r0", rackOfNode(d.Pods[0].Node), "the other VC binds three nodes of rack0")
		}
		return k
	}
	k := setup()
	d := place(t, k, ag("free", "a", 0, 2, 8))
	require.ElementsMatch(t, []string{"r0", "r1"}, podRacks(d), "without the constraint: rack0's last node, then one of rack1")

	k = setup()
	d = place(t, k, within(ag("g", "a", 0, 2, 8), rackKey))
	requireOneRack(t, d, "r1")
	require.NotEqual(t, d.Pods[0].Node, d.Pods[1].Node)
	// The VC's two bound nodes of rack1 are full: the next gang binds the
	// other two nodes of rack1 (the keyed cell of its bound nodes).
	d = place(t, k, within(ag("g2", "a", 0, 2, 8), rackKey))
	requireOneRack(t, d, "r1")
	st, _ := k.VirtualClusterStatus("a")
	require.Equal(t, int32(4), st.Cells[0].Bound)
	require.Equal(t, int32(3), mustStatus(t, k, "other").Cells[0].Bound)
	// Nothing is left: it waits.
	d, err := k.Schedule(within(ag("g3", "a", 0, 1, 8), rackKey))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	mustCheck(t, k)

	// Next to the VC's bound node: a's node in rack0 has 4 free leaves and
	// rack0 one free node; the gang binds that node, inside the bound
	// node's rack, rather than two nodes of the free rack.
	k = setup()
	d = place(t, k, ag("one", "a", 0, 1, 4))
	first := d.Pods[0].Node
	require.Equal(t, "r0", rackOfNode(first))
	st2, _ := k.AffinityGroupStatus("o0")
	deleteAllPods(t, k, "o0")
	d = place(t, k, within(ag("g", "a", 0, 1, 8, 1, 4), rackKey))
	require.ElementsMatch(t, []string{first, st2.Pods[0].Node}, []string{d.Pods[0].Node, d.Pods[1].Node})
	require.Equal(t, int32(2), mustStatus(t, k, "a").Cells[0].Bound)
}

func mustStatus(t *testing.T, k *Core, vc string) VirtualClusterStatus {
	t.Helper()
	st, ok := k.VirtualClusterStatus(vc)
	require.True(t, ok)
	return st
}

// A VC of node cells does not promise two of them in one rack: the group
// waits and its reason says so; the oracle agrees.
func TestWithinWaitReasonBestEffort(t *testing.T) {
	k := newHealthyCore(t, withinConfig(2, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 6))
	require.NoError(t, err)
	d := place(t, k, ag("a0", "a", 0, 1, 8))
	require.Equal(t, "r0-n0", d.Pods[0].Node)
	for i := 0; i < 6; i++ {
		place(t, k, ag(fmt.Sprintf("b%d", i), "b", 0, 1, 8))
	}
	// a's node is in rack0, its unbound node can only be r1-n3: even
	// preempting a0 (priority 0) leaves no two nodes of a in one rack.
	spec := within(ag("g", "a", 5, 2, 8), rackKey)
	d, err = k.Schedule(spec)
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind, d.Reason)
	require.Contains(t, d.Reason, `its pods do not fit together within one V100-RACK of those cells (each pod needs its leaf cells on one node), so it binds when groups next to the free cells finish (virtual cluster "a" reserves no V100-RACK or larger cell, so it does not guarantee co-location in one)`)
	require.False(t, k.guaranteeFits(spec).fits, "unbound node cells are no promise of one rack")
	require.True(t, k.guaranteeFits(ag("g", "a", 5, 2, 8)).fits, "without the constraint it fits")
	mustCheck(t, k)
	// Unconstrained, it preempts a0 and spans the racks.
	d, err = k.Schedule(ag("u", "a", 5, 2, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	mustCheck(t, k)
}

// Preemption stays inside one keyed cell: a VC of eight node cells, rack0
// holding two nodes of priority 1 and two of priority 50, rack1 three of
// priority 5 and one of 50. A gang of three nodes at priority 10 within a
// rack preempts the three of rack1 (rack0 has two takeable nodes only);
// unconstrained, the span takes the cheapest nodes across both racks.
func TestWithinPreemptionInsideOneRack(t *testing.T) {
	prios := []int32{1, 1, 50, 50, 5, 5, 5, 50}
	setup := func() (*Core, map[string]string) {
		k := newHealthyCore(t, withinConfig(2, 4, 0))
		_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 8))
		require.NoError(t, err)
		groupOn := map[string]string{}
		for g, n := range fillRacks(t, k, "a", 8, func(i int) int32 { return prios[i] }) {
			groupOn[g] = n
		}
		for i := 0; i < 8; i++ {
			require.Equal(t, fmt.Sprintf("r%d", i/4), rackOfNode(groupOn[fmt.Sprintf("f%d", i)]), "the VC fills rack0 first")
		}
		return k, groupOn
	}
	k, _ := setup()
	d, err := k.Schedule(within(ag("hi", "a", 10, 3, 8), rackKey))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Equal(t, []string{"f4", "f5", "f6"}, d.Victims)
	mustCheck(t, k)
	for _, v := range d.Victims {
		deleteAllPods(t, k, v)
	}
	d = place(t, k, within(ag("hi", "a", 10, 3, 8), rackKey))
	requireOneRack(t, d, "r1")

	k, _ = setup()
	d, err = k.Schedule(ag("hi", "a", 10, 3, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	racks := map[string]bool{}
	for _, v := range d.Victims {
		st, _ := k.AffinityGroupStatus(v)
		racks[rackOfNode(st.Pods[0].Node)] = true
	}
	require.Len(t, racks, 2, "without the constraint the victims %v are in both racks", d.Victims)

	// The whole-group scan, capped at the keyed level, with its floor
	// (TestMain checks every stop at the floor against the full scan): a
	// pod of 8 within a node preempts the cheapest node.
	k, _ = setup()
	d, err = k.Schedule(within(ag("one", "a", 10, 1, 8), hostKey))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Len(t, d.Victims, 1)
	require.Contains(t, []string{"f0", "f1"}, d.Victims[0])
	mustCheck(t, k)
}

// Opportunistic groups: both passes (unbound cells, then idle VC cells)
// stay inside one keyed cell.
func TestWithinOpportunistic(t *testing.T) {
	k := newHealthyCore(t, withinConfig(3, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 5))
	require.NoError(t, err)
	// a binds a rack, holding one node of it; b binds all four nodes of a
	// second rack and one of the third.
	d := place(t, k, ag("a0", "a", 0, 1, 8))
	aRack := rackOfNode(d.Pods[0].Node)
	bNodes := map[string]int{}
	for i := 0; i < 5; i++ {
		d = place(t, k, ag(fmt.Sprintf("b%d", i), "b", 0, 1, 8))
		bNodes[rackOfNode(d.Pods[0].Node)]++
	}
	var partRack string
	for r, n := range bNodes {
		if n == 1 {
			partRack = r
		}
	}
	require.Len(t, bNodes, 2)
	require.NotEmpty(t, partRack)
	require.NotContains(t, bNodes, aRack)
	// The free pool: the third rack's three other nodes. Three pods of 8
	// within a rack go there, in the first pass.
	d = place(t, k, within(ag("o1", "a", -1, 3, 8), rackKey))
	requireOneRack(t, d, partRack)
	// Now only a's idle nodes (three) have room: the second pass.
	d = place(t, k, within(ag("o2", "a", -1, 2, 8), rackKey))
	requireOneRack(t, d, aRack)
	// One node of a's rack is left, and b's node of the third rack frees
	// up (unbound: the free pool's): two pods of 8 within a rack wait,
	// where unconstrained they span racks.
	deleteAllPods(t, k, "b4")
	d, err = k.Schedule(within(ag("o3", "a", -1, 2, 8), rackKey))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	require.Contains(t, d.Reason, `needs 2 pods of 8 V100 within one V100-RACK (withinTopologyKey "topology.kubernetes.io/rack") on idle cells, and the cluster has 16 free healthy V100, at most 8 on one node and 8 in one V100-RACK`)
	mustCheck(t, k)
	d = place(t, k, ag("o4", "a", -1, 2, 8))
	require.ElementsMatch(t, []string{aRack, partRack}, podRacks(d))
}

// Spread spreads inside one keyed cell: the pods of a gang on different
// nodes of one rack (unconstrained, on different racks), and a group
// sharing a spread key with a placed one in a rack none of its peers uses.
func TestWithinSpread(t *testing.T) {
	k := newHealthyCore(t, withinConfig(2, 4, 0))
	spec := vcSpec("a", "V100-RACK", 2)
	spec.Selector = SelectorSpread
	_, err := k.SetVirtualCluster(spec)
	require.NoError(t, err)
	before := spreadPlaced.Load()
	g := within(ag("g", "a", 0, 3, 2), rackKey)
	g.SpreadKey = "web"
	d := place(t, k, g)
	rack := rackOfNode(d.Pods[0].Node)
	requireOneRack(t, d, rack)
	nodes := map[string]bool{}
	for _, p := range d.Pods {
		nodes[p.Node] = true
	}
	require.Len(t, nodes, 3, "one pod a node: %+v", d.Pods)
	require.Equal(t, before+1, spreadPlaced.Load())
	h := within(ag("h", "a", 0, 2, 2), rackKey)
	h.SpreadKey = "web"
	d = place(t, k, h)
	other := rackOfNode(d.Pods[0].Node)
	require.NotEqual(t, rack, other, "its peer's rack is avoided")
	requireOneRack(t, d, other)
	// Within a node there is nothing to spread: packed.
	d = place(t, k, within(ag("n", "a", 0, 2, 2), hostKey))
	require.Equal(t, d.Pods[0].Node, d.Pods[1].Node)
}

// Recovery refuses a record that breaks the constraint, and a late member
// (x3) joins its group's keyed cell.
func TestWithinRecovery(t *testing.T) {
	k := newHealthyCore(t, withinConfig(2, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 2))
	require.NoError(t, err)
	before := fingerprint(k)
	_, err = k.RecoverAffinityGroup(within(ag("g", "a", 0, 2, 8), rackKey),
		[]RecoveredPod{rpod("p0", "r0-n0", 0, 1, 2, 3, 4, 5, 6, 7), rpod("p1", "r1-n0", 0, 1, 2, 3, 4, 5, 6, 7)})
	require.EqualError(t, err, `affinity group "g": its pods break its topology constraint: leaf cells V100-RACK/rack0/r0-n0/0/0/0 and V100-RACK/rack1/r1-n0/0/0/0 are not in one V100-RACK (withinTopologyKey "topology.kubernetes.io/rack")`)
	require.Equal(t, before, fingerprint(k))
	_, err = k.RecoverAffinityGroup(within(ag("g", "a", 0, 1, 2), zoneKey), []RecoveredPod{rpod("p0", "r0-n0", 0, 1)})
	require.ErrorContains(t, err, `chain V100-RACK has no level of withinTopologyKey "topology.kubernetes.io/zone"`)
	require.Equal(t, before, fingerprint(k))

	_, err = k.RecoverAffinityGroup(within(ag("g", "a", 0, 2, 8), hostKey), []RecoveredPod{rpod("p0", "r0-n0", 0, 1, 2, 3, 4, 5, 6, 7)})
	require.EqualError(t, err, `affinity group "g": asks for 16 leaf cells in total, which does not fit in one V100-NODE (8 leaf cells), the level withinTopologyKey "kubernetes.io/hostname" names`)
	require.Equal(t, before, fingerprint(k))

	// Recovered with one of its two pods; the other arrives later and
	// goes to the same node (hostname), though other nodes are emptier.
	_, err = k.RecoverAffinityGroup(within(ag("g", "a", 0, 2, 2), hostKey), []RecoveredPod{rpod("p0", "r0-n1", 6, 7)})
	require.NoError(t, err)
	place(t, k, ag("x", "a", 0, 1, 4)) // packs next to g
	pp, err := k.AssignPod("g", "p1", 2)
	require.NoError(t, err)
	require.Equal(t, "r0-n1", pp.Node)
	mustCheck(t, k)
	// An opportunistic one too.
	_, err = k.RecoverAffinityGroup(within(ag("o", "a", -1, 2, 2), hostKey), []RecoveredPod{rpod("q0", "r1-n3", 0, 1)})
	require.NoError(t, err)
	pp, err = k.AssignPod("o", "q1", 2)
	require.NoError(t, err)
	require.Equal(t, "r1-n3", pp.Node)
	mustCheck(t, k)
}

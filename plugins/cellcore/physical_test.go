package cellcore

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// physView is everything a reader of the core sees: the snapshot, every
// cell record (with what is read through the cell), every VC's and group's
// status, node health and devices. Two equal views are the same state for
// every reader.
func physView(t *testing.T, k *Core) string {
	t.Helper()
	out := fmt.Sprintf("snapshot %+v\n", k.Snapshot())
	for _, r := range k.CellRecords(nil, "", "") {
		out += fmt.Sprintf("cell %s %s %s %d %s %s %d ", r.Chain(), r.LeafType(), r.CellType(), r.Level(), r.Address(), r.Node(), r.Index())
		r.cell = nil // the rest: the copied state
		out += fmt.Sprintf("%+v\n", r)
	}
	for _, n := range []string{"vc1", "vc2", "vc3", "vc4"} {
		st, ok := k.VirtualClusterStatus(n)
		out += fmt.Sprintf("vc %s %v %+v\n", n, ok, st)
		out += fmt.Sprintf("vc records %s: %d\n", n, len(k.CellRecords(nil, n, "")))
	}
	for _, g := range k.AffinityGroupNames() {
		st, _ := k.AffinityGroupStatus(g)
		ex, _ := k.ExplainAffinityGroup(g)
		out += fmt.Sprintf("group %+v\nexplained %+v\n", st, ex)
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range k.nodes {
			if !yield(n) {
				return
			}
		}
	}) {
		h, _ := k.NodeHealthOf(name)
		d, _ := k.NodeDevicesOf(name)
		out += fmt.Sprintf("node %s %s %+v %v\n", name, h, d, k.NodeDeviceIndices(name))
	}
	for _, ns := range []string{"ns-a", "ns-b"} {
		for _, vc := range []string{"vc1", "vc2"} {
			out += fmt.Sprintf("usage %s %s %+v\n", vc, ns, k.NamespaceUsageOf(vc, ns))
		}
	}
	return out
}

// requireSameView fails with the first difference of two views.
func requireSameView(t *testing.T, before, after string, why string) {
	t.Helper()
	if before == after {
		return
	}
	i := 0
	for i < len(before) && i < len(after) && before[i] == after[i] {
		i++
	}
	lo := max(0, i-300)
	t.Fatalf("%s: state changed at offset %d:\nbefore: ...%s\nafter:  ...%s", why, i, before[lo:min(len(before), i+200)], after[lo:min(len(after), i+200)])
}

func ptr32(v int32) *int32 { return &v }

// busyConfig: racks rack0..rack2 of 4 V100 nodes (r<i>-n<j>), r2-n3 pinned
// as pin-1, and two T4 nodes.
func busyConfig() Config {
	cfg := clusterConfig(3, 4, 2)
	cfg.PhysicalCells[2].CellChildren[3].PinnedCellID = "pin-1"
	return cfg
}

// busyCore is a core with groups in every state (Allocated guaranteed,
// opportunistic and lazily downgraded ones, Being preempted with a pod
// lost, Preempting with Reserving and Reserved cells, Pending), bad nodes
// and devices, devices taken without a name and by claims, and VCs with
// policies and a pinned cell.
func busyCore(t *testing.T) *Core {
	t.Helper()
	k := newHealthyCore(t, busyConfig())
	vc1 := vcSpec("vc1", "V100-RACK", 1, "V100-NODE", 1)
	vc1.Selector, vc1.Sequencer = SelectorSpread, SequencerDRF
	vc1.Limits = map[string]NamespaceLimits{"ns-a": {MaxRunningGroups: ptr32(5)}, AllNamespaces: {MaxLeafCells: ptr32(64)}}
	vc2 := vcSpec("vc2", "V100-NODE", 3, "T4-NODE", 1)
	vc2.Selector = SelectorRoundRobin
	vc3 := vcSpec("vc3")
	vc3.PinnedCells = []PinnedCellSpec{{PinnedCellID: "pin-1"}}
	for _, s := range []VirtualClusterSpec{vc1, vc2, vc3} {
		_, err := k.SetVirtualCluster(s)
		require.NoError(t, err)
	}
	a1 := ag("a1", "vc1", 1, 2, 8)
	a1.Namespace = "ns-a"
	vcPlace(t, k, a1)
	vcPlace(t, k, lazyAG("a2", "vc1", 0, 1, 4))
	vcPlace(t, k, ag("o1", "vc2", -1, 1, 2))
	vcPlace(t, k, ag("b1", "vc2", 1, 2, 8))
	vcPlace(t, k, ag("t1", "vc2", 1, 1, 4))
	// b2 needs all three of vc2's nodes: it preempts b1 (Being preempted),
	// and one of b1's pods goes (cell e9: its cells Reserved by b2).
	d, err := k.Schedule(ag("b2", "vc2", 5, 3, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Equal(t, []string{"b1"}, d.Victims)
	_, err = k.DeletePod("b1", "b1-0")
	require.NoError(t, err)
	p1, w1 := ag("p1", "vc3", 0, 1, 4), ag("w1", "vc3", 0, 1, 8)
	p1.PinnedCellID, w1.PinnedCellID = "pin-1", "pin-1"
	vcPlace(t, k, p1)
	d, err = k.Schedule(w1)
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	// Hardware: a bad free node, a bad device, devices taken unnamed and
	// claimed.
	require.NoError(t, k.SetNodeHealth("r2-n2", NodeBad))
	require.NoError(t, k.SetLeafCellHealth("r1-n3", "", 2, true))
	require.NoError(t, k.SetNodeDevices("r2-n1", NodeDevices{Unhealthy: 1, Foreign: 1, Claimed: refs(5)}))
	require.NoError(t, k.SetNodeDevices("t4-1", NodeDevices{Devices: []DeviceStatus{{Index: 1, Health: DeviceMaintenance}}}))
	mustCheck(t, k)
	for g, want := range map[string]AGState{"a1": AGAllocated, "a2": AGAllocated, "o1": AGAllocated, "b1": AGBeingPreempted, "b2": AGPreempting, "p1": AGAllocated, "w1": AGPending, "t1": AGAllocated} {
		st, ok := k.AffinityGroupState(g)
		require.True(t, ok, g)
		require.Equal(t, want, st, g)
	}
	return k
}

// The same configuration again changes nothing any reader sees, whatever
// the state: every group in its state on its cells, every binding, health,
// mark and claim. And the core goes on working: b2 completes its
// preemption on the carried-over reservation.
func TestReplacePhysicalClusterIdempotent(t *testing.T) {
	k := busyCore(t)
	var events []string
	k.OnTransition = func(g string, ev AGEvent, _, to AGState) {
		events = append(events, fmt.Sprintf("%s:%s->%s", g, ev, to))
	}
	before := physView(t, k)
	for i := 0; i < 2; i++ {
		res, err := k.ReplacePhysicalCluster(busyConfig())
		require.NoError(t, err)
		require.True(t, res.Applied, "%+v", res)
		require.Empty(t, res.Rejected)
		require.Empty(t, res.Stranded)
		require.Empty(t, res.Cancelled)
		require.Empty(t, res.AddedNodes)
		require.Empty(t, res.RemovedNodes)
		require.Empty(t, res.ChangedNodes)
		mustCheck(t, k)
		requireSameView(t, before, physView(t, k), "replacing with the same configuration")
	}
	require.Empty(t, events, "no transition")
	// Life goes on: b1's last pod goes, b2 takes its reservation.
	_, err := k.DeletePod("b1", "b1-1")
	require.NoError(t, err)
	d, err := k.Schedule(ag("b2", "vc2", 5, 3, 8))
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind, d.Reason)
	mustCheck(t, k)
	require.Equal(t, []string{"b1:e4->Deleted", "b2:e2->Allocated"}, events, "the hook carried over")
}

// withNodes is busyConfig with a fourth rack of nodes (added) and/or a T4
// node more.
func withRack(cfg Config, name string, nodes ...string) Config {
	cfg.PhysicalCells = append(slices.Clone(cfg.PhysicalCells), rackSpec(name, nodes))
	return cfg
}

func TestReplacePhysicalClusterAddRack(t *testing.T) {
	k := busyCore(t)
	before := physView(t, k)
	cfg := withRack(busyConfig(), "rack3", "r3-n0", "r3-n1", "r3-n2", "r3-n3")
	cfg.PhysicalCells = append(cfg.PhysicalCells, PhysicalCellSpec{CellType: "T4-NODE", CellAddress: "t4-9"})
	res, err := k.ReplacePhysicalCluster(cfg)
	require.NoError(t, err)
	require.True(t, res.Applied, "%+v", res)
	require.Equal(t, []string{"r3-n0", "r3-n1", "r3-n2", "r3-n3", "t4-9"}, res.AddedNodes)
	require.Empty(t, res.RemovedNodes)
	require.Empty(t, res.ChangedNodes)
	mustCheck(t, k)
	// New nodes are Unknown until seen; everything else as it was.
	for _, n := range res.AddedNodes {
		h, ok := k.NodeHealthOf(n)
		require.True(t, ok)
		require.Equal(t, NodeUnknown, h)
		require.NoError(t, k.SetNodeHealth(n, NodeHealthy))
	}
	mustCheck(t, k)
	after := physView(t, k)
	for _, g := range []string{"a1", "a2", "o1", "b1", "b2", "p1", "w1", "t1"} {
		st0, _ := k.AffinityGroupStatus(g)
		require.Contains(t, after, fmt.Sprintf("group %+v\n", st0))
		require.Contains(t, before, fmt.Sprintf("group %+v\n", st0), "group %s unchanged", g)
	}
	// A VC grows into the new rack and uses it.
	vc1 := vcSpec("vc1", "V100-RACK", 2, "V100-NODE", 1)
	vc1.Selector, vc1.Sequencer = SelectorSpread, SequencerDRF
	vc1.Limits = map[string]NamespaceLimits{"ns-a": {MaxRunningGroups: ptr32(5)}, AllNamespaces: {MaxLeafCells: ptr32(64)}}
	_, err = k.SetVirtualCluster(vc1)
	require.NoError(t, err)
	// vc1's old cells hold 20 free leaves: big takes some of the new rack.
	d := vcPlace(t, k, ag("big", "vc1", 1, 4, 8))
	onNew := 0
	for _, p := range d.Pods {
		if p.Node[:3] == "r3-" {
			onNew++
		}
	}
	require.NotZero(t, onNew, "%+v", d.Pods)
	mustCheck(t, k)
}

// removeNode is busyConfig with node name swapped for another name (a
// rack's node count is its type's).
func renameNode(cfg Config, from, to string) Config {
	out := Config{CellTypes: cfg.CellTypes}
	for _, top := range cfg.PhysicalCells {
		top.CellChildren = slices.Clone(top.CellChildren)
		for i := range top.CellChildren {
			if top.CellChildren[i].CellAddress == from {
				top.CellChildren[i].CellAddress = to
			}
		}
		if top.CellAddress == from {
			top.CellAddress = to
		}
		out.PhysicalCells = append(out.PhysicalCells, top)
	}
	return out
}

func withoutTop(cfg Config, addr string) Config {
	out := Config{CellTypes: cfg.CellTypes}
	for _, top := range cfg.PhysicalCells {
		if top.CellAddress != addr {
			out.PhysicalCells = append(out.PhysicalCells, top)
		}
	}
	return out
}

// nodeOf is the node of a group's first pod.
func nodeOf(t *testing.T, k *Core, g string) string {
	st, ok := k.AffinityGroupStatus(g)
	require.True(t, ok)
	return st.Pods[len(st.Pods)-1].Node
}

func TestReplacePhysicalClusterRefused(t *testing.T) {
	t.Run("a node holding a group is stranded", func(t *testing.T) {
		k := busyCore(t)
		before := physView(t, k)
		n := nodeOf(t, k, "a1")
		res, err := k.ReplacePhysicalCluster(renameNode(busyConfig(), n, "elsewhere"))
		require.NoError(t, err)
		require.False(t, res.Applied)
		require.Equal(t, []string{"a1"}, res.Stranded)
		require.Equal(t, []string{n}, res.RemovedNodes)
		require.Equal(t, []string{"elsewhere"}, res.AddedNodes)
		mustCheck(t, k)
		requireSameView(t, before, physView(t, k), "a refused change")
	})
	t.Run("a T4 node holding groups", func(t *testing.T) {
		k := busyCore(t)
		before := physView(t, k)
		n := nodeOf(t, k, "t1")
		res, err := k.ReplacePhysicalCluster(withoutTop(busyConfig(), n))
		require.NoError(t, err)
		require.False(t, res.Applied)
		require.Contains(t, res.Stranded, "t1")
		requireSameView(t, before, physView(t, k), "a refused change")
	})
	t.Run("free capacity a VC needs is rejected with the reason", func(t *testing.T) {
		k := busyCore(t)
		// vc1 owns a rack and a node, vc2 three nodes: removing two racks'
		// worth of free capacity leaves too few.
		before := physView(t, k)
		cfg := busyConfig()
		cfg.CellTypes = gpuTypes(4)
		// The T4 chain goes: vc2's T4-NODE no longer resolves.
		cfg = withoutTop(withoutTop(cfg, "t4-0"), "t4-1")
		res, err := k.ReplacePhysicalCluster(cfg)
		require.NoError(t, err)
		require.False(t, res.Applied)
		require.Equal(t, []VCRejection{{Name: "vc2", Reason: `virtual cluster "vc2": virtualCells[1]: cellType "T4-NODE": unknown cell type (not in any chain of the physical cluster)`}}, res.Rejected)
		requireSameView(t, before, physView(t, k), "a refused change")
		// The same words as SetVirtualCluster on a core of that cluster.
		k2, err := New(cfg)
		require.NoError(t, err)
		_, err = k2.SetVirtualCluster(vcSpec("vc2", "V100-NODE", 3, "T4-NODE", 1))
		require.EqualError(t, err, res.Rejected[0].Reason)
	})
	t.Run("a VC that no longer fits", func(t *testing.T) {
		k := newHealthyCore(t, clusterConfig(2, 4, 0))
		_, err := k.SetVirtualCluster(vcSpec("vc1", "V100-RACK", 1))
		require.NoError(t, err)
		_, err = k.SetVirtualCluster(vcSpec("vc2", "V100-NODE", 3))
		require.NoError(t, err)
		vcPlace(t, k, ag("g", "vc1", 0, 1, 8))
		before := physView(t, k)
		// One rack only: vc1's bound rack stays, vc2's three nodes have no
		// free cell.
		res, err := k.ReplacePhysicalCluster(withoutTop(clusterConfig(2, 4, 0), "rack1"))
		require.NoError(t, err)
		require.False(t, res.Applied)
		require.Len(t, res.Rejected, 1)
		require.Equal(t, "vc2", res.Rejected[0].Name)
		require.Equal(t, `virtual cluster "vc2" does not fit: chain V100-RACK lacks 3 free V100-NODE cell(s) at level 4 for all virtual clusters' unbound cells`, res.Rejected[0].Reason)
		require.Empty(t, res.Stranded)
		require.Equal(t, []string{"r1-n0", "r1-n1", "r1-n2", "r1-n3"}, res.RemovedNodes)
		requireSameView(t, before, physView(t, k), "a refused change")
		mustCheck(t, k)
	})
	t.Run("an invalid configuration is an error", func(t *testing.T) {
		k := busyCore(t)
		before := physView(t, k)
		_, err := k.ReplacePhysicalCluster(Config{CellTypes: gpuTypes(4)})
		require.EqualError(t, err, "physicalCells is empty")
		requireSameView(t, before, physView(t, k), "an invalid configuration")
	})
}

// Free capacity no VC needs goes; a free node changes shape (it moves to
// another chain: an 8-GPU node becomes a T4 node).
func TestReplacePhysicalClusterRemoveFree(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(2, 4, 2))
	_, err := k.SetVirtualCluster(vcSpec("vc1", "V100-RACK", 1, "T4-NODE", 1))
	require.NoError(t, err)
	vcPlace(t, k, ag("g", "vc1", 0, 2, 8))
	vcPlace(t, k, ag("o", "vc1", -1, 1, 1))
	require.NoError(t, k.SetNodeHealth("t4-0", NodeMaintenance))
	require.NoError(t, k.SetNodeDevices("t4-1", NodeDevices{Foreign: 1}))
	gNode := nodeOf(t, k, "g")
	oNode := nodeOf(t, k, "o")
	free := ""
	for _, n := range []string{"t4-0", "t4-1"} {
		if n != oNode {
			free = n
		}
	}
	require.NotEmpty(t, free)
	gst, _ := k.AffinityGroupStatus("g")
	// The other rack goes whole (unless g or o are on it).
	other := "rack1"
	if gNode[:2] == "r1" || oNode[:2] == "r1" {
		other = "rack0"
	}
	cfg := withoutTop(clusterConfig(2, 4, 2), other)
	res, err := k.ReplacePhysicalCluster(cfg)
	require.NoError(t, err)
	require.True(t, res.Applied, "%+v", res)
	require.Len(t, res.RemovedNodes, 4)
	mustCheck(t, k)
	st, _ := k.AffinityGroupStatus("g")
	require.Equal(t, gst, st)
	h, _ := k.NodeHealthOf("t4-0")
	require.Equal(t, NodeMaintenance, h)
	d, _ := k.NodeDevicesOf("t4-1")
	require.EqualValues(t, 1, d.Foreign)
	// A free T4 node changes shape: 2 devices instead of 4 (its own chain).
	// Its devices keep their health and claims by index (those that are
	// left), its unnamed counts stay.
	d0, _ := k.NodeDevicesOf(free)
	d0.Devices = []DeviceStatus{{Index: 1, Health: DeviceBad}, {Index: 3, Health: DeviceRetired}}
	d0.Claimed = refs(0)
	require.NoError(t, k.SetNodeDevices(free, d0))
	mustCheck(t, k)
	cfg.CellTypes = gpuTypes(4)
	cfg.CellTypes["T4X2-NODE"] = CellTypeSpec{ChildCellType: "T4", ChildCellNumber: 2, IsNodeLevel: true}
	for i := range cfg.PhysicalCells {
		if cfg.PhysicalCells[i].CellAddress == free {
			cfg.PhysicalCells[i].CellType = "T4X2-NODE"
		}
	}
	res, err = k.ReplacePhysicalCluster(cfg)
	require.NoError(t, err)
	require.True(t, res.Applied, "%+v", res)
	require.Equal(t, []string{free}, res.ChangedNodes)
	require.Equal(t, []int32{0, 1}, k.NodeDeviceIndices(free))
	mustCheck(t, k)
	d1, _ := k.NodeDevicesOf(free)
	require.Equal(t, []DeviceStatus{{LeafCellType: "T4", Index: 1, Health: DeviceBad}}, d1.Devices)
	require.Equal(t, []DeviceRef{{LeafCellType: "T4", Index: 0}}, d1.Claimed)
	require.Equal(t, d0.Foreign, d1.Foreign)
	st, _ = k.AffinityGroupStatus("g")
	require.Equal(t, gst, st)
}

// A preemptor whose reserved cells vanish goes back to Pending (AG e5): its
// victim gets its cells back (cell e4) and is Allocated again (x2), and the
// VC's cell it had bound for its other Reserved cells is unbound.
func TestReplacePhysicalClusterCancelsPreemptor(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("vc1", "V100-NODE", 3))
	require.NoError(t, err)
	vcPlace(t, k, ag("low", "vc1", 0, 1, 8))
	// high needs three nodes: two free (Reserved), low's (Reserving).
	d, err := k.Schedule(ag("high", "vc1", 5, 3, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	lowNode := nodeOf(t, k, "low")
	var reservedNodes []string
	for _, l := range k.Snapshot().LeafCells {
		if l.State == CellReserved && !slices.Contains(reservedNodes, l.Node) {
			reservedNodes = append(reservedNodes, l.Node)
		}
	}
	require.Len(t, reservedNodes, 2)
	st, _ := k.VirtualClusterStatus("vc1")
	require.EqualValues(t, 3, st.Cells[0].Bound)
	var events []string
	k.OnTransition = func(g string, ev AGEvent, _, to AGState) {
		events = append(events, fmt.Sprintf("%s:%s->%s", g, ev, to))
	}
	// One reserved node is replaced by another one.
	res, err := k.ReplacePhysicalCluster(renameNode(clusterConfig(1, 4, 0), reservedNodes[0], "r0-new"))
	require.NoError(t, err)
	require.True(t, res.Applied, "%+v", res)
	require.Equal(t, []string{"high"}, res.Cancelled)
	require.Equal(t, []string{"r0-new"}, res.AddedNodes)
	require.Equal(t, reservedNodes[:1], res.RemovedNodes)
	require.Equal(t, []string{"high:e5->Pending", "low:x2->Allocated"}, events)
	mustCheck(t, k)
	for _, l := range k.Snapshot().LeafCells {
		if l.Node == lowNode {
			require.Equal(t, CellUsed, l.State)
			require.Equal(t, "low", l.UsingGroup)
		} else {
			require.Equal(t, CellFree, l.State)
		}
	}
	st, _ = k.VirtualClusterStatus("vc1")
	require.EqualValues(t, 1, st.Cells[0].Bound, "only low's node stays bound")
	// high preempts again on the new cells once r0-new is seen.
	require.NoError(t, k.SetNodeHealth("r0-new", NodeHealthy))
	d, err = k.Schedule(ag("high", "vc1", 5, 3, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	mustCheck(t, k)
}

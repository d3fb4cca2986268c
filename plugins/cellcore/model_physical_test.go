package cellcore

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestModelPhysicalChanges is the randomized model test with one more
// operation: the physical cluster changes (ReplacePhysicalCluster), as
// DRA ResourceSlices appear, change and vanish. It runs in seeds of its own
// (1000 past -model.seed), so TestModelRandomized's runs and make
// core-decisions-compare's digests are those of a core without the
// operation. After every step, the model test's checks run: CheckInvariants
// (safety) and the VC guarantee (every pending guaranteed group that the
// oracle says fits its VC is scheduled again and must not wait), so also
// after every change.
//
// Each change is checked on its own: a refused one (Stranded or Rejected)
// changes nothing (the snapshot is the same), names exactly the groups that
// hold leaves the new cluster lacks, and is refused whenever a VC does not
// fit the new cluster even empty; an applied one keeps every group on the
// same leaves in the same state (but preemptors it cancels, and their
// victims) and every VC at its size.
func TestModelPhysicalChanges(t *testing.T) {
	const runs = 2
	per := *modelOps / 8 / runs
	for r := 0; r < runs; r++ {
		seed := *modelSeed + 1000 + int64(r)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			m := newModelRun(t, seed)
			m.mild = r == 1
			for i := 0; i < per; i++ {
				if m.r.Intn(20) == 0 {
					m.physicalChange(i)
					continue
				}
				m.step(i)
			}
			t.Logf("%d operations (mild hardware faults: %v): %v", per, m.mild, m.stats)
			require.NotZero(t, m.stats["phys-applied"])
			require.NotZero(t, m.stats["phys-stranded"])
			require.NotZero(t, m.stats["phys-rejected"])
		})
	}
}

// cloneConfig copies what drawChange edits.
func cloneConfig(cfg Config) Config {
	out := Config{CellTypes: maps.Clone(cfg.CellTypes), PhysicalCells: slices.Clone(cfg.PhysicalCells)}
	for i := range out.PhysicalCells {
		out.PhysicalCells[i].CellChildren = slices.Clone(out.PhysicalCells[i].CellChildren)
	}
	return out
}

// busyNodes: nodes where a group uses some leaf. A node whose leaves are
// only Reserved counts as free: taking it cancels its preemptors.
func busyNodes(s Snapshot) map[string]bool {
	out := map[string]bool{}
	for _, l := range s.LeafCells {
		if l.UsingGroup != "" {
			out[l.Node] = true
		}
	}
	return out
}

// drawChange draws a new physical cluster: a T4 node or a rack added, a T4
// node or a rack removed, a rack's node replaced by another (removed and
// added), a T4 node's shape changed (4 devices <-> 2, another chain). The
// node or rack to take is a free one half of the time. One change in
// eight is the same cluster again (nothing may change).
func (m *modelRun) drawChange(snap Snapshot) (Config, string) {
	cfg := cloneConfig(m.cfg)
	busy := busyNodes(snap)
	m.next++
	// Some times in four, a node where a preemptor holds Reserved cells
	// goes (cancelled by AG e5 unless a group uses a leaf of it too).
	var reserved []string
	for _, l := range snap.LeafCells {
		if l.State == CellReserved && (len(reserved) == 0 || reserved[len(reserved)-1] != l.Node) {
			reserved = append(reserved, l.Node)
		}
	}
	if m.r.Intn(8) == 0 {
		return cfg, "same"
	}
	if len(reserved) > 0 && m.r.Intn(4) == 0 {
		node := m.pick(reserved)
		for i := range cfg.PhysicalCells {
			c := &cfg.PhysicalCells[i]
			if c.CellAddress == node {
				cfg.PhysicalCells = append(cfg.PhysicalCells[:i:i], cfg.PhysicalCells[i+1:]...)
				return cfg, "remove-reserved"
			}
			for j := range c.CellChildren {
				if n := &c.CellChildren[j]; n.CellAddress == node {
					n.CellAddress = fmt.Sprintf("%s-m%d", strings.SplitN(node, "-", 2)[0], m.next)
					return cfg, "remove-reserved"
				}
			}
		}
	}
	var t4, racks []int
	for i, c := range cfg.PhysicalCells {
		if c.CellType == "V100-RACK" {
			racks = append(racks, i)
		} else {
			t4 = append(t4, i)
		}
	}
	// pick an index of list, a free one half of the time if there is.
	pick := func(list []int, free func(int) bool) int {
		if m.r.Intn(2) == 0 {
			var f []int
			for _, i := range list {
				if free(i) {
					f = append(f, i)
				}
			}
			if len(f) > 0 {
				return f[m.r.Intn(len(f))]
			}
		}
		return list[m.r.Intn(len(list))]
	}
	freeTop := func(i int) bool {
		c := cfg.PhysicalCells[i]
		if busy[c.CellAddress] {
			return false
		}
		for _, n := range c.CellChildren {
			if busy[n.CellAddress] {
				return false
			}
		}
		return true
	}
	remove := func(i int) {
		cfg.PhysicalCells = append(cfg.PhysicalCells[:i:i], cfg.PhysicalCells[i+1:]...)
	}
	switch op := m.r.Intn(6); {
	case op == 0 || (op == 2 || op == 5) && len(t4) < 2:
		cfg.PhysicalCells = append(cfg.PhysicalCells, PhysicalCellSpec{CellType: "T4-NODE", CellAddress: fmt.Sprintf("t4-a%d", m.next)})
		return cfg, "add-t4"
	case op == 1 && len(racks) < 6 || op == 3 && len(racks) < 2:
		var nodes []string
		for j := 0; j < 4; j++ {
			nodes = append(nodes, fmt.Sprintf("x%d-n%d", m.next, j))
		}
		cfg.PhysicalCells = append(cfg.PhysicalCells, rackSpec(fmt.Sprintf("rack-x%d", m.next), nodes))
		return cfg, "add-rack"
	case op == 2:
		remove(pick(t4, freeTop))
		return cfg, "remove-t4"
	case op == 3 || op == 1:
		remove(pick(racks, freeTop))
		return cfg, "remove-rack"
	case op == 4:
		var nodes [][2]int
		for _, i := range racks {
			for j := range cfg.PhysicalCells[i].CellChildren {
				nodes = append(nodes, [2]int{i, j})
			}
		}
		idx := make([]int, len(nodes))
		for i := range idx {
			idx[i] = i
		}
		x := nodes[pick(idx, func(i int) bool {
			return !busy[cfg.PhysicalCells[nodes[i][0]].CellChildren[nodes[i][1]].CellAddress]
		})]
		n := &cfg.PhysicalCells[x[0]].CellChildren[x[1]]
		// The rack's prefix stays (checkWithinPods reads racks from names).
		n.CellAddress = fmt.Sprintf("%s-m%d", strings.SplitN(n.CellAddress, "-", 2)[0], m.next)
		return cfg, "replace-node"
	default:
		i := pick(t4, freeTop)
		c := &cfg.PhysicalCells[i]
		if c.CellType == "T4-NODE" {
			x2 := cfg.CellTypes["T4-NODE"]
			x2.ChildCellNumber = 2
			cfg.CellTypes["T4X2-NODE"] = x2
			c.CellType = "T4X2-NODE"
		} else {
			c.CellType = "T4-NODE"
		}
		return cfg, "reshape-t4"
	}
}

// physicalChange is the model's physical cluster change and its checks.
func (m *modelRun) physicalChange(step int) {
	t := m.t
	snap := m.k.Snapshot()
	before := m.fingerprint()
	cfg, what := m.drawChange(snap)
	m.stats["phys-"+what]++

	// What the new cluster lacks, from the configuration alone: the leaf
	// IDs of a core built from it, and the VCs that do not fit it empty.
	fresh, err := New(cfg)
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, l := range fresh.Snapshot().LeafCells {
		ids[l.ID] = true
	}
	var wantStranded []string
	for _, g := range snap.AffinityGroups {
		if g.State != AGAllocated && g.State != AGBeingPreempted {
			continue
		}
		for _, l := range snap.LeafCells {
			if (l.UsingGroup == g.Name) && !ids[l.ID] {
				wantStranded = append(wantStranded, g.Name)
				break
			}
		}
	}
	sort.Strings(wantStranded)
	freshRefuses := map[string]string{}
	for _, n := range m.vcNames() {
		if _, err := fresh.SetVirtualCluster(m.vcs[n]); err != nil {
			freshRefuses[n] = err.Error()
		}
	}

	res, err := m.k.ReplacePhysicalCluster(cfg)
	require.NoError(t, err)
	require.False(t, res.Busy, "this core never says Busy")
	require.Equal(t, wantStranded, nilIfEmpty(res.Stranded), "stranded groups (%s)", what)
	for _, rj := range res.Rejected {
		require.Contains(t, m.vcs, rj.Name)
		require.True(t, strings.HasPrefix(rj.Reason, fmt.Sprintf("virtual cluster %q", rj.Name)), rj.Reason)
		if want, ok := freshRefuses[rj.Name]; ok {
			require.Equal(t, want, rj.Reason, "SetVirtualCluster's words")
		}
	}
	if len(freshRefuses) > 0 {
		require.False(t, res.Applied, "a VC that does not fit the new cluster even empty (%v) is never shrunk", freshRefuses)
		if len(res.Stranded) == 0 {
			require.NotEmpty(t, res.Rejected)
		}
	}
	if what == "same" {
		require.True(t, res.Applied, "the same cluster again is applied: %+v", res)
	}
	if !res.Applied {
		require.True(t, len(res.Stranded) > 0 || len(res.Rejected) > 0, "a refusal says why: %+v", res)
		m.sameState(before, "step %d: a refused physical change (%s: %+v) changed the state", step, what, res)
		if len(res.Stranded) > 0 {
			m.stats["phys-stranded"]++
		}
		if len(res.Rejected) > 0 {
			m.stats["phys-rejected"]++
			if len(freshRefuses) == 0 {
				m.stats["phys-rejected-with-cells"]++ // fits empty, not with the cells bound
			}
		}
	} else {
		require.Empty(t, res.Stranded)
		require.Empty(t, res.Rejected)
		m.stats["phys-applied"]++
		if what == "same" {
			// The same cluster again: nothing any reader sees changes.
			require.Empty(t, res.AddedNodes)
			require.Empty(t, res.RemovedNodes)
			require.Empty(t, res.ChangedNodes)
			require.Empty(t, res.Cancelled)
			m.sameState(before, "step %d: the same physical cluster again", step)
		}
		m.stats["phys-cancelled"] += len(res.Cancelled)
		for _, g := range snap.AffinityGroups {
			if g.State == AGPreempting || g.State == AGBeingPreempted {
				m.stats["phys-carried-"+strings.ReplaceAll(g.State.String(), " ", "-")]++
			}
		}
		after := m.k.Snapshot()
		// Groups: the same leaves, the same states, but cancelled
		// preemptors (Pending) and their victims (Allocated again, or
		// still Being preempted by another preemptor).
		cancelled := map[string]bool{}
		for _, n := range res.Cancelled {
			cancelled[n] = true
		}
		require.Equal(t, len(snap.AffinityGroups), len(after.AffinityGroups))
		for i, g := range snap.AffinityGroups {
			a := after.AffinityGroups[i]
			switch {
			case cancelled[g.Name]:
				require.Equal(t, AGPreempting, g.State)
				require.Equal(t, AGPending, a.State)
			case g.State == AGBeingPreempted && a.State == AGAllocated && len(res.Cancelled) > 0:
				g.State = AGAllocated
				require.Equal(t, g, a)
			default:
				require.Equal(t, g, a, "group %s carried over", g.Name)
			}
		}
		// VCs: the same size.
		for i, v := range snap.VirtualClusters {
			w := after.VirtualClusters[i]
			require.Equal(t, v.Name, w.Name)
			for j, c := range v.Cells {
				require.Equal(t, c.Total, w.Cells[j].Total, "VC %s %s", v.Name, c.CellType)
			}
		}
		// The plugin's view of the nodes follows the new cluster.
		removed := map[string]bool{}
		for _, n := range res.RemovedNodes {
			removed[n] = true
			delete(m.health, n)
			delete(m.devices, n)
		}
		for _, n := range res.AddedNodes {
			require.NoError(t, m.k.SetNodeHealth(n, NodeHealthy))
			m.health[n] = NodeHealthy
		}
		for _, n := range res.ChangedNodes {
			got, ok := m.k.NodeDevicesOf(n)
			require.True(t, ok)
			h, _ := m.k.NodeHealthOf(n)
			require.Equal(t, m.health[n], h, "node %s keeps its health", n)
			d := NodeDevices{Devices: setDevice(got.Devices, -1, DeviceGood), Unhealthy: got.Unhealthy, Foreign: got.Foreign, Claimed: got.Claimed}
			for i := range d.Devices {
				d.Devices[i].LeafCellType = ""
			}
			m.devices[n] = d
		}
		for n := range m.k.nodes {
			_, ok := m.health[n]
			require.True(t, ok, "node %s known to the model", n)
		}
		m.cfg = cfg
	}
	if err := m.k.CheckInvariants(); err != nil {
		t.Fatalf("step %d, after a physical change (%s): %v", step, what, err)
	}
	// A change leaves no VC cell bound that nothing uses.
	require.Empty(t, idleBoundCells(m.k), "step %d: VC cells bound with no guaranteed leaf after a physical change (%s)", step, what)
	m.requeueWaiting(step)
	if err := m.k.CheckInvariants(); err != nil {
		t.Fatalf("step %d, after a physical change (%s) and requeueing: %v", step, what, err)
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// idleBoundCells lists the VCs' bound cells (not pinned, not doomed) that
// no guaranteed leaf uses (finish unbinds those whose last guaranteed leaf
// went).
func idleBoundCells(k *Core) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, ch := range k.chainOrder {
		for _, p := range ch.vcPools {
			for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
				for _, r := range p.roots.buckets[key] {
					if r.guarLeaves == 0 && !r.doomed {
						out = append(out, r.ID())
					}
				}
			}
		}
	}
	return out
}

package cellcore

import (
	"sort"
)

// CellRecord is one physical cell as the inspect API shows it: a flat copy
// of its mutable state taken under the core's lock (CellRecords), which the
// caller turns into a tree outside it, so that an operator's view costs
// scheduling as little as possible (BenchmarkInspect in plugins/inspect
// measures it). What never changes after the model is built (type, address,
// node, device index) is read through the cell, without the lock.
type CellRecord struct {
	cell   *Cell
	Parent int32 // index of the parent record, -1 for a top cell
	// Health: "good", "doomed" (a VC keeps it bound to lost hardware), a
	// leaf's own device health when not good (unknown, looping, bad,
	// maintenance, retired), "unhealthy" (counted as one of the node's
	// unnamed unhealthy devices), "foreign" (counted as held by a pod
	// hivesched did not place), or the node's health when not schedulable.
	Health string
	// BindingRoot: the cell is bound to a VC (or is a pinned cell) as a
	// whole; VirtualCluster and PinnedCellID are set on it and below.
	BindingRoot    bool
	VirtualCluster string
	PinnedCellID   string
	// Leaves only.
	State     CellState
	Group     string
	Priority  int32 // of Group; -2 when free
	Reserving string
	// Leaf counts below the cell.
	Leaves, Used, Free, Bad int32
}

// Chain is the name of the cell's chain (its top-level cell type).
func (r *CellRecord) Chain() string { return r.cell.chain.name }

// LeafType is the leaf cell type of the cell's chain.
func (r *CellRecord) LeafType() string { return r.cell.chain.leafType }

// CellType is the cell's type.
func (r *CellRecord) CellType() string { return r.cell.chain.levelType[r.cell.level] }

// Level is the cell's level: 1 for leaf cells.
func (r *CellRecord) Level() int { return int(r.cell.level) }

// Address is the cell's address (a node name at node level, a device index
// for a leaf).
func (r *CellRecord) Address() string { return r.cell.address }

// Node is the node of a cell at or below node level.
func (r *CellRecord) Node() string { return r.cell.NodeName() }

// Index is a leaf cell's device index (-1 above the leaves).
func (r *CellRecord) Index() int32 {
	if r.cell.isLeaf() {
		return r.cell.index
	}
	return -1
}

// CellRecords copies the physical cells, depth first, each after its
// parent: all of them, or (vc) the cells bound to a VC and their ancestors,
// or (node) a node's cells and their ancestors. The copy is appended to buf
// (pass the last answer, emptied, to reuse its memory). It holds the core's
// lock for one walk of what it copies and allocates nothing else.
func (k *Core) CellRecords(buf []CellRecord, vc, node string) []CellRecord {
	k.mu.Lock()
	defer k.mu.Unlock()
	w := recordWalker{out: buf[:0]}
	switch {
	case node != "":
		if n := k.nodes[node]; n != nil {
			w.at = map[*Cell]int32{}
			for _, c := range n.cells {
				w.subtree(c)
			}
		}
	case vc != "":
		if v := k.vcs[vc]; v != nil {
			w.at = map[*Cell]int32{}
			for _, ch := range k.chainOrder {
				p := v.pools[ch]
				if p == nil {
					continue
				}
				var roots []*Cell
				for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
					roots = append(roots, p.roots.buckets[key]...)
				}
				sort.Slice(roots, func(i, j int) bool { return cellBefore(roots[i], roots[j]) })
				for _, r := range roots {
					w.subtree(r)
				}
			}
			for _, p := range v.pinned {
				w.subtree(k.pinned[p.pinnedID])
			}
		}
	default:
		if w.out == nil {
			w.out = make([]CellRecord, 0, k.cellCount)
		}
		for _, ch := range k.chainOrder {
			for _, t := range ch.tops {
				w.walk(t, -1, "", "")
			}
		}
	}
	return w.out
}

// cellBefore orders cells of one chain as a depth-first walk meets them.
func cellBefore(a, b *Cell) bool {
	pa, pb := a.pathFromTop(), b.pathFromTop()
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return len(pa) < len(pb)
}

// pathFromTop is the cell's position: its top cell's index among the
// chain's tops, then its index among its siblings at each level.
func (c *Cell) pathFromTop() []int {
	var path []int
	for x := c; x != nil; x = x.parent {
		sibs := x.chain.tops
		if x.parent != nil {
			sibs = x.parent.children
		}
		for i, s := range sibs {
			if s == x {
				path = append(path, i)
				break
			}
		}
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}

type recordWalker struct {
	out []CellRecord
	at  map[*Cell]int32 // filtered walks: ancestors already copied
}

// subtree copies c's ancestors (those not copied yet) and c's subtree.
func (w *recordWalker) subtree(c *Cell) {
	var up []*Cell
	for x := c.parent; x != nil; x = x.parent {
		up = append(up, x)
	}
	parent, vc, pinned := int32(-1), "", ""
	for i := len(up) - 1; i >= 0; i-- {
		a := up[i]
		vc, pinned = bindingOf(a, vc, pinned)
		if at, ok := w.at[a]; ok {
			parent = at
			continue
		}
		w.out = append(w.out, record(a, parent, vc, pinned))
		parent = int32(len(w.out) - 1)
		w.at[a] = parent
	}
	w.walk(c, parent, vc, pinned)
}

func (w *recordWalker) walk(c *Cell, parent int32, vc, pinned string) {
	vc, pinned = bindingOf(c, vc, pinned)
	w.out = append(w.out, record(c, parent, vc, pinned))
	me := int32(len(w.out) - 1)
	for _, ch := range c.children {
		w.walk(ch, me, vc, pinned)
	}
}

// bindingOf is the VC and pinned cell of c, given its parent's.
func bindingOf(c *Cell, vc, pinned string) (string, string) {
	if c.pool != nil && (c.pool.vc != nil || c.pool.pinnedID != "") {
		pinned = c.pool.pinnedID
		if c.pool.vc != nil {
			vc = c.pool.vc.name
		}
	}
	return vc, pinned
}

func record(c *Cell, parent int32, vc, pinned string) CellRecord {
	r := CellRecord{cell: c, Parent: parent, Priority: -2, VirtualCluster: vc, PinnedCellID: pinned,
		Leaves: c.leafCount, Used: c.guarLeaves + c.oppLeaves, Free: c.freeLeaves, Bad: c.lostLeaves, Health: "good"}
	r.BindingRoot = c.pool != nil && (c.pool.vc != nil || c.pool.pinnedID != "")
	switch {
	case c.doomed:
		r.Health = "doomed"
	case c.isLeaf() && c.device != DeviceGood:
		r.Health = c.device.String()
	case c.isLeaf() && c.mark == markUnhealthy:
		r.Health = "unhealthy"
	case c.isLeaf() && c.mark == markForeign:
		r.Health = "foreign"
	case c.node != nil && c.node.health != NodeHealthy:
		r.Health = healthNames[c.node.health]
	}
	if c.isLeaf() {
		r.State = c.state
		if c.using != nil {
			r.Group, r.Priority = c.using.spec.Name, c.using.reportedPriority()
		}
		if c.reserving != nil {
			r.Reserving = c.reserving.spec.Name
		}
	}
	return r
}

// healthNames are the lowercase node healths, without allocating.
var healthNames = map[NodeHealth]string{NodeUnknown: "unknown", NodeHealthy: "healthy", NodeBad: "bad", NodeMaintenance: "maintenance", NodeRetired: "retired", NodeLooping: "looping"}

// GroupExplanation is what the inspect API says of one group.
type GroupExplanation struct {
	AffinityGroupStatus
	// Reason: why a Pending or Preempting group waits (one sentence).
	Reason  string
	Victims []string
	// Holders: the groups using or reserving leaf cells bound to the
	// group's VC, highest priority first.
	Holders []GroupHolder
}

// GroupHolder is a group holding some of a VC's cells.
type GroupHolder struct {
	Group     string
	Priority  int32 // effective: -1 for opportunistic and downgraded
	LeafCells int32
}

// ExplainAffinityGroup returns the group's status, why it waits and who
// holds its VC's cells.
func (k *Core) ExplainAffinityGroup(name string) (GroupExplanation, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	g := k.groups[name]
	if g == nil {
		return GroupExplanation{}, false
	}
	e := GroupExplanation{AffinityGroupStatus: k.groupStatus(g)}
	switch g.state {
	case AGPending:
		e.Reason = k.waitReason(g)
	case AGPreempting:
		e.Victims = k.victimsOf(g)
	}
	held := map[*AffinityGroup]int32{}
	if v := k.vcs[g.spec.VirtualCluster]; v != nil {
		for _, ch := range k.chainOrder {
			p := v.pools[ch]
			if p == nil {
				continue
			}
			for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
				for _, r := range p.roots.buckets[key] {
					r.forEachLeaf(func(l *Cell) {
						if l.using != nil && l.using != g {
							held[l.using]++
						} else if l.reserving != nil && l.reserving != g {
							held[l.reserving]++
						}
					})
				}
			}
		}
	}
	for h, n := range held {
		e.Holders = append(e.Holders, GroupHolder{Group: h.spec.Name, Priority: h.reportedPriority(), LeafCells: n})
	}
	sort.Slice(e.Holders, func(i, j int) bool {
		a, b := e.Holders[i], e.Holders[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return a.Group < b.Group
	})
	return e, true
}

// AffinityGroupNames lists the known groups, sorted.
func (k *Core) AffinityGroupNames() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.groupNames()
}

// LeafUsage counts leaf cells of one leaf cell type.
type LeafUsage struct {
	Total int32
	// Free: schedulable and in state Free (for a VC: also its virtual
	// cells not bound yet, which healthy free capacity backs).
	Free int32
	// Used: used by a group (for a VC: by its guaranteed groups, in its
	// cells); Opportunistic: used by opportunistic groups (for a VC: its
	// own, wherever they run).
	Used, Opportunistic int32
	// Reserved: reserved by a preempting group (states Reserving and
	// Reserved).
	Reserved int32
	// Bad: lost to bad, maintenance or retired hardware (for a VC: its
	// cells bound to such hardware, doomed or not).
	Bad int32
}

// Usage is the leaf cell counts the metrics report: for the whole cluster
// and for each VC, by leaf cell type.
type Usage struct {
	Cluster map[string]LeafUsage            // by leaf cell type
	VCs     map[string]map[string]LeafUsage // by VC, then leaf cell type
}

// LeafUsage counts every leaf cell once, under the core's lock, with one
// walk of the leaves (about a millisecond at 10k nodes: scraping metrics
// does not hold up scheduling).
func (k *Core) LeafUsage() Usage {
	k.mu.Lock()
	defer k.mu.Unlock()
	u := Usage{Cluster: map[string]LeafUsage{}, VCs: map[string]map[string]LeafUsage{}}
	for _, ch := range k.chainOrder {
		var c LeafUsage
		for _, t := range ch.tops {
			t.forEachLeaf(func(l *Cell) {
				c.Total++
				switch {
				case l.lost():
					c.Bad++
				case l.state == CellFree && l.schedulable():
					c.Free++
				}
				if l.using != nil {
					c.Used++
					if l.using.opportunistic() {
						c.Opportunistic++
					}
				}
				if l.reserving != nil {
					c.Reserved++
				}
			})
		}
		sum := u.Cluster[ch.leafType]
		sum.Total += c.Total
		sum.Free += c.Free
		sum.Used += c.Used
		sum.Opportunistic += c.Opportunistic
		sum.Reserved += c.Reserved
		sum.Bad += c.Bad
		u.Cluster[ch.leafType] = sum
	}
	for name, v := range k.vcs {
		st := k.vcStatus(v)
		byType := map[string]LeafUsage{}
		add := func(leafType string, total, used, free, bad int32) {
			x := byType[leafType]
			x.Total += total
			x.Used += used
			x.Free += free
			x.Bad += bad
			byType[leafType] = x
		}
		for _, c := range st.Cells {
			add(c.LeafCellType, c.LeafCells, c.UsedLeafCells, c.FreeLeafCells, c.BadLeafCells)
		}
		for _, c := range st.PinnedCells {
			add(c.LeafCellType, c.LeafCells, c.UsedLeafCells, c.FreeLeafCells, c.BadLeafCells)
		}
		for t, n := range st.OpportunisticLeafCellsByType {
			x := byType[t]
			x.Opportunistic += n
			byType[t] = x
		}
		countReserved := func(r *Cell) {
			r.forEachLeaf(func(l *Cell) {
				if l.reserving != nil {
					x := byType[l.chain.leafType]
					x.Reserved++
					byType[l.chain.leafType] = x
				}
			})
		}
		for _, ch := range k.chainOrder {
			if p := v.pools[ch]; p != nil {
				for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
					for _, r := range p.roots.buckets[key] {
						countReserved(r)
					}
				}
			}
		}
		for _, p := range v.pinned {
			countReserved(k.pinned[p.pinnedID])
		}
		u.VCs[name] = byType
	}
	return u
}

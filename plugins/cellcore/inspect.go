package cellcore

import (
	"sort"
	"strings"
)

// CellRecord is one physical cell as the inspect API shows it: a flat copy
// taken under the core's lock (CellRecords), which the caller turns into a
// tree outside it, so that an operator's view costs scheduling as little as
// possible (measured in docs/cellcore.md).
type CellRecord struct {
	Parent   int32 // index of the parent record, -1 for a top cell
	Chain    string
	LeafType string
	CellType string
	Level    int
	Address  string
	Node     string
	Index    int32 // leaves: device index
	// Health: "good", "doomed" (a VC keeps it bound to lost hardware), or
	// the node's health (or "bad" for a bad device) when not schedulable.
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

// CellRecords copies every physical cell, depth first, each after its
// parent. It holds the core's lock for one walk and allocates one slice.
func (k *Core) CellRecords() []CellRecord {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]CellRecord, 0, k.cellCount)
	var walk func(c *Cell, parent int32, vc, pinned string)
	walk = func(c *Cell, parent int32, vc, pinned string) {
		r := CellRecord{Parent: parent, Chain: c.chain.name, LeafType: c.chain.leafType, CellType: c.chain.levelType[c.level],
			Level: int(c.level), Address: c.address, Node: c.NodeName(), Index: -1, Priority: -2,
			Leaves: c.leafCount, Used: c.guarLeaves + c.oppLeaves, Free: c.freeLeaves, Bad: c.lostLeaves, Health: "good"}
		if c.pool != nil && (c.pool.vc != nil || c.pool.pinnedID != "") {
			r.BindingRoot = true
			pinned = c.pool.pinnedID
			if c.pool.vc != nil {
				vc = c.pool.vc.name
			}
		}
		r.VirtualCluster, r.PinnedCellID = vc, pinned
		switch {
		case c.doomed:
			r.Health = "doomed"
		case c.isLeaf() && c.deviceBad:
			r.Health = "bad"
		case c.node != nil && c.node.health != NodeHealthy:
			r.Health = strings.ToLower(c.node.health.String())
		}
		if c.isLeaf() {
			r.Index, r.State = c.index, c.state
			if c.using != nil {
				r.Group, r.Priority = c.using.spec.Name, c.using.priority()
			}
			if c.reserving != nil {
				r.Reserving = c.reserving.spec.Name
			}
		}
		out = append(out, r)
		me := int32(len(out) - 1)
		for _, ch := range c.children {
			walk(ch, me, vc, pinned)
		}
	}
	for _, ch := range k.chainOrder {
		for _, t := range ch.tops {
			walk(t, -1, "", "")
		}
	}
	return out
}

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
		e.Holders = append(e.Holders, GroupHolder{Group: h.spec.Name, Priority: h.priority(), LeafCells: n})
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
		for _, c := range st.Cells {
			x := byType[c.LeafCellType]
			x.Total += c.LeafCells
			x.Used += c.UsedLeafCells
			x.Free += c.FreeLeafCells
			x.Bad += c.BadLeafCells
			byType[c.LeafCellType] = x
		}
		for _, c := range st.PinnedCells {
			x := byType[c.LeafCellType]
			x.Total += c.LeafCells
			x.Used += c.UsedLeafCells
			x.Free += c.FreeLeafCells
			x.Bad += c.BadLeafCells
			byType[c.LeafCellType] = x
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

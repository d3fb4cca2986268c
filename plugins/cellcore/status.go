package cellcore

import (
	"fmt"
	"sort"
)

// CellLevelStatus is a VC's reservation at one (chain, level).
type CellLevelStatus struct {
	Chain        string
	LeafCellType string
	CellType     string
	Level        int
	// Virtual cells: reserved, bound to physical cells, and bound to lost
	// hardware (bad: doomed, or bound cells whose hardware went bad).
	Total, Bound, Bad int32
	// Leaf cells under these virtual cells: total, used or reserved by the
	// VC's guaranteed groups, free and healthy, and lost.
	LeafCells, UsedLeafCells, FreeLeafCells, BadLeafCells int32
}

// PinnedCellStatus is one pinned cell of a VC.
type PinnedCellStatus struct {
	PinnedCellID                                          string
	CellType                                              string
	LeafCellType                                          string
	LeafCells, UsedLeafCells, FreeLeafCells, BadLeafCells int32
}

// VirtualClusterStatus is a VC's usage, cheap to compute (its bound cells only).
type VirtualClusterStatus struct {
	Name           string
	Cells          []CellLevelStatus
	PinnedCells    []PinnedCellStatus
	AffinityGroups map[AGState]int
	// The VC's groups running as opportunistic (priority -1, or lazily
	// preempted / displaced guaranteed groups) and the leaf cells they use,
	// wherever those are: they are preemptible and outside the VC's cells.
	OpportunisticGroups    int
	OpportunisticLeafCells int32
	DowngradedGroups       int
	// OpportunisticLeafCellsByType splits OpportunisticLeafCells by leaf
	// cell type.
	OpportunisticLeafCellsByType map[string]int32
	// Of the leaf cells under the VC's cells: lost ones (bad hardware, or
	// held by pods hivesched did not place), and of those the ones foreign
	// pods hold, with the nodes they are on (sorted).
	LostLeafCells, ForeignLeafCells int32
	ForeignNodes                    []string
	// LostNodes are the nodes of the VC's lost leaf cells (sorted).
	LostNodes []string
}

// VirtualClusterStatus returns one VC's status.
func (k *Core) VirtualClusterStatus(name string) (VirtualClusterStatus, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v := k.vcs[name]
	if v == nil {
		return VirtualClusterStatus{}, false
	}
	return k.vcStatus(v), true
}

func (k *Core) vcStatus(v *vcState) VirtualClusterStatus {
	st := VirtualClusterStatus{Name: v.name, AffinityGroups: map[AGState]int{}}
	for s, n := range v.agCount {
		if n > 0 && AGState(s) != AGDeleted {
			st.AffinityGroups[AGState(s)] = n
		}
	}
	for _, ch := range k.chainOrder {
		p := v.pools[ch]
		if p == nil {
			continue
		}
		byLevel := make([]CellLevelStatus, ch.top+1)
		for l := 1; l <= ch.top; l++ {
			byLevel[l] = CellLevelStatus{Chain: ch.name, LeafCellType: ch.leafType, CellType: ch.levelType[l], Level: l, Total: p.quota[l], Bound: p.bound[l],
				LeafCells: p.quota[l] * ch.leafCount[l]}
			// Unbound virtual cells are backed by healthy free capacity.
			byLevel[l].FreeLeafCells = p.unbound(l) * ch.leafCount[l]
		}
		for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
			for _, r := range p.roots.buckets[key] {
				s := &byLevel[r.level]
				if r.lostLeaves > 0 || r.doomed {
					s.Bad++
				}
				s.UsedLeafCells += r.guarLeaves
				s.FreeLeafCells += r.freeLeaves
				s.BadLeafCells += r.lostLeaves
				st.addLost(r)
			}
		}
		for l := ch.top; l >= 1; l-- {
			if byLevel[l].Total > 0 || byLevel[l].Bound > 0 {
				st.Cells = append(st.Cells, byLevel[l])
			}
		}
	}
	for _, g := range k.groups {
		if g.spec.VirtualCluster == v.name && g.opportunistic() && (g.state == AGAllocated || g.state == AGBeingPreempted) {
			st.OpportunisticGroups++
			if g.downgraded {
				st.DowngradedGroups++
			}
			for _, pod := range g.placement {
				for _, c := range pod {
					if c.using == g {
						st.OpportunisticLeafCells++
						if st.OpportunisticLeafCellsByType == nil {
							st.OpportunisticLeafCellsByType = map[string]int32{}
						}
						st.OpportunisticLeafCellsByType[c.chain.leafType]++
					}
				}
			}
		}
	}
	for _, p := range v.pinned {
		c := k.pinned[p.pinnedID]
		st.addLost(c)
		st.PinnedCells = append(st.PinnedCells, PinnedCellStatus{PinnedCellID: p.pinnedID, CellType: c.chain.levelType[c.level], LeafCellType: c.chain.leafType,
			LeafCells: c.leafCount, UsedLeafCells: c.guarLeaves, FreeLeafCells: c.freeLeaves, BadLeafCells: c.lostLeaves})
	}
	return st
}

// addLost counts the lost leaves below a cell of the VC and their nodes.
func (st *VirtualClusterStatus) addLost(c *Cell) {
	if c.lostLeaves == 0 {
		return
	}
	st.LostLeafCells += c.lostLeaves
	c.forEachLeaf(func(l *Cell) {
		if !l.lost() {
			return
		}
		st.LostNodes = insertSorted(st.LostNodes, l.node.name)
		if l.mark == markForeign {
			st.ForeignLeafCells++
			st.ForeignNodes = insertSorted(st.ForeignNodes, l.node.name)
		}
	})
}

// insertSorted adds s to a sorted set.
func insertSorted(set []string, s string) []string {
	i := sort.SearchStrings(set, s)
	if i < len(set) && set[i] == s {
		return set
	}
	return append(set[:i], append([]string{s}, set[i:]...)...)
}

// AffinityGroupStatus is a group's state and placement.
type AffinityGroupStatus struct {
	Name           string
	VirtualCluster string
	State          AGState
	Priority       int32 // effective: -1 once downgraded
	Downgraded     bool
	Pods           []PodPlacement
}

// AffinityGroupIncarnation is a number that differs for every group the
// core creates, even of the same name: a decision about a group taken a
// while ago (a member lost 2 s ago) applies only to the same incarnation.
func (k *Core) AffinityGroupIncarnation(name string) (uint64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if g := k.groups[name]; g != nil {
		return g.seq, true
	}
	return 0, false
}

// AffinityGroupDowngraded reports whether a group runs as opportunistic
// although guaranteed (lazily preempted, or an extra beyond its VC).
func (k *Core) AffinityGroupDowngraded(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	g := k.groups[name]
	return g != nil && g.downgraded
}

// AffinityGroupState returns a group's state (cheap: no placement copied).
func (k *Core) AffinityGroupState(name string) (AGState, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	g := k.groups[name]
	if g == nil {
		return AGDeleted, false
	}
	return g.state, true
}

// PodAssigned reports whether the pod holds a slot of the group (cheap: no
// placement copied).
func (k *Core) PodAssigned(group, podKey string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	g := k.groups[group]
	if g == nil {
		return false
	}
	for _, s := range g.slots {
		if s.podKey == podKey {
			return true
		}
	}
	return false
}

// JoinsPlacement reports whether a pod of leafCellNumber leaf cells joining
// the group takes cells the group already holds (a slot of its placement,
// decided with the group, or the slot of a member that is gone), rather than
// a slot that needs new cells: extension x3, a member that was not running
// when the group was recovered. Taking new cells binds more of the VC, so the
// plugin admits such a member as it admits a new group.
func (k *Core) JoinsPlacement(group, podKey string, leafCellNumber int32) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	g := k.groups[group]
	if g == nil || g.placement == nil {
		return false
	}
	for i, s := range g.slots {
		if s.podKey == podKey {
			return true
		}
		if s.podKey == "" && s.leafCellNumber == leafCellNumber && len(g.placement[i]) > 0 {
			return true
		}
	}
	return false
}

// CheckMember checks that a pod's request agrees with its known group: the
// members of one group must agree on VC, priority, leaf cell type, pinned
// cell, topology constraint (WithinTopologyKey) and members.
func (k *Core) CheckMember(spec AffinityGroupSpec) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if g := k.groups[spec.Name]; g != nil && !g.spec.equal(&spec) {
		return specError(fmt.Errorf("affinity group %q already exists with a different spec (pods of one group must agree on virtual cluster, priority, leaf cell type, pinned cell, topology constraint and members)", spec.Name))
	}
	return nil
}

// AffinityGroupStatus returns one group's status.
func (k *Core) AffinityGroupStatus(name string) (AffinityGroupStatus, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	g := k.groups[name]
	if g == nil {
		return AffinityGroupStatus{}, false
	}
	return k.groupStatus(g), true
}

func (k *Core) groupStatus(g *AffinityGroup) AffinityGroupStatus {
	st := AffinityGroupStatus{Name: g.spec.Name, VirtualCluster: g.spec.VirtualCluster, State: g.state, Priority: g.reportedPriority(), Downgraded: g.downgraded}
	if g.placement != nil {
		for i, s := range g.slots {
			pp, _ := k.podPlacement(g, i, s, nil)
			st.Pods = append(st.Pods, pp)
		}
	}
	return st
}

// LeafCellStatus is one physical leaf cell.
type LeafCellStatus struct {
	ID             string
	Node           string
	Index          int32
	State          CellState
	Healthy        bool
	UsingGroup     string
	ReservingGroup string
	Priority       int32 // of the using group, else of the reserving group; -2 if free
	VirtualCluster string
}

// Snapshot is the whole state, for status pages and debugging.
type Snapshot struct {
	VirtualClusters []VirtualClusterStatus
	AffinityGroups  []AffinityGroupStatus
	LeafCells       []LeafCellStatus
}

// Snapshot copies the whole state. It walks every cell: use the per-VC and
// per-group calls on hot paths.
func (k *Core) Snapshot() Snapshot {
	k.mu.Lock()
	defer k.mu.Unlock()
	var s Snapshot
	names := make([]string, 0, len(k.vcs))
	for n := range k.vcs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s.VirtualClusters = append(s.VirtualClusters, k.vcStatus(k.vcs[n]))
	}
	for _, n := range k.groupNames() {
		s.AffinityGroups = append(s.AffinityGroups, k.groupStatus(k.groups[n]))
	}
	for _, ch := range k.chainOrder {
		for _, t := range ch.tops {
			t.forEachLeaf(func(l *Cell) {
				ls := LeafCellStatus{ID: l.ID(), Node: l.NodeName(), Index: l.index, State: l.state, Healthy: l.schedulable(), Priority: -2}
				if l.using != nil {
					ls.UsingGroup, ls.Priority = l.using.spec.Name, l.using.reportedPriority()
				}
				if l.reserving != nil {
					ls.ReservingGroup = l.reserving.spec.Name
					if l.using == nil {
						ls.Priority = l.reserving.reportedPriority()
					}
				}
				if r := l.rootAncestor(); r != nil && r.pool.vc != nil {
					ls.VirtualCluster = r.pool.vc.name
				}
				s.LeafCells = append(s.LeafCells, ls)
			})
		}
	}
	return s
}

// CellCount is the number of physical cells (all levels). It takes the
// lock: ReplacePhysicalCluster changes it.
func (k *Core) CellCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cellCount
}

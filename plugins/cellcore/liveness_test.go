package cellcore

import (
	"fmt"
	"sort"
	"sync/atomic"
)

// The VC guarantee (liveness): a guaranteed group whose request fits in its
// VC's cells, counting every leaf held by a lower-priority or opportunistic
// group as takeable, is Placed or Preempts; it never Waits. guaranteeFits is
// the oracle the model test checks every such decision against. It is
// written from the definition, not from the search: it lists the VC's cells
// as the group could see them in a private cluster of the VC's size (the
// bound cells with what higher or equal priority holds there taken out, and
// every unbound virtual cell whole) and asks whether the group's pods pack
// into them, each pod on one node, by an exact search.

// guaranteeVerdict says whether a request fits its VC's cells and why not.
type guaranteeVerdict struct {
	fits bool
	// unboundUncertain: the VC has unbound virtual cells that the chain's
	// schedulable free cells cannot all back now (hardware bad or not yet
	// seen); the oracle then counts them as nothing, so it checks less.
	unboundUncertain bool
	// overLimit: the group's namespace is at its limit in the VC.
	overLimit bool
	why       string
}

// limitOracle recomputes from the groups, not from the core's counters,
// whether placing g would take its namespace over a usage or concurrency
// limit of its VC, and says which.
func limitOracle(k *Core, vc *vcState, g *AffinityGroup) string {
	l, ok := vc.limitsFor(g.spec.Namespace)
	if !ok {
		return ""
	}
	var groups, leaves int64
	for _, o := range k.groups {
		if o != g && o.spec.Name != g.spec.Name && o.spec.VirtualCluster == g.spec.VirtualCluster && o.spec.Namespace == g.spec.Namespace && holding(o.state) {
			groups++
			for _, sl := range o.slots {
				leaves += int64(sl.leafCellNumber)
			}
		}
	}
	if l.MaxRunningGroups != nil && groups+1 > int64(*l.MaxRunningGroups) {
		return fmt.Sprintf("maxRunningGroups %d, %d running", *l.MaxRunningGroups, groups)
	}
	if l.MaxLeafCells != nil && leaves+int64(g.totalLeaves()) > int64(*l.MaxLeafCells) {
		return fmt.Sprintf("maxLeafCells %d, %d held", *l.MaxLeafCells, leaves)
	}
	return ""
}

func (k *Core) guaranteeFits(spec AffinityGroupSpec) guaranteeVerdict {
	k.mu.Lock()
	defer k.mu.Unlock()
	var v guaranteeVerdict
	vc := k.vcs[spec.VirtualCluster]
	if spec.Priority < 0 || vc == nil {
		v.why = "not guaranteed or no VC"
		return v
	}
	g := newGroup(spec, vc, 0)
	if why := limitOracle(k, vc, g); why != "" {
		// The VC's own limit for the namespace holds the group back: the
		// guarantee is the VC's cells, the limit is the VC owner's choice.
		v.overLimit = true
		v.why = why
		return v
	}
	pods := make([]int32, len(g.slots))
	for i, s := range g.slots {
		pods[i] = s.leafCellNumber
	}
	sort.Slice(pods, func(a, b int) bool { return pods[a] > pods[b] })
	for _, ch := range k.candidateChains(&spec, vc) {
		p := k.poolFor(g, ch)
		if p == nil || (spec.PinnedCellID != "" && p.vc != vc) {
			continue
		}
		if spec.WithinTopologyKey != "" {
			if k.keyedFits(&v, g, p, pods) {
				return v
			}
			continue
		}
		bins, unbound, backed := k.privateBins(p, specRank(&spec))
		if backed {
			bins = append(bins, unbound...)
		}
		if packs(pods, bins) {
			v.fits = true
			v.unboundUncertain = false
			v.why = fmt.Sprintf("fits %v into %s bins %v", pods, p.name(), bins)
			return v
		}
		// Only a verdict the unbacked cells would have turned counts as a
		// weaker check.
		if !backed && packs(pods, append(bins, unbound...)) {
			v.unboundUncertain = true
		}
	}
	v.why = fmt.Sprintf("%v does not pack", pods)
	return v
}

// keyedFits is the guarantee for a group with a topology constraint: what
// its VC promises is co-location at the levels it reserves. So the group
// fits if its pods pack into one keyed cell (the level WithinTopologyKey
// names in the pool's chain) as the VC's private cluster shows it: the
// VC's bound cells grouped by their keyed cell (bound cells at or above
// the keyed level contribute each keyed cell below them; bound cells below
// it join their keyed ancestor's group, several bound cells of one rack
// making one group), or one whole keyed cell that an unbound virtual cell
// at or above the keyed level would give (counted only when schedulable
// free cells back every VC's unbound cells, as privateBins does). Unbound
// virtual cells below the keyed level count for nothing: they may be bound
// in different keyed cells (the search may still use them, best effort). A
// chain without the key's level, or whose keyed cell is smaller than the
// group, is not a chain the group may use.
func (k *Core) keyedFits(v *guaranteeVerdict, g *AffinityGroup, p *pool, pods []int32) bool {
	ch := p.chain
	wl := withinLevel(g, ch)
	if wl == 0 {
		return false
	}
	keyedOracle.checked.Add(1)
	groups := map[*Cell][]int32{}
	var order []*Cell
	add := func(kc *Cell, bins []int32) {
		if _, ok := groups[kc]; !ok {
			order = append(order, kc)
		}
		groups[kc] = append(groups[kc], bins...)
	}
	for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
		for _, r := range p.roots.buckets[key] {
			if int(r.level) >= wl {
				eachAtLevel(r, wl, func(kc *Cell) { add(kc, k.nodeBins(kc, g.priority())) })
			} else {
				add(ancestorAt(r, wl), k.nodeBins(r, g.priority()))
			}
		}
	}
	for _, kc := range order {
		if packs(pods, groups[kc]) {
			keyedOracle.bound.Add(1)
			if len(groups[kc]) > 1 && int(kc.level) > ch.nodeLevel {
				keyedOracle.boundNodes.Add(1)
			}
			v.fits = true
			v.why = fmt.Sprintf("fits %v into %s's bound cells in %s: bins %v", pods, p.name(), kc.ID(), groups[kc])
			return true
		}
	}
	if p.pinnedID != "" || p.vc == nil {
		return false
	}
	var whole []int32 // one keyed cell, empty
	for m := wl; m <= ch.top && whole == nil; m++ {
		if p.unbound(m) == 0 {
			continue
		}
		if wl <= ch.nodeLevel {
			whole = []int32{ch.leafCount[wl]}
			break
		}
		for j := int32(0); j < ch.leafCount[wl]/ch.leafCount[ch.nodeLevel]; j++ {
			whole = append(whole, ch.leafCount[ch.nodeLevel])
		}
	}
	if whole == nil || !packs(pods, whole) {
		return false
	}
	if !k.schedulableBacksAllUnbound(ch) {
		keyedOracle.uncertain.Add(1)
		v.unboundUncertain = true
		return false
	}
	keyedOracle.unbound.Add(1)
	v.fits, v.unboundUncertain = true, false
	v.why = fmt.Sprintf("fits %v into one %s an unbound virtual cell of %s gives: bins %v", pods, ch.levelType[wl], p.name(), whole)
	return true
}

// keyedOracle counts keyedFits' verdicts for the model test's report:
// checks, fits in bound cells (of them, over several nodes of a keyed cell
// above node level), fits in a whole keyed cell of an unbound virtual
// cell, and such fits not counted for damaged free cells.
var keyedOracle struct{ checked, bound, boundNodes, unbound, uncertain atomic.Int64 }

// nodeBins is what a group of priority prio may take below x, node by
// node (x itself at or below node level: a pod never spans two bound cells
// below node level).
func (k *Core) nodeBins(x *Cell, prio int32) []int32 {
	bins, _, _ := k.privateBinsOf(x.chain, []*Cell{x}, nil, prio)
	return bins
}

// privateBins is what a group of priority prio may use in pool p, node by
// node (a pod never spans nodes, nor two bound cells below node level): in
// its bound cells, and in its unbound virtual cells, and whether wholly
// schedulable free cells back those.
func (k *Core) privateBins(p *pool, prio int32) (bins, unbound []int32, backed bool) {
	var roots []*Cell
	for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
		roots = append(roots, p.roots.buckets[key]...)
	}
	return k.privateBinsOf(p.chain, roots, p, prio)
}

// privateBinsOf is privateBins of the given roots (and, with p, of p's
// unbound virtual cells).
func (k *Core) privateBinsOf(ch *chain, roots []*Cell, p *pool, prio int32) (bins, unbound []int32, backed bool) {
	avail := func(x *Cell) int32 {
		var n int32
		x.forEachLeaf(func(l *Cell) {
			if !l.schedulable() {
				return
			}
			switch l.state {
			case CellFree:
				n++
			case CellUsed:
				if l.using.priority() < prio {
					n++
				}
			default: // Reserving, Reserved: the preemptor holds it
				if l.reserving.priority() < prio {
					n++
				}
			}
		})
		return n
	}
	var nodesOf func(x *Cell)
	nodesOf = func(x *Cell) {
		if int(x.level) <= ch.nodeLevel {
			bins = append(bins, avail(x))
			return
		}
		for _, c := range x.children {
			nodesOf(c)
		}
	}
	for _, r := range roots {
		nodesOf(r)
	}
	if p == nil || p.pinnedID != "" || p.vc == nil {
		return bins, nil, true
	}
	for l := 1; l <= ch.top; l++ {
		for i := int32(0); i < p.unbound(l); i++ {
			if l <= ch.nodeLevel {
				unbound = append(unbound, ch.leafCount[l])
				continue
			}
			for j := int32(0); j < ch.leafCount[l]/ch.leafCount[ch.nodeLevel]; j++ {
				unbound = append(unbound, ch.leafCount[ch.nodeLevel])
			}
		}
	}
	return bins, unbound, len(unbound) == 0 || k.schedulableBacksAllUnbound(ch)
}

// schedulableBacksAllUnbound: buddy counting over the free cells whose every
// leaf is schedulable covers every VC's unbound virtual cells, so each can
// be bound to a whole schedulable cell whichever of them the others take.
// A free cell with bad or unready hardware counts for nothing, not even its
// good parts: which VC a damaged cell's parts end up backing depends on the
// order of the binds, and dooming then charges the loss to one of them
// (docs/cellcore.md). So with damaged free cells the oracle checks less.
func (k *Core) schedulableBacksAllUnbound(ch *chain) bool {
	counts, demand := k.levelCounts(ch, false)
	for l := 1; l <= ch.top; l++ {
		fl := ch.freeList[l]
		for key := fl.next(ch.leafCount[l] + 1); key >= 0; key = fl.next(key + 1) {
			for _, c := range fl.buckets[key] {
				if c.unschedLeaves > 0 {
					counts[l]--
				}
			}
		}
	}
	l, _ := checkLevels(ch, counts, demand)
	return l == 0
}

// packs: can pods (sizes, largest first) go into bins (capacities), each pod
// in one bin? Exact: depth-first, bins of equal free space tried once.
func packs(pods []int32, bins []int32) bool {
	var total, room int64
	for _, p := range pods {
		total += int64(p)
	}
	for _, b := range bins {
		room += int64(b)
	}
	if total > room {
		return false
	}
	free := append([]int32(nil), bins...)
	var place func(i int) bool
	place = func(i int) bool {
		if i == len(pods) {
			return true
		}
		tried := map[int32]bool{}
		for j, f := range free {
			if f < pods[i] || tried[f] {
				continue
			}
			tried[f] = true
			free[j] -= pods[i]
			ok := place(i + 1)
			free[j] += pods[i]
			if ok {
				return true
			}
		}
		return false
	}
	return place(0)
}

// explainPool describes, for a failed guarantee check, the VC's pools: bound
// roots with their leaves, and for each level with unbound virtual cells the
// free cells the VC could bind there.
func (k *Core) explainPool(spec AffinityGroupSpec) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	vc := k.vcs[spec.VirtualCluster]
	if vc == nil {
		return ""
	}
	out := ""
	for _, ch := range k.candidateChains(&spec, vc) {
		p := vc.pools[ch]
		if p == nil {
			continue
		}
		for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
			for _, r := range p.roots.buckets[key] {
				out += fmt.Sprintf("\n  bound %s: free %d opp %d guar %d unsched %d doomed %v", r.ID(), r.freeLeaves, r.oppLeaves, r.guarLeaves, r.unschedLeaves, r.doomed)
			}
		}
		for m := 1; m <= ch.top; m++ {
			if p.unbound(m) == 0 {
				continue
			}
			out += fmt.Sprintf("\n  %s: %d unbound at level %d", ch.name, p.unbound(m), m)
			for h := m; h <= ch.top; h++ {
				fl := ch.freeList[h]
				for key := fl.next(0); key >= 0; key = fl.next(key + 1) {
					for _, x := range fl.buckets[key] {
						c := bestDescendant(x, m)
						if c == nil {
							out += fmt.Sprintf("\n    free %s (level %d): nothing schedulable", x.ID(), h)
							continue
						}
						out += fmt.Sprintf("\n    free %s (level %d) -> %s: free %d opp %d unsched %d canBind %v", x.ID(), h, c.ID(), c.freeLeaves, c.oppLeaves, c.unschedLeaves, k.canBind(p, c))
					}
				}
			}
		}
		counts, demand := k.levelCounts(ch, false)
		out += fmt.Sprintf("\n  %s free cells by level %v, unbound demand %v", ch.name, counts, demand)
	}
	return out
}

// specRank is the rank a group of spec s has (AffinityGroup.priority).
func specRank(s *AffinityGroupSpec) int32 {
	g := AffinityGroup{spec: *s}
	return g.priority()
}

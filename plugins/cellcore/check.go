package cellcore

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
)

// CheckInvariants recomputes everything the core keeps incrementally and
// checks the model's invariants. It walks every cell: tests and debugging
// only. It returns nil or every violation found (up to a limit).
func (k *Core) CheckInvariants() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	fail := func(format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	for _, e := range k.internalErrs {
		fail("internal: %s", e)
	}
	for _, n := range k.nodes {
		checkNodeMarks(n, fail)
	}
	use := map[nsKey]nsUsage{}
	for _, g := range k.groups {
		if g.spec.Namespace != "" && holding(g.state) {
			key := nsKey{g.spec.VirtualCluster, g.spec.Namespace}
			u := use[key]
			u.groups++
			u.leaves += int64(g.totalLeaves())
			use[key] = u
		}
	}
	// The queue's view of the same holdings (read without the lock).
	opp := map[string]int64{}
	for _, g := range k.groups {
		if g.spec.Priority < 0 && holding(g.state) {
			opp[g.spec.VirtualCluster] += int64(g.totalLeaves())
		}
	}
	k.seqView.ns.Range(func(key, c any) bool {
		if got, want := c.(*atomic.Int64).Load(), use[key.(nsKey)].leaves; got != want {
			fail("sequence view: namespace %s in VC %s holds %d leaf cells, recomputed %d", key.(nsKey).ns, key.(nsKey).vc, got, want)
		}
		return true
	})
	k.seqView.opp.Range(func(vc, c any) bool {
		if got, want := c.(*atomic.Int64).Load(), opp[vc.(string)]; got != want {
			fail("sequence view: VC %s's opportunistic groups hold %d leaf cells, recomputed %d", vc, got, want)
		}
		return true
	})
	if len(use) != len(k.nsUse) {
		fail("namespace usage: %d entries kept, %d recomputed", len(k.nsUse), len(use))
	}
	for key, u := range use {
		if got := k.nsUse[key]; got == nil || *got != u {
			fail("namespace %s in VC %s: usage kept %+v, recomputed %+v", key.ns, key.vc, got, u)
		}
	}
	inPlacement := map[*Cell][]*AffinityGroup{}
	for name, g := range k.groups {
		if g.spec.Name != name {
			fail("group %q is filed as %q", g.spec.Name, name)
		}
		switch g.state {
		case AGPending:
			if g.placement != nil {
				fail("Pending group %q has a placement", name)
			}
		case AGDeleted:
			fail("Deleted group %q is still kept", name)
		}
		for _, pod := range g.placement {
			for _, c := range pod {
				inPlacement[c] = append(inPlacement[c], g)
				switch g.state {
				case AGAllocated:
					if c.using != g || c.state != CellUsed {
						fail("Allocated group %q: cell %s is %s using %v", name, c.ID(), c.state, groupName(c.using))
					}
				case AGPreempting:
					if c.reserving != g {
						fail("Preempting group %q: cell %s is reserved by %v", name, c.ID(), groupName(c.reserving))
					}
				case AGBeingPreempted:
					if c.using != g || (c.state != CellUsed && c.state != CellReserving) {
						fail("Being preempted group %q: cell %s is %s using %v", name, c.ID(), c.state, groupName(c.using))
					}
				}
			}
		}
		if g.vc != nil && k.vcs[g.spec.VirtualCluster] != g.vc {
			fail("group %q refers to a virtual cluster %q that was removed", name, g.vc.name)
		}
		if key := g.spec.WithinTopologyKey; key != "" {
			if why := withinViolation(key, g.placement); why != "" {
				fail("group %q breaks its topology constraint: %s", name, why)
			}
		}
		if g.livePods < 0 || g.livePods > len(g.slots) {
			fail("group %q has %d live pods for %d slots", name, g.livePods, len(g.slots))
		}
	}
	for _, v := range k.vcs {
		var count [5]int
		for _, g := range k.groups {
			if g.vc == v {
				count[g.state]++
			}
		}
		for s := range count {
			if AGState(s) != AGDeleted && count[s] != v.agCount[s] {
				fail("VC %q counts %d groups %s, there are %d", v.name, v.agCount[s], AGState(s), count[s])
			}
		}
	}
	held := map[*AffinityGroup]int32{} // leaves each guaranteed group holds (heldBy)
	for _, ch := range k.chainOrder {
		roots := map[*pool]map[int]int32{}
		for _, t := range ch.tops {
			k.checkCell(t, 0, roots, inPlacement, fail)
			if !ch.topIndex.contains(t) || t.key[idxTop] != ch.topIndex.clampKey(t.freeLeaves) {
				fail("top cell %s is not indexed by its free leaves", t.ID())
			}
		}
		for _, p := range append(append([]*pool(nil), ch.vcPools...), ch.freePool) {
			if p.isFree() {
				continue
			}
			for l := 1; l <= ch.top; l++ {
				if roots[p][l] != p.bound[l] {
					fail("%s: %d bound roots at level %d, counted %d", p.name(), roots[p][l], l, p.bound[l])
				}
				if p.bound[l] > p.quota[l] {
					fail("%s: %d bound cells at level %d, quota %d", p.name(), p.bound[l], l, p.quota[l])
				}
				if p.doomed[l] > p.bound[l] || p.doomed[l] < 0 {
					fail("%s: %d doomed of %d bound at level %d", p.name(), p.doomed[l], p.bound[l], l)
				}
			}
		}
		var doomed int32
		for _, p := range ch.vcPools {
			for l := 1; l <= ch.top; l++ {
				doomed += p.doomed[l]
			}
		}
		if doomed != ch.doomedCells {
			fail("chain %s: %d doomed cells counted, %d in its pools", ch.name, ch.doomedCells, doomed)
		}
		for l := 1; l <= ch.top; l++ {
			var unbound int64
			for _, p := range ch.vcPools {
				unbound += int64(p.unbound(l))
			}
			if unbound != ch.demand[l] {
				fail("chain %s: demand %d at level %d counted, %d in its pools", ch.name, ch.demand[l], l, unbound)
			}
		}
		k.checkSums(ch, held, fail)
		counts, demand := k.levelCounts(ch, false)
		for l := 1; l <= ch.top; l++ {
			if roots[ch.freePool][l] != int32(counts[l]) {
				fail("chain %s: free list at level %d holds %d cells, %d free roots found", ch.name, l, counts[l], roots[ch.freePool][l])
			}
		}
		if l, short := checkLevels(ch, counts, demand); l > 0 {
			fail("safety invariant: chain %s lacks %d free %s cells", ch.name, short, ch.levelType[l])
		}
		hc, hd := k.levelCounts(ch, true)
		if l, _ := checkLevels(ch, hc, hd); l > 0 {
			for m := l; m <= ch.top; m++ {
				for _, p := range ch.vcPools {
					if p.unbound(m) > 0 {
						if c := k.lostFreeCell(ch, m); c != nil && k.canBind(p, c) {
							fail("chain %s: healthy capacity short at level %d, but lost free cell %s was not doomed", ch.name, l, c.ID())
						}
					}
				}
			}
		}
	}
	var running, preempting prioCounts
	for _, g := range k.groups {
		switch g.state {
		case AGAllocated, AGBeingPreempted:
			running.add(g.priority(), 1)
		case AGPreempting:
			preempting.add(g.priority(), 1)
		}
	}
	if running != k.running || preempting != k.preempting {
		fail("groups counted by priority differ from a recount")
	}
	for _, g := range k.groups {
		if g.heldLeaves != held[g] || (g.heldLeaves > 0) != (g.heldIn != nil) {
			fail("group %q: holds %d leaves, recomputed %d", g.spec.Name, g.heldLeaves, held[g])
		}
	}
	return errors.Join(errs...)
}

func groupName(g *AffinityGroup) string {
	if g == nil {
		return "<none>"
	}
	return g.spec.Name
}

// checkCell recomputes a subtree's counters; rootsAbove counts pool roots on
// the path from the top (exactly one root must cover every leaf).
func (k *Core) checkCell(c *Cell, rootsAbove int, roots map[*pool]map[int]int32, inPlacement map[*Cell][]*AffinityGroup, fail func(string, ...any)) (lc leafCounts) {
	if c.pool != nil {
		rootsAbove++
		if roots[c.pool] == nil {
			roots[c.pool] = map[int]int32{}
		}
		roots[c.pool][int(c.level)]++
		if !c.pool.roots.contains(c) || c.key[idxRoot] != c.pool.roots.clampKey(c.freeLeaves) {
			fail("root %s of %s is not indexed by its free leaves", c.ID(), c.pool.name())
		}
		if c.pool.isFree() {
			fl := c.chain.freeList[c.level]
			if !fl.contains(c) || c.key[idxFree] != fl.clampKey(c.chain.penalty(c)) {
				fail("free cell %s is not in its free list with its penalty", c.ID())
			}
			if c.doomed {
				fail("free cell %s is marked doomed", c.ID())
			}
		} else if c.pool.vc == nil && c.pool.pinnedID == "" {
			fail("root %s belongs to no VC", c.ID())
		}
	}
	if c.isLeaf() {
		if rootsAbove != 1 {
			fail("leaf %s is under %d pool roots, want 1", c.ID(), rootsAbove)
		}
		switch c.state {
		case CellFree:
			if c.using != nil || c.reserving != nil {
				fail("Free leaf %s has groups %s/%s", c.ID(), groupName(c.using), groupName(c.reserving))
			}
		case CellUsed:
			if c.using == nil || c.reserving != nil {
				fail("Used leaf %s: using %s reserving %s", c.ID(), groupName(c.using), groupName(c.reserving))
			}
		case CellReserving:
			if c.using == nil || c.reserving == nil {
				fail("Reserving leaf %s: using %s reserving %s", c.ID(), groupName(c.using), groupName(c.reserving))
			}
		case CellReserved:
			if c.using != nil || c.reserving == nil {
				fail("Reserved leaf %s: using %s reserving %s", c.ID(), groupName(c.using), groupName(c.reserving))
			}
		}
		for _, g := range []*AffinityGroup{c.using, c.reserving} {
			if g == nil {
				continue
			}
			if k.groups[g.spec.Name] != g {
				fail("leaf %s refers to forgotten group %q", c.ID(), g.spec.Name)
			}
			found := false
			for _, x := range inPlacement[c] {
				if x == g {
					found = true
				}
			}
			if !found {
				fail("leaf %s refers to group %q whose placement lacks it", c.ID(), g.spec.Name)
			}
			if !g.opportunistic() || g == c.reserving {
				r := c.rootAncestor()
				want := k.poolFor(g, c.chain)
				if r == nil || r.pool != want {
					fail("leaf %s used by guaranteed group %q lies outside its VC's cells", c.ID(), g.spec.Name)
				}
			}
		}
		if c.using != nil && c.using.state != AGAllocated && c.using.state != AGBeingPreempted {
			fail("leaf %s is used by group %q in state %s", c.ID(), c.using.spec.Name, c.using.state)
		}
		if c.reserving != nil && c.reserving.state != AGPreempting {
			fail("leaf %s is reserved by group %q in state %s", c.ID(), c.reserving.spec.Name, c.reserving.state)
		}
		holders := 0
		for _, g := range inPlacement[c] {
			if c.using == g || c.reserving == g {
				holders++
			}
		}
		if holders > 2 || (holders == 2 && c.state != CellReserving) {
			fail("leaf %s is held by %d groups in state %s", c.ID(), holders, c.state)
		}
		lc = c.leafContribution()
	} else {
		for _, ch := range c.children {
			x := k.checkCell(ch, rootsAbove, roots, inPlacement, fail)
			lc.free += x.free
			lc.unsched += x.unsched
			lc.lost += x.lost
			lc.opp += x.opp
			lc.guar += x.guar
			lc.idleUnsched += x.idleUnsched
		}
		if c.level > c.chain.nodeLeveli8() {
			free, take := c.nodeHists()
			wantFree, wantTake := make([]int32, len(free)), make([]int32, len(take))
			eachAtLevel(c, c.chain.nodeLevel, func(n *Cell) {
				wantFree[n.freeLeaves]++
				wantTake[n.freeLeaves+n.oppLeaves]++
			})
			if !slices.Equal(free, wantFree) || !slices.Equal(take, wantTake) {
				fail("cell %s: node histograms %v %v, recomputed %v %v", c.ID(), free, take, wantFree, wantTake)
			}
		}
		for j := 1; j < int(c.level); j++ {
			var m int32
			eachAtLevel(c, j, func(d *Cell) { m = max(m, d.freeLeaves) })
			if c.maxFree[j-1] != m {
				fail("cell %s: maxFree at level %d is %d, want %d", c.ID(), j, c.maxFree[j-1], m)
			}
		}
		if c.pool == nil && rootsAbove == 0 {
			var want int32
			for _, ch := range c.children {
				switch {
				case ch.pool == nil:
					want += ch.splitFree
				case ch.pool.isFree():
					want += ch.freeLeaves
				}
			}
			if c.splitFree != want {
				fail("split cell %s: %d free leaves of free-pool roots below it kept, %d recomputed", c.ID(), c.splitFree, want)
			}
			all := true
			for _, ch := range c.children {
				if ch.pool == nil || !ch.pool.isFree() {
					all = false
				}
			}
			if all {
				fail("cell %s: all children are free but they were not merged", c.ID())
			}
		}
	}
	got := leafCounts{c.freeLeaves, c.unschedLeaves, c.lostLeaves, c.oppLeaves, c.guarLeaves, c.idleUnschedLeaves}
	if got != lc {
		fail("cell %s: counters %+v, recomputed %+v", c.ID(), got, lc)
	}
	if c.dirty {
		fail("cell %s left dirty", c.ID())
	}
	return lc
}

func eachAtLevel(c *Cell, l int, fn func(*Cell)) {
	if int(c.level) == l {
		fn(c)
		return
	}
	for _, ch := range c.children {
		eachAtLevel(ch, l, fn)
	}
}

// checkNodeMarks: a node's marks number what it wants (as far as its good
// leaves go), sit on good leaves only, and sit on a busy leaf only while no
// idle good leaf is left unmarked: every device a foreign pod or an unnamed
// unhealthy device holds is withheld from placement whenever the node has
// one to withhold.
func checkNodeMarks(n *node, fail func(string, ...any)) {
	var good, idleUnmarked, busyMarked int32
	var got [numMarks]int32
	var claimed int32
	for _, nc := range n.cells {
		nc.forEachLeaf(func(l *Cell) {
			if l.claimed {
				claimed++
			}
			if l.device != DeviceGood {
				if l.mark != markNone {
					fail("node %s: leaf %s of health %s carries a mark", n.name, l.ID(), l.device)
				}
				return
			}
			if l.claimed {
				// A claimed leaf is foreign exactly while no group holds
				// it, and counts for none of the unnamed marks.
				if want := l.claimedMark(); l.mark != want {
					fail("node %s: claimed leaf %s (idle %v) carries mark %d, want %d", n.name, l.ID(), l.idle(), l.mark, want)
				}
				return
			}
			good++
			got[l.mark]++
			switch {
			case l.mark == markNone && l.idle():
				idleUnmarked++
			case l.mark != markNone && !l.idle():
				busyMarked++
			}
		})
	}
	want := n.wantMarks
	if total := min(good, want[markUnhealthy]+want[markForeign]); got[markUnhealthy]+got[markForeign] != total ||
		got[markUnhealthy] != min(want[markUnhealthy], total) {
		fail("node %s: marks unhealthy %d foreign %d, want %d and %d of %d good leaves", n.name, got[markUnhealthy], got[markForeign], want[markUnhealthy], want[markForeign], good)
	}
	if busyMarked > 0 && idleUnmarked > 0 {
		fail("node %s: %d marks on busy leaves while %d idle leaves are unmarked", n.name, busyMarked, idleUnmarked)
	}
	if claimed != n.claimed {
		fail("node %s: %d claimed leaves, counted %d", n.name, claimed, n.claimed)
	}
}

// checkSums recomputes a chain's sums and its pools' sums and holders from
// their cells, and adds the leaves each guaranteed group holds to held.
func (k *Core) checkSums(ch *chain, held map[*AffinityGroup]int32, fail func(string, ...any)) {
	nodeFree := make([]int32, len(ch.nodeFree))
	var free, lost int32
	for _, t := range ch.tops {
		free += t.freeLeaves
		lost += t.lostLeaves
		eachAtLevel(t, ch.nodeLevel, func(n *Cell) { nodeFree[n.freeLeaves]++ })
	}
	if free != ch.freeLeaves || lost != ch.lostLeaves || !slices.Equal(nodeFree, ch.nodeFree) {
		fail("chain %s: %d free and %d lost leaves, nodes by free leaves %v kept, recomputed %d, %d and %v", ch.name, ch.freeLeaves, ch.lostLeaves, ch.nodeFree, free, lost, nodeFree)
	}
	pools := append(append([]*pool{ch.freePool}, ch.vcPools...), k.pinnedPools(ch)...)
	for _, p := range pools {
		want := newPool(ch, nil, "", 0).sums
		byPrio := map[int32]int32{}
		groups := map[int32]map[*AffinityGroup]bool{}
		for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
			for _, r := range p.roots.buckets[key] {
				want.addRoot(r, 1)
				r.forEachLeaf(func(l *Cell) {
					if g := l.heldBy(); g != nil && !g.opportunistic() {
						held[g]++
						byPrio[g.priority()]++
						if groups[g.priority()] == nil {
							groups[g.priority()] = map[*AffinityGroup]bool{}
						}
						groups[g.priority()][g] = true
						if g.heldIn == nil || !slices.Contains(p.holders.levels, g.heldIn) {
							fail("group %q holds leaf %s of %s but is not among its holders", g.spec.Name, l.ID(), p.name())
						}
					}
				})
			}
		}
		got := p.sums
		if got.free != want.free || got.opp != want.opp || got.idleUnsched != want.idleUnsched ||
			!slices.Equal(got.units[0], want.units[0]) || !slices.Equal(got.units[1], want.units[1]) {
			fail("%s: sums %+v, recomputed %+v", p.name(), got, want)
		}
		levels := 0
		for _, lv := range p.holders.levels {
			if len(lv.groups) > 0 {
				levels++
			}
		}
		if levels != len(byPrio) {
			fail("%s: %d holder priorities kept, %d recomputed", p.name(), levels, len(byPrio))
		}
		for i, lv := range p.holders.levels {
			if i > 0 && p.holders.levels[i-1].prio <= lv.prio {
				fail("%s: holder priorities out of order", p.name())
			}
			if lv.leaves != byPrio[lv.prio] || len(lv.groups) != len(groups[lv.prio]) {
				fail("%s: priority %d holds %d leaves of %d groups, recomputed %d of %d", p.name(), lv.prio, lv.leaves, len(lv.groups), byPrio[lv.prio], len(groups[lv.prio]))
			}
			for j, g := range lv.groups {
				if g.heldIn != lv || g.heldPos != j || !groups[lv.prio][g] {
					fail("%s: holder %q is misfiled", p.name(), g.spec.Name)
				}
			}
			byName := slices.SortedFunc(maps.Keys(groups[lv.prio]), func(a, b *AffinityGroup) int { return strings.Compare(a.spec.Name, b.spec.Name) })
			if len(lv.first) > firstKept || lv.named && !slices.Equal(lv.first, byName[:min(len(lv.first), len(byName))]) {
				fail("%s: priority %d's first holders by name are not the first %d", p.name(), lv.prio, len(lv.first))
			}
		}
	}
}

// pinnedPools are the pools of a chain's pinned cells.
func (k *Core) pinnedPools(ch *chain) []*pool {
	var out []*pool
	for _, c := range k.pinned {
		if c.chain == ch {
			out = append(out, c.pool)
		}
	}
	return out
}

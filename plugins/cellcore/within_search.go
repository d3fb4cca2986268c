package cellcore

import (
	"cmp"
	"slices"
)

// The searches of a group with a topology constraint (within.go) where
// they differ from the unconstrained ones: pod-by-pod spans, Spread and a
// late member (x3) each stay inside one cell of the keyed level. The
// whole-group searches (placeGuaranteed, scanPreempt, placeOpportunistic)
// only cap their levels at the keyed level: a placement inside one cell at
// or below it is inside one keyed cell.

// keyedCand is a keyed cell a span may try, with the pool's roots in it.
type keyedCand struct {
	cell  *Cell
	roots []*Cell
	room  int32 // leaves the search could take there, at most
}

// withinScratch is the constrained searches' reusable storage.
type withinScratch struct {
	cands []keyedCand
	roots []*Cell // roots of the attempt in progress
	list  []*Cell
}

// keyedOfRoots lists the keyed (level-wl) cells that hold roots of p below
// wl, each with those roots in the pool's order (least free first). Roots
// at or above wl are not listed: a search inside one of their level-wl
// cells is a whole-group placement, which the level loops make. A keyed
// cell is found again by a mark (a fresh epoch, and its index as the
// count), as cancelPreemptorsOf marks cells: the next search attempt's
// epoch is newer, so the marks mean nothing to it.
func (s *search) keyedOfRoots(p *pool, wl int) []keyedCand {
	w := &s.within
	s.k.epoch++
	e := s.k.epoch
	for i := range w.cands {
		w.cands[i].roots = w.cands[i].roots[:0]
	}
	n := 0
	for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
		for _, r := range p.roots.buckets[key] {
			if int(r.level) >= wl {
				continue
			}
			kc := ancestorAt(r, wl)
			if kc.markEpoch != e {
				kc.markEpoch, kc.markCount = e, int32(n)
				if n == len(w.cands) {
					w.cands = append(w.cands, keyedCand{})
				}
				w.cands[n].cell = kc
				n++
			}
			i := kc.markCount
			w.cands[i].roots = append(w.cands[i].roots, r)
		}
	}
	return w.cands[:n]
}

// mayBindBelow: may a span bind more of p's virtual cells inside a keyed
// cell of level wl (p has unbound virtual cells below wl)?
func mayBindBelow(p *pool, wl int) bool {
	if p.vc == nil || p.pinnedID != "" {
		return false
	}
	for m := 1; m < wl; m++ {
		if p.unbound(m) > 0 {
			return true
		}
	}
	return false
}

// spanWithin places the group pod by pod inside one keyed cell of p's
// chain (level wl): for groups larger than any one cell the VC owns there
// (a VC of node cells asked for two nodes in one rack). It tries the keyed
// cells that hold the pool's roots below wl, tightest first, binding more
// of the VC's virtual cells below wl inside the cell if needed; then, if
// the VC has such virtual cells, keyed cells it would bind them all in
// (the free part of split ones, tightest first, then a whole free one).
// Bindings of a failed try are undone; those of the success are in
// s.bound.
func (s *search) spanWithin(p *pool, wl int) bool {
	need := s.g.totalLeaves()
	bind := mayBindBelow(p, wl)
	cands := s.keyedOfRoots(p, wl)
	for i := range cands {
		c := &cands[i]
		c.room = 0
		for _, r := range c.roots {
			if s.preempt {
				c.room += r.leafCount - r.unschedLeaves
			} else {
				c.room += r.freeLeaves
			}
		}
		if bind {
			if s.preempt {
				c.room = c.cell.leafCount - c.cell.unschedLeaves
			} else {
				c.room += c.cell.splitFree
			}
		}
	}
	slices.SortStableFunc(cands, func(a, b keyedCand) int { return cmp.Compare(a.room, b.room) })
	for i := range cands {
		if cands[i].room >= need && s.spanIn(p, cands[i].cell, cands[i].roots, wl, bind) {
			return true
		}
	}
	if !bind {
		return false
	}
	for _, kc := range s.freshKeyed(p, wl, need, cands) {
		if s.spanIn(p, kc, nil, wl, true) {
			return true
		}
	}
	return false
}

// freshKeyed lists keyed cells without roots of p where p could bind its
// virtual cells below wl: split keyed cells with room in their free part
// (tightest first: free space stays in whole cells), then one whole free
// keyed cell (a free cell at or above wl, smallest first, split along its
// lowest-penalty children). It scans the free lists below wl: a linear
// pass, made only for a constrained group no bound cell could take.
func (s *search) freshKeyed(p *pool, wl int, need int32, seen []keyedCand) []*Cell {
	ch := p.chain
	w := &s.within
	w.list = w.list[:0]
	s.k.epoch++ // marks the keyed cells met (keyedOfRoots)
	e := s.k.epoch
	for i := range seen {
		seen[i].cell.markEpoch = e
	}
	for l := 1; l < wl; l++ {
		fl := ch.freeList[l]
		for key := fl.next(0); key >= 0; key = fl.next(key + 1) {
			for _, x := range fl.buckets[key] {
				kc := ancestorAt(x, wl)
				if kc.markEpoch == e {
					continue
				}
				kc.markEpoch = e
				if roomOf(kc, s.preempt) >= need {
					w.list = append(w.list, kc)
				}
			}
		}
	}
	preempt := s.preempt
	slices.SortStableFunc(w.list, func(a, b *Cell) int { return cmp.Compare(roomOf(a, preempt), roomOf(b, preempt)) })
	for h := wl; h <= ch.top; h++ {
		fl := ch.freeList[h]
		if key := fl.next(0); key >= 0 && key <= ch.leafCount[h] {
			// A clean cell (no unschedulable leaf): damaged ones sort after
			// every clean one (chain.penalty).
			w.list = append(w.list, descendTo(fl.buckets[key][0], wl))
			break
		}
	}
	return w.list
}

func roomOf(kc *Cell, preempt bool) int32 {
	if preempt {
		return kc.freeLeaves + kc.oppLeaves
	}
	return kc.splitFree
}

// spanIn places the group's pods one by one over roots (the pool's roots
// inside keyed cell kc, or kc itself inside one of them), least free first,
// as span does over a whole pool; with bind, a pod no root holds gets a
// virtual cell of the VC bound inside kc for it.
func (s *search) spanIn(p *pool, kc *Cell, roots []*Cell, wl int, bind bool) bool {
	k := s.k
	ch := p.chain
	s.newAttempt()
	s.bound = s.bound[:0]
	rs := append(s.within.roots[:0], roots...)
	defer func() { s.within.roots = rs[:0] }()
	for _, slot := range s.order {
		n := s.g.slots[slot].leafCellNumber
		ok := false
		for _, r := range rs {
			if (s.preempt || r.freeLeaves >= n) && s.podInto(r, n, slot) {
				ok = true
				break
			}
		}
		for m := 1; !ok && bind && m < wl; m++ {
			if p.unbound(m) == 0 || ch.leafCount[m] < n {
				continue
			}
			cand := k.freeCellIn(p, kc, m, s.anchor())
			if cand == nil || k.bindRoot(cand, p, false) != nil {
				continue
			}
			s.bound = append(s.bound, cand)
			rs = append(rs, cand)
			ok = s.podInto(cand, n, slot)
		}
		if !ok {
			s.unbindAll()
			return false
		}
	}
	return true
}

// freeCellIn chooses a free cell of level m inside keyed cell kc for pool p
// to bind, by the buddy rule as bindableFreeCell does (clean before one
// with opportunistic leaves before a damaged one; the smallest free cell
// split first, keeping larger ones whole; then nearest to anchor), among
// those the safety checks allow (canBind, splitHurts); nil if none.
func (k *Core) freeCellIn(p *pool, kc *Cell, m int, anchor *Cell) *Cell {
	ok := func(c *Cell) bool { return c != nil && k.canBind(p, c) && !k.splitHurts(p, c) }
	if r := kc.rootAncestor(); r != nil {
		// kc lies in one root: a whole free keyed cell, or none.
		if c := bestDescendant(kc, m); r.pool.isFree() && ok(c) {
			return c
		}
		return nil
	}
	var best *Cell
	var bestRank bindRank
	var visit func(x *Cell)
	visit = func(x *Cell) {
		if int(x.level) < m {
			return
		}
		if x.pool != nil {
			if !x.pool.isFree() {
				return
			}
			c := bestDescendant(x, m)
			if c == nil {
				return
			}
			rk := bindRank{tier: 2, h: int(x.level), dist: distance(anchor, c), cost: bindCost(c)}
			switch {
			case bindCost(c) == 0:
				rk.tier = 0
			case c.unschedLeaves == 0:
				rk.tier = 1
			}
			if best == nil || rk.less(bestRank) {
				if ok(c) {
					best, bestRank = c, rk
				}
			}
			return
		}
		for _, c := range x.children {
			visit(c)
		}
	}
	visit(kc)
	return best
}

// bindRank orders free cells a constrained span may bind (freeCellIn).
type bindRank struct {
	tier, h, dist int
	cost          int64
}

func (a bindRank) less(b bindRank) bool {
	if a.tier != b.tier {
		return a.tier < b.tier
	}
	if a.h != b.h {
		return a.h < b.h
	}
	if a.dist != b.dist {
		return a.dist < b.dist
	}
	return a.cost < b.cost
}

// distance is the level of the lowest common ancestor of a and c (0
// without a): cells under a lower one are closer.
func distance(a, c *Cell) int {
	if a == nil {
		return 0
	}
	for x := c; x != nil; x = x.parent {
		if x == a || isAncestor(x, a) {
			return int(x.level)
		}
	}
	return int(c.chain.top) + 1
}

// spreadWithin is Spread for a constrained group: its pods spread over
// the nodes (and racks) of one keyed cell of the pool, not the VC's whole
// cells. It tries the keyed cells of the pool's bound cells where none of
// the group's spread-key peers runs (keyed cells inside roots at or above
// the keyed level; those holding roots below it, binding more of the VC's
// virtual cells inside them for an unused node, as spread does); then a
// keyed cell of a virtual cell at or above the keyed level bound for it
// (unused nodes, as spread binds one when every bound node is used); then
// the bound keyed cells where peers run. A keyed cell at or below node
// level has nothing to spread over: the group is packed.
func (s *search) spreadWithin(p *pool, base spreadAvoid, wl int) bool {
	if wl <= p.chain.nodeLevel {
		return false
	}
	peerFree := func(kc *Cell) bool {
		for _, n := range base.nodes {
			if ancestorAt(n, wl) == kc {
				return false
			}
		}
		return true
	}
	if s.spreadBound(p, base, wl, func(kc *Cell) bool { return peerFree(kc) }) || s.spreadFresh(p, base, wl) {
		return true
	}
	return s.spreadBound(p, base, wl, func(kc *Cell) bool { return !peerFree(kc) })
}

// spreadBound tries spreadIn in the keyed cells of p's bound cells that
// pass use.
func (s *search) spreadBound(p *pool, base spreadAvoid, wl int, use func(*Cell) bool) bool {
	need := s.g.totalLeaves()
	for key := p.roots.next(need); key >= 0; key = p.roots.next(key + 1) {
		for _, r := range p.roots.buckets[key] {
			if int(r.level) < wl {
				continue
			}
			done := !eachLevelCell(r, wl, need, func(kc *Cell) bool {
				if kc.freeLeaves < need || !use(kc) {
					return true
				}
				s.within.list = append(s.within.list[:0], kc)
				return !s.spreadIn(p, base, kc, s.within.list, wl, false)
			})
			if done {
				return true
			}
		}
	}
	bind := mayBindBelow(p, wl)
	cands := s.keyedOfRoots(p, wl)
	for i := range cands {
		if c := &cands[i]; use(c.cell) && s.spreadIn(p, base, c.cell, c.roots, wl, bind) {
			return true
		}
	}
	return false
}

// spreadFresh binds one of p's virtual cells at or above the keyed level
// (the smallest level first, by the buddy rule) and spreads inside its
// first keyed cell; the binding is undone if that fails.
func (s *search) spreadFresh(p *pool, base spreadAvoid, wl int) bool {
	k := s.k
	if p.vc == nil || p.pinnedID != "" {
		return false
	}
	for m := wl; m <= p.chain.top; m++ {
		if p.unbound(m) == 0 {
			continue
		}
		cand := k.bindableFreeCell(p, m)
		if cand == nil || cand.freeLeaves < s.g.totalLeaves() || k.bindRoot(cand, p, false) != nil {
			return false
		}
		kc := descendTo(cand, wl)
		s.within.list = append(s.within.list[:0], kc)
		if s.spreadIn(p, base, kc, s.within.list, wl, false) {
			s.bound = append(s.bound, cand)
			return true
		}
		k.unbindRoot(cand)
		return false
	}
	return false
}

// spreadIn is spread over roots inside keyed cell kc (kc itself when it
// lies in one root): each pod on the best-scoring node (spreadScore), a
// virtual cell bound inside kc when every node with room is one the group
// or its peers use.
func (s *search) spreadIn(p *pool, base spreadAvoid, kc *Cell, roots []*Cell, wl int, bind bool) bool {
	k := s.k
	ch := p.chain
	s.newAttempt()
	s.bound = s.bound[:0]
	avoid := spreadAvoid{nodes: append(s.spreadScratch.nodes[:0], base.nodes...), racks: append(s.spreadScratch.racks[:0], base.racks...)}
	defer func() { s.spreadScratch = avoid }()
	rs := append(s.within.roots[:0], roots...)
	defer func() { s.within.roots = rs[:0] }()
	for _, slot := range s.order {
		n := s.g.slots[slot].leafCellNumber
		var best *Cell
		var score spreadScore
		for _, r := range rs {
			if x, sc := s.bestSpreadIn(r, n, &avoid); x != nil && (best == nil || sc.less(score)) {
				best, score = x, sc
			}
		}
		bound := false
		for m := 1; (best == nil || score.nodeUsed) && !bound && bind && m < wl; m++ {
			if p.unbound(m) == 0 || ch.leafCount[m] < n {
				continue
			}
			cand := k.freeCellIn(p, kc, m, s.anchor())
			if cand == nil {
				continue
			}
			x, sc := s.bestSpreadIn(cand, n, &avoid)
			if x == nil || (best != nil && !sc.less(score)) || k.bindRoot(cand, p, false) != nil {
				continue
			}
			s.bound = append(s.bound, cand)
			rs = append(rs, cand)
			best, score, bound = x, sc, true
		}
		if best == nil || !s.pickLeaves(best, n, slot) {
			for i := len(s.bound) - 1; i >= 0; i-- {
				k.unbindRoot(s.bound[i])
			}
			s.bound = s.bound[:0]
			return false
		}
		for _, l := range s.result[slot] {
			avoid.add(l)
		}
	}
	return true
}

// fillSlotWithin is fillSlot (x3) for a constrained group: the late
// member's leaves go inside the keyed cell of the leaves of near (the group
// itself, or the gang of an extra pod). A
// guaranteed group takes its VC's cells there, binding more of its virtual
// cells inside the keyed cell if needed; an opportunistic one takes free
// leaves there, of unbound cells first.
func (k *Core) fillSlotWithin(g *AffinityGroup, slot int, ch *chain, near *AffinityGroup) bool {
	wl := ch.keyLevel(g.spec.WithinTopologyKey)
	var anchor *Cell
	for _, pod := range near.placement {
		if len(pod) > 0 {
			anchor = pod[0]
			break
		}
	}
	if wl == 0 || anchor == nil {
		return false
	}
	kc := ancestorAt(anchor, wl)
	s := &k.srch
	need := g.slots[slot].leafCellNumber
	if g.opportunistic() {
		defer func() { s.freePoolOnly = false }()
		for _, only := range []bool{true, false} {
			s.freePoolOnly = only
			s.newAttempt()
			if s.podInto(kc, need, slot) {
				return true
			}
		}
		return false
	}
	p := k.poolFor(g, ch)
	if p == nil {
		return false
	}
	return s.spanIn(p, kc, k.poolRootsIn(p, kc), wl, mayBindBelow(p, wl))
}

// poolRootsIn lists p's roots inside cell kc, or kc itself when it lies in
// a root of p.
func (k *Core) poolRootsIn(p *pool, kc *Cell) []*Cell {
	w := &k.srch.within
	w.list = w.list[:0]
	if r := kc.rootAncestor(); r != nil {
		if r.pool == p {
			w.list = append(w.list, kc)
		}
		return w.list
	}
	var visit func(x *Cell)
	visit = func(x *Cell) {
		if x.pool != nil {
			if x.pool == p {
				w.list = append(w.list, x)
			}
			return
		}
		for _, c := range x.children {
			visit(c)
		}
	}
	visit(kc)
	return w.list
}

package cellcore

import "math"

// Binding: which free physical cell a VC's virtual cell is bound to (the
// buddy rule and its safety checks), and a free cell near the cells a
// group already holds.

// nearFreeCell finds a clean free cell of level m close to anchor: in the
// subtree of anchor's parent, then of its grandparent, and so on up to the
// top of the chain. It visits only cells of level m and above.
func (k *Core) nearFreeCell(anchor *Cell, m int) *Cell {
	if anchor == nil {
		return nil
	}
	var found *Cell
	var visit func(x *Cell) bool
	visit = func(x *Cell) bool {
		if int(x.level) < m {
			return false
		}
		if x.pool != nil {
			if x.pool.isFree() && x.chain.penalty(x) == 0 {
				found = descendTo(x, m)
				return true
			}
			return false // bound or pinned: nothing free below
		}
		for _, c := range x.children {
			if visit(c) {
				return true
			}
		}
		return false
	}
	for a := anchor.parent; a != nil; a = a.parent {
		if int(a.level) > m && visit(a) {
			return found
		}
	}
	return nil
}

// bindableFreeCell chooses the free physical cell that pool p binds at level
// m, in the order of the buddy rule (keep larger cells whole): a clean cell
// (healthy, no opportunistic leaves) of level m, else one split out of the
// smallest larger clean cell; else a healthy cell with opportunistic leaves
// (a guaranteed group may preempt them), again of level m before one split
// out of a larger cell; else the cell with the fewest unschedulable leaves;
// a cell none of whose leaves is schedulable never. A split that would break
// the safety invariant is skipped: whether a split is safe depends only on
// the two levels (canBind), so one check per level decides for all its
// cells. A split that would leave the VCs' unbound cells without wholly
// schedulable cells to back them, where they had enough before, comes after
// every choice that does not (it would spend the last good cell of a level
// that some VC reserved whole). (Taking the first free cell whatever it
// held, or giving up when splitting it was unsafe, left a VC waiting beside
// a bindable cell: issue 9.)
func (k *Core) bindableFreeCell(p *pool, m int) *Cell {
	ch := p.chain
	tier := func(c *Cell) int {
		switch {
		case bindCost(c) == 0:
			return 0
		case c.unschedLeaves == 0:
			return 1
		}
		return 2
	}
	backedBefore := -1 // computed once, if a split needs it
	var best *Cell
	bestHurts := false
	for h := m; h <= ch.top; h++ {
		c := bestFreeAt(ch, h, m)
		if c == nil {
			continue
		}
		hurts := false
		if best != nil && !bestHurts && tier(c) > tier(best) {
			continue
		}
		if h > m {
			if !k.canBind(p, c) {
				continue
			}
			if hasDamagedFree(ch) { // else the split does not hurt: see splitHurts
				if backedBefore < 0 {
					backedBefore = 0
					if k.schedulableBacking(ch, nil, p) {
						backedBefore = 1
					}
				}
				hurts = backedBefore == 1 && !k.schedulableBacking(ch, c, p) // splitHurts, computed once
			}
		}
		if best != nil {
			if hurts && !bestHurts {
				continue
			}
			if hurts == bestHurts && (tier(c) > tier(best) || (tier(c) == tier(best) && (tier(c) < 2 || bindCost(c) >= bindCost(best)))) {
				continue
			}
		}
		best, bestHurts = c, hurts
		if tier(c) == 0 && !hurts {
			break
		}
	}
	return best
}

// splitHurts: would binding cand, split out of a larger free cell, leave
// the VCs' unbound cells without wholly schedulable backing that they have
// now?
//
// Callers ask only once canBind(p, cand) holds. Without a damaged free
// cell in the chain (one with unschedulable leaves), the schedulable
// backing is the structural count: before the split it is the safety
// invariant, after it the count canBind made, so the split never hurts.
func (k *Core) splitHurts(p *pool, cand *Cell) bool {
	if f := freeAncestor(cand); f == nil || f == cand || !hasDamagedFree(p.chain) {
		return false
	}
	return k.schedulableBacking(p.chain, nil, p) && !k.schedulableBacking(p.chain, cand, p)
}

// hasDamagedFree: a free cell of the chain has unschedulable leaves (its
// free list keys it above every clean cell: chain.penalty).
func hasDamagedFree(ch *chain) bool {
	for l := 1; l <= ch.top; l++ {
		if ch.freeList[l].next(ch.leafCount[l]+1) >= 0 {
			return true
		}
	}
	return false
}

// schedulableBacking: do the chain's wholly schedulable free cells (and the
// wholly schedulable parts of free cells with bad or unready hardware) cover
// every VC's unbound virtual cells by buddy counting, after pool p binds the
// free cell split (if not nil)?
func (k *Core) schedulableBacking(ch *chain, split *Cell, p *pool) bool {
	counts, demand := k.levelCounts(ch, false)
	var addParts func(c *Cell)
	addParts = func(c *Cell) {
		for _, x := range c.children {
			if x.unschedLeaves == 0 {
				counts[x.level]++
			} else if x.unschedLeaves < x.leafCount {
				addParts(x)
			}
		}
	}
	for l := 1; l <= ch.top; l++ {
		fl := ch.freeList[l]
		for key := fl.next(ch.leafCount[l] + 1); key >= 0; key = fl.next(key + 1) {
			for _, c := range fl.buckets[key] {
				if c.unschedLeaves > 0 {
					counts[l]--
					addParts(c)
				}
			}
		}
	}
	if split != nil {
		f := freeAncestor(split)
		// Take the split's path out of the counts: f leaves, its other
		// children along the path come in (as schedulable parts if damaged).
		if f.unschedLeaves == 0 {
			counts[f.level]--
		} else {
			// f was counted by its parts; recount without the path.
			var sub func(c *Cell)
			sub = func(c *Cell) {
				for _, x := range c.children {
					if x.unschedLeaves == 0 {
						counts[x.level]--
					} else if x.unschedLeaves < x.leafCount {
						sub(x)
					}
				}
			}
			sub(f)
		}
		for x := split; x != f; x = x.parent {
			for _, sib := range x.parent.children {
				if sib == x {
					continue
				}
				if sib.unschedLeaves == 0 {
					counts[sib.level]++
				} else if sib.unschedLeaves < sib.leafCount {
					addParts(sib)
				}
			}
		}
		if p.unbound(int(split.level)) > 0 {
			demand[split.level]--
		}
	}
	l, _ := checkLevels(ch, counts, demand)
	return l == 0
}

// bindCost ranks a free cell for binding: opportunistic leaves to preempt,
// and far behind any schedulable cell, its unschedulable leaves.
func bindCost(c *Cell) int64 {
	if c.unschedLeaves == 0 {
		return int64(c.oppLeaves)
	}
	return 1<<40 + int64(c.unschedLeaves)<<20 + int64(c.oppLeaves)
}

// bestFreeAt is the best level-m cell in (or split out of) a free cell of
// level h. Free cells are keyed by their penalty, every cell with an
// unschedulable leaf (a damaged cell) after every cell without, so the scans
// below visit only damaged cells (few) besides the one they return. At
// h == m it is the first wholly schedulable cell. Splitting (h > m), a
// wholly schedulable part of a damaged cell comes first: a damaged cell
// cannot back a level-h virtual cell anyway, so splitting it keeps the clean
// ones whole for the VCs that reserved cells of their size (the buddy rule:
// split what is least useful whole); else the first clean cell, split along
// its lowest-penalty children.
func bestFreeAt(ch *chain, h, m int) *Cell {
	fl := ch.freeList[h]
	damaged := ch.leafCount[h] + 1 // the lowest key of a damaged cell
	var best *Cell
	scan := func(from, to int32) *Cell {
		for key := fl.next(from); key >= 0 && key < to; key = fl.next(key + 1) {
			for _, x := range fl.buckets[key] {
				c := bestDescendant(x, m)
				if c == nil {
					continue
				}
				if c.unschedLeaves == 0 {
					return c
				}
				if best == nil || bindCost(c) < bindCost(best) {
					best = c
				}
			}
		}
		return nil
	}
	if h > m {
		if c := scan(damaged, math.MaxInt32); c != nil {
			return c
		}
		if c := scan(0, damaged); c != nil {
			return c
		}
	} else if c := scan(0, math.MaxInt32); c != nil {
		return c
	}
	return best
}

// bestDescendant is the level-m cell at or below x with the lowest bindCost,
// or nil if none has a schedulable leaf. Below a wholly schedulable cell the
// lowest-penalty child at each level is followed; below one with bad
// hardware every branch with a schedulable leaf is searched.
func bestDescendant(x *Cell, m int) *Cell {
	switch {
	case x.unschedLeaves == x.leafCount:
		return nil
	case int(x.level) == m:
		return x
	case x.unschedLeaves == 0:
		return descendTo(x, m)
	}
	var best *Cell
	for _, ch := range x.children {
		if c := bestDescendant(ch, m); c != nil && (best == nil || bindCost(c) < bindCost(best)) {
			best = c
		}
	}
	return best
}

// descendTo picks the level-m descendant of c with the lowest penalty.
func descendTo(c *Cell, m int) *Cell {
	for int(c.level) > m {
		best := c.children[0]
		for _, ch := range c.children[1:] {
			if c.chain.penalty(ch) < c.chain.penalty(best) {
				best = ch
			}
		}
		c = best
	}
	return c
}

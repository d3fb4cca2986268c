package cellcore

import "math/bits"

// Bounds that let a search skip what cannot succeed, read from counters
// (poolSums, node histograms) in time that does not grow with the cluster.
// Each is a necessary condition of every success of the search it guards,
// so a search that passes it runs as before and one that fails it would
// have failed: the decisions are the same.

// poolCannotHold: no search can place g in pool p, so it need not run. The
// pool binds no more cells (every virtual cell is bound, or it is a pinned
// cell), and its units cannot hold g's pods with the leaves a search may
// take there: free ones; when preempting, also those opportunistic groups
// use, and only if no guaranteed group of lower priority than g holds
// leaves in the pool (its leaves would be takeable too, and there is no
// bound then). Every placement a search finds puts each pod in one unit
// (the pod's node, or its root below node level), and a search of a pool
// that binds nothing changes nothing when it fails: skipping it is the same.
func (k *Core) poolCannotHold(g *AffinityGroup, p *pool, preempt bool) bool {
	if p.pinnedID == "" {
		for l := 1; l <= p.chain.top; l++ {
			if p.unbound(l) > 0 {
				return false
			}
		}
	}
	if !preempt {
		return unitsCannotHold(g, p.sums.units[0], p.sums.free)
	}
	if lo, ok := p.holders.lowestPrio(); ok && lo < g.priority() {
		return false
	}
	return unitsCannotHold(g, p.sums.units[1], p.sums.free+p.sums.opp)
}

// unitsCannotHold: units counted by hist (hist[f] units of f takeable
// leaves, total leaves in all) cannot hold g's pods whatever their order:
// g needs more than total, or for some pod size t more pods of t leaves or
// more than the units have room for (a unit of f leaves holds at most f/t
// of them).
func unitsCannotHold(g *AffinityGroup, hist []int32, total int32) bool {
	if g.totalLeaves() > total {
		return true
	}
	for _, m := range g.spec.Members {
		t := m.LeafCellNumber
		var pods, room int64
		for _, o := range g.spec.Members {
			if o.LeafCellNumber >= t {
				pods += int64(o.PodNumber)
			}
		}
		for f := int(t); f < len(hist); f++ {
			room += int64(hist[f]) * int64(int32(f)/t)
		}
		if pods > room {
			return true
		}
	}
	return false
}

// nodesFit is placeIn's answer for a cell c above node level when it counts
// free leaves only (not preempting; limited to the free pool, only for a
// cell in it, where its leaves are all the pool's): each pod
// in turn, largest first, on the node with the fewest free leaves that hold
// it. Which of the nodes with as many free leaves it takes does not change
// what is left, so replaying the choice on c's histogram of nodes by free
// leaves gives the same answer without visiting the nodes.
func (s *search) nodesFit(c *Cell) bool {
	free, _ := c.nodeHists()
	h := append(s.hist[:0], free...)
	s.hist = h
	for _, slot := range s.order {
		need := s.g.slots[slot].leafCellNumber
		f := int(need)
		for f < len(h) && h[f] == 0 {
			f++
		}
		if f >= len(h) {
			return false
		}
		h[f]--
		h[int32(f)-need]++
	}
	return true
}

// inFreePool: c lies in a root of its chain's free pool.
func inFreePool(c *Cell) bool {
	r := c.rootAncestor()
	return r != nil && r.pool.isFree()
}

// prioCounts counts groups by rank (-1 to maxRank), with a bitmap
// of the priorities counted, so that the lowest is a few word scans away.
type prioCounts struct {
	n    [maxRank + 2]int32
	bits [(maxRank + 2 + 63) / 64]uint64
}

func (c *prioCounts) add(prio, d int32) {
	i := prio + 1
	c.n[i] += d
	if c.n[i] > 0 {
		c.bits[i/64] |= 1 << (uint(i) % 64)
	} else {
		c.bits[i/64] &^= 1 << (uint(i) % 64)
	}
}

// anyIn: some group of a rank from lo to hi is counted.
func (c *prioCounts) anyIn(lo, hi int32) bool {
	for r := lo; r <= hi; r++ {
		i := r + 1
		if w := c.bits[i/64]; w == 0 {
			r += 63 - i%64 // the rest of this word is empty too
			continue
		}
		if c.n[i] > 0 {
			return true
		}
	}
	return false
}

// lowest is the lowest priority counted, and false if none is.
func (c *prioCounts) lowest() (int32, bool) {
	for w, word := range c.bits {
		if word != 0 {
			return int32(w*64+bits.TrailingZeros64(word)) - 1, true
		}
	}
	return 0, false
}

// countGroup adds (sign 1) or takes away (-1) g, in its state, to the
// counts of running (Allocated, Being preempted) and Preempting groups by
// priority that the preemption search's floor reads. A group is taken away
// at the priority it was added with (countedPrio): a downgrade or its undo
// may have changed its priority in between.
func (k *Core) countGroup(g *AffinityGroup, sign int32) {
	var c *prioCounts
	switch g.state {
	case AGAllocated, AGBeingPreempted:
		c = &k.running
	case AGPreempting:
		c = &k.preempting
	default:
		return
	}
	if sign > 0 {
		g.countedPrio = g.priority()
	}
	c.add(g.countedPrio, sign)
}

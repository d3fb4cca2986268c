package cellcore

// Counters: each cell's leaf counters, the node histograms of cells above
// node level, and what each pool's roots hold, summed. All change only in
// updateLeaf (a leaf's contribution) and when a root joins or leaves a pool
// (attach, detach), so that searches and a waiting group's reason read
// them instead of walking leaves. CheckInvariants recomputes every one.

// nodeHists are two histograms of the nodes below a cell above node level:
// free[f] is how many have f free leaves, take[f] how many have f leaves
// free or used by opportunistic groups (what a guaranteed group may take
// from a node when no guaranteed group of lower priority is there). They
// live in maxFree's array after its level-1 entries, so that the cells at
// and below node level, nearly all of them, pay nothing for them.
func (c *Cell) nodeHists() (free, take []int32) {
	h := c.maxFree[len(c.maxFree):cap(c.maxFree)]
	n := len(h) / 2
	return h[:n:n], h[n:]
}

// addNodeHists adds (sign 1) or takes away (sign -1) the nodes of cells
// (at or above node level) to c's node histograms.
func (c *Cell) addNodeHists(cells []*Cell, sign int32) {
	free, take := c.nodeHists()
	for _, x := range cells {
		if x.level == x.chain.nodeLeveli8() {
			free[x.freeLeaves] += sign
			take[x.freeLeaves+x.oppLeaves] += sign
			continue
		}
		xf, xt := x.nodeHists()
		for i := range free {
			free[i] += sign * xf[i]
			take[i] += sign * xt[i]
		}
	}
}

// poolSums is what a pool's roots hold: free (schedulable) leaves, leaves
// used by opportunistic groups, idle leaves that are not schedulable, and
// two histograms of its units, the cells a pod cannot cross (a node, or a
// root below node level): units[0][f] is how many have f free leaves,
// units[1][f] how many have f free or opportunistic leaves.
type poolSums struct {
	free, opp, idleUnsched int32
	units                  [2][]int32
}

// unitValues are the values a unit is counted by in poolSums.units.
func unitValues(c *Cell) [2]int32 { return [2]int32{c.freeLeaves, c.freeLeaves + c.oppLeaves} }

// attach makes c a root of p.
func (p *pool) attach(c *Cell) {
	c.pool = p
	p.roots.add(c, c.freeLeaves)
	p.sums.addRoot(c, 1)
}

// detach takes root c out of p.
func (p *pool) detach(c *Cell) {
	p.roots.remove(c)
	p.sums.addRoot(c, -1)
	c.pool = nil
}

func (s *poolSums) addRoot(c *Cell, sign int32) {
	s.free += sign * c.freeLeaves
	s.opp += sign * c.oppLeaves
	s.idleUnsched += sign * c.idleUnschedLeaves
	if c.level > c.chain.nodeLeveli8() {
		free, take := c.nodeHists()
		for i := range free {
			s.units[0][i] += sign * free[i]
			s.units[1][i] += sign * take[i]
		}
		return
	}
	v := unitValues(c)
	s.units[0][v[0]] += sign
	s.units[1][v[1]] += sign
}

// updateLeaf propagates the change of a leaf's contribution (old -> now) to
// the leaf and its ancestors, their node histograms, its chain's and its
// pool's sums. maxFree and index keys are refreshed in flush.
func (k *Core) updateLeaf(l *Cell, old leafCounts) {
	k.applyLeaf(l, old, l.leafContribution())
}

// applyLeaf is updateLeaf with the leaf's contribution now already known.
func (k *Core) applyLeaf(l *Cell, old, now leafCounts) {
	if now == old {
		return
	}
	d := leafCounts{now.free - old.free, now.unsched - old.unsched, now.lost - old.lost, now.opp - old.opp, now.guar - old.guar, now.idleUnsched - old.idleUnsched}
	if n := l.node; n != nil && !k.marking && (n.wantMarks != [numMarks]int32{} || n.claimed > 0) {
		// A group came or went on a node with marked leaves: the marks may
		// have to move to the leaves that are idle now.
		k.queueRemark(n)
	}
	if d.lost != 0 {
		l.chain.needCheck = true
	}
	ch := l.chain
	nodeLevel := ch.nodeLeveli8()
	// How every cell's unitValues change, and those of the leaf's node and
	// of its unit (the node, or the pool root below it) before the change:
	// the histograms move them from bucket to bucket.
	dv := [2]int32{d.free, d.free + d.opp}
	moves := dv != [2]int32{}
	var node, unit [2]int32
	unitSeen, aboveFreeRoot := false, false
	for x := l; x != nil; x = x.parent {
		if aboveFreeRoot {
			x.splitFree += d.free
		}
		if moves {
			if !unitSeen && (x.pool != nil || x.level == nodeLevel) {
				unit, unitSeen = unitValues(x), true
			}
			switch {
			case x.level == nodeLevel:
				node = unitValues(x)
				ch.nodeFree[node[0]]--
				ch.nodeFree[node[0]+dv[0]]++
			case x.level > nodeLevel:
				free, take := x.nodeHists()
				free[node[0]]--
				free[node[0]+dv[0]]++
				take[node[1]]--
				take[node[1]+dv[1]]++
			}
		}
		x.freeLeaves += d.free
		x.unschedLeaves += d.unsched
		x.lostLeaves += d.lost
		x.oppLeaves += d.opp
		x.guarLeaves += d.guar
		x.idleUnschedLeaves += d.idleUnsched
		if p := x.pool; p != nil {
			aboveFreeRoot = p.isFree()
			p.sums.free += d.free
			p.sums.opp += d.opp
			p.sums.idleUnsched += d.idleUnsched
			if moves {
				for i := range unit {
					p.sums.units[i][unit[i]]--
					p.sums.units[i][unit[i]+dv[i]]++
				}
			}
		}
		if x.parent == nil {
			ch.freeLeaves += d.free
			ch.lostLeaves += d.lost
		}
		if !x.dirty {
			x.dirty = true
			k.dirty[x.level] = append(k.dirty[x.level], x)
		}
		if d.guar < 0 && x.guarLeaves == 0 && x.pool != nil && x.pool.vc != nil && x.pool.pinnedID == "" && !x.doomed {
			k.unbindCandidates = append(k.unbindCandidates, x)
		}
	}
}

// flush refreshes maxFree and index keys of changed cells, lowest level first.
func (k *Core) flush() {
	for l := 1; l < len(k.dirty); l++ {
		list := k.dirty[l]
		for i, x := range list {
			list[i] = nil
			x.dirty = false
			if x.level > 1 && !x.maxFreeFromHists() {
				for j := range x.maxFree {
					x.maxFree[j] = 0
				}
				for _, c := range x.children {
					if c.level > 1 {
						for j, v := range c.maxFree {
							if v > x.maxFree[j] {
								x.maxFree[j] = v
							}
						}
					}
					if f := c.freeLeaves; f > x.maxFree[c.level-1] {
						x.maxFree[c.level-1] = f
					}
				}
			}
			if x.pool != nil {
				x.pool.roots.rekey(x, x.freeLeaves)
				if x.pool.isFree() {
					x.chain.freeList[x.level].rekey(x, x.chain.penalty(x))
				}
			}
			if x.parent == nil {
				x.chain.topIndex.rekey(x, x.freeLeaves)
			}
		}
		k.dirty[l] = list[:0]
	}
}

// maxFreeFromHists sets maxFree of a cell just above node level from its
// node histogram, without reading its children, when the histogram decides
// every entry: a node with every leaf free makes each level's most a whole
// cell of that level, no free node makes it 0. (Either is common: a
// binding splits a rack whose other nodes are whole, and a full rack.)
// The entry of the node level itself is the histogram's highest count.
// Otherwise it returns false and flush reads the children.
func (x *Cell) maxFreeFromHists() bool {
	ch := x.chain
	if int(x.level) != ch.nodeLevel+1 {
		return false
	}
	free, _ := x.nodeHists()
	whole := len(free) - 1 // a node's leaf count
	switch {
	case free[whole] > 0:
		for j := range x.maxFree {
			x.maxFree[j] = ch.leafCount[j+1]
		}
	case free[0] == int32(len(x.children)):
		clear(x.maxFree)
	default:
		return false
	}
	return true
}

// freeAt is how many free leaves the best level-l cell at or below c has.
func freeAt(c *Cell, l int) int32 {
	if int(c.level) == l {
		return c.freeLeaves
	}
	if int(c.level) < l {
		return 0
	}
	return c.maxFree[l-1]
}

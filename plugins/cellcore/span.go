package cellcore

// span places pods one by one over a pool's cells, binding more virtual
// cells as needed: for groups larger than any one cell the VC owns.
func (s *search) span(p *pool) bool {
	k := s.k
	s.newAttempt()
	s.bound = s.bound[:0]
	ch := p.chain
	for _, slot := range s.order {
		need := s.g.slots[slot].leafCellNumber
		if s.spanPodIn(p.roots, need, slot) {
			continue
		}
		ok := false
		if p.vc != nil && p.pinnedID == "" {
			for m := 1; m <= ch.top && !ok; m++ {
				if p.unbound(m) == 0 || ch.leafCount[m] < need {
					continue
				}
				// Next to the group's cells first, for affinity across the
				// cells it binds; else the best free cell of the level.
				cand := k.nearFreeCell(s.anchor(), m)
				if cand == nil || !k.canBind(p, cand) || k.splitHurts(p, cand) {
					cand = k.bindableFreeCell(p, m)
				}
				if cand == nil {
					continue
				}
				if err := k.bindRoot(cand, p, false); err != nil {
					continue
				}
				s.bound = append(s.bound, cand)
				ok = s.spanPodIn(p.roots, need, slot)
			}
		}
		if !ok {
			s.unbindAll()
			return false
		}
	}
	return true
}

// unbindAll undoes the bindings the attempt made (s.bound), last first.
func (s *search) unbindAll() {
	for i := len(s.bound) - 1; i >= 0; i-- {
		s.k.unbindRoot(s.bound[i])
	}
	s.bound = s.bound[:0]
}

func (s *search) spanPodIn(b *bucketSet, need int32, slot int) bool {
	from := need
	if s.preempt {
		from = 0
	}
	for key := b.next(from); key >= 0; key = b.next(key + 1) {
		for _, r := range b.buckets[key] {
			if s.podInto(r, need, slot) {
				return true
			}
		}
	}
	return false
}

func (s *search) podInto(x *Cell, need int32, slot int) bool {
	if x.leafCount-x.unschedLeaves < need || (!s.preempt && freeAt(x, min(int(x.level), x.chain.nodeLevel)) < need) ||
		(s.freePoolOnly && x.freePoolFree() < need) {
		return false // without preempting, a pod needs a node with need free leaves (in the free pool, if limited to it)
	}
	if x.level <= x.chain.nodeLeveli8() {
		if s.count(x) < need {
			return false
		}
		return s.pickLeaves(x, need, slot)
	}
	for _, ch := range x.children {
		if s.podInto(ch, need, slot) {
			return true
		}
	}
	return false
}

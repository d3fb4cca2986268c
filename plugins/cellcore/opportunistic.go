package cellcore

// placeOpportunistic uses free leaves anywhere: first only leaves of unbound
// cells (at every affinity level, then pod by pod), so that opportunistic work
// stays away from the VCs' cells, and only then idle leaves of VC cells.
func (k *Core) placeOpportunistic(g *AffinityGroup) bool {
	s := &k.srch
	s.preempt = false
	defer func() { s.freePoolOnly = false }()
	need := g.totalLeaves()
	within := g.spec.WithinTopologyKey != ""
	for _, freeOnly := range []bool{true, false} {
		s.freePoolOnly = freeOnly
		for _, ch := range k.candidateChains(&g.spec, nil) {
			lmax := ch.top
			if within {
				if lmax = withinLevel(g, ch); lmax == 0 {
					continue
				}
			}
			if l0 := lowestLevel(ch, need); l0 > 0 {
				for l := l0; l <= lmax; l++ {
					if s.inRoots(ch.freePool.roots, l, need) || s.inRoots(ch.topIndex, l, need) {
						return true
					}
				}
			}
			if within {
				// The top cells' index reaches every keyed cell, and
				// placeIn of one already places pod by pod over its nodes:
				// no span beyond it.
				continue
			}
			s.newAttempt()
			ok := true
			for _, slot := range s.order {
				n := g.slots[slot].leafCellNumber
				if !s.spanPodIn(ch.freePool.roots, n, slot) && !s.spanPodIn(ch.topIndex, n, slot) {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
	}
	return false
}

package cellcore

import (
	"math"
)

// placeWithPreemption is the slow path: it scans the VC's cells for the
// placement whose victims have the lowest priority. The scan of a level stops
// early once a plan reaches preemptFloor, the least cost any plan can have:
// no later plan could replace it (consider keeps the first of equal costs),
// so the result is the full scan's.
//
// A gang takes extra pods back before it preempts any gang (elastic.go):
// while extra pods run, it first looks for a plan whose victims are extra
// pods and opportunistic groups only (the search's rank bound lowered to
// extraBand), and only without one for any plan.
func (k *Core) placeWithPreemption(g *AffinityGroup) bestPlan {
	s := &k.srch
	if g.priority() > extraBand && (k.running.anyIn(0, extraBand-1) || k.preempting.anyIn(0, extraBand-1)) {
		prio := s.prio
		s.prio = extraBand
		best := k.placeWithPreemptionBelow(g)
		s.prio = prio
		if best.found {
			return best
		}
	}
	return k.placeWithPreemptionBelow(g)
}

// placeWithPreemptionBelow is placeWithPreemption taking victims of a rank
// below the search's (s.prio).
func (k *Core) placeWithPreemptionBelow(g *AffinityGroup) bestPlan {
	s := &k.srch
	s.preempt, s.maxCost = true, 2
	defer func() { s.preempt = false }()
	need := g.totalLeaves()
	within := g.spec.WithinTopologyKey != ""
	var best bestPlan
	for _, ch := range k.candidateChains(&g.spec, g.vc) {
		lmax := ch.top // as in placeGuaranteed: plans inside one keyed cell
		if within {
			if lmax = withinLevel(g, ch); lmax == 0 {
				continue
			}
		}
		p := k.poolFor(g, ch)
		if p == nil || k.poolCannotHold(g, p, true) {
			continue
		}
		if l0 := lowestLevel(ch, need); l0 > 0 {
			for l := l0; l <= lmax && !best.found; l++ {
				floor, ok := k.preemptFloor(g, p, ch, l, need)
				best = k.scanPreempt(p, ch, l, need, floor, ok)
				if ok && best.found && best.cost == floor && verifyPreemptFloor {
					if full := k.scanPreempt(p, ch, l, need, floor, false); !samePlan(full, best) {
						k.internalError("preemption floor %+v cut the scan of %s short: plan %+v, full scan %+v", floor, g.Name(), best.cost, full.cost)
					}
					preemptFloorHits.Add(1)
				}
			}
		}
		if best.found {
			return best
		}
		if within && s.spanWithin(p, lmax) || !within && s.span(p) {
			best = bestPlan{found: true, result: s.copyResult(), bound: append([]*Cell(nil), s.bound...)}
			return best
		}
	}
	return best
}

// scanPreempt tries every level-l cell of the pool (and free cells it may
// bind) for a plan; with useFloor it stops at the first plan costing floor.
func (k *Core) scanPreempt(p *pool, ch *chain, l int, need int32, floor preemptCost, useFloor bool) bestPlan {
	s := &k.srch
	var best bestPlan
	done := false
	try := func(bind *Cell) func(c *Cell) bool {
		return func(c *Cell) bool {
			if s.placeIn(c) {
				s.consider(&best, bind)
				done = useFloor && best.cost == floor
			}
			return !done
		}
	}
	for key := p.roots.next(0); key >= 0 && !done; key = p.roots.next(key + 1) {
		for _, r := range p.roots.buckets[key] {
			if int(r.level) >= l && !eachLevelCell(r, l, need, try(nil)) {
				break
			}
		}
	}
	if p.pinnedID != "" {
		return best
	}
	for m := l; m <= ch.top && !done; m++ {
		if p.unbound(m) == 0 {
			continue
		}
		cand := k.bindableFreeCell(p, m)
		if cand == nil {
			continue
		}
		eachLevelCell(cand, l, need, try(cand))
	}
	return best
}

// preemptFloor is a lower bound of the cost of any plan inside one level-l
// cell of the pool, and whether it can be computed cheaply. Leaves a plan
// takes without cost are Free (at most the pool's most free leaves in one
// level-l cell, or a whole free cell it may bind) or Reserved by a preemptor
// of lower priority; when such a preemptor exists there is no floor. Past the
// free leaves, a plan takes used leaves of at least one victim, whose
// priority is at least the lowest of all groups holding leaves.
func (k *Core) preemptFloor(g *AffinityGroup, p *pool, ch *chain, l int, need int32) (preemptCost, bool) {
	if preemptFloorOff {
		return preemptCost{}, false
	}
	if lo, ok := k.preempting.lowest(); ok && lo < g.priority() {
		return preemptCost{}, false // its Reserved leaves are free to take
	}
	minPrio := int32(math.MaxInt32)
	if lo, ok := k.running.lowest(); ok {
		minPrio = lo
	}
	// The most free leaves in one level-l cell: a root holds no more than
	// its own free leaves, its bucket's key, so the buckets at or below the
	// best found so far need no visit.
	var maxFree int32
	for key := p.roots.prev(int32(len(p.roots.buckets) - 1)); key > maxFree; key = p.roots.prev(key - 1) {
		for _, r := range p.roots.buckets[key] {
			if maxFree = max(maxFree, freeAt(r, l)); maxFree == key {
				break
			}
		}
	}
	if p.pinnedID == "" {
		for m := l; m <= ch.top; m++ {
			if p.unbound(m) > 0 {
				maxFree = max(maxFree, ch.leafCount[l])
			}
		}
	}
	if maxFree >= need || minPrio == math.MaxInt32 {
		return preemptCost{maxPrio: -2}, true // only a plan without victims is sure to be best
	}
	return preemptCost{maxPrio: minPrio, victims: 1, leaves: need - maxFree}, true
}

package cellcore

import "sync/atomic"

// spreadPlaced counts Spread placements (the model test reports it).
var spreadPlaced atomic.Int64

// Selectors (seed 004's agent selectors) choose among the placements the
// buddy allocation allows; none reaches outside the VC's cells or binds a
// cell the safety checks (canBind, splitHurts) refuse.
//
//   - Pack (the default): HiveD's packing, the tightest cells first.
//   - Spread: the group's pods one by one, each on a node none of its group
//     nor of the groups sharing its spread key uses, in a rack (the level
//     above nodes) none of them uses, as far as the VC's cells allow:
//     first among the VC's bound cells, then, when every bound node with
//     room is taken, binding more of its virtual cells (for an unused node;
//     an unused rack alone never binds a cell). A group that cannot be
//     placed this way is packed. It costs
//     fragmentation: a spread group holds parts of several nodes where a
//     packed one would hold one, so the VC's whole free nodes go first.
//   - RoundRobin: packing, but among equally good cells (the same free
//     count) the VC starts its search at a rotating position, so that
//     successive groups of equal shape land on different cells.

// spreadScore ranks a node for the next pod: lower is better.
type spreadScore struct {
	nodeUsed, rackUsed bool
	free               int32 // takeable leaves: fewer first (fragment fewer nodes)
}

func (a spreadScore) less(b spreadScore) bool {
	if a.nodeUsed != b.nodeUsed {
		return !a.nodeUsed
	}
	if a.rackUsed != b.rackUsed {
		return !a.rackUsed
	}
	return a.free < b.free
}

// spreadAvoid is what a spread placement stays away from: nodes and racks
// of the group's placed pods and of its spread-key peers. Small lists, kept
// in the search's scratch: a group has few pods.
type spreadAvoid struct {
	nodes, racks []*Cell
}

func rackOf(nodeCell *Cell) *Cell {
	if nodeCell == nil {
		return nil
	}
	return nodeCell.parent
}

func contains(list []*Cell, c *Cell) bool {
	for _, x := range list {
		if x == c {
			return true
		}
	}
	return false
}

func (a *spreadAvoid) add(leaf *Cell) {
	nc := leaf.nodeCell
	if nc == nil || contains(a.nodes, nc) {
		return
	}
	a.nodes = append(a.nodes, nc)
	if r := rackOf(nc); r != nil && !contains(a.racks, r) {
		a.racks = append(a.racks, r)
	}
}

// usedRack: every node below c is in a rack the spread avoids (c is such a
// rack, or a cell of one at or below node level).
func (a *spreadAvoid) usedRack(c *Cell) bool {
	switch {
	case c.nodeCell != nil:
		return contains(a.racks, rackOf(c.nodeCell))
	case c.level == c.chain.nodeLeveli8()+1:
		return contains(a.racks, c)
	}
	return false
}

func (a *spreadAvoid) score(x *Cell, free int32) spreadScore {
	nc := x.nodeCell
	return spreadScore{nodeUsed: contains(a.nodes, nc), rackUsed: contains(a.racks, rackOf(nc)), free: free}
}

// spreading: the group is to be spread (a Spread VC, and something to
// spread: several pods, or a spread key shared with other groups).
func spreading(g *AffinityGroup) bool {
	return g.vc != nil && g.vc.spec.Selector == SelectorSpread && (len(g.slots) > 1 || g.spec.SpreadKey != "")
}

// placeSpread tries the Spread selector in each of the group's pools.
func (k *Core) placeSpread(g *AffinityGroup) (bestPlan, bool) {
	s := &k.srch
	s.preempt = false
	avoid := spreadAvoid{nodes: s.spreadBase.nodes[:0], racks: s.spreadBase.racks[:0]}
	if key := g.spec.SpreadKey; key != "" {
		for _, o := range k.groups {
			// A key is its namespace's own: another namespace of the
			// VC taking it must not steer this one's groups together.
			if o != g && o.spec.SpreadKey == key && o.spec.Namespace == g.spec.Namespace && o.spec.VirtualCluster == g.spec.VirtualCluster && holding(o.state) {
				for _, pod := range o.placement {
					for _, l := range pod {
						avoid.add(l)
					}
				}
			}
		}
	}
	within := g.spec.WithinTopologyKey != ""
	for _, ch := range k.candidateChains(&g.spec, g.vc) {
		var wl int
		if within {
			if wl = withinLevel(g, ch); wl == 0 {
				continue
			}
		}
		p := k.poolFor(g, ch)
		if p == nil || k.poolCannotHold(g, p, false) {
			continue
		}
		if within && s.spreadWithin(p, avoid, wl) || !within && s.spread(p, avoid) {
			spreadPlaced.Add(1)
			s.spreadBase = avoid // keep the grown lists for the next group
			return bestPlan{found: true, result: s.copyResult(), bound: s.bound}, true
		}
	}
	s.spreadBase = avoid
	return bestPlan{}, false
}

// spread places the pods one by one over the pool's cells, each where it is
// farthest from the others (spreadScore), binding more virtual cells of the
// VC when no bound cell offers an unused node.
func (s *search) spread(p *pool, base spreadAvoid) bool {
	k := s.k
	s.newAttempt()
	s.bound = s.bound[:0]
	// The scratch itself, not a copy: a local that the free-cell scan
	// points to moved to the heap, one allocation a placement.
	avoid := &s.spreadScratch
	avoid.nodes = append(avoid.nodes[:0], base.nodes...)
	avoid.racks = append(avoid.racks[:0], base.racks...)
	fail := func() bool {
		for i := len(s.bound) - 1; i >= 0; i-- {
			k.unbindRoot(s.bound[i])
		}
		s.bound = s.bound[:0]
		return false
	}
	ch := p.chain
	for _, slot := range s.order {
		need := s.g.slots[slot].leafCellNumber
		best, score := s.bestSpreadCell(p.roots, need, avoid)
		if (best == nil || score.nodeUsed) && p.vc != nil && p.pinnedID == "" {
			// Every bound node with room is taken by the group or its
			// peers: bind a virtual cell of the VC whose node is better, if
			// there is one, the smallest level that holds the pod first.
			// (Not for a rack alone: a whole cell bound early to spread
			// racks would cost more fragmentation than it buys.)
			for m := 1; m <= ch.top; m++ {
				if p.unbound(m) == 0 || ch.leafCount[m] < need {
					continue
				}
				cand, x, sc := k.spreadFreeCell(p, m, need, avoid)
				if cand == nil {
					cand = k.bindableFreeCell(p, m)
					if cand == nil || !k.canBind(p, cand) || k.splitHurts(p, cand) {
						continue
					}
					x, sc = s.bestSpreadIn(cand, need, avoid)
				}
				if x == nil || (best != nil && !sc.less(score)) {
					continue
				}
				if err := k.bindRoot(cand, p, false); err != nil {
					continue
				}
				s.bound = append(s.bound, cand)
				best, score = x, sc
				break
			}
		}
		if best == nil || !s.pickLeaves(best, need, slot) {
			return fail()
		}
		for _, l := range s.result[slot] {
			avoid.add(l)
		}
	}
	return true
}

// bestSpreadCell finds, among the pool's roots, the node-level (or smaller)
// cell with need takeable leaves that scores best: the best of the first
// root (in the buckets' order) that offers an unused node in an unused
// rack, else the best of all. The first pass looks for that root only,
// passing over the roots that cannot offer one (a used rack, a node of
// one) without visiting their nodes; the second, when none does, scores
// them all.
func (s *search) bestSpreadCell(b *bucketSet, need int32, avoid *spreadAvoid) (*Cell, spreadScore) {
	for key := b.next(need); key >= 0; key = b.next(key + 1) {
		for _, r := range b.buckets[key] {
			if avoid.usedRack(r) {
				continue
			}
			if x, sc := s.bestSpreadIn(r, need, avoid); x != nil && !sc.nodeUsed && !sc.rackUsed {
				return x, sc
			}
		}
	}
	var best *Cell
	var bestScore spreadScore
	for key := b.next(need); key >= 0; key = b.next(key + 1) {
		for _, r := range b.buckets[key] {
			if x, sc := s.bestSpreadIn(r, need, avoid); x != nil && (best == nil || sc.less(bestScore)) {
				best, bestScore = x, sc
				if !sc.nodeUsed && !sc.rackUsed {
					// An unused node in an unused rack, in the tightest
					// roots first (the buckets' order): good enough, and
					// the scan of a large VC stops here.
					return best, bestScore
				}
			}
		}
	}
	return best, bestScore
}

// bestSpreadIn looks below x (down to node level, or x itself below it).
func (s *search) bestSpreadIn(x *Cell, need int32, avoid *spreadAvoid) (*Cell, spreadScore) {
	if x.freeLeaves < need || x.unschedLeaves == x.leafCount {
		return nil, spreadScore{}
	}
	if x.level <= x.chain.nodeLeveli8() {
		a := s.count(x)
		if a < need {
			return nil, spreadScore{}
		}
		return x, avoid.score(x, a)
	}
	if x.level == x.chain.nodeLeveli8()+1 && !avoid.usedRack(x) {
		return bestFreshNode(x, need)
	}
	var best *Cell
	var bestScore spreadScore
	for _, c := range x.children {
		if y, sc := s.bestSpreadIn(c, need, avoid); y != nil && (best == nil || sc.less(bestScore)) {
			best, bestScore = y, sc
		}
	}
	return best, bestScore
}

// bestFreshNode is bestSpreadIn of a rack x the spread does not use yet:
// none of its nodes is used, none holds a leaf this attempt took (each pod
// taken puts its rack in avoid), so every node scores by its free leaves
// alone, and the best is the first node with the fewest free leaves that
// hold need, read off x's node histogram.
func bestFreshNode(x *Cell, need int32) (*Cell, spreadScore) {
	free, _ := x.nodeHists()
	f := int(need)
	for f < len(free) && free[f] == 0 {
		f++
	}
	if f == len(free) {
		return nil, spreadScore{}
	}
	for _, n := range x.children {
		if n.freeLeaves == int32(f) {
			return n, spreadScore{free: int32(f)}
		}
	}
	return nil, spreadScore{}
}

// spreadFreeCell finds the free level-m cell to bind for the next pod whose
// best node scores best: among wholly healthy free cells (whole, or split
// out of a larger free cell where the buddy rules allow: canBind, and not a
// split that would leave the VCs' unbound cells without backing). It stops
// at the first cell offering an unused node in an unused rack.
func (k *Core) spreadFreeCell(p *pool, m int, need int32, avoid *spreadAvoid) (cell, node *Cell, score spreadScore) {
	f := spreadFree{k: k, p: p, m: m, need: need, avoid: avoid}
	ch := p.chain
	for h := m; h <= ch.top && !f.perfect; h++ {
		fl := ch.freeList[h]
		damaged := ch.leafCount[h] + 1
		for key := fl.next(0); key >= 0 && key < damaged && !f.perfect; key = fl.next(key + 1) {
			for _, c := range fl.buckets[key] {
				// visit's first tests, here without the call: most
				// free cells fail them.
				if c.unschedLeaves > 0 || c.freeLeaves < need || f.settled && f.avoid.usedRack(c) {
					continue
				}
				f.visit(c)
				if f.perfect {
					break
				}
			}
		}
	}
	return f.cell, f.node, f.score
}

// spreadFree is spreadFreeCell's scan: the best cell so far and whether it
// is perfect (an unused node in an unused rack, where the scan stops). A
// struct rather than closures over the results: the scan visits every free
// cell of the level, and the group's own earlier splits add seven a pod.
type spreadFree struct {
	k          *Core
	p          *pool
	m          int
	need       int32
	avoid      *spreadAvoid
	cell, node *Cell
	score      spreadScore
	perfect    bool
	// settled: the best so far is an unused node with need leaves (in a
	// used rack, or it would be perfect): no cell of a used rack beats it.
	settled bool
}

func (f *spreadFree) visit(x *Cell) {
	if f.perfect || x.unschedLeaves > 0 || x.freeLeaves < f.need {
		return
	}
	if f.settled && f.avoid.usedRack(x) {
		// Every node of x is in a rack the spread uses: its best scores
		// no better than an unused node with need leaves in a used rack,
		// which the best so far already is (a later cell must score
		// strictly less). The free cells that the group's own earlier
		// splits left are all such cells: without this each pod scored
		// again every sibling of the nodes bound before it.
		return
	}
	if int(x.level) > f.m {
		for _, c := range x.children {
			f.visit(c)
			if f.perfect {
				return
			}
		}
		return
	}
	y, sc := f.k.srch.bestSpreadIn(x, f.need, f.avoid)
	if y == nil || (f.cell != nil && !sc.less(f.score)) {
		return
	}
	if (x.pool == nil || x.pool.isFree()) && f.k.canBind(f.p, x) && !f.k.splitHurts(f.p, x) {
		f.cell, f.node, f.score = x, y, sc
		f.perfect = !sc.nodeUsed && !sc.rackUsed
		f.settled = !sc.nodeUsed && sc.free <= f.need
	}
}

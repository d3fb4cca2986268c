package cellcore

import (
	"slices"
	"sync/atomic"
)

// search finds a placement for one affinity group. It is reused across calls
// so that the hot path allocates nothing per node or per cell: leaves taken in
// the current attempt are marked with an epoch instead of being copied.
type search struct {
	k       *Core
	g       *AffinityGroup
	order   []int // slot indices, largest pods first
	result  [][]*Cell
	preempt bool // count leaves of lower priority AGs as available
	maxCost int  // when preempting: 0 free leaves only, 1 also leaves of chosen victims, 2 any
	// freePoolOnly: take only leaves of unbound cells (opportunistic work's
	// first choice, away from the VCs' cells).
	freePoolOnly bool
	prio         int32 // the group's priority, for preemption
	epoch        uint32
	nodes        []*Cell
	avail        []int32
	assign       []int
	// binding made by a spanning search, undone if the plan is dropped
	bound []*Cell
	// rot: RoundRobin's rotation among equally good cells (0: packing's
	// first choice).
	rot int
	// Spread's scratch lists, reused.
	spreadBase, spreadScratch spreadAvoid
	hist                      []int32 // nodesFit's scratch histogram
	maxPod                    int32   // the group's largest pod
	within                    withinScratch
}

// rotated is i's rank when a choice among n equally good cells starts at
// the rotation.
func (s *search) rotated(i, n int) int {
	if s.rot == 0 || n == 0 {
		return i
	}
	return (i - s.rot%n + n) % n
}

func (s *search) reset(g *AffinityGroup) {
	s.g = g
	s.prio = g.priority()
	s.order = s.order[:0]
	s.maxPod = 0
	for i, slot := range g.slots {
		s.order = append(s.order, i)
		s.maxPod = max(s.maxPod, slot.leafCellNumber)
	}
	slices.SortStableFunc(s.order, func(a, b int) int {
		return int(g.slots[b].leafCellNumber) - int(g.slots[a].leafCellNumber)
	})
	if cap(s.result) < len(g.slots) {
		s.result = make([][]*Cell, len(g.slots))
	}
	s.result = s.result[:len(g.slots)]
	s.bound = s.bound[:0]
}

// anchor is a leaf the current attempt already took, or nil.
func (s *search) anchor() *Cell {
	for _, slot := range s.order {
		if r := s.result[slot]; len(r) > 0 {
			return r[0]
		}
	}
	return nil
}

func (s *search) newAttempt() {
	s.k.epoch++
	s.epoch = s.k.epoch
	for i := range s.result {
		s.result[i] = s.result[i][:0]
	}
}

// takeable: may this leaf go to the group in this attempt?
func (s *search) takeable(c *Cell) bool {
	if c.markEpoch == s.epoch || !c.schedulable() {
		return false
	}
	if s.freePoolOnly {
		if r := c.rootAncestor(); r == nil || !r.pool.isFree() {
			return false
		}
	}
	if c.state == CellFree {
		return true
	}
	if !s.preempt {
		return false
	}
	switch c.state {
	case CellUsed:
		return c.using.priority() < s.prio && s.victimCost(c.using) <= s.maxCost
	case CellReserving:
		return c.reserving.priority() < s.prio && s.victimCost(c.using) <= s.maxCost
	default: // Reserved: cancels a lower preemptor, kills nobody
		return c.reserving.priority() < s.prio && s.maxCost >= 1
	}
}

// victimCost: 1 if taking a cell of g kills no one new (g is already a
// victim of this attempt), else 2.
func (s *search) victimCost(g *AffinityGroup) int {
	if g.victimMark == s.epoch {
		return 1
	}
	return 2
}

// count is how many leaves below c are takeable now.
func (s *search) count(c *Cell) int32 {
	if c.isLeaf() {
		if s.takeable(c) {
			return 1
		}
		return 0
	}
	if !s.preempt && c.nodeCell != nil {
		// At and below node level the counter is exact but for this
		// attempt's marks, which mark counts in each cell; limited to the
		// free pool, it is if the cell lies in one root.
		if s.freePoolOnly {
			if r := c.rootAncestor(); r == nil {
				return s.countLeaves(c)
			} else if !r.pool.isFree() {
				return 0
			}
		}
		n := c.freeLeaves
		if c.markEpoch == s.epoch {
			n -= c.markCount
		}
		return n
	}
	return s.countLeaves(c)
}

// countLeaves is count, leaf by leaf.
func (s *search) countLeaves(c *Cell) int32 {
	if c.isLeaf() {
		if s.takeable(c) {
			return 1
		}
		return 0
	}
	var n int32
	for _, ch := range c.children {
		n += s.count(ch)
	}
	return n
}

func (ch *chain) nodeLeveli8() int8 { return int8(ch.nodeLevel) }

// mark takes leaf c for the pod in slot, and counts it in every cell above
// it up to its node (count).
func (s *search) mark(c *Cell, slot int) {
	c.markEpoch = s.epoch
	s.result[slot] = append(s.result[slot], c)
	for x := c.parent; x != nil && x.nodeCell != nil; x = x.parent {
		if x.markEpoch != s.epoch {
			x.markEpoch = s.epoch
			x.markCount = 0
		}
		x.markCount++
	}
}

// pickLeaves takes n leaves below x for a pod, packed under the lowest cell
// that holds them, preferring the tightest fitting child.
func (s *search) pickLeaves(x *Cell, n int32, slot int) bool {
	if x.isLeaf() {
		if n == 1 && s.takeable(x) {
			s.mark(x, slot)
			return true
		}
		return false
	}
	var best *Cell
	var bestN int32
	for _, ch := range x.children {
		if a := s.count(ch); a >= n && (best == nil || a < bestN) {
			best, bestN = ch, a
		}
	}
	if best != nil {
		return s.pickLeaves(best, n, slot)
	}
	// No single child holds the pod: spread it over the fullest children.
	for n > 0 {
		best, bestN = nil, 0
		for _, ch := range x.children {
			if a := s.count(ch); a > bestN {
				best, bestN = ch, a
			}
		}
		if best == nil {
			return false
		}
		t := min(bestN, n)
		if !s.pickLeaves(best, t, slot) {
			return false
		}
		n -= t
	}
	return true
}

// placeIn tries to place the whole group inside cell c.
func (s *search) placeIn(c *Cell) bool {
	s.newAttempt()
	if s.preempt {
		return s.placeInPreempting(c)
	}
	g := s.g
	if c.level <= c.chain.nodeLeveli8() {
		for _, slot := range s.order {
			if !s.pickLeaves(c, g.slots[slot].leafCellNumber, slot) {
				return false
			}
		}
		return true
	}
	if (!s.freePoolOnly || inFreePool(c)) && !s.nodesFit(c) {
		return false
	}
	s.nodes, s.avail = s.nodes[:0], s.avail[:0]
	s.collectNodes(c)
	s.assign = s.assign[:0]
	for _, slot := range s.order {
		need := g.slots[slot].leafCellNumber
		best := -1
		for i, a := range s.avail {
			if a >= need && (best < 0 || a < s.avail[best] || (a == s.avail[best] && s.rotated(i, len(s.avail)) < s.rotated(best, len(s.avail)))) {
				best = i
			}
		}
		if best < 0 {
			return false
		}
		s.avail[best] -= need
		s.assign = append(s.assign, best)
	}
	for i, slot := range s.order {
		if !s.pickLeaves(s.nodes[s.assign[i]], g.slots[slot].leafCellNumber, slot) {
			return false
		}
	}
	return true
}

// placeInPreempting places the group inside c, pod by pod, choosing for
// each pod the node that kills the fewest groups: free leaves first, then
// leaves of groups already chosen as victims, then the group whose death
// frees the most leaves in c (a gang dies whole, so all of it is reusable).
func (s *search) placeInPreempting(c *Cell) bool {
	g := s.g
	s.maxCost = 2
	c.forEachLeaf(func(l *Cell) {
		if u := l.using; u != nil {
			if u.cellMark != s.epoch {
				u.cellMark, u.cellLeaves = s.epoch, 0
			}
			u.cellLeaves++
		}
	})
	s.nodes, s.avail = s.nodes[:0], s.avail[:0]
	if c.level <= c.chain.nodeLeveli8() {
		s.nodes = append(s.nodes, c)
	} else {
		s.collectNodes(c)
	}
	for _, slot := range s.order {
		need := g.slots[slot].leafCellNumber
		best, bestTier, bestKey := -1, 3, int32(0)
		for i, n := range s.nodes {
			tier, key := s.nodeCost(n, need)
			if tier < bestTier || (tier == bestTier && key < bestKey) {
				best, bestTier, bestKey = i, tier, key
			}
		}
		if best < 0 || bestTier > 2 {
			s.maxCost = 2
			return false
		}
		s.maxCost = bestTier
		if !s.pickLeaves(s.nodes[best], need, slot) {
			s.maxCost = 2
			return false
		}
		for _, l := range s.result[slot] {
			if l.using != nil && (l.state == CellUsed || l.state == CellReserving) {
				l.using.victimMark = s.epoch
			}
		}
	}
	s.maxCost = 2
	return true
}

// nodeCost ranks a node for a pod of need leaves when preempting: the
// cheapest tier of leaves that holds the pod, and a key to minimise within
// the tier (best fit for free leaves; the most leaves freed otherwise).
func (s *search) nodeCost(n *Cell, need int32) (int, int32) {
	for tier := 0; tier <= 2; tier++ {
		s.maxCost = tier
		a := s.count(n)
		if a < need {
			continue
		}
		if tier < 2 {
			s.maxCost = 2
			return tier, a
		}
		var freed int32
		n.forEachLeaf(func(l *Cell) {
			if l.using != nil && l.markEpoch != s.epoch && l.using.victimMark != s.epoch && l.using.cellMark == s.epoch {
				freed = max(freed, l.using.cellLeaves)
			}
		})
		s.maxCost = 2
		return 2, -freed
	}
	s.maxCost = 2
	return 3, 0
}

func (s *search) collectNodes(c *Cell) {
	if !s.preempt && c.freeLeaves == 0 || c.unschedLeaves == c.leafCount {
		return
	}
	if c.level == c.chain.nodeLeveli8() {
		if a := s.count(c); a > 0 {
			s.nodes = append(s.nodes, c)
			s.avail = append(s.avail, a)
		}
		return
	}
	for _, ch := range c.children {
		s.collectNodes(ch)
	}
}

// descend looks below x for a level-l cell that holds the group (g leaves),
// visiting the most used qualifying child first so that free space stays in
// large cells (packing).
func (s *search) descend(x *Cell, l int, need int32) bool {
	if int(x.level) == l {
		return s.placeIn(x)
	}
	if len(x.children) > 64 {
		for _, ch := range x.children {
			if freeAt(ch, l) >= need && s.mayHold(ch, l, need) && s.descend(ch, l, need) {
				return true
			}
		}
		return false
	}
	var tried uint64
	for {
		best := -1
		n := len(x.children)
		for i, ch := range x.children {
			if tried&(1<<uint(i)) == 0 && freeAt(ch, l) >= need && s.mayHold(ch, l, need) && (best < 0 || ch.freeLeaves < x.children[best].freeLeaves ||
				(ch.freeLeaves == x.children[best].freeLeaves && s.rotated(i, n) < s.rotated(best, n))) {
				best = i
			}
		}
		if best < 0 {
			return false
		}
		tried |= 1 << uint(best)
		if s.descend(x.children[best], l, need) {
			return true
		}
	}
}

// mayHold: may a level-l cell at or below c hold the group's need leaves?
// Not if none has as many free (the callers check that first, inline: it
// is what turns most cells away), nor if no node below c has as many free
// as its largest pod, nor, limited to the free pool, if fewer lie there: a
// necessary condition of descend's success, which changes nothing when it
// fails.
func (s *search) mayHold(c *Cell, l int, need int32) bool {
	// At or below node level, need free leaves in one cell hold the
	// largest pod too.
	if nl := c.chain.nodeLevel; l > nl && c.maxFree[nl-1] < s.maxPod {
		return false
	}
	return !s.freePoolOnly || c.freePoolFree() >= need
}

// inRoots tries the roots of an index (a pool's roots or a chain's top
// cells), least free first, for a level-l cell that holds the group.
func (s *search) inRoots(b *bucketSet, l int, need int32) bool {
	for key := b.next(need); key >= 0; key = b.next(key + 1) {
		bk := b.buckets[key]
		for j := 0; j < len(bk); j++ {
			i := j
			if s.rot != 0 {
				i = (j + s.rot) % len(bk)
			}
			r := bk[i]
			if int(r.level) >= l && freeAt(r, l) >= need && s.mayHold(r, l, need) && s.descend(r, l, need) {
				return true
			}
		}
	}
	return false
}

// lowestLevel is the lowest level of ch whose cells hold need leaves, or 0.
func lowestLevel(ch *chain, need int32) int {
	for l := 1; l <= ch.top; l++ {
		if ch.leafCount[l] >= need {
			return l
		}
	}
	return 0
}

// --- preemption search: slower, scans the pool ---

type preemptCost struct {
	maxPrio int32 // highest priority among victims, -2 if none
	victims int
	leaves  int32
}

func (a preemptCost) less(b preemptCost) bool {
	if a.maxPrio != b.maxPrio {
		return a.maxPrio < b.maxPrio
	}
	if a.victims != b.victims {
		return a.victims < b.victims
	}
	return a.leaves < b.leaves
}

func (s *search) cost() preemptCost {
	c := preemptCost{maxPrio: -2}
	var seen []*AffinityGroup
	for _, pod := range s.result {
		for _, l := range pod {
			if l.state == CellUsed || l.state == CellReserving {
				c.leaves++
				if v := l.using; v != nil {
					found := false
					for _, x := range seen {
						if x == v {
							found = true
							break
						}
					}
					if !found {
						seen = append(seen, v)
						if p := v.priority(); p > c.maxPrio {
							c.maxPrio = p
						}
					}
				}
			}
		}
	}
	c.victims = len(seen)
	return c
}

type bestPlan struct {
	found  bool
	cost   preemptCost
	result [][]*Cell
	bind   *Cell // a free cell to bind when the plan is committed, or nil
	// bound: cells a spanning or spreading search already bound for the
	// plan. placeGuaranteed's plans share the search's own list (no copy
	// on the fast path): schedulePending commits such a plan before any
	// other search runs. placeWithPreemption keeps a plan across searches,
	// so its plans copy the list.
	bound []*Cell
}

func (s *search) consider(b *bestPlan, bind *Cell) {
	c := s.cost()
	if b.found && !c.less(b.cost) {
		return
	}
	b.found, b.cost, b.bind = true, c, bind
	b.result = copyPods(s.result)
}

// eachLevelCell visits the level-l cells at or below x that could hold need
// leaves if every lower priority were preempted, until fn returns false; it
// reports whether the visit ran to the end.
func eachLevelCell(x *Cell, l int, need int32, fn func(*Cell) bool) bool {
	if x.leafCount-x.unschedLeaves < need {
		return true
	}
	if int(x.level) == l {
		return fn(x)
	}
	for _, ch := range x.children {
		if !eachLevelCell(ch, l, need, fn) {
			return false
		}
	}
	return true
}

// samePlan: the same cost and the same leaves for every pod.
func samePlan(a, b bestPlan) bool {
	if a.found != b.found || a.cost != b.cost || a.bind != b.bind || len(a.result) != len(b.result) {
		return false
	}
	for i := range a.result {
		if len(a.result[i]) != len(b.result[i]) {
			return false
		}
		for j := range a.result[i] {
			if a.result[i][j] != b.result[i][j] {
				return false
			}
		}
	}
	return true
}

// verifyPreemptFloor makes every preemption search that stopped at its floor
// run the full scan as well and record an internal error (CheckInvariants)
// if the plans differ; tests set it. preemptFloorHits counts those stops.
// preemptFloorOff turns the early stop off (the benchmark's baseline).
var (
	verifyPreemptFloor bool
	preemptFloorOff    bool
	preemptFloorHits   atomic.Int64
)

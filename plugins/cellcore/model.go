package cellcore

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// chain is the physical cells of one top cell type: the unit in which buddy
// allocation and the safety invariant work.
type chain struct {
	name      string // the top cell type
	leafType  string
	top       int
	nodeLevel int
	levelType []string // by level; index 0 unused
	levelKey  []string // the topology key naming each level, or ""; index 0 unused
	childNum  []int32  // children of a level-l cell; index 0, 1 unused
	leafCount []int32  // leaves in a level-l cell
	tops      []*Cell
	topIndex  *bucketSet   // every top cell, keyed by free leaves
	freePool  *pool        // unbound physical cells
	freeList  []*bucketSet // buddy free lists by level, keyed by binding penalty
	vcPools   []*pool      // VC pools in this chain, by VC name
	needCheck bool         // health or capacity changed: rebalance doomed cells
	// demand[l]: the VC pools' unbound virtual cells of level l, summed
	// (what the safety invariant must back); doomedCells: their doomed
	// bound cells. Kept as bindings change, so that canBind and finish do
	// not sum every pool on the hot path (check.go recounts them).
	demand      []int64
	doomedCells int32
	// freeLeaves: free schedulable leaves of the whole chain; nodeFree[f]:
	// how many of its nodes have f of them (for an opportunistic group's
	// reason); lostLeaves: its leaves of lost capacity.
	freeLeaves, lostLeaves int32
	nodeFree               []int32
}

// pool is a set of root cells: the chain's free pool (the buddy free lists), a
// VC's bound cells in the chain, or one pinned cell.
type pool struct {
	chain    *chain
	vc       *vcState // nil for the free pool and unowned pinned cells
	pinnedID string
	roots    *bucketSet // keyed by free leaves
	quota    []int32    // VC pools: virtual cells per level
	bound    []int32    // VC pools: bound roots per level (doomed included)
	doomed   []int32
	sums     poolSums    // what its roots hold, summed
	holders  holderIndex // the guaranteed groups holding its leaves
}

// newPool makes an empty pool whose roots hold at most maxLeaves leaves.
func newPool(ch *chain, vc *vcState, pinnedID string, maxLeaves int32) *pool {
	p := &pool{chain: ch, vc: vc, pinnedID: pinnedID, roots: newBucketSet(idxRoot, maxLeaves)}
	n := ch.leafCount[ch.nodeLevel] + 1
	p.sums.units = [2][]int32{make([]int32, n), make([]int32, n)}
	return p
}

func (p *pool) isFree() bool { return p == p.chain.freePool }

func (p *pool) unbound(l int) int32 {
	if n := p.quota[l] - p.bound[l]; n > 0 {
		return n
	}
	return 0
}

// addBound changes the pool's bound count of level l by d, and the chain's
// demand with it.
func (p *pool) addBound(l int, d int32) {
	before := p.unbound(l)
	p.bound[l] += d
	p.chain.demand[l] += int64(p.unbound(l) - before)
}

// recountDemand sums the chain's demand again (after a VC's quota changed).
func (ch *chain) recountDemand() {
	clear(ch.demand)
	for _, p := range ch.vcPools {
		for l := 1; l <= ch.top; l++ {
			ch.demand[l] += int64(p.unbound(l))
		}
	}
}

func (p *pool) name() string {
	switch {
	case p.isFree():
		return "free pool of chain " + p.chain.name
	case p.pinnedID != "":
		return "pinned cell " + p.pinnedID
	}
	return "VC " + p.vc.name + " in chain " + p.chain.name
}

func (ch *chain) penalty(c *Cell) int32 {
	if c.unschedLeaves > 0 {
		return c.oppLeaves + ch.leafCount[c.level] + 1
	}
	return c.oppLeaves
}

// build turns a validated configuration into chains, cells and nodes.
func (k *Core) build(cfg Config) error {
	types, err := resolveTypes(cfg.CellTypes)
	if err != nil {
		return err
	}
	belowNode := map[string]string{} // type -> a node-level type above it
	for _, ti := range types {
		if ti.nodeLevel {
			for t := types[ti.child]; t != nil; t = types[t.child] {
				belowNode[t.name] = ti.name
				if t.isLeaf {
					break
				}
			}
		}
	}
	if len(cfg.PhysicalCells) == 0 {
		return fmt.Errorf("physicalCells is empty")
	}
	k.chains = map[string]*chain{}
	k.nodes = map[string]*node{}
	k.pinned = map[string]*Cell{}
	nodeByLeafType := map[string]string{} // node/leafType -> cell path, for duplicates
	total := 0
	for i := range cfg.PhysicalCells {
		if ti, ok := types[cfg.PhysicalCells[i].CellType]; ok {
			total += cellsBelow(ti, types)
		}
	}
	b := &builder{k: k, types: types, nodeByLeafType: nodeByLeafType, devices: map[int32]bool{}}
	b.cells = make([]Cell, total)
	for i := range cfg.PhysicalCells {
		spec := &cfg.PhysicalCells[i]
		where := fmt.Sprintf("physicalCells[%d]", i)
		ti, ok := types[spec.CellType]
		if !ok {
			return fmt.Errorf("%s: unknown cell type %q", where, spec.CellType)
		}
		if !ti.nodeBelowOk {
			if above, ok := belowNode[ti.name]; ok {
				return fmt.Errorf("%s: top cell of type %q is below node level (type %q is the node level above it)", where, ti.name, above)
			}
			return fmt.Errorf("%s: chain of cell type %q has no node level (mark one type isNodeLevel)", where, ti.name)
		}
		ch := k.chains[ti.name]
		if ch == nil {
			ch = newChain(ti, types)
			k.chains[ti.name] = ch
			k.chainOrder = append(k.chainOrder, ch)
		}
		b.ch, b.pinned, b.count = ch, b.pinned[:0], 0
		top, err := b.cell(spec, ti, nil, where, 0)
		if err != nil {
			return err
		}
		ch.tops = append(ch.tops, top)
		ch.topIndex.add(top, top.freeLeaves)
		k.addFreeRoot(top)
		for _, p := range b.pinned {
			if _, dup := k.pinned[p.id]; dup {
				return fmt.Errorf("%s: pinnedCellId %q is used twice", p.where, p.id)
			}
			k.pinned[p.id] = p.cell
		}
		k.cellCount += b.count
	}
	sort.Slice(k.chainOrder, func(i, j int) bool { return k.chainOrder[i].name < k.chainOrder[j].name })
	// Pinned cells leave the buddy free pool for good: each is its own pool.
	ids := make([]string, 0, len(k.pinned))
	for id := range k.pinned {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c := k.pinned[id]
		for x := c.parent; x != nil; x = x.parent {
			if x.pool != nil && x.pool.pinnedID != "" {
				return fmt.Errorf("pinned cell %q is inside pinned cell %q", id, x.pool.pinnedID)
			}
		}
		for _, other := range ids {
			if o := k.pinned[other]; o != c && isAncestor(c, o) {
				return fmt.Errorf("pinned cell %q is inside pinned cell %q", other, id)
			}
		}
		p := newPool(c.chain, nil, id, c.leafCount)
		if err := k.splitTo(c); err != nil {
			return err
		}
		p.attach(c)
	}
	k.flush()
	return nil
}

// cellsBelow counts the cells of a full tree of type ti (itself included).
func cellsBelow(ti *typeInfo, types map[string]*typeInfo) int {
	n, per := 1, 1
	for t := ti; !t.isLeaf; t = types[t.child] {
		per *= int(t.childNum)
		n += per
	}
	return n
}

func isAncestor(a, c *Cell) bool {
	for x := c.parent; x != nil; x = x.parent {
		if x == a {
			return true
		}
	}
	return false
}

func newChain(ti *typeInfo, types map[string]*typeInfo) *chain {
	ch := &chain{name: ti.name, leafType: ti.leafType, top: ti.level}
	n := ti.level + 1
	ch.levelType = make([]string, n)
	ch.levelKey = make([]string, n)
	ch.childNum = make([]int32, n)
	ch.leafCount = make([]int32, n)
	for t := ti; ; t = types[t.child] {
		ch.levelType[t.level] = t.name
		ch.levelKey[t.level] = t.topologyKey
		ch.childNum[t.level] = t.childNum
		ch.leafCount[t.level] = t.leafCount
		if t.nodeLevel {
			ch.nodeLevel = t.level
		}
		if t.isLeaf {
			break
		}
	}
	ch.topIndex = newBucketSet(idxTop, ti.leafCount)
	ch.freeList = make([]*bucketSet, n)
	for l := 1; l < n; l++ {
		ch.freeList[l] = newBucketSet(idxFree, 2*ch.leafCount[l]+1)
	}
	ch.freePool = newPool(ch, nil, "", ti.leafCount)
	ch.demand = make([]int64, n)
	ch.nodeFree = make([]int32, ch.leafCount[ch.nodeLevel]+1)
	return ch
}

// levelOf returns the level of a cell type in the chain, or 0.
func (ch *chain) levelOf(t string) int {
	for l := 1; l <= ch.top; l++ {
		if ch.levelType[l] == t {
			return l
		}
	}
	return 0
}

type pinnedRef struct {
	id, where string
	cell      *Cell
}

type builder struct {
	k              *Core
	ch             *chain
	types          map[string]*typeInfo
	nodeByLeafType map[string]string
	pinned         []pinnedRef
	count          int
	curNode        *node
	nextDevice     int64
	devices        map[int32]bool
	// bulk storage, to build large clusters with few allocations
	cells []Cell
	ints  []int32
	ptrs  []*Cell
}

func (b *builder) newChildren(n int) []*Cell {
	if len(b.ptrs) < n {
		b.ptrs = make([]*Cell, 4096+n)
	}
	s := b.ptrs[:n:n]
	b.ptrs = b.ptrs[n:]
	return s
}

func (b *builder) newCell() *Cell {
	if len(b.cells) == 0 {
		b.cells = make([]Cell, 1024)
	}
	c := &b.cells[0]
	b.cells = b.cells[1:]
	b.count++
	return c
}

var smallInts = func() []string {
	s := make([]string, 256)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

// smallItoa shares the strings of small indices: millions of cells below
// node level need no string of their own.
func smallItoa(i int) string {
	if i >= 0 && i < len(smallInts) {
		return smallInts[i]
	}
	return strconv.Itoa(i)
}

func (b *builder) newInts(n int) []int32 {
	if len(b.ints) < n {
		b.ints = make([]int32, 4096+n)
	}
	s := b.ints[:n:n]
	b.ints = b.ints[n:]
	return s
}

func (b *builder) cell(spec *PhysicalCellSpec, ti *typeInfo, parent *Cell, where string, sibling int) (*Cell, error) {
	ch := b.ch
	if spec != nil && spec.CellType != "" && spec.CellType != ti.name {
		return nil, fmt.Errorf("%s: cell type %q, but its parent's type needs %q here", where, spec.CellType, ti.name)
	}
	c := b.newCell()
	c.chain = ch
	c.parent = parent
	c.level = int8(ti.level)
	c.leafCount = ti.leafCount
	for i := range c.pos {
		c.pos[i] = -1
	}
	addr := ""
	if spec != nil {
		addr = spec.CellAddress
	}
	switch {
	case ti.level > ch.nodeLevel:
		if addr == "" {
			addr = strconv.Itoa(sibling)
		}
	case ti.level == ch.nodeLevel:
		if addr == "" {
			return nil, fmt.Errorf("%s: node-level cell of type %q needs cellAddress (the node name)", where, ti.name)
		}
		key := addr + "\x00" + ch.leafType
		if prev, dup := b.nodeByLeafType[key]; dup {
			return nil, fmt.Errorf("%s: node %q with leaf cell type %q is listed twice (also at %s)", where, addr, ch.leafType, prev)
		}
		b.nodeByLeafType[key] = where
		n := b.k.nodes[addr]
		if n == nil {
			n = &node{name: addr}
			b.k.nodes[addr] = n
		}
		n.cells = append(n.cells, c)
		b.curNode, b.nextDevice = n, 0
		clear(b.devices)
		c.nodeCell = c
		ch.nodeFree[0]++ // nothing is free before the node is seen
	default:
		c.nodeCell = parent.nodeCell
		if ti.isLeaf {
			// Device indices are int32 (placements, records, the isolation
			// annotation): an address that does not fit is refused, never
			// truncated into another device's index. nextDevice is int64 so
			// that the index after the largest one is seen to overflow too.
			idx := b.nextDevice
			if addr != "" {
				v, err := strconv.ParseInt(addr, 10, 32)
				if err != nil || v < 0 {
					return nil, fmt.Errorf("%s: leaf cell address %q must be a device index (an integer from 0 to %d)", where, addr, math.MaxInt32)
				}
				idx = v
			} else if idx > math.MaxInt32 {
				return nil, fmt.Errorf("%s: leaf cell without cellAddress would get device index %d (the one after its sibling's), more than %d", where, idx, math.MaxInt32)
			}
			if b.devices[int32(idx)] {
				return nil, fmt.Errorf("%s: device index %d is used twice in node %q", where, idx, b.curNode.name)
			}
			b.devices[int32(idx)] = true
			b.nextDevice = idx + 1
			c.index = int32(idx)
			addr = smallItoa(int(idx))
		} else if addr == "" {
			addr = smallItoa(sibling)
		} else if _, err := strconv.Atoi(addr); err != nil {
			return nil, fmt.Errorf("%s: cell address %q below node level must be an index", where, addr)
		}
	}
	if ti.level <= ch.nodeLevel {
		c.node = b.curNode
	}
	c.address = addr
	if spec != nil && spec.PinnedCellID != "" {
		b.pinned = append(b.pinned, pinnedRef{id: spec.PinnedCellID, where: where, cell: c})
	}
	// Nothing is schedulable until its node is first seen healthy.
	c.unschedLeaves = c.leafCount
	c.idleUnschedLeaves = c.leafCount
	if ti.isLeaf {
		return c, nil
	}
	// Above node level, the node histograms follow maxFree (nodeHists).
	n := ti.level - 1
	if ti.level > ch.nodeLevel {
		n += 2 * int(ch.leafCount[ch.nodeLevel]+1)
	}
	c.maxFree = b.newInts(n)[:ti.level-1]
	var kids []PhysicalCellSpec
	if spec != nil {
		kids = spec.CellChildren
	}
	if len(kids) == 0 && ti.level > ch.nodeLevel {
		return nil, fmt.Errorf("%s: cell of type %q is above node level and must list its %d children (down to the nodes)", where, ti.name, ti.childNum)
	}
	if len(kids) != 0 && int32(len(kids)) != ti.childNum {
		return nil, fmt.Errorf("%s: cell of type %q lists %d children, its type has %d", where, ti.name, len(kids), ti.childNum)
	}
	childType := b.types[ti.child]
	c.children = b.newChildren(int(ti.childNum))
	for i := range c.children {
		var ks *PhysicalCellSpec
		cw := where
		if len(kids) != 0 {
			ks = &kids[i]
			cw = fmt.Sprintf("%s.cellChildren[%d]", where, i)
		}
		kid, err := b.cell(ks, childType, c, cw, i)
		if err != nil {
			return nil, err
		}
		c.children[i] = kid
	}
	if ti.level > ch.nodeLevel {
		c.addNodeHists(c.children, 1)
	}
	return c, nil
}

// --- buddy free pool ---

func (k *Core) addFreeRoot(c *Cell) {
	c.chain.freePool.sums.addRoot(c, 1)
	linkFree(c)
}

func (k *Core) removeFreeRoot(c *Cell) {
	c.chain.freePool.sums.addRoot(c, -1)
	unlinkFree(c)
}

// linkFree is addFreeRoot but for the free pool's sums (pool.attach
// without them): a merge or a split that moves the sums at once calls it.
func linkFree(c *Cell) {
	ch := c.chain
	c.pool = ch.freePool
	ch.freePool.roots.add(c, c.freeLeaves)
	ch.freeList[c.level].add(c, ch.penalty(c))
	for x := c.parent; x != nil; x = x.parent {
		x.splitFree += c.freeLeaves
	}
}

// unlinkFree is removeFreeRoot but for the free pool's sums.
func unlinkFree(c *Cell) {
	ch := c.chain
	ch.freePool.roots.remove(c)
	c.pool = nil
	ch.freeList[c.level].remove(c)
	for x := c.parent; x != nil; x = x.parent {
		x.splitFree -= c.freeLeaves
	}
	c.splitFree = 0 // split next, its children's roots count again
}

// freeAncestor returns the free-list cell at or above c, or nil.
func freeAncestor(c *Cell) *Cell {
	r := c.rootAncestor()
	if r != nil && r.pool.isFree() {
		return r
	}
	return nil
}

// splitTo takes target out of the free pool, splitting the free cell above it
// (buddy split): the siblings along the path become free cells of their level.
func (k *Core) splitTo(target *Cell) error {
	f := freeAncestor(target)
	if f == nil {
		return fmt.Errorf("cell %s is not free", target.ID())
	}
	ch := target.chain
	if target.level < ch.nodeLeveli8() {
		// Below node level a sibling is a unit of its own in the free
		// pool's sums (a pod cannot cross a root), not a part of its node:
		// the sums move root by root.
		k.removeFreeRoot(f)
		for x := f; x != target; {
			x.splitFree = 0 // split now: its children's free roots count
			next := pathChild(x, target)
			for _, c := range x.children {
				if c != next {
					k.addFreeRoot(c)
				}
			}
			x = next
		}
		return nil
	}
	// At or above node level the split moves the indexes as removeFreeRoot
	// and addFreeRoot would, in the same order (a bucket's order decides
	// among equal cells), but the counters at once: f's roots but target
	// stay in the free pool, so its sums lose target's leaves and nodes
	// alone, and every cell above the new roots loses target's free leaves
	// from splitFree (the cells of the path count the siblings below them:
	// their free leaves but target's). A binding splits a rack into eight
	// nodes this way; root by root it summed seven nodes and a rack's
	// histograms again.
	fp := ch.freePool
	fp.roots.remove(f)
	ch.freeList[f.level].remove(f)
	f.pool = nil
	f.splitFree = 0 // a root's, as removeFreeRoot leaves it (target may be f)
	for x := f; x != target; {
		next := pathChild(x, target)
		for _, c := range x.children {
			if c != next {
				c.pool = fp
				fp.roots.add(c, c.freeLeaves)
				ch.freeList[c.level].add(c, ch.penalty(c))
			}
		}
		x.splitFree = x.freeLeaves - target.freeLeaves
		x = next
	}
	fp.sums.addRoot(target, -1)
	for x := f.parent; x != nil; x = x.parent {
		x.splitFree -= target.freeLeaves
	}
	return nil
}

// pathChild is the child of x on the way down to its descendant target.
func pathChild(x, target *Cell) *Cell {
	c := target
	for c.parent != x {
		c = c.parent
	}
	return c
}

// releaseToFree returns c to the free pool and merges buddies upward.
func (k *Core) releaseToFree(c *Cell) {
	fp := c.chain.freePool
	// At or above node level a merged cell's sums are its children's (its
	// nodes and leaves), so the free pool's sums change by c's alone: they
	// move once, and the merges move only the indexes and splitFree (a
	// rack merged back took eight nodes' sums out and its own in).
	batch := c.level >= c.chain.nodeLeveli8()
	fp.sums.addRoot(c, 1)
	linkFree(c)
	for p := c.parent; p != nil; p = p.parent {
		for _, ch := range p.children {
			if ch.pool == nil || !ch.pool.isFree() {
				return
			}
		}
		for _, ch := range p.children {
			if !batch {
				fp.sums.addRoot(ch, -1)
			}
			unlinkFree(ch)
		}
		if !batch {
			fp.sums.addRoot(p, 1)
		}
		linkFree(p)
	}
}

// bindRoot binds the free physical cell target to a VC pool at its level.
func (k *Core) bindRoot(target *Cell, p *pool, doomed bool) error {
	if err := k.splitTo(target); err != nil {
		return err
	}
	p.attach(target)
	target.doomed = doomed
	p.addBound(int(target.level), 1)
	if doomed {
		p.doomed[target.level]++
		p.chain.doomedCells++
	}
	// A split may leave less healthy capacity than the VCs may claim.
	target.chain.needCheck = true
	return nil
}

// unbindRoot releases a VC's bound cell back to the free pool.
func (k *Core) unbindRoot(r *Cell) {
	p := r.pool
	p.detach(r)
	p.addBound(int(r.level), -1)
	if r.doomed {
		p.doomed[r.level]--
		p.chain.doomedCells--
		r.doomed = false
	}
	k.releaseToFree(r)
	r.chain.needCheck = true
}

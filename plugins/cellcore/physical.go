package cellcore

import (
	"fmt"
	"sort"
)

// Changing the physical cluster at run time (issue 25: the cluster derived
// from DRA ResourceSlices and node labels, which appear, change and vanish).
//
// ReplacePhysicalCluster builds the new cell model aside, replays into it
// everything the core knows, and only when all of it fits swaps the new
// cells in under the lock. The replay is the state, not its history: the
// VCs' specs are set again (the same fit check as SetVirtualCluster), the
// VCs' bound cells are bound again where the same cell exists, node and
// device health, marks and claims are copied leaf by leaf, and each leaf a
// group holds takes the same state, group and preemptor as before. Group
// records, VC records, the queue's view, namespace usage and the counters
// that are not about cells are the core's own and are kept as they are; the
// new cells point at them, and their cell-side fields (placements, holders,
// pools) are pointed at the new cells in the swap.
//
// A cell "stays the same" when the new configuration has a cell at the same
// place: at or below node level, the same node (by name), chain, and
// address path below the node (a leaf: its device index); above node level,
// the same path of addresses from the chain's top cell. Its type and size
// must match too. Such a cell keeps its ID, so readers (CellRecords,
// Snapshot, inspect) see it unchanged.

// VCRejection is a virtual cluster that would not fit the new physical
// cluster, with the reason in SetVirtualCluster's words.
type VCRejection struct{ Name, Reason string }

// PhysicalChangeResult says what ReplacePhysicalCluster did, or why it did
// nothing.
type PhysicalChangeResult struct {
	// Applied: the new physical cluster is in place. When false, nothing in
	// the core changed.
	Applied bool
	// Rejected: VCs whose virtual cells would not fit the new cluster (a VC
	// that no longer fits is never silently shrunk). Any entry means
	// Applied == false.
	Rejected []VCRejection
	// Stranded: affinity groups holding cells (Allocated, Being preempted)
	// that do not exist in the new cluster, or that would no longer meet
	// the group's topology constraint there (a node moved to another rack).
	// Any entry means Applied == false.
	Stranded []string
	// Busy: refused only because the change cannot be applied now; retry
	// later. This core never sets it: every transient state is carried over
	// or, for a preemptor whose reserved cells vanish, cancelled by AG e5
	// (docs/cellcore.md, "Changing the physical cluster"). Kept in the
	// contract so that a caller handles it if a later core needs it.
	Busy       bool
	BusyReason string
	// Cancelled: Preempting groups sent back to Pending (AG e5) because
	// cells they had reserved do not exist in the new cluster, no longer
	// lie in their VC's cells, or no longer meet their topology constraint; their victims got those cells back (cell e4)
	// and are Allocated again (x2) unless they lost a pod. Only when
	// Applied.
	Cancelled []string
	// What changed (node names, sorted): for logs and events. Set whether
	// or not the change applied.
	AddedNodes, RemovedNodes, ChangedNodes []string
}

// ReplacePhysicalCluster changes the physical cluster to cfg, atomically:
// either the whole change applies (Applied true) or nothing in the core
// changes. It is refused when a VC's virtual cells would not fit cfg
// (Rejected, the same check as SetVirtualCluster) or a group holding cells
// would lose them (Stranded). Otherwise everything the core knows carries
// over: VCs, node and device health, devices taken or claimed, every group
// in every state with its cells, victims and reservations, namespace usage,
// the queue's view. The error is for an invalid cfg only (New's validation).
//
// cfg is built into cells before the core's lock is taken; the replay and
// the swap run under it (BenchmarkReplacePhysicalCluster: the cost at 10k
// nodes). CellRecords taken before the swap keep describing the old cells.
func (k *Core) ReplacePhysicalCluster(cfg Config) (PhysicalChangeResult, error) {
	n, err := New(cfg)
	if err != nil {
		return PhysicalChangeResult{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	r := &replacement{k: k, n: n}
	res := r.plan()
	if len(res.Rejected) > 0 || len(res.Stranded) > 0 {
		return res, nil
	}
	r.commit()
	k.finish()
	res.Applied = true
	res.Cancelled = r.cancelledNames()
	return res, nil
}

// replacement is one ReplacePhysicalCluster call: the core k and the new
// model n, built from the new configuration. plan fills n and never writes
// k (nor the groups and VCs k owns); commit moves n's cells into k.
type replacement struct {
	k, n *Core
	// leafMap: old leaf -> the same leaf in n; pairs: every node of both
	// models with its leaves so paired.
	leafMap map[*Cell]*Cell
	pairs   []nodePair
	// changed: nodes of both models whose cells differ (their marks are
	// placed again rather than copied).
	changed map[string]bool
	// cancelled: Preempting groups whose reservation does not carry over.
	cancelled map[*AffinityGroup]bool
	// victims of cancelled preemptors, to return by x2 once they are on the
	// new cells.
	victims []*AffinityGroup
}

type nodePair struct {
	old, new *node
	leaves   [][2]*Cell // old, new
}

func (r *replacement) cancelledNames() []string {
	var out []string
	for g := range r.cancelled {
		out = append(out, g.spec.Name)
	}
	sort.Strings(out)
	return out
}

// plan replays k's state into n and reports what does not fit. n is
// complete (every binding, health, mark, claim and leaf state) when it
// reports nothing.
func (r *replacement) plan() PhysicalChangeResult {
	k, n := r.k, r.n
	var res PhysicalChangeResult
	// The new model's searches mark cells with epochs: start past every
	// epoch k has used, so that no new mark means anything to k's groups.
	n.epoch = k.epoch
	r.pairNodes(&res)

	// Groups holding cells that vanish, or that would break their
	// topology constraint: Stranded (Allocated, Being preempted), or their
	// reservation cancelled (Preempting).
	r.cancelled = map[*AffinityGroup]bool{}
	names := k.groupNames()
	for _, name := range names {
		g := k.groups[name]
		if !holding(g.state) { // Allocated, Being preempted, Preempting
			continue
		}
		if r.allMapped(g) && !r.breaksWithin(g) {
			continue
		}
		if g.state == AGPreempting {
			r.cancelled[g] = true
		} else {
			res.Stranded = append(res.Stranded, name)
		}
	}

	// VCs: their specs against the new cells, in name order, each on the
	// cells the ones before it left (SetVirtualCluster's check: a VC that
	// does not fit with the others is rejected with its words).
	rejected := map[string]bool{}
	reject := func(name, reason string) {
		if !rejected[name] {
			rejected[name] = true
			res.Rejected = append(res.Rejected, VCRejection{Name: name, Reason: reason})
		}
	}
	vcNames := make([]string, 0, len(k.vcs))
	for name := range k.vcs {
		vcNames = append(vcNames, name)
	}
	sort.Strings(vcNames)
	for _, name := range vcNames {
		if _, err := n.setVC(k.vcs[name].spec); err != nil {
			reject(name, err.Error())
		}
	}
	if len(res.Rejected) > 0 || len(res.Stranded) > 0 {
		return r.sorted(res)
	}

	// The VCs' bound cells, bound again where the same cell exists, at a
	// level where the VC still has that many virtual cells, doomed as they
	// were (rebalanceDoomed reconsiders them in finish).
	for _, name := range vcNames {
		v := k.vcs[name]
		nv := n.vcs[name]
		for _, ch := range k.chainOrder {
			p := v.pools[ch]
			nch := n.chains[ch.name]
			if p == nil || nch == nil || nv.pools[nch] == nil {
				continue
			}
			np := nv.pools[nch]
			for _, root := range sortedRoots(p) {
				c := r.counterpart(root)
				if c == nil || np.unbound(int(c.level)) == 0 || freeAncestor(c) == nil {
					continue // its virtual cell is bound again when needed
				}
				if err := n.bindRoot(c, np, root.doomed); err != nil {
					n.internalError("binding %s again: %v", c.ID(), err)
				}
			}
		}
	}
	// The safety invariant with those bindings: a free pool split in a way
	// that cannot back every unbound virtual cell refuses the change (the
	// VCs with unbound cells at or above the short level are named).
	for _, ch := range n.chainOrder {
		counts, demand := n.levelCounts(ch, false)
		l, short := checkLevels(ch, counts, demand)
		if l == 0 {
			continue
		}
		for _, p := range ch.vcPools {
			for m := l; m <= ch.top; m++ {
				if p.unbound(m) > 0 {
					reject(p.vc.name, fmt.Sprintf("virtual cluster %q does not fit: chain %s lacks %d free %s cell(s) at level %d for all virtual clusters' unbound cells", p.vc.name, ch.name, short, ch.levelType[l], l))
					break
				}
			}
		}
	}
	if len(res.Rejected) > 0 {
		return r.sorted(res)
	}

	// Every guaranteed leaf inside its VC's cells: a group's leaves whose
	// bound cell did not carry over bind a virtual cell of the VC again, as
	// recovery does (bindForRecovery: the lowest ancestor the VC may still
	// bind safely). Running groups first, so that a preemptor never takes
	// a virtual cell a running group needs; a preemptor whose reserved
	// leaves cannot be bound is cancelled (AG e5).
	for pass := 0; pass < 2; pass++ {
		for _, name := range names {
			g := k.groups[name]
			running := g.state == AGAllocated || g.state == AGBeingPreempted
			if r.cancelled[g] || (pass == 0 && !running) || (pass == 1 && g.state != AGPreempting) {
				continue
			}
			if g.opportunistic() {
				continue
			}
			if reason := r.placeInVC(g); reason != "" {
				if g.state == AGPreempting {
					r.cancelled[g] = true
				} else {
					reject(g.spec.VirtualCluster, reason)
				}
			}
		}
	}
	if len(res.Rejected) > 0 {
		return r.sorted(res)
	}

	// Health, devices, marks, claims and leaf states, node by node.
	r.restoreLeaves()
	return r.sorted(res)
}

func (r *replacement) sorted(res PhysicalChangeResult) PhysicalChangeResult {
	sort.Slice(res.Rejected, func(i, j int) bool { return res.Rejected[i].Name < res.Rejected[j].Name })
	sort.Strings(res.Stranded)
	return res
}

// sortedRoots lists a pool's roots in the order a walk of the chain meets
// them, so that a replay binds in the same order whatever the index holds.
func sortedRoots(p *pool) []*Cell {
	var roots []*Cell
	for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
		roots = append(roots, p.roots.buckets[key]...)
	}
	sort.Slice(roots, func(i, j int) bool { return cellBefore(roots[i], roots[j]) })
	return roots
}

// pairNodes pairs the nodes of both models, leaf by leaf, and names the
// added, removed and changed ones.
func (r *replacement) pairNodes(res *PhysicalChangeResult) {
	k, n := r.k, r.n
	r.pairs = make([]nodePair, 0, len(n.nodes))
	r.leafMap = make(map[*Cell]*Cell, k.leafCells)
	r.changed = map[string]bool{}
	for name, on := range k.nodes {
		nn := n.nodes[name]
		if nn == nil {
			res.RemovedNodes = append(res.RemovedNodes, name)
			continue
		}
		// The node is the same when each chain's node cell is where it was
		// with the same cells below.
		same := len(on.cells) == len(nn.cells)
		np := nodePair{old: on, new: nn}
		leaves := 0
		for _, oc := range on.cells {
			leaves += int(oc.leafCount)
		}
		np.leaves = make([][2]*Cell, 0, leaves)
		for _, oc := range on.cells {
			nc := r.counterpart(oc)
			if nc == nil {
				same = false
				continue
			}
			same = pairLeaves(oc, nc, func(ol, nl *Cell) {
				np.leaves = append(np.leaves, [2]*Cell{ol, nl})
				r.leafMap[ol] = nl
			}) && sameAbove(oc, nc) && same
		}
		if !same {
			r.changed[name] = true
			res.ChangedNodes = append(res.ChangedNodes, name)
		}
		r.pairs = append(r.pairs, np)
	}
	for name := range n.nodes {
		if k.nodes[name] == nil {
			res.AddedNodes = append(res.AddedNodes, name)
		}
	}
	sort.Strings(res.AddedNodes)
	sort.Strings(res.RemovedNodes)
	sort.Strings(res.ChangedNodes)
	// Pairs in name order: the replay does the same work in the same order
	// every time (map order would not).
	sort.Slice(r.pairs, func(i, j int) bool { return r.pairs[i].new.name < r.pairs[j].new.name })
}

// sameAbove: the cells above node cells oc (old) and nc (new) have the
// same types and addresses, up to the top: the node sits where it did.
func sameAbove(oc, nc *Cell) bool {
	o, n := oc.parent, nc.parent
	for ; o != nil && n != nil; o, n = o.parent, n.parent {
		if o.address != n.address || o.level != n.level || o.leafCount != n.leafCount || o.chain.levelType[o.level] != n.chain.levelType[n.level] {
			return false
		}
	}
	return o == nil && n == nil
}

// pairLeaves calls fn for each leaf below old cell oc that has a counterpart
// below new cell nc (same address path), in nc's order. It reports whether
// the two subtrees are the same cells (every cell paired, with its type).
func pairLeaves(oc, nc *Cell, fn func(ol, nl *Cell)) bool {
	if oc.isLeaf() || nc.isLeaf() {
		if oc.isLeaf() && nc.isLeaf() {
			fn(oc, nc)
			return oc.chain.leafType == nc.chain.leafType
		}
		return false
	}
	same := len(oc.children) == len(nc.children) && oc.chain.levelType[oc.level] == nc.chain.levelType[nc.level]
	for i, x := range nc.children {
		addr, ord := addressOrdinal(nc.children, i)
		o := childAt(oc.children, addr, ord)
		if o != nil && indexOf(oc.children, o) != i {
			same = false // the same cells in another order
		}
		if o != nil && o.level == x.level {
			same = pairLeaves(o, x, fn) && same
		} else {
			same = false
		}
	}
	return same
}

// addressOrdinal is the address of sibs[i] and how many siblings before it
// share it (addresses above node level are free-form and may repeat).
func addressOrdinal(sibs []*Cell, i int) (string, int) {
	addr, ord := sibs[i].address, 0
	for _, s := range sibs[:i] {
		if s.address == addr {
			ord++
		}
	}
	return addr, ord
}

func childAt(sibs []*Cell, addr string, ord int) *Cell {
	for _, s := range sibs {
		if s.address == addr {
			if ord == 0 {
				return s
			}
			ord--
		}
	}
	return nil
}

// counterpart is the new model's cell at old cell c's place (see the top of
// the file), or nil.
func (r *replacement) counterpart(c *Cell) *Cell {
	if nl, ok := r.leafMap[c]; ok {
		return nl
	}
	nch := r.n.chains[c.chain.name]
	if nch == nil {
		return nil
	}
	// The path from c up to its anchor: its node cell, or its top cell.
	var path []*Cell
	x := c
	for ; x.parent != nil && !(c.level <= c.chain.nodeLeveli8() && x == c.nodeCell); x = x.parent {
		path = append(path, x)
	}
	var cur *Cell
	if c.level <= c.chain.nodeLeveli8() {
		nn := r.n.nodes[c.node.name]
		if nn == nil {
			return nil
		}
		for _, nc := range nn.cells {
			if nc.chain == nch {
				cur = nc
			}
		}
	} else {
		i := indexOf(c.chain.tops, x)
		addr, ord := addressOrdinal(c.chain.tops, i)
		cur = childAt(nch.tops, addr, ord)
	}
	for i := len(path) - 1; i >= 0 && cur != nil; i-- {
		y := path[i]
		addr, ord := addressOrdinal(y.parent.children, indexOf(y.parent.children, y))
		cur = childAt(cur.children, addr, ord)
	}
	if cur == nil || cur.level != c.level || cur.leafCount != c.leafCount ||
		cur.chain.levelType[cur.level] != c.chain.levelType[c.level] {
		return nil
	}
	return cur
}

func indexOf(list []*Cell, c *Cell) int {
	for i, x := range list {
		if x == c {
			return i
		}
	}
	return -1
}

// allMapped: every cell of g's placement stays the same.
func (r *replacement) allMapped(g *AffinityGroup) bool {
	for _, pod := range g.placement {
		for _, c := range pod {
			if r.leafMap[c] == nil {
				return false
			}
		}
	}
	return true
}

// breaksWithin: g has a topology constraint that its cells, the same cells
// in n, would break (a node moved to another rack, a type lost its key):
// the group cannot keep them, as recovery refuses such a record.
func (r *replacement) breaksWithin(g *AffinityGroup) bool {
	key := g.spec.WithinTopologyKey
	if key == "" {
		return false
	}
	mapped := make([][]*Cell, len(g.placement))
	for i, pod := range g.placement {
		for _, c := range pod {
			mapped[i] = append(mapped[i], r.leafMap[c])
		}
	}
	return withinViolation(key, mapped) != ""
}

// placeInVC makes sure every leaf guaranteed group g uses or reserves lies in
// its VC's (or its pinned cell's) cells in n, binding virtual cells as
// recovery does; it returns why not, in recovery's words, or "".
func (r *replacement) placeInVC(g *AffinityGroup) string {
	n := r.n
	nv := n.vcs[g.spec.VirtualCluster]
	if g.vc == nil || nv == nil {
		return "" // a group without a VC is opportunistic (downgraded)
	}
	var bound []*Cell
	fail := func(reason string) string {
		for i := len(bound) - 1; i >= 0; i-- {
			n.unbindRoot(bound[i])
		}
		return reason
	}
	for _, pod := range g.placement {
		for _, c := range pod {
			if c.using != g && c.reserving != g {
				continue
			}
			l := r.leafMap[c]
			if g.spec.PinnedCellID != "" {
				pc := n.pinned[g.spec.PinnedCellID]
				if pc == nil || pc.pool.vc != nv || (l != pc && !isAncestor(pc, l)) {
					return fail(fmt.Sprintf("virtual cluster %q: leaf cell %s of affinity group %q is outside pinned cell %q", g.spec.VirtualCluster, l.ID(), g.spec.Name, g.spec.PinnedCellID))
				}
				continue
			}
			p := nv.pools[l.chain]
			if p == nil {
				return fail(fmt.Sprintf("virtual cluster %q has no cells in chain %s for affinity group %q", g.spec.VirtualCluster, l.chain.name, g.spec.Name))
			}
			if root := l.rootAncestor(); root != nil && root.pool == p {
				continue
			}
			if !n.bindForRecovery(p, l, &bound) {
				return fail(fmt.Sprintf("virtual cluster %q has no free virtual cell left for leaf cell %s of affinity group %q", g.spec.VirtualCluster, l.ID(), g.spec.Name))
			}
		}
	}
	return ""
}

// restoreLeaves copies every paired node's health, wanted marks and claims,
// and its leaves' device health, marks, claims, state and groups, into n,
// keeping n's counters exact (updateLeaf from each leaf's contribution
// before). A cancelled preemptor's leaves go back as AG e5 gives them back:
// Reserving to its victim (cell e4), Reserved to Free (cell e7). Marks of
// unchanged nodes are copied (so they stay on the same leaves); a changed
// node's are placed again in finish.
func (r *replacement) restoreLeaves() {
	n := r.n
	n.marking = true // no remark queued by the copy itself
	var olds []leafCounts
	for _, np := range r.pairs {
		on, nn := np.old, np.new
		olds = olds[:0]
		for _, nc := range nn.cells {
			nc.forEachLeaf(func(l *Cell) { olds = append(olds, l.leafContribution()) })
		}
		nn.health = on.health
		nn.wantMarks = on.wantMarks
		nn.claimed = 0
		same := !r.changed[nn.name]
		for _, pr := range np.leaves {
			ol, nl := pr[0], pr[1]
			nl.device = ol.device
			nl.claimed = ol.claimed
			if nl.claimed {
				nn.claimed++
			}
			if same {
				nl.mark = ol.mark
			}
			using, reserving := ol.using, ol.reserving
			if reserving != nil && r.cancelled[reserving] {
				if using != nil {
					r.victims = appendUnique(r.victims, using)
				}
				reserving = nil
			}
			nl.using, nl.reserving = using, reserving
			switch {
			case using != nil && reserving != nil:
				nl.state = CellReserving
			case using != nil:
				nl.state = CellUsed
			case reserving != nil:
				nl.state = CellReserved
			default:
				nl.state = CellFree
			}
		}
		if !same {
			// A device is the device wherever the node's cells put it: a
			// leaf that is not the same cell (the node moved to another
			// chain) keeps the health and claim of the device of its leaf
			// type and index, but no group (its cells are others).
			paired := make(map[*Cell]bool, len(np.leaves))
			for _, pr := range np.leaves {
				paired[pr[1]] = true
			}
			for _, nc := range nn.cells {
				nc.forEachLeaf(func(l *Cell) {
					if paired[l] {
						return
					}
					for _, oc := range on.cells {
						if oc.chain.leafType != l.chain.leafType {
							continue
						}
						oc.forEachLeaf(func(ol *Cell) {
							if ol.index == l.index && !paired[l] {
								paired[l] = true
								l.device, l.claimed = ol.device, ol.claimed
								if l.claimed {
									nn.claimed++
								}
							}
						})
					}
				})
			}
		}
		i := 0
		for _, nc := range nn.cells {
			nc.forEachLeaf(func(l *Cell) { n.updateLeaf(l, olds[i]); i++ })
		}
		if !same && (nn.wantMarks != [numMarks]int32{} || nn.claimed > 0) {
			n.queueRemark(nn)
		}
	}
	n.marking = false
}

// commit swaps n's cells into k. It cannot fail: plan checked everything.
func (r *replacement) commit() {
	k, n := r.k, r.n
	// The VC records stay k's (groups point at them; their counts, policies
	// and rotation carry over): they take n's pools.
	for name, v := range k.vcs {
		nv := n.vcs[name]
		v.pools, v.chains, v.pinned, v.leafTotal = nv.pools, nv.chains, nv.pinned, nv.leafTotal
		for _, p := range v.pools {
			p.vc = v
		}
		for _, p := range v.pinned {
			p.vc = v
		}
		k.seqView.setVC(name, v.spec.Sequencer, v.leafTotal)
	}
	k.chains, k.chainOrder, k.nodes, k.pinned, k.leafTypes = n.chains, n.chainOrder, n.nodes, n.pinned, n.leafTypes
	k.cellCount, k.leafCells = n.cellCount, n.leafCells
	k.dirty, k.unbindCandidates, k.unbindingNow, k.remarkNodes = n.dirty, n.unbindCandidates, n.unbindingNow, n.remarkNodes
	k.epoch = max(k.epoch, n.epoch)
	k.internalErrs = append(k.internalErrs, n.internalErrs...)
	// The search's scratch points at old cells: start it afresh.
	k.srch = search{k: k}

	// Groups: placements on the new cells, holders in the new pools.
	names := k.groupNames()
	for _, name := range names {
		g := k.groups[name]
		g.heldLeaves, g.heldIn, g.heldPos = 0, nil, 0
		if g.chain != nil {
			g.chain = k.chains[g.chain.name]
		}
		if g.placement == nil {
			continue
		}
		if r.cancelled[g] {
			continue
		}
		for _, pod := range g.placement {
			for i, c := range pod {
				pod[i] = r.leafMap[c]
			}
		}
	}
	for _, name := range names {
		g := k.groups[name]
		for _, pod := range g.placement {
			for _, c := range pod {
				if !r.cancelled[g] && c.heldBy() == g {
					k.hold(g, c)
				}
			}
		}
	}
	// Cancelled preemptors: AG e5 (their cells were given back in the
	// replay: cell e4 to their victims, cell e7 to Free); victims with no
	// Reserving cell left are Allocated again (x2).
	var cancelledLeaves []*Cell
	for _, name := range r.cancelledNames() {
		g := k.groups[name]
		for _, pod := range g.placement {
			for _, c := range pod {
				if l := r.leafMap[c]; l != nil {
					cancelledLeaves = append(cancelledLeaves, l)
				}
			}
		}
		g.placement = nil
		if err := k.setAGState(g, AGe5); err != nil {
			k.internalError("cancelling %q: %v", name, err)
		}
	}
	for _, v := range r.victims {
		k.maybeCancelBeingPreempted(v)
	}
	// A VC's cell is unbound when its last guaranteed leaf goes (finish's
	// candidates, queued as leaves change): the cells a cancelled
	// preemptor had reserved came over Free, so their bound cells are
	// candidates as cell e7 would have made them. (Other bound cells are
	// left as they were: everything else carries over.)
	for _, c := range cancelledLeaves {
		if c.node != nil {
			// Reserved by the preemptor, the leaf is idle now: a claim on
			// it is foreign, its node's marks move (the model test found
			// a claimed leaf of an unchanged node left unmarked).
			k.queueRemark(c.node)
		}
		if root := c.rootAncestor(); root != nil && root.pool.vc != nil && root.pool.pinnedID == "" {
			k.unbindCandidates = append(k.unbindCandidates, root)
		}
	}
}

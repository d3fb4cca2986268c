package cellcore

import (
	"fmt"
	"slices"
	"sort"
	"sync"
)

// Core holds the whole cell state of a cluster and decides placements.
type Core struct {
	mu sync.Mutex

	chains     map[string]*chain
	chainOrder []*chain
	nodes      map[string]*node
	pinned     map[string]*Cell
	leafTypes  map[string]bool
	vcs        map[string]*vcState
	groups     map[string]*AffinityGroup
	cellCount  int
	leafCells  int64 // of the whole cluster: no group may ask for more

	seq              uint64
	epoch            uint32
	dirty            [][]*Cell // changed cells by level, flushed at the end of each operation
	unbindCandidates []*Cell
	unbindingNow     []*Cell            // finish's copy of unbindCandidates, reused
	remarkNodes      []*node            // nodes whose leaf marks must be placed again (markNodeLeaves)
	nsUse            map[nsKey]*nsUsage // what each namespace's groups hold of each VC (limits)
	seqView          sequenceView       // the queue order's inputs, read without the lock
	marking          bool               // markNodeLeaves is moving marks: do not queue again
	downgradedNow    []string
	scratchCounts    []leafCounts
	scratchLevels    [2][]int64 // levelCounts' counts and demand
	srch             search
	internalErrs     []string
	// running and preempting count the Allocated and Being preempted, and
	// the Preempting groups by priority (countGroup): preemptFloor's input.
	running, preempting prioCounts

	// OnTransition, if set, is called for every AG transition (for tests
	// and event logs). It runs under the core's lock: it must not call Core.
	OnTransition func(group string, ev AGEvent, from, to AGState)
}

// New builds the cell model of a physical cluster. Every node starts
// Unknown (not schedulable) until SetNodeHealth reports it.
func New(cfg Config) (*Core, error) {
	k := &Core{vcs: map[string]*vcState{}, groups: map[string]*AffinityGroup{}, leafTypes: map[string]bool{}, nsUse: map[nsKey]*nsUsage{}}
	if err := k.build(cfg); err != nil {
		return nil, err
	}
	top := 0
	for _, ch := range k.chainOrder {
		k.leafTypes[ch.leafType] = true
		top = max(top, ch.top)
		k.leafCells += int64(len(ch.tops)) * int64(ch.leafCount[ch.top])
	}
	k.dirty = make([][]*Cell, top+1)
	k.srch.k = k
	return k, nil
}

func (k *Core) trace(g *AffinityGroup, ev AGEvent) {
	if k.OnTransition != nil {
		// from is not kept: setAGState has already moved; callers of the hook
		// read the new state.
		k.OnTransition(g.spec.Name, ev, 0, g.state)
	}
}

// traceEvent fires a self-transition through the table (x3).
func (k *Core) traceEvent(g *AffinityGroup, ev AGEvent) {
	if err := k.setAGState(g, ev); err != nil {
		k.internalError("%v", err)
	}
}

func (k *Core) internalError(format string, args ...any) {
	k.internalErrs = append(k.internalErrs, fmt.Sprintf(format, args...))
}

// finish ends every mutating operation: lazily unbinds VC cells that no
// guaranteed leaf uses any more, refreshes indexes, and keeps the doomed-bad
// bindings in line with health.
func (k *Core) finish() {
	k.remarkQueued()
	for {
		k.flush()
		if len(k.unbindCandidates) == 0 {
			break
		}
		list := k.unbindCandidates
		k.unbindCandidates = k.unbindingNow[:0]
		for _, r := range list {
			if r.pool != nil && r.pool.vc != nil && r.pool.pinnedID == "" && r.guarLeaves == 0 && !r.doomed {
				k.unbindRoot(r)
			}
		}
		clear(list)
		k.unbindingNow = list[:0]
	}
	for _, ch := range k.chainOrder {
		if ch.needCheck {
			k.flush()
			k.rebalanceDoomed(ch)
			k.flush()
			ch.needCheck = false
		}
	}
}

// DecisionKind says what Schedule decided.
type DecisionKind int

const (
	// Placed: the group is Allocated; Pods holds each pod's cells.
	Placed DecisionKind = iota
	// Wait: the group stays Pending (or Preempting); Reason says why.
	Wait
	// Preempt: the group is Preempting; Victims must be deleted, whole.
	Preempt
)

func (d DecisionKind) String() string {
	return [...]string{"Placed", "Wait", "Preempt"}[d]
}

// Decision is the answer of Schedule.
type Decision struct {
	Kind    DecisionKind
	Group   string
	State   AGState
	Pods    []PodPlacement // one per pod slot, in member order (Placed)
	Victims []string       // whole AGs to delete (Preempt, and Wait while Preempting)
	Reason  string         // for a user: why the group waits
	// OverLimit: the group waits for its namespace's limit in its VC
	// (Reason names it), not for cells.
	OverLimit bool
	// Downgraded lists guaranteed AGs lazily preempted to opportunistic.
	Downgraded []string
}

// PodPlacement is one pod's cells: a node and the leaf cell (device) indices.
type PodPlacement struct {
	PodKey          string // set once a pod is assigned to the slot
	Node            string
	LeafCellType    string
	LeafCellNumber  int32
	LeafCellIndices []int32
}

func (k *Core) placedDecision(g *AffinityGroup) Decision {
	d := Decision{Kind: Placed, Group: g.spec.Name, State: g.state, Pods: make([]PodPlacement, len(g.slots))}
	var leaves int
	for _, pod := range g.placement {
		leaves += len(pod)
	}
	buf := make([]int32, leaves) // one array for every pod's indices
	for i, s := range g.slots {
		d.Pods[i], buf = k.podPlacement(g, i, s, buf)
	}
	return d
}

// podPlacement is slot i's placement. Its leaf indices take the first
// entries of buf (a new array if buf is too short); it returns the rest.
func (k *Core) podPlacement(g *AffinityGroup, i int, s podSlot, buf []int32) (PodPlacement, []int32) {
	pp := PodPlacement{PodKey: s.podKey, LeafCellNumber: s.leafCellNumber}
	if i < len(g.placement) && len(g.placement[i]) > 0 {
		leaves := g.placement[i]
		pp.Node = leaves[0].NodeName()
		pp.LeafCellType = leaves[0].chain.leafType
		n := len(leaves)
		if len(buf) < n {
			buf = make([]int32, n)
		}
		pp.LeafCellIndices, buf = buf[:n:n], buf[n:]
		for j, c := range leaves {
			pp.LeafCellIndices[j] = c.index
		}
		slices.Sort(pp.LeafCellIndices)
	}
	return pp, buf
}

func (k *Core) victimsOf(g *AffinityGroup) []string {
	var out []string
	for _, pod := range g.placement {
		for _, c := range pod {
			if c.state == CellReserving && c.reserving == g && c.using != nil {
				found := false
				for _, n := range out {
					if n == c.using.spec.Name {
						found = true
						break
					}
				}
				if !found {
					out = append(out, c.using.spec.Name)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// Schedule decides for an affinity group. A new group is validated and
// created Pending; a Pending group is placed (AG e0), set preempting (AG e1)
// or left waiting; a Preempting group becomes Allocated once its victims are
// gone (AG e2). An Allocated group's placement is returned as it is.
// Invalid requests return an error and change nothing.
func (k *Core) Schedule(spec AffinityGroupSpec) (Decision, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.finish()
	k.downgradedNow = k.downgradedNow[:0]
	g := k.groups[spec.Name]
	if g != nil && !g.spec.equal(&spec) {
		return Decision{}, specError(fmt.Errorf("affinity group %q already exists with a different spec (pods of one group must agree on virtual cluster, priority, leaf cell type, pinned cell, topology constraint and members)", spec.Name))
	}
	if g == nil || g.state == AGPending {
		if err := k.validateSpec(&spec); err != nil {
			return Decision{}, specError(err)
		}
	}
	if g != nil && g.state == AGPending && g.vc == nil {
		// Rolled back after its VC was removed; the VC of its name is back.
		g.vc = k.vcs[spec.VirtualCluster]
		g.vc.agCount[AGPending]++
	}
	if g == nil {
		k.seq++
		g = newGroup(spec, k.vcs[spec.VirtualCluster], k.seq)
		k.groups[spec.Name] = g
		g.vc.agCount[AGPending]++
	}
	var d Decision
	switch g.state {
	case AGAllocated, AGBeingPreempted:
		d = k.placedDecision(g)
	case AGPreempting:
		done, err := k.completePreemption(g)
		if err != nil {
			return Decision{}, err
		}
		if done {
			d = k.placedDecision(g)
		} else {
			d = Decision{Kind: Wait, Group: g.spec.Name, State: g.state, Victims: k.victimsOf(g),
				Reason: fmt.Sprintf("affinity group %q is preempting: waiting for the victims to be deleted", g.spec.Name)}
		}
	default:
		var err error
		d, err = k.schedulePending(g)
		if err != nil {
			return Decision{}, err
		}
	}
	d.Downgraded = append([]string(nil), k.downgradedNow...)
	return d, nil
}

func (k *Core) schedulePending(g *AffinityGroup) (Decision, error) {
	if g.spec.ExtraOf != "" {
		return k.scheduleExtra(g)
	}
	return k.schedulePendingGroup(g)
}

// schedulePendingGroup is the search for a Pending group: placed (e0),
// preempting (e1) or waiting.
func (k *Core) schedulePendingGroup(g *AffinityGroup) (Decision, error) {
	if reason := k.overLimit(g); reason != "" {
		return Decision{Kind: Wait, Group: g.spec.Name, State: g.state, Reason: reason, OverLimit: true}, nil
	}
	s := &k.srch
	for attempt := 0; attempt < 2; attempt++ {
		s.reset(g)
		if g.opportunistic() {
			if k.placeOpportunistic(g) {
				if err := k.allocate(g, s.copyResult()); err != nil {
					return Decision{}, err
				}
				return k.placedDecision(g), nil
			}
			return k.waitDecision(g), nil
		}
		if plan, ok := k.placeGuaranteed(g); ok {
			if err := k.commitPlan(g, plan); err != nil {
				return Decision{}, err
			}
			return k.placedDecision(g), nil
		}
		plan := k.placeWithPreemption(g)
		if !plan.found {
			return k.waitDecision(g), nil
		}
		var lazy []*AffinityGroup
		for _, pod := range plan.result {
			for _, c := range pod {
				if (c.state == CellUsed || c.state == CellReserving) && c.using != nil &&
					!c.using.opportunistic() && c.using.spec.LazyPreemptionEnable {
					lazy = appendUnique(lazy, c.using)
				}
			}
		}
		if len(lazy) > 0 && attempt == 0 {
			k.dropPlan(plan)
			for _, v := range lazy {
				k.downgrade(v)
			}
			k.finish()
			continue
		}
		allFreeOrReserved := true
		for _, pod := range plan.result {
			for _, c := range pod {
				if c.state == CellUsed || c.state == CellReserving {
					allFreeOrReserved = false
				}
			}
		}
		if allFreeOrReserved {
			if err := k.commitPlan(g, plan); err != nil {
				return Decision{}, err
			}
			return k.placedDecision(g), nil
		}
		if plan.bind != nil {
			if err := k.bindRoot(plan.bind, k.poolFor(g, plan.bind.chain), false); err != nil {
				k.dropPlan(plan)
				return Decision{}, err
			}
		}
		victims, err := k.reserve(g, plan.result)
		if err != nil {
			k.dropPlan(plan)
			return Decision{}, err
		}
		k.releaseUnusedBindings(plan.bound)
		d := Decision{Kind: Preempt, Group: g.spec.Name, State: g.state}
		for _, v := range victims {
			d.Victims = append(d.Victims, v.spec.Name)
		}
		sort.Strings(d.Victims)
		d.Reason = fmt.Sprintf("affinity group %q preempts %v in virtual cluster %q", g.spec.Name, d.Victims, g.spec.VirtualCluster)
		return d, nil
	}
	return k.waitDecision(g), nil
}

// copyResult copies the attempt's leaves per pod, all in one array.
func (s *search) copyResult() [][]*Cell {
	return copyPods(s.result)
}

func copyPods(pods [][]*Cell) [][]*Cell {
	n := 0
	for _, pod := range pods {
		n += len(pod)
	}
	all := make([]*Cell, n)
	out := make([][]*Cell, len(pods))
	for i, pod := range pods {
		out[i] = all[:len(pod):len(pod)]
		copy(out[i], pod)
		all = all[len(pod):]
	}
	return out
}

func (k *Core) commitPlan(g *AffinityGroup, plan bestPlan) error {
	if plan.bind != nil {
		if err := k.bindRoot(plan.bind, k.poolFor(g, plan.bind.chain), false); err != nil {
			k.dropPlan(plan)
			return err
		}
	}
	if err := k.allocate(g, plan.result); err != nil {
		k.dropPlan(plan)
		return err
	}
	k.releaseUnusedBindings(plan.bound)
	return nil
}

// releaseUnusedBindings hands finish the cells a search bound for what was
// committed (a plan, a late member's slot) that it does not use. A spanning
// search binds virtual cells as it places pod after pod, and one it bound
// may end up holding none of the group's leaves: a leaf an opportunistic pod holds
// (bindable, as a guaranteed group may preempt it, but not taken by a
// placement without preemption), after which the search bound another
// cell. Such a cell would stay bound to the VC with no guaranteed leaf in
// it for good: finish unbinds a VC cell when its last guaranteed leaf
// goes, and this one never had one. (The model test found them: a few
// in 10,000 operations.)
func (k *Core) releaseUnusedBindings(bound []*Cell) {
	for _, r := range bound {
		if r.guarLeaves == 0 {
			k.unbindCandidates = append(k.unbindCandidates, r)
		}
	}
}

// dropPlan undoes the bindings a plan made while searching.
func (k *Core) dropPlan(plan bestPlan) {
	for i := len(plan.bound) - 1; i >= 0; i-- {
		if r := plan.bound[i]; r.pool != nil && !r.pool.isFree() && r.guarLeaves == 0 {
			k.unbindRoot(r)
		}
	}
	if plan.bind != nil && plan.bind.pool != nil && !plan.bind.pool.isFree() && plan.bind.guarLeaves == 0 && plan.bind.pool.pinnedID == "" {
		k.unbindRoot(plan.bind)
	}
}

// poolFor is the pool a guaranteed group uses in a chain.
func (k *Core) poolFor(g *AffinityGroup, ch *chain) *pool {
	if g.spec.PinnedCellID != "" {
		return k.pinned[g.spec.PinnedCellID].pool
	}
	if g.vc == nil {
		return nil
	}
	return g.vc.pools[ch]
}

// placeGuaranteed is the fast path: no preemption, the VC's bound cells
// first, then a fresh binding, lowest affinity level first.
func (k *Core) placeGuaranteed(g *AffinityGroup) (bestPlan, bool) {
	if spreading(g) {
		if plan, ok := k.placeSpread(g); ok {
			return plan, true
		}
	}
	s := &k.srch
	s.preempt = false
	s.rot = 0
	if g.vc != nil && g.vc.spec.Selector == SelectorRoundRobin {
		g.vc.rotation++
		s.rot = g.vc.rotation
	}
	defer func() { s.rot = 0 }()
	need := g.totalLeaves()
	within := g.spec.WithinTopologyKey != ""
	for _, ch := range k.candidateChains(&g.spec, g.vc) {
		// A constrained group's placement stays under one cell of the
		// keyed level: whole-group placements at or below it, spans inside
		// one of its cells (within.go).
		lmax := ch.top
		if within {
			if lmax = withinLevel(g, ch); lmax == 0 {
				continue
			}
		}
		p := k.poolFor(g, ch)
		if p == nil || k.poolCannotHold(g, p, false) {
			continue
		}
		if l0 := lowestLevel(ch, need); l0 > 0 {
			for l := l0; l <= lmax; l++ {
				if s.inRoots(p.roots, l, need) {
					return bestPlan{found: true, result: s.copyResult()}, true
				}
				if p.pinnedID != "" {
					continue
				}
				for m := l; m <= ch.top; m++ {
					if p.unbound(m) == 0 {
						continue
					}
					cand := k.bindableFreeCell(p, m)
					if cand != nil && freeAt(cand, l) >= need && s.descend(cand, l, need) {
						return bestPlan{found: true, result: s.copyResult(), bind: cand}, true
					}
				}
			}
		}
		if within && s.spanWithin(p, lmax) || !within && s.span(p) {
			return bestPlan{found: true, result: s.copyResult(), bound: s.bound}, true
		}
	}
	return bestPlan{}, false
}

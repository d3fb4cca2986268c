package cellcore

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// VirtualClusterSpec is a VC's reservation: virtual cells per cell type and
// pinned cells. The JSON names are HiveD's.
type VirtualClusterSpec struct {
	Name         string            `json:"name"`
	VirtualCells []VirtualCellSpec `json:"virtualCells,omitempty"`
	PinnedCells  []PinnedCellSpec  `json:"pinnedCells,omitempty"`
	// Sequencer orders the VC's pending groups of equal priority.
	Sequencer Sequencer `json:"sequencer,omitempty"`
	// Selector chooses among the placements the buddy allocation allows.
	Selector Selector `json:"selector,omitempty"`
	// Limits per namespace ("*": every namespace without its own entry).
	Limits map[string]NamespaceLimits `json:"limits,omitempty"`
}

// Sequencer is a VC's queue order (seed 004's sequencers) among pending
// groups of equal priority.
type Sequencer string

const (
	// SequencerPriorityFIFO (the default, also ""): oldest first.
	SequencerPriorityFIFO Sequencer = "PriorityFIFO"
	// SequencerPriorityLIFO: newest first.
	SequencerPriorityLIFO Sequencer = "PriorityLIFO"
	// SequencerDRF: the namespace with the smallest dominant share of the
	// VC first, FIFO inside a namespace.
	SequencerDRF Sequencer = "DRF"
)

// Selector is a VC's placement policy (seed 004's agent selectors). Every
// selector chooses only among placements the buddy allocation allows: it
// never weakens sharing safety.
type Selector string

const (
	// SelectorPack (the default, also ""): HiveD's packing.
	SelectorPack Selector = "Pack"
	// SelectorSpread: members of a group, and groups sharing a spread key,
	// on different nodes, then different racks, as far as the cells allow.
	SelectorSpread Selector = "Spread"
	// SelectorRoundRobin: rotate among equally good cells.
	SelectorRoundRobin Selector = "RoundRobin"
)

// NamespaceLimits bounds one namespace's use of a VC; nil is no bound.
type NamespaceLimits struct {
	MaxLeafCells      *int32 `json:"maxLeafCells,omitempty"`
	MaxRunningGroups  *int32 `json:"maxRunningGroups,omitempty"`
	MaxGroupLeafCells *int32 `json:"maxGroupLeafCells,omitempty"`
	MaxPriority       *int32 `json:"maxPriority,omitempty"`
}

// VirtualCellSpec is CellNumber virtual cells of CellType, where CellType is a
// cell type or HiveD's dotted path CHAIN.TYPE (for example RACK.NODE) when
// the type appears in several chains.
type VirtualCellSpec struct {
	CellType   string `json:"cellType"`
	CellNumber int32  `json:"cellNumber"`
}

// PinnedCellSpec names a physical cell by its pinnedCellId.
type PinnedCellSpec struct {
	PinnedCellID string `json:"pinnedCellId"`
}

type vcState struct {
	name    string
	spec    VirtualClusterSpec
	pools   map[*chain]*pool // non-pinned cells by chain
	chains  []*chain         // the chains of pools, in chain order (candidateChains)
	pinned  []*pool
	agCount [5]int // AGs by state
	// leafTotal: the leaf cells of its virtual and pinned cells (DRF's
	// denominator).
	leafTotal int64
	// rotation: RoundRobin's start among equally good cells, advanced at
	// every placement.
	rotation int
}

// leafCapacity is how many leaves the VC can ever give one group in a chain.
func (v *vcState) leafCapacity(ch *chain, pinnedID string) int32 {
	if pinnedID != "" {
		for _, p := range v.pinned {
			if p.pinnedID == pinnedID {
				for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
					for _, r := range p.roots.buckets[key] {
						return r.leafCount
					}
				}
			}
		}
		return 0
	}
	p := v.pools[ch]
	if p == nil {
		return 0
	}
	var n int32
	for l := 1; l <= ch.top; l++ {
		n += p.quota[l] * ch.leafCount[l]
	}
	return n
}

// resolveCellType maps a VC's cell type (or CHAIN.TYPE path) to a chain level.
func (k *Core) resolveCellType(t string) (*chain, int, error) {
	if t == "" {
		return nil, 0, fmt.Errorf("cellType is empty")
	}
	if strings.Contains(t, ".") {
		parts := strings.Split(t, ".")
		ch := k.chains[parts[0]]
		if ch == nil {
			return nil, 0, fmt.Errorf("cellType %q: %q is not a chain (a top-level physical cell type)", t, parts[0])
		}
		prev := ch.top + 1
		for _, part := range parts {
			l := ch.levelOf(part)
			if l == 0 || l >= prev {
				return nil, 0, fmt.Errorf("cellType %q: %q is not below %q in chain %s", t, part, ch.levelType[min(prev, ch.top)], ch.name)
			}
			prev = l
		}
		return ch, prev, nil
	}
	var found []*chain
	for _, ch := range k.chainOrder {
		if ch.levelOf(t) > 0 {
			found = append(found, ch)
		}
	}
	switch len(found) {
	case 0:
		return nil, 0, fmt.Errorf("cellType %q: unknown cell type (not in any chain of the physical cluster)", t)
	case 1:
		return found[0], found[0].levelOf(t), nil
	}
	if ch := k.chains[t]; ch != nil {
		return ch, ch.top, nil
	}
	names := make([]string, len(found))
	for i, ch := range found {
		names[i] = ch.name + "." + t
	}
	return nil, 0, fmt.Errorf("cellType %q is in several chains: name one of %s", t, strings.Join(names, ", "))
}

// VCChangeResult reports what a VC change did to running groups.
type VCChangeResult struct {
	// Downgraded lists the guaranteed groups that now run as opportunistic
	// because the VC no longer owns their cells (lazy preemption).
	Downgraded []string
	// Cancelled lists Preempting groups sent back to Pending.
	Cancelled []string
}

// SetVirtualCluster adds or changes a VC. A change that the free capacity
// cannot cover is refused with the chain and level that lack cells, and
// changes nothing. Shrinking below what running groups use downgrades them.
func (k *Core) SetVirtualCluster(spec VirtualClusterSpec) (VCChangeResult, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.finish()
	return k.setVC(spec)
}

// RemoveVirtualCluster removes a VC: its running groups are downgraded to
// opportunistic, its Pending and Preempting groups are deleted (AG e8/e7).
func (k *Core) RemoveVirtualCluster(name string) (VCChangeResult, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.finish()
	v := k.vcs[name]
	if v == nil {
		return VCChangeResult{}, fmt.Errorf("unknown virtual cluster %q", name)
	}
	res, err := k.setVC(VirtualClusterSpec{Name: name})
	if err != nil {
		return res, err
	}
	names := make([]string, 0)
	for n, g := range k.groups {
		if g.vc == v {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		g := k.groups[n]
		switch g.state {
		case AGPending, AGPreempting:
			_ = k.deleteGroup(g)
		default:
			if !g.opportunistic() {
				k.downgrade(g)
				res.Downgraded = appendName(res.Downgraded, n)
			}
			g.vc.agCount[g.state]--
			g.vc = nil
		}
	}
	sort.Strings(res.Downgraded)
	for _, p := range v.pinned {
		p.vc = nil
	}
	for ch, p := range v.pools {
		removePool(ch, p)
	}
	delete(k.vcs, name)
	return res, nil
}

func appendName(list []string, n string) []string {
	for _, x := range list {
		if x == n {
			return list
		}
	}
	return append(list, n)
}

func removePool(ch *chain, p *pool) {
	for i, x := range ch.vcPools {
		if x == p {
			ch.vcPools = append(ch.vcPools[:i], ch.vcPools[i+1:]...)
			return
		}
	}
}

func (k *Core) setVC(spec VirtualClusterSpec) (VCChangeResult, error) {
	var res VCChangeResult
	if spec.Name == "" {
		return res, fmt.Errorf("virtual cluster name is empty")
	}
	if err := validatePolicies(&spec); err != nil {
		return res, err
	}
	// Resolve and validate everything first.
	quota := map[*chain][]int32{}
	for i, vcell := range spec.VirtualCells {
		ch, l, err := k.resolveCellType(vcell.CellType)
		if err != nil {
			return res, fmt.Errorf("virtual cluster %q: virtualCells[%d]: %v", spec.Name, i, err)
		}
		if vcell.CellNumber <= 0 {
			return res, fmt.Errorf("virtual cluster %q: virtualCells[%d]: cellNumber must be positive, got %d", spec.Name, i, vcell.CellNumber)
		}
		if quota[ch] == nil {
			quota[ch] = make([]int32, ch.top+1)
		}
		// Entries of one type add up (HiveD allows a type twice). Summed in
		// int32, two large entries wrapped around into a negative quota,
		// which every capacity check then accepted.
		sum := int64(quota[ch][l]) + int64(vcell.CellNumber)
		if sum > math.MaxInt32 {
			return res, fmt.Errorf("virtual cluster %q: virtualCells[%d]: the cellNumbers of cell type %s in chain %s add up to %d, more than the supported %d",
				spec.Name, i, ch.levelType[l], ch.name, sum, math.MaxInt32)
		}
		quota[ch][l] = int32(sum)
	}
	v := k.vcs[spec.Name]
	pinned := map[string]bool{}
	for i, pc := range spec.PinnedCells {
		c := k.pinned[pc.PinnedCellID]
		if c == nil {
			return res, fmt.Errorf("virtual cluster %q: pinnedCells[%d]: unknown pinned cell %q", spec.Name, i, pc.PinnedCellID)
		}
		if pinned[pc.PinnedCellID] {
			return res, fmt.Errorf("virtual cluster %q: pinnedCells[%d]: pinned cell %q is listed twice", spec.Name, i, pc.PinnedCellID)
		}
		if o := c.pool.vc; o != nil && o != v {
			return res, fmt.Errorf("virtual cluster %q: pinned cell %q already belongs to virtual cluster %q", spec.Name, pc.PinnedCellID, o.name)
		}
		pinned[pc.PinnedCellID] = true
	}
	// The safety invariant, structurally: the free pool must cover every
	// VC's unbound cells once this one changes. Cells a shrink releases are
	// counted at their level (merging could only add capacity).
	chains := map[*chain]bool{}
	for ch := range quota {
		chains[ch] = true
	}
	if v != nil {
		for ch := range v.pools {
			chains[ch] = true
		}
	}
	for _, ch := range k.chainOrder {
		if !chains[ch] {
			continue
		}
		counts, demand := k.levelCounts(ch, false)
		newQ := quota[ch]
		var old *pool
		if v != nil {
			old = v.pools[ch]
		}
		for l := 1; l <= ch.top; l++ {
			var q, b int32
			if newQ != nil {
				q = newQ[l]
			}
			if old != nil {
				b = old.bound[l]
				demand[l] -= int64(old.unbound(l))
			}
			if q > b {
				demand[l] += int64(q - b)
			} else {
				counts[l] += int64(b - q)
			}
		}
		if l, short := checkLevels(ch, counts, demand); l > 0 {
			return res, fmt.Errorf("virtual cluster %q does not fit: chain %s lacks %d free %s cell(s) at level %d for all virtual clusters' unbound cells", spec.Name, ch.name, short, ch.levelType[l], l)
		}
	}
	// Apply.
	if v == nil {
		v = &vcState{name: spec.Name, pools: map[*chain]*pool{}}
		k.vcs[spec.Name] = v
	}
	v.spec = spec
	v.leafTotal = 0
	for ch, q := range quota {
		for l := 1; l <= ch.top; l++ {
			v.leafTotal += int64(q[l]) * int64(ch.leafCount[l])
		}
	}
	for _, pc := range spec.PinnedCells {
		if c := k.pinned[pc.PinnedCellID]; c != nil {
			v.leafTotal += int64(c.leafCount)
		}
	}
	k.seqView.setVC(spec.Name, spec.Sequencer, v.leafTotal)
	for _, ch := range k.chainOrder {
		if !chains[ch] {
			continue
		}
		p := v.pools[ch]
		newQ := quota[ch]
		if newQ == nil {
			newQ = make([]int32, ch.top+1)
		}
		if p == nil {
			p = newPool(ch, v, "", ch.leafCount[ch.top])
			p.bound, p.doomed = make([]int32, ch.top+1), make([]int32, ch.top+1)
			v.pools[ch] = p
			ch.vcPools = append(ch.vcPools, p)
			sort.Slice(ch.vcPools, func(i, j int) bool { return ch.vcPools[i].vc.name < ch.vcPools[j].vc.name })
		}
		p.quota = newQ
		ch.recountDemand()
		for l := 1; l <= ch.top; l++ {
			for p.bound[l] > p.quota[l] {
				k.shrinkOne(p, l, &res)
			}
		}
		ch.needCheck = true
	}
	// Pinned cells.
	for _, pp := range v.pinned {
		if !pinned[pp.pinnedID] {
			k.evacuate(k.pinned[pp.pinnedID], &res)
			pp.vc = nil
		}
	}
	v.pinned = v.pinned[:0]
	ids := make([]string, 0, len(pinned))
	for id := range pinned {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		pp := k.pinned[id].pool
		pp.vc = v
		v.pinned = append(v.pinned, pp)
	}
	// Pools with no quota left disappear once empty.
	for ch, p := range v.pools {
		empty := true
		for l := 1; l <= ch.top; l++ {
			if p.quota[l] > 0 || p.bound[l] > 0 {
				empty = false
			}
		}
		if empty {
			removePool(ch, p)
			delete(v.pools, ch)
		}
	}
	v.chains = v.chains[:0]
	for _, ch := range k.chainOrder {
		if v.pools[ch] != nil {
			v.chains = append(v.chains, ch)
		}
	}
	sort.Strings(res.Downgraded)
	sort.Strings(res.Cancelled)
	return res, nil
}

// shrinkOne unbinds one of the pool's level-l cells: a doomed or empty one if
// there is, else the one with the fewest guaranteed leaves, whose groups are
// downgraded (lazy preemption) and whose preemptors go back to Pending.
func (k *Core) shrinkOne(p *pool, l int, res *VCChangeResult) {
	var pick *Cell
	for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
		for _, r := range p.roots.buckets[key] {
			if int(r.level) != l {
				continue
			}
			if pick == nil || rank(r) < rank(pick) {
				pick = r
			}
		}
	}
	if pick == nil {
		p.bound[l] = p.quota[l] // unreachable: counts and roots agree
		p.chain.recountDemand()
		k.internalError("pool %s: bound count %d at level %d without roots", p.name(), p.bound[l], l)
		return
	}
	k.evacuate(pick, res)
	k.flush()
	if pick.pool == p { // not unbound lazily already
		k.unbindRoot(pick)
	}
}

func rank(r *Cell) int64 {
	if r.doomed {
		return -1
	}
	return int64(r.guarLeaves)
}

// evacuate makes the guaranteed use of a cell go away without killing
// anything: preemptors holding reservations in it go back to Pending, groups
// using it are downgraded to opportunistic.
func (k *Core) evacuate(c *Cell, res *VCChangeResult) {
	var pre, users []*AffinityGroup
	c.forEachLeaf(func(l *Cell) {
		if l.reserving != nil {
			pre = appendUnique(pre, l.reserving)
		}
		if l.using != nil && !l.using.opportunistic() {
			users = appendUnique(users, l.using)
		}
	})
	for _, g := range pre {
		if g.state == AGPreempting {
			k.preemptorToPending(g)
			res.Cancelled = appendName(res.Cancelled, g.spec.Name)
		}
	}
	for _, g := range users {
		k.downgrade(g)
		res.Downgraded = appendName(res.Downgraded, g.spec.Name)
	}
}

// levelCounts returns, for a chain, the free-list cells per level and the VCs'
// unbound virtual cells per level. With healthyOnly, free cells that contain
// lost leaves are not counted whole: their healthy descendants are. The
// slices are the core's scratch (a binding asks for them several times):
// they hold until the next call.
func (k *Core) levelCounts(ch *chain, healthyOnly bool) (counts, demand []int64) {
	for i := range k.scratchLevels {
		if cap(k.scratchLevels[i]) <= ch.top {
			k.scratchLevels[i] = make([]int64, ch.top+1)
		}
		k.scratchLevels[i] = k.scratchLevels[i][:ch.top+1]
		clear(k.scratchLevels[i])
	}
	counts, demand = k.scratchLevels[0], k.scratchLevels[1]
	for l := 1; l <= ch.top; l++ {
		counts[l] = int64(ch.freeList[l].size)
	}
	if healthyOnly {
		for l := 1; l <= ch.top; l++ {
			fl := ch.freeList[l]
			for key := fl.next(ch.leafCount[l] + 1); key >= 0; key = fl.next(key + 1) {
				for _, c := range fl.buckets[key] {
					if c.lostLeaves > 0 {
						counts[l]--
						addHealthy(c, counts)
					}
				}
			}
		}
	}
	copy(demand, ch.demand)
	return counts, demand
}

// addHealthy counts the largest wholly healthy cells below a partly lost one.
func addHealthy(c *Cell, counts []int64) {
	for _, ch := range c.children {
		if ch.lostLeaves == 0 {
			counts[ch.level]++
		} else if ch.lostLeaves < ch.leafCount {
			addHealthy(ch, counts)
		}
	}
}

// checkLevels runs buddy counting top-down: free cells of a level plus what
// is left of the level above (split into children) must cover the demand of
// each level. It returns the first short level and by how much, or 0.
func checkLevels(ch *chain, counts, demand []int64) (int, int64) {
	var avail int64
	for l := ch.top; l >= 1; l-- {
		if l < ch.top {
			avail *= int64(ch.childNum[l+1])
		}
		avail += counts[l] - demand[l]
		if avail < 0 {
			return l, -avail
		}
		if avail > 1<<40 {
			avail = 1 << 40 // plenty; avoid overflow on deep chains
		}
	}
	return 0, 0
}

// canBind: does binding the free cell cand for pool p keep the structural
// safety invariant? Taking a whole free-list cell of the bound level always
// does; splitting a larger cell may starve another VC's larger cells.
func (k *Core) canBind(p *pool, cand *Cell) bool {
	f := freeAncestor(cand)
	if f == nil {
		return false
	}
	if f == cand {
		return true
	}
	ch := p.chain
	counts, demand := k.levelCounts(ch, false)
	counts[f.level]--
	for l := int(f.level) - 1; l >= int(cand.level); l-- {
		counts[l] += int64(ch.childNum[l+1] - 1)
	}
	if p.unbound(int(cand.level)) > 0 {
		demand[cand.level]--
	}
	l, _ := checkLevels(ch, counts, demand)
	return l == 0
}

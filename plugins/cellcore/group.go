package cellcore

import (
	"fmt"
	"sort"
)

// Priority bounds. -1 is opportunistic; 0..MaxPriority are guaranteed.
const (
	OpportunisticPriority int32 = -1
	MaxPriority           int32 = 1000
	// MaxPodsPerGroup bounds a gang's size, so that a typo cannot make the
	// core allocate unbounded memory.
	MaxPodsPerGroup = 10000
)

// AffinityGroupSpec is a gang request: all pods are placed at once, inside one
// cell of a chain where they fit with the best affinity.
type AffinityGroupSpec struct {
	Name           string
	VirtualCluster string
	// Namespace the group's pods are in: the VC's limits for it apply
	// (empty: none do).
	Namespace string
	// SpreadKey: groups of a Spread VC and of one namespace that share it
	// go to different nodes as far as the VC's cells allow.
	SpreadKey            string
	Priority             int32
	LeafCellType         string // optional: only chains of this leaf type
	PinnedCellID         string // optional: only this pinned cell of the VC
	LazyPreemptionEnable bool   // when preempted, downgrade to opportunistic instead
	// WithinTopologyKey: all the group's pods are placed under one cell of
	// the level this key names (CellTypeSpec.TopologyKey) in the chain
	// used; chains without such a level are not used. "" is no constraint.
	WithinTopologyKey string
	// ExtraOf names the elastic gang this group is an extra pod of ("" for
	// a gang): a gang's pods beyond its minimum are placed one by one once
	// the minimum runs, each a one-pod group of its own at the gang's
	// priority, ranked below every gang's minimum (rank), on the gang's
	// chain and inside its WithinTopologyKey cell (docs/elastic.md).
	ExtraOf string
	// ExtraOverflow: an extra pod of a guaranteed gang that finds no room
	// in its VC runs as opportunistic on idle cells beyond it (next to its
	// gang first), the first taken back by any VC's guaranteed groups,
	// instead of waiting (docs/elastic.md, "Beyond the VC").
	ExtraOverflow bool
	Members       []AffinityGroupMember
}

// AffinityGroupMember is PodNumber pods of LeafCellNumber leaf cells each.
type AffinityGroupMember struct {
	PodNumber      int32 `json:"podNumber"`
	LeafCellNumber int32 `json:"leafCellNumber"`
}

func (s *AffinityGroupSpec) equal(o *AffinityGroupSpec) bool {
	if s.Name != o.Name || s.VirtualCluster != o.VirtualCluster || s.Namespace != o.Namespace || s.SpreadKey != o.SpreadKey || s.Priority != o.Priority ||
		s.LeafCellType != o.LeafCellType || s.PinnedCellID != o.PinnedCellID || s.WithinTopologyKey != o.WithinTopologyKey ||
		s.LazyPreemptionEnable != o.LazyPreemptionEnable || s.ExtraOf != o.ExtraOf || s.ExtraOverflow != o.ExtraOverflow || len(s.Members) != len(o.Members) {
		return false
	}
	for i := range s.Members {
		if s.Members[i] != o.Members[i] {
			return false
		}
	}
	return true
}

// AffinityGroup is the core's record of a gang.
type AffinityGroup struct {
	spec       AffinityGroupSpec
	vc         *vcState
	state      AGState
	downgraded bool // lazily preempted: runs on as opportunistic
	lostPod    bool // a pod was deleted while Being preempted: no way back (x2)
	// search scratch, valid while equal to the search epoch
	victimMark, cellMark uint32
	cellLeaves           int32
	seq                  uint64
	chain                *chain
	slots                []podSlot
	placement            [][]*Cell // per slot: used (Allocated, Being preempted) or reserved (Preempting) leaves
	livePods             int
	// heldLeaves: the leaves a guaranteed group holds (heldBy), as its
	// pool's holders count them; heldIn, heldPos: its place there.
	heldLeaves int32
	heldIn     *holderLevel
	heldPos    int
	// countedPrio: the priority countGroup counted the group at.
	countedPrio int32
}

type podSlot struct {
	leafCellNumber int32
	podKey         string
}

// Name of the group.
func (g *AffinityGroup) Name() string { return g.spec.Name }

// State of the group.
func (g *AffinityGroup) State() AGState { return g.state }

func (g *AffinityGroup) opportunistic() bool { return g.spec.Priority < 0 || g.downgraded }

// extraBand lifts every gang's minimum above every extra pod: a group's
// rank (priority) is its priority plus extraBand for a guaranteed gang, its
// priority alone for a guaranteed extra (0..MaxPriority), -1 for an
// opportunistic group. Every comparison of the core (who may preempt whom,
// the holders' levels, the preemption floor) reads ranks, so that a
// guaranteed gang of the VC takes back extra pods before it preempts any
// gang, and extra pods of a higher priority gang outrank those of a lower.
const extraBand = MaxPriority + 1

// maxRank is the highest rank.
const maxRank = MaxPriority + extraBand

// priority is the group's rank: -1 once downgraded or opportunistic, its
// priority for an extra pod, its priority lifted by extraBand for a gang.
// What users see is reportedPriority.
func (g *AffinityGroup) priority() int32 {
	if g.downgraded || g.spec.Priority < 0 {
		return OpportunisticPriority
	}
	if g.spec.ExtraOf != "" {
		return g.spec.Priority
	}
	return g.spec.Priority + extraBand
}

// reportedPriority is the priority users see: the spec's, -1 once
// downgraded.
func (g *AffinityGroup) reportedPriority() int32 {
	if g.downgraded {
		return OpportunisticPriority
	}
	return g.spec.Priority
}

// rankPriority is the priority a rank stands for (messages).
func rankPriority(r int32) int32 {
	if r >= extraBand {
		return r - extraBand
	}
	return r
}

func (g *AffinityGroup) totalLeaves() int32 {
	var t int32
	for _, s := range g.slots {
		t += s.leafCellNumber
	}
	return t
}

// validateSpec checks a request against the cluster: everything a user can get
// wrong is reported here, before the core changes anything.
func (k *Core) validateSpec(s *AffinityGroupSpec) error {
	if s.Name == "" {
		return fmt.Errorf("affinity group name is empty")
	}
	sz, err := k.validateShape(s)
	if err != nil {
		return err
	}
	maxLeaves, total := sz.maxLeaves, sz.leaves
	if s.ExtraOf != "" && (sz.pods != 1 || s.ExtraOf == s.Name) {
		return fmt.Errorf("affinity group %q: an extra pod of elastic group %q is one pod, a group of its own (members %v)", s.Name, s.ExtraOf, s.Members)
	}
	if s.VirtualCluster == "" {
		return fmt.Errorf("affinity group %q: virtual cluster is empty", s.Name)
	}
	vc := k.vcs[s.VirtualCluster]
	if vc == nil {
		return fmt.Errorf("affinity group %q: unknown virtual cluster %q", s.Name, s.VirtualCluster)
	}
	if err := k.checkStaticLimits(s, vc, int64(total)); err != nil {
		return err
	}
	if s.LeafCellType != "" && !k.leafTypes[s.LeafCellType] {
		return fmt.Errorf("affinity group %q: unknown leaf cell type %q (known: %v)", s.Name, s.LeafCellType, k.sortedLeafTypes())
	}
	if s.PinnedCellID != "" {
		if s.Priority < 0 {
			return fmt.Errorf("affinity group %q: an opportunistic group cannot use pinned cell %q", s.Name, s.PinnedCellID)
		}
		c := k.pinned[s.PinnedCellID]
		if c == nil {
			return fmt.Errorf("affinity group %q: unknown pinned cell %q", s.Name, s.PinnedCellID)
		}
		if c.pool.vc != vc {
			return fmt.Errorf("affinity group %q: pinned cell %q does not belong to virtual cluster %q", s.Name, s.PinnedCellID, s.VirtualCluster)
		}
		if s.LeafCellType != "" && c.chain.leafType != s.LeafCellType {
			return fmt.Errorf("affinity group %q: pinned cell %q has leaf cell type %q, not %q", s.Name, s.PinnedCellID, c.chain.leafType, s.LeafCellType)
		}
	}
	// Can it ever fit? Each pod must fit in one node; guaranteed groups must
	// fit in their VC's cells.
	var fitsNode, fitsVC bool
	var vcLeaves, nodeLeaves int32
	for _, ch := range k.candidateChains(s, vc) {
		nl := ch.leafCount[ch.nodeLevel]
		if nl > nodeLeaves {
			nodeLeaves = nl
		}
		if maxLeaves <= nl {
			fitsNode = true
		}
		if s.Priority >= 0 {
			cap := vc.leafCapacity(ch, s.PinnedCellID)
			if cap > vcLeaves {
				vcLeaves = cap
			}
			if int64(cap) >= total {
				fitsVC = true
			}
		}
	}
	if !fitsNode {
		return fmt.Errorf("affinity group %q: a pod asks for %d leaf cells, but no node of a usable chain has more than %d", s.Name, maxLeaves, nodeLeaves)
	}
	if s.Priority >= 0 && !fitsVC {
		return fmt.Errorf("affinity group %q: asks for %d leaf cells in total, but virtual cluster %q has at most %d in one chain", s.Name, total, s.VirtualCluster, vcLeaves)
	}
	// An opportunistic group has no VC bound: it can still never have more
	// than the cluster (and waiting for that forever helps nobody).
	if total > k.leafCells {
		return fmt.Errorf("affinity group %q: asks for %d leaf cells in total, more than the %d of the whole cluster", s.Name, total, k.leafCells)
	}
	if s.WithinTopologyKey != "" {
		return k.validateWithin(s, vc, sz)
	}
	return nil
}

// groupSize is what validateShape computed of a spec's members.
type groupSize struct {
	pods      int64 // pods of all members
	leaves    int64 // leaf cells of all members
	maxLeaves int32 // the largest pod's leaf cells
}

// validateShape checks the part of a spec that says how much a group is:
// the priority range and the members, each count positive, at most
// MaxPodsPerGroup pods in all. The sums are int64: the counts are int32
// each, and a product or a sum of them must not wrap around into a small (or
// negative) number that passes the checks. It runs before anything is
// allocated per pod, so a request of 2^31 pods costs no more than one of 2.
func (k *Core) validateShape(s *AffinityGroupSpec) (groupSize, error) {
	var sz groupSize
	if s.Priority < OpportunisticPriority || s.Priority > MaxPriority {
		return sz, fmt.Errorf("affinity group %q: priority %d is out of range [%d, %d]", s.Name, s.Priority, OpportunisticPriority, MaxPriority)
	}
	if len(s.Members) == 0 {
		return sz, fmt.Errorf("affinity group %q: no members", s.Name)
	}
	for i, m := range s.Members {
		if m.PodNumber <= 0 {
			return sz, fmt.Errorf("affinity group %q: members[%d].podNumber must be positive, got %d", s.Name, i, m.PodNumber)
		}
		if m.LeafCellNumber <= 0 {
			return sz, fmt.Errorf("affinity group %q: members[%d].leafCellNumber must be positive, got %d", s.Name, i, m.LeafCellNumber)
		}
		sz.pods += int64(m.PodNumber)
		sz.leaves += int64(m.PodNumber) * int64(m.LeafCellNumber)
		sz.maxLeaves = max(sz.maxLeaves, m.LeafCellNumber)
		if sz.pods > MaxPodsPerGroup {
			break // the rest cannot make it smaller
		}
	}
	if sz.pods > MaxPodsPerGroup {
		return sz, fmt.Errorf("affinity group %q: %d pods, more than the supported %d", s.Name, sz.pods, MaxPodsPerGroup)
	}
	return sz, nil
}

// candidateChains lists the chains a group may use, in a stable order. The
// list may be the core's own (a group of any leaf type: every chain, or its
// VC's): callers only read it.
func (k *Core) candidateChains(s *AffinityGroupSpec, vc *vcState) []*chain {
	if s.ExtraOf != "" {
		// An extra pod runs on its gang's chain (the same GPU model, next
		// to it); while its gang is not placed, the chains a gang of its
		// spec could use.
		if gang := k.groups[s.ExtraOf]; gang != nil {
			if ch := gangChain(gang); ch != nil {
				return []*chain{ch}
			}
		}
	}
	if s.PinnedCellID != "" {
		if c := k.pinned[s.PinnedCellID]; c != nil {
			return []*chain{c.chain}
		}
		return nil
	}
	if s.LeafCellType == "" {
		switch {
		case s.Priority < 0:
			return k.chainOrder
		case vc != nil:
			return vc.chains
		}
		return nil
	}
	var out []*chain
	for _, ch := range k.chainOrder {
		if s.LeafCellType != "" && ch.leafType != s.LeafCellType {
			continue
		}
		if s.Priority >= 0 && (vc == nil || vc.pools[ch] == nil) {
			continue
		}
		out = append(out, ch)
	}
	return out
}

func (k *Core) sortedLeafTypes() []string {
	out := make([]string, 0, len(k.leafTypes))
	for t := range k.leafTypes {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

func newGroup(s AffinityGroupSpec, vc *vcState, seq uint64) *AffinityGroup {
	s.Members = append([]AffinityGroupMember(nil), s.Members...)
	g := &AffinityGroup{spec: s, vc: vc, seq: seq}
	pods := 0
	for _, m := range s.Members {
		pods += int(m.PodNumber)
	}
	g.slots = make([]podSlot, 0, pods)
	for _, m := range s.Members {
		for i := int32(0); i < m.PodNumber; i++ {
			g.slots = append(g.slots, podSlot{leafCellNumber: m.LeafCellNumber})
		}
	}
	return g
}

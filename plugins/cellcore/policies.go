package cellcore

import (
	"fmt"
	"math"
)

// Per-VC policies (seed 004): validators (namespace limits), sequencers
// (queue order) and selectors (placement among what the buddy allocation
// allows). None of them weakens sharing safety: limits only make groups wait
// or refuse them, a sequencer only orders the queue, a selector only picks
// among placements the buddy allocation offers.

// AllNamespaces is the Limits key that applies to every namespace without an
// entry of its own.
const AllNamespaces = "*"

func validatePolicies(spec *VirtualClusterSpec) error {
	switch spec.Sequencer {
	case "", SequencerPriorityFIFO, SequencerPriorityLIFO, SequencerDRF:
	default:
		return fmt.Errorf("virtual cluster %q: unknown sequencer %q (PriorityFIFO, PriorityLIFO, DRF)", spec.Name, spec.Sequencer)
	}
	switch spec.Selector {
	case "", SelectorPack, SelectorSpread, SelectorRoundRobin:
	default:
		return fmt.Errorf("virtual cluster %q: unknown selector %q (Pack, Spread, RoundRobin)", spec.Name, spec.Selector)
	}
	for ns, l := range spec.Limits {
		if ns == "" {
			return fmt.Errorf("virtual cluster %q: limits for an empty namespace", spec.Name)
		}
		for name, v := range map[string]*int32{"maxLeafCells": l.MaxLeafCells, "maxRunningGroups": l.MaxRunningGroups, "maxGroupLeafCells": l.MaxGroupLeafCells} {
			if v != nil && *v < 0 {
				return fmt.Errorf("virtual cluster %q: limits of namespace %q: %s must not be negative, got %d", spec.Name, ns, name, *v)
			}
		}
		if v := l.MaxPriority; v != nil && (*v < -1 || *v > MaxPriority) {
			return fmt.Errorf("virtual cluster %q: limits of namespace %q: maxPriority must be from -1 to %d, got %d", spec.Name, ns, MaxPriority, *v)
		}
	}
	return nil
}

// limitsFor returns the limits of a namespace in a VC: its own entry, else
// the "*" entry, else none.
func (v *vcState) limitsFor(ns string) (NamespaceLimits, bool) {
	if ns == "" || len(v.spec.Limits) == 0 {
		return NamespaceLimits{}, false
	}
	if l, ok := v.spec.Limits[ns]; ok {
		return l, true
	}
	l, ok := v.spec.Limits[AllNamespaces]
	return l, ok
}

// nsKey names one namespace's use of one VC.
type nsKey struct{ vc, ns string }

// nsUsage is what one namespace's groups hold of one VC: the groups that
// hold or reserve cells (Preempting, Allocated, Being preempted) and their
// leaf cells.
type nsUsage struct {
	groups int32
	leaves int64
}

func holding(s AGState) bool {
	return s == AGPreempting || s == AGAllocated || s == AGBeingPreempted
}

// trackUsage keeps nsUse when a group moves from state from to state to.
func (k *Core) trackUsage(g *AffinityGroup, from, to AGState) {
	if g.spec.Namespace == "" || holding(from) == holding(to) {
		return
	}
	key := nsKey{g.spec.VirtualCluster, g.spec.Namespace}
	u := k.nsUse[key]
	if u == nil {
		u = &nsUsage{}
		k.nsUse[key] = u
	}
	if holding(to) {
		u.groups++
		u.leaves += int64(g.totalLeaves())
	} else {
		u.groups--
		u.leaves -= int64(g.totalLeaves())
		if u.groups == 0 {
			delete(k.nsUse, key)
		}
	}
}

// checkStaticLimits refuses a group that can never fit its namespace's
// limits: more leaf cells in one group, or a higher priority, than allowed.
func (k *Core) checkStaticLimits(s *AffinityGroupSpec, v *vcState, leaves int64) error {
	l, ok := v.limitsFor(s.Namespace)
	if !ok {
		return nil
	}
	if l.MaxPriority != nil && s.Priority > *l.MaxPriority {
		return fmt.Errorf("affinity group %q: priority %d is above the highest priority namespace %s may use in virtual cluster %q (maxPriority %d)",
			s.Name, s.Priority, s.Namespace, s.VirtualCluster, *l.MaxPriority)
	}
	if l.MaxGroupLeafCells != nil && leaves > int64(*l.MaxGroupLeafCells) {
		return fmt.Errorf("affinity group %q asks for %d leaf cells in all, more than one group of namespace %s may have in virtual cluster %q (maxGroupLeafCells %d)",
			s.Name, leaves, s.Namespace, s.VirtualCluster, *l.MaxGroupLeafCells)
	}
	for _, c := range []*int32{l.MaxLeafCells, l.MaxRunningGroups} {
		if c != nil && *c == 0 {
			return fmt.Errorf("affinity group %q: namespace %s may run no group in virtual cluster %q (its limits are 0)", s.Name, s.Namespace, s.VirtualCluster)
		}
	}
	if l.MaxLeafCells != nil && leaves > int64(*l.MaxLeafCells) {
		return fmt.Errorf("affinity group %q asks for %d leaf cells in all, more than namespace %s may hold in virtual cluster %q (maxLeafCells %d)",
			s.Name, leaves, s.Namespace, s.VirtualCluster, *l.MaxLeafCells)
	}
	return nil
}

// overLimit says which limit keeps a Pending group of a namespace waiting:
// placing it now would take the namespace over its usage or concurrency
// limit in the VC. Empty: no limit is in the way.
func (k *Core) overLimit(g *AffinityGroup) string {
	if g.vc == nil {
		return ""
	}
	l, ok := g.vc.limitsFor(g.spec.Namespace)
	if !ok {
		return ""
	}
	u := k.nsUse[nsKey{g.spec.VirtualCluster, g.spec.Namespace}]
	var use nsUsage
	if u != nil {
		use = *u
	}
	if l.MaxRunningGroups != nil && use.groups+1 > *l.MaxRunningGroups {
		return fmt.Sprintf("namespace %s already runs %d affinity groups in virtual cluster %q, its limit (maxRunningGroups %d): the group waits until one of them ends",
			g.spec.Namespace, use.groups, g.spec.VirtualCluster, *l.MaxRunningGroups)
	}
	if need := int64(g.totalLeaves()); l.MaxLeafCells != nil && use.leaves+need > int64(*l.MaxLeafCells) {
		return fmt.Sprintf("namespace %s holds %d leaf cells in virtual cluster %q and the group needs %d more, above its limit (maxLeafCells %d): the group waits until the namespace's groups free %d",
			g.spec.Namespace, use.leaves, g.spec.VirtualCluster, need, *l.MaxLeafCells, use.leaves+need-int64(*l.MaxLeafCells))
	}
	return ""
}

// NamespaceUsage is what a namespace's groups hold of a VC.
type NamespaceUsage struct {
	Groups     int32
	LeafCells  int64
	VCLeaves   int64   // the VC's leaf cells (its guaranteed capacity)
	Share      float64 // LeafCells / VCLeaves (0 for an empty VC)
	Sequencer  Sequencer
	Configured bool // the VC exists
}

// NamespaceUsageOf reports what a namespace's groups hold of a VC and the
// VC's sequencer: the inputs of the queue order (SequenceLess).
func (k *Core) NamespaceUsageOf(vc, ns string) NamespaceUsage {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out NamespaceUsage
	if u := k.nsUse[nsKey{vc, ns}]; u != nil {
		out.Groups, out.LeafCells = u.groups, u.leaves
	}
	v := k.vcs[vc]
	if v == nil {
		return out
	}
	out.Configured = true
	out.Sequencer = v.spec.Sequencer
	out.VCLeaves = v.leafTotal
	if out.VCLeaves > 0 {
		out.Share = float64(out.LeafCells) / float64(out.VCLeaves)
	} else if out.LeafCells > 0 {
		out.Share = math.Inf(1)
	}
	return out
}

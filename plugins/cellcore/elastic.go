package cellcore

import (
	"fmt"
	"sort"
)

// Elastic gangs. A gang's minimum is an affinity group like any other,
// placed whole. Its pods beyond the minimum (a Ray worker the autoscaler
// adds, a Spark executor of dynamic allocation) are extra pods: each is a
// one-pod affinity group of its own (spec.ExtraOf names the gang), so that
// it goes through the AG machine as any group does (Pending, Allocated,
// Deleted; e0, e3, e6 when preempted) and is taken back as a whole without
// touching its gang. HiveD's model has no partial gang: a group is the unit
// that is all-or-nothing, and an extra pod is all-or-nothing by itself.
//
// What an extra is promised (docs/elastic.md):
//   - it is placed only while its gang is Allocated, on its gang's chain,
//     next to the gang (fillSlot's search for a late member), and inside the
//     gang's cell of its WithinTopologyKey level if the gang asked for one:
//     no room there and it waits, with that reason;
//   - a guaranteed gang's extra takes its VC's cells (it may preempt
//     opportunistic pods and extras of lower rank there, never a gang),
//     and with ExtraOverflow, when the VC has no room, idle cells beyond
//     it as opportunistic (overflow); an opportunistic gang's extra
//     scavenges as any opportunistic pod;
//   - its rank (priority) is below every gang's minimum: a guaranteed gang
//     of the VC takes back extras before it preempts any gang, so a gang
//     shrinks to its minimum before any gang is preempted whole;
//   - when a running member of the minimum goes while an extra of its size
//     runs, PromoteExtra moves the extra into the member's slot (extension
//     x4): the gang keeps its minimum.

// scheduleExtra decides for a Pending extra pod.
func (k *Core) scheduleExtra(x *AffinityGroup) (Decision, error) {
	gang := k.groups[x.spec.ExtraOf]
	if gang == nil || gang.state != AGAllocated {
		st := "not known yet"
		if gang != nil {
			st = gang.state.String()
		}
		return Decision{Kind: Wait, Group: x.spec.Name, State: x.state, Reason: fmt.Sprintf(
			"extra pod %q of elastic affinity group %q waits for the gang's minimum to be placed (the gang is %s)", x.spec.Name, x.spec.ExtraOf, st)}, nil
	}
	if gang.spec.VirtualCluster != x.spec.VirtualCluster || gang.spec.Priority != x.spec.Priority {
		return Decision{}, specError(fmt.Errorf("extra pod %q of affinity group %q asks for virtual cluster %q at priority %d, its gang for %q at %d",
			x.spec.Name, gang.spec.Name, x.spec.VirtualCluster, x.spec.Priority, gang.spec.VirtualCluster, gang.spec.Priority))
	}
	// Next to the gang first (the search a late member of a group uses).
	if k.fillExtra(x, gang) {
		return k.placedDecision(x), nil
	}
	if x.spec.WithinTopologyKey != "" {
		if k.overflow(x, gang) {
			return k.placedDecision(x), nil
		}
		kc := gangKeyedCell(gang)
		where := "the gang's " + x.spec.WithinTopologyKey + " cell"
		if kc != nil {
			where += " " + kc.ID()
		}
		return Decision{Kind: Wait, Group: x.spec.Name, State: x.state, Reason: fmt.Sprintf(
			"extra pod %q of affinity group %q needs %d %s inside %s, which has no room left: the gang asked to stay inside one %s, and its extra pods stay there too",
			x.spec.Name, gang.spec.Name, x.slots[0].leafCellNumber, gangChain(gang).leafType, where, x.spec.WithinTopologyKey)}, nil
	}
	// Anywhere on the gang's chain the group may go, preempting what ranks
	// lower (candidateChains keeps extras on their gang's chain).
	d, err := k.schedulePendingGroup(x)
	if err == nil && d.Kind == Wait && k.overflow(x, gang) {
		return k.placedDecision(x), nil
	}
	if err == nil && d.Kind == Wait {
		d.Reason = fmt.Sprintf("extra pod of elastic affinity group %q (it takes its VC's cells that no gang needs, and never preempts a gang): %s", gang.spec.Name, d.Reason)
	}
	return d, err
}

// gangAnchor is a leaf an Allocated group holds (nil if none: a slot
// may be empty, its member not running when the group was recovered).
func gangAnchor(g *AffinityGroup) *Cell {
	for _, pod := range g.placement {
		if len(pod) > 0 {
			return pod[0]
		}
	}
	return nil
}

// overflow places a guaranteed extra that asked for it (ExtraOverflow) and
// found no room in its VC on idle cells beyond it, as opportunistic: next
// to its gang (inside its keyed cell if it has one), unbound cells first.
// It runs downgraded, as a lazily preempted group does (its placement record
// says so, and a restarted scheduler keeps it opportunistic): every VC's
// guaranteed groups may take it back. false leaves it Pending, guaranteed.
func (k *Core) overflow(x, gang *AffinityGroup) bool {
	if !x.spec.ExtraOverflow || x.opportunistic() || x.state != AGPending {
		return false
	}
	x.downgraded = true // no cells, no holders, not counted yet: nothing to move
	if k.fillExtra(x, gang) {
		return true
	}
	x.downgraded = false
	return false
}

// gangChain is the chain an Allocated group runs in (nil if it holds no
// leaf).
func gangChain(g *AffinityGroup) *chain {
	if a := gangAnchor(g); a != nil {
		return a.chain
	}
	return nil
}

// gangKeyedCell is the cell of g's WithinTopologyKey level its leaves are
// in (nil without one).
func gangKeyedCell(g *AffinityGroup) *Cell {
	ch := gangChain(g)
	if ch == nil || g.spec.WithinTopologyKey == "" {
		return nil
	}
	wl := ch.keyLevel(g.spec.WithinTopologyKey)
	if wl == 0 {
		return nil
	}
	return ancestorAt(gangAnchor(g), wl)
}

// fillExtra places extra x next to its gang without preemption (AG e0 on
// Free cells), as fillSlot places a late member.
func (k *Core) fillExtra(x, gang *AffinityGroup) bool {
	if reason := k.overLimit(x); reason != "" {
		return false
	}
	if !k.searchSlotNear(x, 0, gang) {
		return false
	}
	leaves := append([]*Cell(nil), k.srch.result[0]...)
	bound := k.srch.bound
	if err := k.allocate(x, [][]*Cell{leaves}); err != nil {
		k.internalError("extra %q: %v", x.spec.Name, err)
		return false
	}
	k.releaseUnusedBindings(bound)
	return true
}

// ExtrasOf lists the groups of gang's extra pods that hold cells (Allocated
// or Being preempted), by name.
func (k *Core) ExtrasOf(gang string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for name, g := range k.groups {
		if g.spec.ExtraOf == gang && (g.state == AGAllocated || g.state == AGBeingPreempted) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// promotionBlocked says why extra x's leaves cannot become gang g's ("" if
// they can): a downgraded extra holds cells outside the VC's (or a
// downgraded gang's extra inside them); an extra placed before its gang
// was placed anew (rolled back, recovered) may lie outside the gang's
// keyed cell, which the gang's constraint forbids.
func promotionBlocked(g, x *AffinityGroup) string {
	if x.opportunistic() != g.opportunistic() {
		return "one runs as opportunistic, the other does not"
	}
	if len(x.placement) == 0 || len(x.placement[0]) == 0 {
		return "the extra holds no cells"
	}
	if gangChain(g) != x.placement[0][0].chain {
		return "the extra runs on another chain"
	}
	if kc := gangKeyedCell(g); kc != nil {
		for _, c := range x.placement[0] {
			if ancestorAt(c, int(kc.level)) != kc {
				return fmt.Sprintf("the extra lies outside the gang's %s cell %s", g.spec.WithinTopologyKey, kc.ID())
			}
		}
	}
	return ""
}

// CanPromote says whether extra (an Allocated extra pod of gang) could take
// a slot of gang's of its size (PromoteExtra's checks but the slot).
func (k *Core) CanPromote(gang, extra string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	g, x := k.groups[gang], k.groups[extra]
	return g != nil && x != nil && x.spec.ExtraOf == gang && g.state == AGAllocated && x.state == AGAllocated && promotionBlocked(g, x) == ""
}

// PromoteExtra is what keeps an elastic gang at its minimum when a running
// member goes: the slot of the member podKey (its pod deleted, or being
// deleted) takes extra's pod and leaves, its own leaves go Free (cell e1),
// extra's leaves change hands (cell e1 then e0, within one call: no other
// group sees them Free) and extra's group is deleted (AG e3). Both must be
// Allocated, extra an extra pod of gang of the member's size.
func (k *Core) PromoteExtra(gang, podKey, extra string) (PodPlacement, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.finish()
	g, x := k.groups[gang], k.groups[extra]
	if g == nil || x == nil {
		return PodPlacement{}, fmt.Errorf("promote %q into %q: not known", extra, gang)
	}
	if x.spec.ExtraOf != gang {
		return PodPlacement{}, fmt.Errorf("promote %q into %q: it is not an extra pod of it", extra, gang)
	}
	if g.state != AGAllocated || x.state != AGAllocated {
		return PodPlacement{}, fmt.Errorf("promote %q (%s) into %q (%s): both must be Allocated", extra, x.state, gang, g.state)
	}
	if why := promotionBlocked(g, x); why != "" {
		return PodPlacement{}, fmt.Errorf("promote %q into %q: %s", extra, gang, why)
	}
	slot := -1
	for i, s := range g.slots {
		if s.podKey == podKey && podKey != "" {
			slot = i
		}
	}
	if slot < 0 {
		// Already gone from the core (DeletePod ran): any empty slot of
		// the extra's size with cells.
		for i, s := range g.slots {
			if s.podKey == "" && s.leafCellNumber == x.slots[0].leafCellNumber && len(g.placement[i]) > 0 {
				slot = i
				break
			}
		}
	}
	if slot < 0 || g.slots[slot].leafCellNumber != x.slots[0].leafCellNumber || len(x.placement) == 0 || len(x.placement[0]) == 0 {
		return PodPlacement{}, fmt.Errorf("promote %q into %q: no slot of its %d leaf cells for member %q", extra, gang, x.slots[0].leafCellNumber, podKey)
	}
	old := g.placement[slot]
	moved := x.placement[0]
	for _, c := range old {
		if c.using == g && c.state == CellUsed {
			k.setLeaf(c, Celle1, nil, nil)
		}
	}
	for _, c := range moved {
		k.setLeaf(c, Celle1, nil, nil)
		k.setLeaf(c, Celle0, g, nil)
	}
	if g.slots[slot].podKey == "" {
		g.livePods++
	}
	g.slots[slot].podKey = x.slots[0].podKey
	g.placement[slot] = append([]*Cell(nil), moved...)
	x.placement = [][]*Cell{nil}
	if x.livePods > 0 {
		x.livePods = 0
	}
	if err := k.deleteGroup(x); err != nil {
		return PodPlacement{}, err
	}
	k.traceEvent(g, AGx4)
	pp, _ := k.podPlacement(g, slot, g.slots[slot], nil)
	return pp, nil
}

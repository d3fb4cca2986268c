package cellcore

import (
	"fmt"
	"sort"
)

// AssignPod gives a pod one of the Allocated group's slots of its size (the
// same slot again for the same key) and returns the pod's cells. A slot with
// no cells (a member that was not running when the group was recovered) gets
// cells now, next to the group's (extension x3).
//
// A pod with no slot of its size left is refused (SpecError: the group has
// more pods than members); every other error is internal (the group is not
// known, or not Allocated: the caller did not expect that state).
func (k *Core) AssignPod(group, podKey string, leafCellNumber int32) (PodPlacement, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.finish()
	g := k.groups[group]
	if g == nil {
		return PodPlacement{}, fmt.Errorf("affinity group %q is not known", group)
	}
	if g.state != AGAllocated && g.state != AGBeingPreempted {
		return PodPlacement{}, fmt.Errorf("affinity group %q is %s, not Allocated", group, g.state)
	}
	for i, s := range g.slots {
		if s.podKey == podKey {
			pp, _ := k.podPlacement(g, i, s, nil)
			return pp, nil
		}
	}
	empty := -1
	for i, s := range g.slots {
		if s.podKey != "" || s.leafCellNumber != leafCellNumber {
			continue
		}
		if len(g.placement[i]) > 0 {
			g.slots[i].podKey = podKey
			g.livePods++
			pp, _ := k.podPlacement(g, i, g.slots[i], nil)
			return pp, nil
		}
		if empty < 0 {
			empty = i
		}
	}
	if empty >= 0 && g.state == AGAllocated {
		if !k.fillSlot(g, empty) {
			return PodPlacement{}, fmt.Errorf("affinity group %q: no free cells left for its member of %d leaf cells that was not running when the group was recovered", group, leafCellNumber)
		}
		g.slots[empty].podKey = podKey
		g.livePods++
		pp, _ := k.podPlacement(g, empty, g.slots[empty], nil)
		return pp, nil
	}
	// More pods of this size than the group's members: the user's
	// (a PodGroup with more pods than minCount, an extra pod of a gang).
	return PodPlacement{}, specError(fmt.Errorf("affinity group %q has no free slot for a pod of %d leaf cells (its members: %v)", group, leafCellNumber, g.spec.Members))
}

// fillSlot is extension x3: an Allocated group recovered with fewer pods than
// members takes Free cells for a late member (cell e0; the group stays
// Allocated). A guaranteed group looks in its VC's bound cells of the chain it
// runs in; an opportunistic one in unbound cells first, then anywhere.
func (k *Core) fillSlot(g *AffinityGroup, slot int) bool {
	if !k.searchSlotNear(g, slot, g) {
		return false
	}
	s := &k.srch
	leaves := append([]*Cell(nil), s.result[slot]...)
	for _, c := range leaves {
		k.setLeaf(c, Celle0, g, nil)
	}
	k.releaseUnusedBindings(s.bound)
	g.placement[slot] = leaves
	k.traceEvent(g, AGx3)
	return true
}

// searchSlotNear finds Free leaves for g's slot next to group near (g
// itself for a late member, the gang for an extra pod): in near's chain,
// inside its keyed cell if g has a WithinTopologyKey; a guaranteed g in
// its VC's cells (binding more virtual cells if needed), an opportunistic
// one in unbound cells first, then anywhere. The leaves are in
// k.srch.result[slot]; the cells the search bound in k.srch.bound.
func (k *Core) searchSlotNear(g *AffinityGroup, slot int, near *AffinityGroup) bool {
	ch := gangChain(near)
	if ch == nil {
		return false
	}
	s := &k.srch
	s.reset(g)
	s.preempt = false
	s.order = append(s.order[:0], slot)
	need := g.slots[slot].leafCellNumber
	if g.spec.WithinTopologyKey != "" {
		return k.fillSlotWithin(g, slot, ch, near)
	}
	if g.opportunistic() {
		for _, r := range []*bucketSet{ch.freePool.roots, ch.topIndex} {
			s.newAttempt()
			if s.spanPodIn(r, need, slot) {
				return true
			}
		}
		return false
	}
	if p := k.poolFor(g, ch); p != nil {
		return s.span(p) // binds more of the VC's virtual cells if needed
	}
	return false
}

// PodDeletion reports what deleting a pod did.
type PodDeletion struct {
	GroupDeleted bool
	// FreedLeaves is how many of the deleted group's leaf cells are now Free
	// (not Reserved for a preemptor): capacity that waiting groups may use.
	FreedLeaves int32
	// ReadyPreemptors are Preempting groups whose cells are now all
	// Reserved: scheduling them again makes them Allocated (AG e2).
	ReadyPreemptors []string
}

// DeletePod records that a pod of a group is gone. On a Being preempted
// group its Reserving cells go Reserved (cell e9); when the group's last pod
// goes, the group is deleted (AG e3 or e4).
func (k *Core) DeletePod(group, podKey string) (PodDeletion, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.finish()
	var res PodDeletion
	g := k.groups[group]
	if g == nil {
		return res, nil
	}
	slot := -1
	for i, s := range g.slots {
		if s.podKey == podKey && podKey != "" {
			slot = i
		}
	}
	if slot < 0 {
		return res, nil
	}
	cells := append([]*Cell(nil), g.placement[slot]...)
	g.slots[slot].podKey = ""
	g.livePods--
	k.podDeleted(g, slot)
	if g.livePods == 0 {
		all := len(cells)
		for _, pod := range g.placement {
			cells = append(cells, pod...)
		}
		if err := k.deleteGroup(g); err != nil {
			return res, err
		}
		res.GroupDeleted = true
		res.FreedLeaves = countFree(cells[all:])
	}
	res.ReadyPreemptors = k.readyPreemptors(cells)
	return res, nil
}

// countFree counts the leaves in state Free among cells.
func countFree(cells []*Cell) int32 {
	var n int32
	for _, c := range cells {
		if c.state == CellFree {
			n++
		}
	}
	return n
}

// DeleteAffinityGroup deletes a group whatever its pods: AG e8, e7, e3 or e4
// by its state.
func (k *Core) DeleteAffinityGroup(group string) (PodDeletion, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.finish()
	var res PodDeletion
	g := k.groups[group]
	if g == nil {
		return res, nil
	}
	n := 0
	for _, pod := range g.placement {
		n += len(pod)
	}
	cells := make([]*Cell, 0, n)
	for _, pod := range g.placement {
		cells = append(cells, pod...)
	}
	if err := k.deleteGroup(g); err != nil {
		return res, err
	}
	res.GroupDeleted = true
	res.FreedLeaves = countFree(cells)
	res.ReadyPreemptors = k.readyPreemptors(cells)
	return res, nil
}

func (k *Core) readyPreemptors(cells []*Cell) []string {
	var out []string
	for _, c := range cells {
		if p := c.reserving; p != nil && p.state == AGPreempting {
			ready := true
			for _, pod := range p.placement {
				for _, x := range pod {
					if x.state != CellReserved {
						ready = false
					}
				}
			}
			if ready {
				out = appendName(out, p.spec.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// RollbackAffinityGroup is extension x1: an Allocated group whose gang did
// not complete before binding releases its cells and is Pending again.
func (k *Core) RollbackAffinityGroup(group string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.finish()
	g := k.groups[group]
	if g == nil {
		return fmt.Errorf("affinity group %q is not known", group)
	}
	return k.rollback(g)
}

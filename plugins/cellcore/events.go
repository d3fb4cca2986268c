package cellcore

import "fmt"

// This file is the code path of every transition: an AG event's operation
// fires cell events, and a cell event that the seed says triggers an AG event
// fires it here too. Each public entry point checks its preconditions before
// changing anything, so an illegal transition returns a TransitionError and
// leaves the state as it was.

func (k *Core) setAGState(g *AffinityGroup, ev AGEvent) error {
	next, err := agNext(g.state, ev, g.spec.Name)
	if err != nil {
		return err
	}
	if g.vc != nil {
		g.vc.agCount[g.state]--
		g.vc.agCount[next]++
	}
	k.trackUsage(g, g.state, next)
	k.trackSequence(g, g.state, next)
	k.countGroup(g, -1)
	g.state = next
	k.countGroup(g, 1)
	k.trace(g, ev)
	return nil
}

// setLeaf moves a leaf to a new state and association, checked against the
// cell machine, and propagates the change of its counters.
func (k *Core) setLeaf(c *Cell, ev CellEvent, using, reserving *AffinityGroup) {
	next, err := cellCheck(c, ev)
	if err != nil {
		k.internalError("%v", err)
		return
	}
	sched, lost := c.schedulable(), c.lost()
	old := c.contribution(sched, lost)
	before := c.heldBy()
	c.state = next
	c.using = using
	c.reserving = reserving
	if h := c.heldBy(); h != before {
		k.unhold(before)
		k.hold(h, c)
	}
	k.applyLeaf(c, old, c.contribution(sched, lost))
}

// allocate is AG e0: Pending -> Allocated on cells that are all Free or
// Reserved by a lower-priority Preempting AG.
func (k *Core) allocate(g *AffinityGroup, placement [][]*Cell) error {
	if _, err := agNext(g.state, AGe0, g.spec.Name); err != nil {
		return err
	}
	for _, pod := range placement {
		for _, c := range pod {
			switch {
			case c.state == CellFree:
			case c.state == CellReserved && c.reserving != g && c.reserving.priority() < g.priority():
			default:
				return fmt.Errorf("affinity group %q: e0 needs cell %s Free or Reserved by a lower priority, it is %s", g.spec.Name, c.ID(), c.state)
			}
		}
	}
	k.cancelPreemptorsOf(g, placement)
	for _, pod := range placement {
		for _, c := range pod {
			switch c.state {
			case CellFree: // cell e0
				k.setLeaf(c, Celle0, g, nil)
			case CellReserved: // cell e8 (i): its Preempting AG went back to Pending (AG e5) above
				k.setLeaf(c, Celle8, g, nil)
			default:
				k.internalError("e0 of %q met cell %s in state %s", g.spec.Name, c.ID(), c.state)
			}
		}
	}
	g.placement = placement
	return k.setAGState(g, AGe0)
}

// reserve is AG e1: Pending -> Preempting. It returns the AGs it preempts.
func (k *Core) reserve(g *AffinityGroup, placement [][]*Cell) ([]*AffinityGroup, error) {
	if _, err := agNext(g.state, AGe1, g.spec.Name); err != nil {
		return nil, err
	}
	p := g.priority()
	for _, pod := range placement {
		for _, c := range pod {
			ok := false
			switch c.state {
			case CellFree:
				ok = true
			case CellUsed:
				ok = c.using != g && c.using.priority() < p
			case CellReserving, CellReserved:
				ok = c.reserving != g && c.reserving.priority() < p
			}
			if !ok {
				return nil, fmt.Errorf("affinity group %q: e1 cannot take cell %s (%s)", g.spec.Name, c.ID(), c.state)
			}
		}
	}
	if err := k.setAGState(g, AGe1); err != nil {
		return nil, err
	}
	k.cancelPreemptorsOf(g, placement)
	g.placement = placement
	var victims []*AffinityGroup
	for _, pod := range placement {
		for _, c := range pod {
			switch c.state {
			case CellFree: // cell e5
				k.setLeaf(c, Celle5, nil, g)
			case CellUsed: // cell e2: the user goes Being preempted (AG e6)
				v := c.using
				k.setLeaf(c, Celle2, v, g)
				_ = k.setAGState(v, AGe6)
				victims = appendUnique(victims, v)
			case CellReserving: // cell e3: the old preemptor went Pending (AG e5) above
				k.setLeaf(c, Celle3, c.using, g)
				victims = appendUnique(victims, c.using)
			case CellReserved: // cell e6: likewise
				k.setLeaf(c, Celle6, nil, g)
			}
		}
	}
	return victims, nil
}

func appendUnique(list []*AffinityGroup, g *AffinityGroup) []*AffinityGroup {
	for _, x := range list {
		if x == g {
			return list
		}
	}
	return append(list, g)
}

// completePreemption is AG e2: Preempting -> Allocated once every cell is
// Reserved (all victims gone).
func (k *Core) completePreemption(g *AffinityGroup) (bool, error) {
	if _, err := agNext(g.state, AGe2, g.spec.Name); err != nil {
		return false, err
	}
	for _, pod := range g.placement {
		for _, c := range pod {
			if c.state != CellReserved || c.reserving != g {
				return false, nil
			}
		}
	}
	for _, pod := range g.placement {
		for _, c := range pod {
			k.setLeaf(c, Celle8, g, nil) // cell e8 (ii)
		}
	}
	return true, k.setAGState(g, AGe2)
}

// cancelPreemptorsOf fires AG e5 on every Preempting AG that holds a cell of
// g's placement (the cells g overwrites through cell e3, e6 or e8 (i)). Each
// gives back its other cells; the overwritten ones stay Reserving/Reserved
// until g takes them, so their victims remain Being preempted.
func (k *Core) cancelPreemptorsOf(g *AffinityGroup, placement [][]*Cell) {
	var old []*AffinityGroup
	k.epoch++
	for _, pod := range placement {
		for _, c := range pod {
			c.markEpoch = k.epoch
			if c.reserving != nil && c.reserving != g {
				old = appendUnique(old, c.reserving)
			}
		}
	}
	keep := k.epoch
	for _, p := range old {
		k.releaseReservations(p, keep)
		p.placement = nil
		_ = k.setAGState(p, AGe5)
	}
}

// preemptorToPending is AG e5 for g when nothing of it is overwritten (a VC
// change evacuating its cells): every cell it reserved is given back.
func (k *Core) preemptorToPending(g *AffinityGroup) {
	k.releaseReservations(g, 0)
	g.placement = nil
	_ = k.setAGState(g, AGe5)
}

// releaseReservations gives back a Preempting AG's cells but those marked
// with keep: Reserving cells to their victim (cell e4), Reserved cells to
// Free (cell e7). A victim left with no Reserving cell and no pod lost is no
// longer being preempted (extension x2).
func (k *Core) releaseReservations(g *AffinityGroup, keep uint32) {
	var victims []*AffinityGroup
	for _, pod := range g.placement {
		for _, c := range pod {
			if c.reserving != g || (keep != 0 && c.markEpoch == keep) {
				continue
			}
			switch c.state {
			case CellReserving:
				victims = appendUnique(victims, c.using)
				k.setLeaf(c, Celle4, c.using, nil)
			case CellReserved:
				k.setLeaf(c, Celle7, nil, nil)
			}
		}
	}
	for _, v := range victims {
		k.maybeCancelBeingPreempted(v)
	}
}

func (k *Core) maybeCancelBeingPreempted(v *AffinityGroup) {
	if v.state != AGBeingPreempted || v.lostPod {
		// A victim whose pods are being deleted goes on to Deleted (AG e4).
		return
	}
	for _, pod := range v.placement {
		for _, c := range pod {
			if c.using == v && c.state == CellReserving {
				return
			}
		}
	}
	_ = k.setAGState(v, AGx2)
}

// podDeleted is cell e9 for a Being preempted AG's pod: its Reserving cells
// become Reserved by their preemptor.
func (k *Core) podDeleted(g *AffinityGroup, slot int) {
	if g.state != AGBeingPreempted || slot >= len(g.placement) {
		return
	}
	g.lostPod = true
	kept := g.placement[slot][:0]
	for _, c := range g.placement[slot] {
		if c.using == g && c.state == CellReserving {
			k.setLeaf(c, Celle9, nil, c.reserving)
			continue // given up: now only the preemptor's
		}
		kept = append(kept, c)
	}
	g.placement[slot] = kept
}

// deleteGroup fires the deletion event of g's state: e8 (Pending), e7
// (Preempting), e3 (Allocated) or e4 (Being preempted).
func (k *Core) deleteGroup(g *AffinityGroup) error {
	switch g.state {
	case AGPending:
		if err := k.setAGState(g, AGe8); err != nil {
			return err
		}
	case AGPreempting:
		k.releaseReservations(g, 0)
		if err := k.setAGState(g, AGe7); err != nil {
			return err
		}
	case AGAllocated, AGBeingPreempted:
		ev := AGe3
		if g.state == AGBeingPreempted {
			ev = AGe4
			for i := range g.placement {
				k.podDeleted(g, i) // all pods are gone: e9 on every Reserving cell
			}
		}
		if _, err := agNext(g.state, ev, g.spec.Name); err != nil {
			return err
		}
		for _, pod := range g.placement {
			for _, c := range pod {
				if c.using == g && c.state == CellUsed {
					k.setLeaf(c, Celle1, nil, nil) // cell e1
				}
			}
		}
		if err := k.setAGState(g, ev); err != nil {
			return err
		}
	default:
		return &TransitionError{Machine: "affinity group", Object: g.spec.Name, State: g.state.String(), Event: "delete"}
	}
	g.placement = nil
	delete(k.groups, g.spec.Name)
	return nil
}

// rollback is extension x1: an Allocated AG whose gang never completed before
// binding gives its cells back and waits again.
func (k *Core) rollback(g *AffinityGroup) error {
	if _, err := agNext(g.state, AGx1, g.spec.Name); err != nil {
		return err
	}
	for _, pod := range g.placement {
		for _, c := range pod {
			if c.using == g && c.state == CellUsed {
				k.setLeaf(c, Celle1, nil, nil)
			}
		}
	}
	g.placement = nil
	for i := range g.slots {
		g.slots[i].podKey = ""
	}
	g.livePods = 0
	// A lazy downgrade is about the cells a group ran on: with them given
	// back, the group is guaranteed again, and its VC owes it its cells. A
	// group whose VC was removed meanwhile asks for the VC of that name, if
	// there is one again (else Schedule refuses it).
	g.downgraded = false
	if g.vc == nil {
		if v := k.vcs[g.spec.VirtualCluster]; v != nil {
			g.vc = v
			v.agCount[g.state]++
		}
	}
	return k.setAGState(g, AGx1)
}

// downgrade is lazy preemption: a guaranteed AG keeps its cells but runs on
// as opportunistic, so the VC's virtual cells it held become unbound.
func (k *Core) downgrade(g *AffinityGroup) {
	if g.opportunistic() {
		return
	}
	olds := k.scratchCounts[:0]
	var leaves []*Cell
	for _, pod := range g.placement {
		for _, c := range pod {
			if c.using == g {
				leaves = append(leaves, c)
				olds = append(olds, c.leafContribution())
			}
		}
	}
	k.unholdAll(g)
	k.countGroup(g, -1)
	g.downgraded = true
	k.countGroup(g, 1)
	for i, c := range leaves {
		k.updateLeaf(c, olds[i])
	}
	k.scratchCounts = olds[:0]
	k.downgradedNow = append(k.downgradedNow, g.spec.Name)
}

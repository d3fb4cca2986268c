package cellcore

import (
	"fmt"
	"sort"
)

// RecoveredPod is a running pod's persisted placement.
type RecoveredPod struct {
	PodKey          string
	Node            string
	LeafCellIndices []int32
	// Downgraded: the pod's record says its group had been lazily preempted
	// (or displaced by a VC shrink) and ran as opportunistic. Recovery keeps
	// it so: it never takes back the VC cells a preemptor was promised.
	Downgraded bool
}

// RecoverResult says how a recovered group came back.
type RecoverResult struct {
	// Downgraded: the group no longer fits its VC's cells and runs on as
	// opportunistic (lazy preemption); Reason says why.
	Downgraded bool
	Reason     string
}

// RecoverAffinityGroup adds back a group that was running before a restart
// (ec). Its cells are taken as they were persisted; it maps onto its VC's
// virtual cells, or, if it no longer fits them, is downgraded to
// opportunistic. A cell already used by another group is a double booking:
// the group is refused and nothing changes.
func (k *Core) RecoverAffinityGroup(spec AffinityGroupSpec, pods []RecoveredPod) (RecoverResult, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.finish()
	var res RecoverResult
	if g := k.groups[spec.Name]; g != nil {
		return res, fmt.Errorf("affinity group %q is already known (%s)", spec.Name, g.state)
	}
	if err := k.validateRecovered(&spec, len(pods)); err != nil {
		return res, err
	}
	vc := k.vcs[spec.VirtualCluster]
	g := newGroup(spec, vc, 0)
	placement := make([][]*Cell, len(g.slots))
	keys := make([]string, len(g.slots))
	var ch *chain
	seen := map[*Cell]bool{}
	for _, rp := range pods {
		slot := -1
		for i, s := range g.slots {
			if keys[i] == "" && int(s.leafCellNumber) == len(rp.LeafCellIndices) {
				slot = i
				break
			}
		}
		if slot < 0 {
			return res, fmt.Errorf("affinity group %q: pod %s has %d leaf cells, no member of that size is left", spec.Name, rp.PodKey, len(rp.LeafCellIndices))
		}
		for _, idx := range rp.LeafCellIndices {
			l, err := k.findLeafIn(rp.Node, spec.LeafCellType, ch, idx)
			if err != nil {
				return res, fmt.Errorf("affinity group %q: pod %s: %v", spec.Name, rp.PodKey, err)
			}
			if ch == nil {
				ch = l.chain
			}
			if l.state != CellFree || seen[l] {
				owner := "another pod of the group"
				if l.using != nil {
					owner = "affinity group " + l.using.spec.Name
				} else if l.reserving != nil {
					owner = "affinity group " + l.reserving.spec.Name
				}
				return res, fmt.Errorf("affinity group %q: pod %s: leaf cell %s is already used by %s (double booking refused)", spec.Name, rp.PodKey, l.ID(), owner)
			}
			seen[l] = true
			placement[slot] = append(placement[slot], l)
		}
		keys[slot] = rp.PodKey
	}
	// A record that breaks the group's topology constraint is invalid like
	// one that double-books: running it on would break the promise every
	// placement keeps (and CheckInvariants checks).
	if spec.WithinTopologyKey != "" {
		if err := recoveredWithin(g, ch, placement); err != nil {
			return res, err
		}
	}
	// Map the placement onto the VC's virtual cells.
	var bound []*Cell
	reason := ""
	recordedDowngrade := false
	for _, rp := range pods {
		recordedDowngrade = recordedDowngrade || rp.Downgraded
	}
	switch {
	case spec.Priority < 0:
	case recordedDowngrade:
		reason = "it had been lazily preempted before the restart"
	case vc == nil:
		reason = fmt.Sprintf("virtual cluster %q no longer exists", spec.VirtualCluster)
	case spec.PinnedCellID != "":
		pc := k.pinned[spec.PinnedCellID]
		if pc == nil || pc.pool.vc != vc {
			reason = fmt.Sprintf("pinned cell %q is not in virtual cluster %q", spec.PinnedCellID, spec.VirtualCluster)
		} else {
			for _, pod := range placement {
				for _, l := range pod {
					if l != pc && !isAncestor(pc, l) {
						reason = fmt.Sprintf("leaf cell %s is outside pinned cell %q", l.ID(), spec.PinnedCellID)
					}
				}
			}
		}
	default:
		p := vc.pools[ch]
		if p == nil {
			reason = fmt.Sprintf("virtual cluster %q has no cells in chain %s", spec.VirtualCluster, ch.name)
			break
		}
		for _, pod := range placement {
			for _, l := range pod {
				if reason != "" {
					break
				}
				if r := l.rootAncestor(); r != nil && r.pool == p {
					continue
				}
				if !k.bindForRecovery(p, l, &bound) {
					reason = fmt.Sprintf("virtual cluster %q has no free virtual cell left for leaf cell %s", spec.VirtualCluster, l.ID())
				}
			}
		}
	}
	if reason != "" && spec.Priority >= 0 {
		for i := len(bound) - 1; i >= 0; i-- {
			k.unbindRoot(bound[i])
		}
		g.downgraded = true
		res = RecoverResult{Downgraded: true, Reason: fmt.Sprintf("affinity group %q runs on as opportunistic: %s", spec.Name, reason)}
	}
	k.seq++
	g.seq = k.seq
	g.chain = ch
	k.groups[spec.Name] = g
	if vc != nil {
		vc.agCount[AGPending]++
	}
	for i := range placement {
		if placement[i] == nil {
			placement[i] = []*Cell{}
		}
	}
	if err := k.allocate(g, placement); err != nil {
		delete(k.groups, spec.Name)
		return RecoverResult{}, err
	}
	k.trace(g, AGec)
	for i, key := range keys {
		if key != "" {
			g.slots[i].podKey = key
			g.livePods++
		}
	}
	return res, nil
}

// validateRecovered bounds a recovered spec before newGroup allocates a slot
// per pod. The spec comes from a placement record on a pod, which its owner
// can write: a forged podNumber of 2^31 must be refused here, not allocated
// (nor crash-loop the scheduler). The VC, leaf cell type and pinned cell are
// not checked: recovery downgrades a group whose VC or pinned cell is gone,
// and finds no leaf for an unknown type.
func (k *Core) validateRecovered(spec *AffinityGroupSpec, pods int) error {
	if spec.Name == "" || len(spec.Members) == 0 {
		return fmt.Errorf("recovered affinity group needs a name and members")
	}
	sz, err := k.validateShape(spec)
	if err != nil {
		return err
	}
	if sz.leaves > k.leafCells {
		return fmt.Errorf("affinity group %q: asks for %d leaf cells in total, more than the %d of the whole cluster", spec.Name, sz.leaves, k.leafCells)
	}
	if pods == 0 || int64(pods) > sz.pods {
		return fmt.Errorf("affinity group %q: %d recovered pods for %d members", spec.Name, pods, sz.pods)
	}
	return nil
}

// bindForRecovery binds the lowest ancestor of leaf l that the pool may still
// bind (unbound quota at its level, free, safe to split out).
func (k *Core) bindForRecovery(p *pool, l *Cell, bound *[]*Cell) bool {
	for x := l; x != nil; x = x.parent {
		if p.unbound(int(x.level)) == 0 || freeAncestor(x) == nil {
			continue
		}
		if !k.canBind(p, x) {
			continue
		}
		if err := k.bindRoot(x, p, false); err != nil {
			return false
		}
		*bound = append(*bound, x)
		return true
	}
	return false
}

func (k *Core) findLeafIn(nodeName, leafType string, ch *chain, index int32) (*Cell, error) {
	n := k.nodes[nodeName]
	if n == nil {
		return nil, fmt.Errorf("node %q is not in the physical cluster", nodeName)
	}
	for _, nc := range n.cells {
		if (leafType != "" && nc.chain.leafType != leafType) || (ch != nil && nc.chain != ch) {
			continue
		}
		var found *Cell
		nc.forEachLeaf(func(l *Cell) {
			if l.index == index {
				found = l
			}
		})
		if found != nil {
			return found, nil
		}
	}
	return nil, fmt.Errorf("node %q has no leaf cell %d of type %q", nodeName, index, leafType)
}

// groupNames returns the known groups, sorted.
func (k *Core) groupNames() []string {
	out := make([]string, 0, len(k.groups))
	for n := range k.groups {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

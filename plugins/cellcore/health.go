package cellcore

import (
	"fmt"
	"sort"
)

// SetNodeHealth records a node's health. Health propagates up the cell tree
// through the counters: no new placement lands on a leaf of a node that is
// not Healthy. When lost capacity (Bad, Maintenance, Retired) leaves the free
// pool short of what VCs may still claim, free virtual cells are bound to lost
// physical cells ("doomed bad cells") so each VC sees its loss; they are
// unbound again when capacity returns.
func (k *Core) SetNodeHealth(name string, h NodeHealth) error {
	if h > NodeLooping {
		return fmt.Errorf("node %q: invalid health %d", name, h)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.finish()
	n := k.nodes[name]
	if n == nil {
		return fmt.Errorf("node %q is not in the physical cluster", name)
	}
	if n.health == h {
		return nil
	}
	olds := k.scratchCounts[:0]
	for _, nc := range n.cells {
		nc.forEachLeaf(func(l *Cell) { olds = append(olds, l.leafContribution()) })
	}
	n.health = h
	i := 0
	for _, nc := range n.cells {
		nc.forEachLeaf(func(l *Cell) { k.updateLeaf(l, olds[i]); i++ })
	}
	k.scratchCounts = olds[:0]
	return nil
}

// NodeNames returns the names of the physical cluster's nodes, sorted.
func (k *Core) NodeNames() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, 0, len(k.nodes))
	for n := range k.nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// NodeHealthOf returns a node's recorded health.
func (k *Core) NodeHealthOf(name string) (NodeHealth, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := k.nodes[name]
	if n == nil {
		return NodeUnknown, false
	}
	return n.health, true
}

// SetLeafCellHealth marks one device bad (or good again): the leaf cell of
// leafType with device index in the node. SetNodeDevices sets every device of
// a node at once, with the other health states.
func (k *Core) SetLeafCellHealth(nodeName, leafType string, index int32, bad bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.finish()
	l, err := k.findLeaf(nodeName, leafType, index)
	if err != nil {
		return err
	}
	old := l.leafContribution()
	l.device = DeviceGood
	if bad {
		l.device = DeviceBad
	}
	k.updateLeaf(l, old)
	k.queueRemark(l.node) // a mark on it may have to move
	return nil
}

func (k *Core) findLeaf(nodeName, leafType string, index int32) (*Cell, error) {
	n := k.nodes[nodeName]
	if n == nil {
		return nil, fmt.Errorf("node %q is not in the physical cluster", nodeName)
	}
	var found *Cell
	for _, nc := range n.cells {
		if leafType != "" && nc.chain.leafType != leafType {
			continue
		}
		nc.forEachLeaf(func(l *Cell) {
			if l.index == index && found == nil {
				found = l
			}
		})
		if found != nil {
			return found, nil
		}
	}
	return nil, fmt.Errorf("node %q has no leaf cell %d of type %q", nodeName, index, leafType)
}

// rebalanceDoomed keeps, for one chain, the healthy free capacity covering
// every VC's unbound virtual cells, by binding virtual cells to lost free
// cells (doomed) where it does not, and unbinding doomed cells that are no
// longer needed.
func (k *Core) rebalanceDoomed(ch *chain) {
	if ch.lostLeaves == 0 && !hasDoomed(ch) {
		// No lost leaf to doom a cell with and no doomed cell to undoom:
		// every step below would find nothing to do.
		return
	}
	// Doomed cells now in real use become ordinary bound cells; unused doomed
	// cells whose hardware is healthy again go back to the free pool.
	for _, p := range ch.vcPools {
		for _, r := range doomedRoots(p) {
			switch {
			case r.guarLeaves > 0:
				r.doomed = false
				p.doomed[r.level]--
				ch.doomedCells--
			case r.lostLeaves == 0:
				k.unbindRoot(r)
			}
		}
	}
	// Doom more while healthy capacity is short.
	for guard := 0; guard < 1<<20; guard++ {
		counts, demand := k.levelCounts(ch, true)
		l, _ := checkLevels(ch, counts, demand)
		if l == 0 || !k.doomOne(ch, l) {
			break
		}
	}
	// Undoom what is no longer needed: unbind a doomed cell and keep it
	// unbound only if healthy capacity still covers every VC.
	for _, p := range ch.vcPools {
		for _, r := range doomedRoots(p) {
			k.unbindRoot(r)
			counts, demand := k.levelCounts(ch, true)
			if l, _ := checkLevels(ch, counts, demand); l > 0 {
				if err := k.bindRoot(r, p, true); err != nil {
					k.internalError("re-dooming %s: %v", r.ID(), err)
				}
			}
		}
	}
}

func hasDoomed(ch *chain) bool { return ch.doomedCells > 0 }

func doomedRoots(p *pool) []*Cell {
	var list []*Cell
	for l := range p.doomed {
		if p.doomed[l] == 0 {
			continue
		}
		for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
			for _, r := range p.roots.buckets[key] {
				if r.doomed && int(r.level) == l {
					list = append(list, r)
				}
			}
		}
	}
	return list
}

// doomOne binds one virtual cell at level l or above (where a VC has unbound
// demand) to a lost free cell. It reports whether it could.
func (k *Core) doomOne(ch *chain, short int) bool {
	for l := short; l <= ch.top; l++ {
		var pick *pool
		for _, p := range ch.vcPools {
			if u := p.unbound(l); u > 0 && (pick == nil || u > pick.unbound(l)) {
				pick = p
			}
		}
		if pick == nil {
			continue
		}
		if c := k.lostFreeCell(ch, l); c != nil && k.canBind(pick, c) {
			if err := k.bindRoot(c, pick, true); err == nil {
				return true
			}
		}
	}
	return false
}

// lostFreeCell finds a free level-l cell with lost leaves, from the level's
// free list or split out of a larger lost free cell.
func (k *Core) lostFreeCell(ch *chain, l int) *Cell {
	for h := l; h <= ch.top; h++ {
		fl := ch.freeList[h]
		var best *Cell
		for key := fl.next(ch.leafCount[h] + 1); key >= 0; key = fl.next(key + 1) {
			for _, c := range fl.buckets[key] {
				if c.lostLeaves > 0 && (best == nil || c.lostLeaves > best.lostLeaves) {
					best = c
				}
			}
		}
		if best != nil {
			for int(best.level) > l {
				next := best.children[0]
				for _, x := range best.children {
					if x.lostLeaves > next.lostLeaves {
						next = x
					}
				}
				best = next
			}
			return best
		}
	}
	return nil
}

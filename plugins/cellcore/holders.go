package cellcore

import (
	"slices"
	"strings"
)

// A pool's holders: the guaranteed groups that hold leaves under its roots,
// by priority, with the leaves they hold. A leaf's holder is the group using
// it, else the one that reserved it (as a waiting group's reason counts
// them). Kept as leaves change hands (setLeaf) and as groups are downgraded,
// so that a waiting group's reason and the preemption search's bounds read
// them without walking the pool's leaves. Opportunistic holders (priority
// -1, downgraded ones too) are not listed: their leaves are the roots'
// oppLeaves, summed in poolSums.
//
// Only guaranteed groups are listed, and a guaranteed group holds leaves
// only inside its VC's (or its pinned cell's) pool, so each is in one pool,
// and binding or unbinding a cell never moves one: a cell is unbound only
// when no guaranteed leaf is left in it, and a free cell holds none
// (CheckInvariants recomputes all of it).

// holderLevel is the holders of one priority in one pool.
type holderLevel struct {
	prio   int32
	leaves int32
	groups []*AffinityGroup // in no order; a group's heldPos is its index
	// first: once a reason asked for the level's names (named), the groups
	// first by name, in order, as many as it holds (at most firstKept): a
	// group that sorts before its last comes in, one of it that leaves
	// goes out, and it is counted again from groups only when fewer than
	// three are left while groups has more. A reason names the groups of
	// the highest priorities only, so most levels are never asked and
	// keep nothing.
	first []*AffinityGroup
	named bool
}

// firstKept bounds holderLevel.first: a reason names three holders, and
// the rest are spares, so that groups coming and going rarely make the
// level count its first names again.
const firstKept = 16

// holderIndex is a pool's holder levels, highest priority first. A level
// stays when its last group leaves (the priorities in use are few, and a
// placement should not allocate one again).
type holderIndex struct {
	levels []*holderLevel
}

// heldBy is the group a waiting group's reason says holds the leaf.
func (c *Cell) heldBy() *AffinityGroup {
	if c.using != nil {
		return c.using
	}
	return c.reserving
}

// hold records that guaranteed group g now holds leaf c.
func (k *Core) hold(g *AffinityGroup, c *Cell) {
	if g == nil || g.opportunistic() {
		return
	}
	if g.heldLeaves == 0 {
		p := c.rootAncestor().pool
		p.holders.level(g.priority()).add(g)
	}
	g.heldLeaves++
	g.heldIn.leaves++
}

// unhold records that guaranteed group g no longer holds one of its leaves.
func (k *Core) unhold(g *AffinityGroup) {
	if g == nil || g.opportunistic() {
		return
	}
	g.heldLeaves--
	g.heldIn.leaves--
	if g.heldLeaves == 0 {
		g.heldIn.remove(g)
	}
}

// unholdAll takes g out of its pool's holders with all its leaves: it is
// about to run as opportunistic (downgrade).
func (k *Core) unholdAll(g *AffinityGroup) {
	if g.heldLeaves == 0 {
		return
	}
	g.heldIn.leaves -= g.heldLeaves
	g.heldLeaves = 0
	g.heldIn.remove(g)
}

// level returns the level of priority prio, added if there is none.
func (h *holderIndex) level(prio int32) *holderLevel {
	i := 0
	for ; i < len(h.levels); i++ {
		if lv := h.levels[i]; lv.prio == prio {
			return lv
		} else if lv.prio < prio {
			break
		}
	}
	lv := &holderLevel{prio: prio}
	h.levels = append(h.levels, nil)
	copy(h.levels[i+1:], h.levels[i:])
	h.levels[i] = lv
	return lv
}

func (lv *holderLevel) add(g *AffinityGroup) {
	g.heldIn, g.heldPos = lv, len(lv.groups)
	lv.groups = append(lv.groups, g)
	f := lv.first
	if !lv.named {
		return
	}
	if len(f) == len(lv.groups)-1 && len(f) < firstKept || len(f) > 0 && g.spec.Name < f[len(f)-1].spec.Name {
		i, _ := slices.BinarySearchFunc(f, g.spec.Name, func(x *AffinityGroup, name string) int { return strings.Compare(x.spec.Name, name) })
		if len(f) < firstKept {
			f = append(f, nil)
		}
		copy(f[i+1:], f[i:len(f)-1])
		f[i] = g
		lv.first = f
	}
}

// remove takes g out of the level.
func (lv *holderLevel) remove(g *AffinityGroup) {
	last := lv.groups[len(lv.groups)-1]
	lv.groups[g.heldPos] = last
	last.heldPos = g.heldPos
	lv.groups[len(lv.groups)-1] = nil
	lv.groups = lv.groups[:len(lv.groups)-1]
	g.heldIn, g.heldPos = nil, 0
	for i, f := range lv.first {
		if f == g {
			n := len(lv.first)
			copy(lv.first[i:], lv.first[i+1:])
			lv.first[n-1] = nil
			lv.first = lv.first[:n-1]
			break
		}
	}
}

// firstByName returns the level's first three groups by name, in order.
func (lv *holderLevel) firstByName() []*AffinityGroup {
	if !lv.named || len(lv.first) < min(3, len(lv.groups)) {
		lv.named = true
		f := lv.first[:0]
		for _, g := range lv.groups {
			i := len(f)
			for i > 0 && g.spec.Name < f[i-1].spec.Name {
				i--
			}
			if i >= firstKept {
				continue
			}
			if len(f) < firstKept {
				f = append(f, nil)
			}
			copy(f[i+1:], f[i:len(f)-1])
			f[i] = g
		}
		lv.first = f
	}
	return lv.first[:min(3, len(lv.first))]
}

// lowestPrio is the lowest priority of a guaranteed group holding leaves in
// the pool, and false if none does.
func (h *holderIndex) lowestPrio() (int32, bool) {
	for i := len(h.levels) - 1; i >= 0; i-- {
		if len(h.levels[i].groups) > 0 {
			return h.levels[i].prio, true
		}
	}
	return 0, false
}

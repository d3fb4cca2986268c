package cellcore

import (
	"fmt"
	"sort"
	"strings"
)

// "All pods of a group within one cell of a level named by a topology key"
// (Kubernetes 1.37's Workload API PodGroups carry one node label key, such
// as a rack label: the whole gang in one domain of it). The configuration
// names levels by keys (CellTypeSpec.TopologyKey); a group that asks for a
// key (AffinityGroupSpec.WithinTopologyKey) is placed under one cell of
// that level of the chain it uses, on every path: the guaranteed fast path
// and preemption search only whole-group placements in cells at or below
// the keyed level and span pods only inside one keyed cell; opportunistic
// placement stops its levels there; Spread spreads inside one keyed cell;
// a late member (x3) joins its group's keyed cell; recovery refuses a
// record that breaks the constraint; CheckInvariants checks every placed
// group. A group without a key takes none of these paths (the searches
// test the key once), so its decisions are the same as before the feature.
//
// What the VC guarantees: HiveD promises affinity at the levels a VC
// reserves. A VC's bound cells and its unbound virtual cells at or above
// the keyed level (each a whole keyed cell, or several) are a promise the
// group can be co-located in; unbound virtual cells below the keyed level
// are not (they may be bound in different keyed cells), so the search uses
// them only as far as the free cells inside one keyed cell allow (best
// effort). liveness_test.go's oracle states exactly this.

// keyLevel is the level of ch that a topology key names, or 0.
func (ch *chain) keyLevel(key string) int {
	if key == "" {
		return 0
	}
	for l := 1; l <= ch.top; l++ {
		if ch.levelKey[l] == key {
			return l
		}
	}
	return 0
}

// withinLevel is the level g's WithinTopologyKey names in ch when one cell
// of it can hold the whole group, else 0: the group cannot use ch. The
// searches cap their levels at it and span pods only inside one of its
// cells.
func withinLevel(g *AffinityGroup, ch *chain) int {
	l := ch.keyLevel(g.spec.WithinTopologyKey)
	if l == 0 || ch.leafCount[l] < g.totalLeaves() {
		return 0
	}
	return l
}

// ancestorAt is c's ancestor (or c itself) at level l.
func ancestorAt(c *Cell, l int) *Cell {
	for c != nil && int(c.level) < l {
		c = c.parent
	}
	return c
}

// declaredKeys lists the topology keys the cell types declare, quoted and
// sorted, for messages.
func (k *Core) declaredKeys() string {
	seen := map[string]bool{}
	var keys []string
	for _, ch := range k.chainOrder {
		for _, key := range ch.levelKey[1:] {
			if key != "" && !seen[key] {
				seen[key] = true
				keys = append(keys, fmt.Sprintf("%q", key))
			}
		}
	}
	if len(keys) == 0 {
		return "the cell types declare no topology key"
	}
	sort.Strings(keys)
	return "the cell types declare " + strings.Join(keys, ", ")
}

// keyedCapacity is the most leaves the VC could ever hold under one
// level-l cell of ch: a whole one if it reserves a cell of that level or
// above, else all its smaller cells, were they bound in the same one.
func (v *vcState) keyedCapacity(ch *chain, l int, pinnedID string) int32 {
	if pinnedID != "" {
		return min(v.leafCapacity(ch, pinnedID), ch.leafCount[l])
	}
	p := v.pools[ch]
	if p == nil {
		return 0
	}
	var n int64
	for m := 1; m <= ch.top; m++ {
		if p.quota[m] == 0 {
			continue
		}
		if m >= l {
			return ch.leafCount[l]
		}
		n += int64(p.quota[m]) * int64(ch.leafCount[m])
	}
	return int32(min(n, int64(ch.leafCount[l])))
}

// validateWithin refuses a topology constraint that can never be met in
// any chain the group may use: none has a level of the key; one cell of
// that level is smaller than the group; no node of such a chain holds its
// largest pod; for a guaranteed group, its VC could never hold it under
// one such cell. A pinned cell at or below the keyed level is one cell, so
// it meets the constraint by itself; above it, the constraint applies
// inside the pinned cell.
func (k *Core) validateWithin(s *AffinityGroupSpec, vc *vcState, sz groupSize) error {
	key := s.WithinTopologyKey
	var keyed, fitCell, fitNode bool
	var cellLeaves, nodeLeaves, vcLeaves int32
	var cellType string
	for _, ch := range k.candidateChains(s, vc) {
		l := ch.keyLevel(key)
		if l == 0 {
			continue
		}
		keyed = true
		if lc := ch.leafCount[l]; lc > cellLeaves {
			cellLeaves, cellType = lc, ch.levelType[l]
		}
		if int64(ch.leafCount[l]) < sz.leaves {
			continue
		}
		fitCell = true
		nodeLeaves = max(nodeLeaves, ch.leafCount[ch.nodeLevel])
		if sz.maxLeaves > ch.leafCount[ch.nodeLevel] {
			continue
		}
		fitNode = true
		if s.Priority >= 0 {
			vcLeaves = max(vcLeaves, vc.keyedCapacity(ch, l, s.PinnedCellID))
		}
	}
	switch {
	case !keyed:
		return fmt.Errorf("affinity group %q: withinTopologyKey %q names no cell level of a chain it may use (%s)", s.Name, key, k.declaredKeys())
	case !fitCell:
		return fmt.Errorf("affinity group %q: asks for %d leaf cells in total, which does not fit in one %s (%d leaf cells), the level withinTopologyKey %q names", s.Name, sz.leaves, cellType, cellLeaves, key)
	case !fitNode:
		return fmt.Errorf("affinity group %q: a pod asks for %d leaf cells, but no node of a chain with a level of withinTopologyKey %q has more than %d", s.Name, sz.maxLeaves, key, nodeLeaves)
	case s.Priority >= 0 && int64(vcLeaves) < sz.leaves:
		return fmt.Errorf("affinity group %q: asks for %d leaf cells within one cell of withinTopologyKey %q, but virtual cluster %q could hold at most %d under one", s.Name, sz.leaves, key, s.VirtualCluster, vcLeaves)
	}
	return nil
}

// withinViolation says how a placement breaks g's topology constraint, or
// "" if it keeps it: every leaf under one cell of the keyed level of its
// chain. CheckInvariants calls it for every group holding cells, recovery
// for every record.
func withinViolation(key string, placement [][]*Cell) string {
	var first, keyed *Cell
	for _, pod := range placement {
		for _, c := range pod {
			if first == nil {
				l := c.chain.keyLevel(key)
				if l == 0 {
					return fmt.Sprintf("chain %s has no level of withinTopologyKey %q", c.chain.name, key)
				}
				first, keyed = c, ancestorAt(c, l)
				continue
			}
			if c.chain != first.chain || ancestorAt(c, int(keyed.level)) != keyed {
				return fmt.Sprintf("leaf cells %s and %s are not in one %s (withinTopologyKey %q)", first.ID(), c.ID(), keyed.chain.levelType[keyed.level], key)
			}
		}
	}
	return ""
}

// recoveredWithin refuses a recovered group whose record breaks its
// topology constraint, or whose members could never all fit in one keyed
// cell of the chain its pods run in (a late member could never join).
func recoveredWithin(g *AffinityGroup, ch *chain, placement [][]*Cell) error {
	key := g.spec.WithinTopologyKey
	if why := withinViolation(key, placement); why != "" {
		return fmt.Errorf("affinity group %q: its pods break its topology constraint: %s", g.spec.Name, why)
	}
	if l := ch.keyLevel(key); withinLevel(g, ch) == 0 {
		return fmt.Errorf("affinity group %q: asks for %d leaf cells in total, which does not fit in one %s (%d leaf cells), the level withinTopologyKey %q names", g.spec.Name, g.totalLeaves(), ch.levelType[l], ch.leafCount[l], key)
	}
	return nil
}

// keyedChains keeps the chains a constrained group can use (withinLevel).
func keyedChains(g *AffinityGroup, chains []*chain) []*chain {
	out := make([]*chain, 0, len(chains))
	for _, ch := range chains {
		if withinLevel(g, ch) > 0 {
			out = append(out, ch)
		}
	}
	return out
}

// keyedTypes names the keyed level's cell types of chains ("V100-RACK",
// "V100-RACK or A100-RACK"), for a wait reason.
func keyedTypes(key string, chains []*chain) string {
	var names []string
	for _, ch := range chains {
		if l := ch.keyLevel(key); l > 0 && !containsString(names, ch.levelType[l]) {
			names = append(names, ch.levelType[l])
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("cell of withinTopologyKey %q", key)
	}
	return strings.Join(names, " or ")
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// withinNeeds is what a constrained group's wait reason adds to what it
// needs.
func withinNeeds(g *AffinityGroup, chains []*chain) string {
	key := g.spec.WithinTopologyKey
	return fmt.Sprintf(" within one %s (withinTopologyKey %q)", keyedTypes(key, chains), key)
}

// withinWaitTail ends the wait reason of a constrained guaranteed group
// whose VC has the leaves it needs, but not in one keyed cell: the
// constraint is what keeps it waiting. It says so, and when the VC
// reserves no cell at or above the keyed level, that the VC does not
// guarantee co-location there.
func withinWaitTail(g *AffinityGroup, chains []*chain, poolFor func(*chain) *pool) string {
	key := g.spec.WithinTopologyKey
	types := keyedTypes(key, chains)
	msg := fmt.Sprintf("; its pods do not fit together within one %s of those cells (each pod needs its leaf cells on one node), so it binds when groups next to the free cells finish", types)
	for _, ch := range chains {
		p := poolFor(ch)
		if p == nil {
			continue
		}
		if p.pinnedID != "" {
			return msg
		}
		for l := ch.keyLevel(key); l <= ch.top; l++ {
			if p.quota[l] > 0 {
				return msg
			}
		}
	}
	return msg + fmt.Sprintf(" (virtual cluster %q reserves no %s or larger cell, so it does not guarantee co-location in one)", g.spec.VirtualCluster, types)
}

// maxKeyedFree is the most free leaves in one keyed cell of the chains,
// for an opportunistic group's wait reason: the top cells by free leaves,
// from the most, until no top cell can have more than found.
func maxKeyedFree(g *AffinityGroup, chains []*chain) int32 {
	var best int32
	for _, ch := range chains {
		l := withinLevel(g, ch)
		if l == 0 {
			continue
		}
		ti := ch.topIndex
		for key := ti.prev(int32(len(ti.buckets) - 1)); key > best; key = ti.prev(key - 1) {
			for _, t := range ti.buckets[key] {
				best = max(best, freeAt(t, l))
			}
		}
	}
	return best
}

package cellcore

import (
	"fmt"
	"sort"
)

// waitReasonByWalk is waitReason as it was written before the pools kept
// sums and holders: it counts every leaf of the group's pools. TestMain
// checks every wait decision's reason against it.
func (k *Core) waitReasonByWalk(g *AffinityGroup) string {
	plural := func(n int32, one, many string) string {
		if n == 1 {
			return one
		}
		return many
	}
	// "a", "a and b", "a, b and c"
	join := func(parts []string) string {
		s := ""
		for i, p := range parts {
			switch {
			case i == 0:
			case i == len(parts)-1:
				s += " and "
			default:
				s += ", "
			}
			s += p
		}
		return s
	}
	opportunistic := g.opportunistic()
	var chains []*chain
	if opportunistic {
		chains = k.candidateChains(&g.spec, nil)
	} else {
		chains = k.candidateChains(&g.spec, g.vc)
	}
	within := g.spec.WithinTopologyKey != ""
	if within {
		chains = keyedChains(g, chains) // the only ones it may use
	}
	leaf := g.spec.LeafCellType
	for _, ch := range chains {
		if leaf == "" {
			leaf = ch.leafType
		} else if leaf != ch.leafType {
			leaf = "leaf cells"
		}
	}
	if leaf == "" {
		leaf = "leaf cells"
	}
	var shape []string
	for _, m := range g.spec.Members {
		shape = append(shape, fmt.Sprintf("%d %s of %d", m.PodNumber, plural(m.PodNumber, "pod", "pods"), m.LeafCellNumber))
	}
	need := g.totalLeaves()
	needs := join(shape) + " " + leaf
	if within {
		needs += withinNeeds(g, chains)
	}

	if opportunistic {
		var free, onNode int32
		for _, ch := range chains {
			for _, t := range ch.tops {
				free += t.freeLeaves
				onNode = max(onNode, freeAt(t, ch.nodeLevel))
			}
		}
		inKeyed := ""
		if within {
			var most int32
			for _, ch := range chains {
				for _, t := range ch.tops {
					most = max(most, freeAt(t, withinLevel(g, ch)))
				}
			}
			inKeyed = fmt.Sprintf(" and %d in one %s", most, keyedTypes(g.spec.WithinTopologyKey, chains))
		}
		return fmt.Sprintf("affinity group %q (opportunistic) needs %s on idle cells, and the cluster has %d free healthy %s, at most %d on one node%s; "+
			"it binds when other groups finish (an opportunistic group never preempts)", g.spec.Name, needs, free, leaf, onNode, inKeyed)
	}

	msg := fmt.Sprintf("affinity group %q (priority %d) needs %s in virtual cluster %q", g.spec.Name, g.spec.Priority, needs, g.spec.VirtualCluster)
	var heldLeaves, lowerLeaves, badLeaves, freeLeaves int32
	var clauses []string
	for _, ch := range chains {
		p := k.poolFor(g, ch)
		if p == nil {
			continue
		}
		var total, chHeld, chLower, chBad, chFree int32
		var cells []string
		if p.pinnedID != "" {
			total = k.pinned[p.pinnedID].leafCount
			cells = append(cells, "pinned cell "+p.pinnedID)
		} else {
			for l := ch.top; l >= 1; l-- {
				if p.quota[l] > 0 {
					total += p.quota[l] * ch.leafCount[l]
					chFree += p.unbound(l) * ch.leafCount[l] // unbound virtual cells are backed by free cells
					cells = append(cells, fmt.Sprintf("%d %s", p.quota[l], ch.levelType[l]))
				}
			}
		}
		held := map[*AffinityGroup]bool{} // groups of equal or higher priority on the cells
		for key := p.roots.next(0); key >= 0; key = p.roots.next(key + 1) {
			for _, r := range p.roots.buckets[key] {
				r.forEachLeaf(func(l *Cell) {
					holder := l.using
					if holder == nil {
						holder = l.reserving
					}
					switch {
					case holder != nil && holder != g && holder.priority() >= g.priority():
						held[holder] = true
						chHeld++
					case holder != nil && holder != g:
						chLower++
					case !l.schedulable():
						chBad++
					case l.state == CellFree:
						chFree++
					}
				})
			}
		}
		var parts []string
		if chHeld > 0 {
			holders := make([]*AffinityGroup, 0, len(held))
			for h := range held {
				holders = append(holders, h)
			}
			sort.Slice(holders, func(i, j int) bool {
				if holders[i].priority() != holders[j].priority() {
					return holders[i].priority() > holders[j].priority()
				}
				return holders[i].spec.Name < holders[j].spec.Name
			})
			var names []string
			for i, h := range holders {
				if i == 3 {
					names = append(names, fmt.Sprintf("%d more", len(holders)-3))
					break
				}
				names = append(names, h.spec.Name)
			}
			parts = append(parts, fmt.Sprintf("%d %s used by groups of priority %d or higher (%s)", chHeld, plural(chHeld, "is", "are"), g.spec.Priority, join(names)))
		}
		if chLower > 0 {
			parts = append(parts, fmt.Sprintf("%d by lower priority groups", chLower))
		}
		if chBad > 0 {
			parts = append(parts, fmt.Sprintf("%d %s on unhealthy hardware", chBad, plural(chBad, "is", "are")))
		}
		if chFree == 0 {
			parts = append(parts, "none is free")
		} else {
			parts = append(parts, fmt.Sprintf("%d %s free", chFree, plural(chFree, "is", "are")))
		}
		clauses = append(clauses, fmt.Sprintf("of its %d %s (%s), %s", total, ch.leafType, join(cells), join(parts)))
		heldLeaves += chHeld
		lowerLeaves += chLower
		badLeaves += chBad
		freeLeaves += chFree
	}
	if len(clauses) == 0 {
		return msg + fmt.Sprintf(", which has no cells of a type the group may use; it binds only once virtual cluster %q has such cells", g.spec.VirtualCluster)
	}
	sep := ": "
	for _, c := range clauses {
		msg += sep + c
		sep = "; "
	}
	var maxPod, largest int32
	for _, m := range g.spec.Members {
		maxPod = max(maxPod, m.LeafCellNumber)
	}
	for _, ch := range chains {
		if p := k.poolFor(g, ch); p != nil && p.pinnedID != "" {
			largest = max(largest, k.pinned[p.pinnedID].leafCount)
		} else if p != nil {
			for l := 1; l <= ch.top; l++ {
				if p.quota[l] > 0 {
					largest = max(largest, ch.leafCount[l])
				}
			}
		}
	}
	switch {
	case largest < maxPod:
		return msg + fmt.Sprintf("; none of its cells holds a pod of %d (the largest holds %d), so the group never binds there: ask for smaller pods or for larger cells", maxPod, largest)
	case freeLeaves+lowerLeaves >= need && within:
		// Enough leaves, but not in one keyed cell: the constraint (or
		// the nodes' shapes in it) keeps the group waiting.
		return msg + withinWaitTail(g, chains, func(ch *chain) *pool { return k.poolFor(g, ch) })
	case freeLeaves+lowerLeaves >= need:
		// Enough leaves, but not where the pods fit together.
		return msg + "; its pods do not fit together in those cells (each pod needs its leaf cells on one node), so it binds when groups next to the free cells finish"
	case heldLeaves > 0 && badLeaves > 0:
		return msg + "; it binds when enough of those groups finish or the unhealthy hardware is back"
	case heldLeaves > 0:
		return msg + "; it binds when enough of those groups finish"
	case badLeaves > 0:
		return msg + "; it binds when the unhealthy hardware is back"
	}
	return msg + "; it binds when cells of the virtual cluster are freed"
}

package cellcore

import "fmt"

func (k *Core) waitDecision(g *AffinityGroup) Decision {
	d := Decision{Kind: Wait, Group: g.spec.Name, State: g.state, Reason: k.waitReason(g)}
	if verifyWaitReason != nil {
		verifyWaitReason(k, g, d.Reason)
	}
	return d
}

// verifyWaitReason, if set (tests), checks every wait decision's reason
// against one counted leaf by leaf.
var verifyWaitReason func(k *Core, g *AffinityGroup, reason string)

// waitReason says why a group waits, in one sentence for its pods' events:
// what it needs, what holds the cells it may use, and what would free them.
// It ends without a period (the scheduler's message adds one) and names cell
// types as the spec does ("V100-NODE"), never as a chain path. It reads the
// pools' sums and holders, not their leaves: its cost does not grow with
// the VC.
func (k *Core) waitReason(g *AffinityGroup) string {
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
			free += ch.freeLeaves
			for f := len(ch.nodeFree) - 1; f > int(onNode); f-- {
				if ch.nodeFree[f] > 0 {
					onNode = int32(f)
					break
				}
			}
		}
		inKeyed := ""
		if within {
			inKeyed = fmt.Sprintf(" and %d in one %s", maxKeyedFree(g, chains), keyedTypes(g.spec.WithinTopologyKey, chains))
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
		// The pool's sums and holders, as its leaves would count: a held
		// leaf by its holder's priority, an idle one as free or unhealthy.
		chFree += p.sums.free
		chBad = p.sums.idleUnsched
		chLower = p.sums.opp
		var names []string
		holders := 0
		for _, lv := range p.holders.levels {
			if lv.prio < g.priority() {
				chLower += lv.leaves
				continue
			}
			chHeld += lv.leaves
			holders += len(lv.groups)
			if len(names) < 3 { // a level's first names are recounted only when asked for
				for _, h := range lv.firstByName() {
					if len(names) < 3 {
						names = append(names, h.spec.Name)
					}
				}
			}
		}
		var parts []string
		if chHeld > 0 {
			if holders > 3 {
				names = append(names, fmt.Sprintf("%d more", holders-3))
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

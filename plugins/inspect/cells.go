package inspect

import (
	"sort"
	"sync"
	"time"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/virtualclusters"
)

// cellIDs names each record by its path (chain/address/.../address, as
// cellcore's Cell.ID), computed from the parent's.
func cellIDs(recs []cellcore.CellRecord) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		if r.Parent < 0 {
			ids[i] = r.Chain() + "/" + r.Address()
		} else {
			ids[i] = ids[r.Parent] + "/" + r.Address()
		}
	}
	return ids
}

// recordBufs keeps the records' memory from one answer to the next: a
// fresh buffer for the whole cluster is megabytes of zeroed pages, the
// larger part of the time the copy holds the core's lock.
var recordBufs = sync.Pool{New: func() any { return new([]cellcore.CellRecord) }}

// records is one CellRecords copy (vc and node as CellRecords takes them)
// in a buffer borrowed from recordBufs; done gives the buffer back, without
// its references to group names and cells. recs is not used after done.
func (s *Server) records(vc, node string) (recs []cellcore.CellRecord, done func()) {
	buf := recordBufs.Get().(*[]cellcore.CellRecord)
	recs = s.core.CellRecords(*buf, vc, node)
	return recs, func() {
		clear(recs) // drop the references to group names and cells
		*buf = recs[:0]
		recordBufs.Put(buf)
	}
}

// cells builds the physical tree from one CellRecords copy, outside
// the core's lock. vc keeps the cells bound to it; node keeps that node's
// cells; both keep the ancestors of what they keep.
func (s *Server) cells(vc, node string) iv1.ClusterCells {
	recs, done := s.records(vc, node)
	defer done()
	ids := cellIDs(recs)
	keep := make([]bool, len(recs))
	for i, r := range recs {
		if (vc == "" || r.VirtualCluster == vc) && (node == "" || r.Node() == node) {
			for j := int32(i); j >= 0 && !keep[j]; j = recs[j].Parent {
				keep[j] = true
			}
		}
	}
	// Records are depth first, each after its parent: going backwards, a
	// cell's subtree is complete when it is reached, and it is then added
	// to its parent (children end up reversed, and are put back in order).
	cells := make([]iv1.Cell, len(recs))
	out := iv1.ClusterCells{GeneratedAt: time.Now().UTC(), Chains: []iv1.Chain{}, Filter: iv1.Filter{VirtualCluster: vc, Node: node}}
	chains := map[string]int{}
	var tops []int
	for i := len(recs) - 1; i >= 0; i-- {
		if !keep[i] {
			continue
		}
		r := &recs[i]
		c := &cells[i]
		c.ID, c.CellType, c.Level, c.Address, c.Node, c.Health = ids[i], r.CellType(), r.Level(), r.Address(), r.Node(), r.Health
		c.VirtualCluster, c.PinnedCellID = r.VirtualCluster, r.PinnedCellID
		c.Leaves, c.UsedLeaves, c.FreeLeaves, c.BadLeaves = r.Leaves, r.Used, r.Free, r.Bad
		if r.Level() == 1 {
			idx := r.Index()
			c.Index = &idx
			c.State = r.State.String()
			c.Group, c.ReservingGroup = r.Group, r.Reserving
			if r.Group != "" {
				prio := r.Priority
				c.Priority = &prio
			}
		}
		for a, b := 0, len(c.Children)-1; a < b; a, b = a+1, b-1 {
			c.Children[a], c.Children[b] = c.Children[b], c.Children[a]
		}
		if r.Parent >= 0 {
			cells[r.Parent].Children = append(cells[r.Parent].Children, *c)
		} else {
			tops = append(tops, i)
		}
	}
	for k := len(tops) - 1; k >= 0; k-- {
		i := tops[k]
		r := &recs[i]
		ci, ok := chains[r.Chain()]
		if !ok {
			ci = len(out.Chains)
			chains[r.Chain()] = ci
			out.Chains = append(out.Chains, iv1.Chain{Name: r.Chain(), LeafCellType: r.LeafType(), Levels: chainLevels(recs, i)})
		}
		out.Chains[ci].Cells = append(out.Chains[ci].Cells, cells[i])
	}
	return out
}

// chainLevels names the cell type of each level of the chain whose top cell
// is recs[top], leaf first, from the records below it.
func chainLevels(recs []cellcore.CellRecord, top int) []string {
	levels := make([]string, recs[top].Level())
	for i := top; i < len(recs) && (i == top || recs[i].Parent >= 0); i++ {
		if l := recs[i].Level(); l >= 1 && l <= len(levels) && levels[l-1] == "" {
			levels[l-1] = recs[i].CellType()
		}
		if recs[i].Level() == 1 {
			break // the first leaf: every level above it was on the way down
		}
	}
	return levels
}

// virtualClusters describes the VCs the scheduler knows (one if name is set),
// from one copy of the whole tree: the physical cells bound to each VC (as
// wholes) and the cells it lends. (CellRecords of one VC sorts its cells
// under the core's lock: at 10,000 nodes four times the whole copy.)
func (s *Server) virtualClusters(name string) []iv1.VirtualCluster {
	infos := s.vcs.States(name)
	if len(infos) == 0 {
		return nil
	}
	type levelKey struct {
		vc, chain string
		level     int
	}
	bound := map[levelKey][]string{}
	pinnedAt := map[string]string{}
	recs, done := s.records("", "")
	use := virtualclusters.CountLeafUse(recs)
	ids := make([]string, len(recs)) // of binding roots' ancestors and themselves
	for i := range recs {
		r := &recs[i]
		if !r.BindingRoot {
			continue
		}
		if _, ok := infos[r.VirtualCluster]; !ok && r.PinnedCellID == "" {
			continue
		}
		cid := memoID(recs, ids, int32(i))
		if r.PinnedCellID != "" {
			pinnedAt[r.PinnedCellID] = cid
			continue
		}
		k := levelKey{r.VirtualCluster, r.Chain(), r.Level()}
		bound[k] = append(bound[k], cid)
	}
	done()

	names := make([]string, 0, len(infos))
	for n := range infos {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]iv1.VirtualCluster, 0, len(names))
	for _, n := range names {
		v := iv1.VirtualCluster{Name: n, State: infos[n], Cells: []iv1.VirtualCells{}, AffinityGroups: map[string]int{}}
		if st, ok := s.core.VirtualClusterStatus(n); ok {
			for _, c := range st.Cells {
				v.Cells = append(v.Cells, iv1.VirtualCells{Chain: c.Chain, CellType: c.CellType, Level: c.Level, Total: c.Total, Bound: c.Bound,
					Physical: bound[levelKey{n, c.Chain, c.Level}]})
			}
			for _, c := range st.PinnedCells {
				v.PinnedCells = append(v.PinnedCells, iv1.PinnedCell{ID: c.PinnedCellID, CellType: c.CellType, Physical: pinnedAt[c.PinnedCellID]})
			}
			v.LeafCells = leafCounts(st, virtualclusters.LeafBreakdown(st, use[n]))
			for s, k := range st.AffinityGroups {
				v.AffinityGroups[s.String()] = k
			}
		}
		out = append(out, v)
	}
	return out
}

// memoID is record i's cell ID, remembering those of its ancestors in ids.
func memoID(recs []cellcore.CellRecord, ids []string, i int32) string {
	if ids[i] == "" {
		if p := recs[i].Parent; p < 0 {
			ids[i] = recs[i].Chain() + "/" + recs[i].Address()
		} else {
			ids[i] = memoID(recs, ids, p) + "/" + recs[i].Address()
		}
	}
	return ids[i]
}

func leafCounts(st cellcore.VirtualClusterStatus, b virtualclusters.Breakdown) iv1.LeafCounts {
	return iv1.LeafCounts{Total: b.Total, Used: b.Used, Free: b.Free, Lent: b.Lent, Unavailable: b.Unavailable, Reserved: b.Reserved,
		Lost: st.LostLeafCells, Opportunistic: st.OpportunisticLeafCells}
}

// leafCounts counts every VC's leaf cells for the history, from one copy
// of the whole tree.
func (s *Server) leafCounts() map[string]iv1.LeafCounts {
	infos := s.vcs.States("")
	out := make(map[string]iv1.LeafCounts, len(infos))
	if len(infos) == 0 {
		return out
	}
	recs, done := s.records("", "")
	defer done()
	use := virtualclusters.CountLeafUse(recs)
	for n := range infos {
		if st, ok := s.core.VirtualClusterStatus(n); ok {
			out[n] = leafCounts(st, virtualclusters.LeafBreakdown(st, use[n]))
		}
	}
	return out
}

package inspect

import (
	"sort"
	"strings"
	"time"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

// leafCode is the one-letter code of a leaf cell in a CellMap (the
// letters of `kubectl hivesched cells`, and F and ? for what its text
// shows as health).
func leafCode(r *cellcore.CellRecord) byte {
	switch r.Health {
	case "bad", "maintenance", "retired", "unhealthy", "doomed":
		return 'X'
	}
	switch {
	case r.Reserving != "":
		return 'R'
	case r.Group != "" && r.Priority < 0:
		return 'o'
	case r.Group != "":
		return 'U'
	case r.Health == "foreign":
		return 'F'
	case r.Health != "good":
		return '?'
	case r.VirtualCluster != "":
		return '.'
	}
	return '_'
}

// cellMap builds the compact map of the physical tree from one CellRecords
// copy (outside the core's lock but for the copy, and for one group status
// per opportunistic group, to colour its cells by its VC).
func (s *Server) cellMap() iv1.CellMap {
	recs, done := s.records("", "")
	defer done()
	out := iv1.CellMap{GeneratedAt: time.Now().UTC(), VirtualClusters: []string{}, Chains: []iv1.MapChain{}}
	vcIndex := map[string]int{}
	for name := range s.vcs.States("") {
		vcIndex[name] = 0
	}
	for i := range recs {
		if vc := recs[i].VirtualCluster; vc != "" {
			vcIndex[vc] = 0
		}
	}
	names := make([]string, 0, len(vcIndex))
	for n := range vcIndex {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		vcIndex[n] = i
	}
	out.VirtualClusters = names
	vcOf := func(name string) int {
		if name == "" {
			return -1
		}
		i, ok := vcIndex[name]
		if !ok {
			i = len(out.VirtualClusters)
			vcIndex[name] = i
			out.VirtualClusters = append(out.VirtualClusters, name)
		}
		return i
	}
	groupVC := map[string]int{}
	ownerOf := func(group string) int {
		i, ok := groupVC[group]
		if !ok {
			i = -1
			if st, found := s.core.AffinityGroupStatus(group); found {
				i = vcOf(st.VirtualCluster)
			}
			groupVC[group] = i
		}
		return i
	}

	chains := map[string]int{}
	// Per record above node level: its index among the chain's Cells and
	// its ID (a node's is its parent's and its address).
	cellAt := make([]int, len(recs))
	cellID := make([]string, len(recs))
	var leaves []byte // the node's codes being written
	var ch *iv1.MapChain
	var node *iv1.MapNode
	pending := 0 // levels between node and leaf that began since the last leaf
	for i := range recs {
		r := &recs[i]
		if r.Parent < 0 {
			ci, ok := chains[r.Chain()]
			if !ok {
				ci = len(out.Chains)
				chains[r.Chain()] = ci
				out.Chains = append(out.Chains, iv1.MapChain{Name: r.Chain(), LeafCellType: r.LeafType(), Levels: chainLevels(recs, i),
					Cells: []iv1.MapCell{}, Nodes: []iv1.MapNode{}})
			}
			ch = &out.Chains[ci]
		}
		parentIsAbove := r.Parent < 0 || recs[r.Parent].Node() == ""
		switch {
		case r.Node() == "":
			parent := -1
			if r.Parent >= 0 {
				parent = cellAt[r.Parent]
			}
			cellAt[i] = len(ch.Cells)
			cellID[i] = childID(recs, cellID, i)
			vc := -1
			if r.BindingRoot {
				vc = vcOf(r.VirtualCluster)
			}
			ch.Cells = append(ch.Cells, iv1.MapCell{ID: cellID[i], Level: r.Level(), Address: r.Address(), Parent: parent, VC: vc})
		case parentIsAbove:
			parent := -1
			if r.Parent >= 0 {
				parent = cellAt[r.Parent]
			}
			if node != nil {
				node.Leaves = string(leaves)
			}
			ch.Nodes = append(ch.Nodes, iv1.MapNode{Name: r.Node(), ID: childID(recs, cellID, i), Parent: parent, Health: r.Health,
				VC: vcOf(r.VirtualCluster), Pinned: r.PinnedCellID, Owners: make([]int, 0, r.Leaves), Indices: make([]int32, 0, r.Leaves)})
			node = &ch.Nodes[len(ch.Nodes)-1]
			leaves, pending = leaves[:0], 0
			if r.Level() == 1 { // a node that is one leaf
				leaves = addLeaf(node, leaves, r, &pending, vcOf, ownerOf)
			}
		default:
			if r.Level() == 1 {
				leaves = addLeaf(node, leaves, r, &pending, vcOf, ownerOf)
			} else if len(node.Owners) > 0 {
				pending++
			}
		}
	}
	if node != nil {
		node.Leaves = string(leaves)
	}
	return out
}

// childID is record i's ID from its parent's (in ids, for records above
// node level).
func childID(recs []cellcore.CellRecord, ids []string, i int) string {
	r := &recs[i]
	if r.Parent < 0 {
		return r.Chain() + "/" + r.Address()
	}
	return ids[r.Parent] + "/" + r.Address()
}

func addLeaf(node *iv1.MapNode, leaves []byte, r *cellcore.CellRecord, pending *int, vcOf func(string) int, ownerOf func(string) int) []byte {
	code := leafCode(r)
	for ; *pending > 0; *pending-- {
		leaves = append(leaves, ' ')
	}
	leaves = append(leaves, code)
	owner := vcOf(r.VirtualCluster)
	switch code {
	case 'o':
		owner = ownerOf(r.Group)
	case 'U':
		if owner < 0 {
			owner = ownerOf(r.Group)
		}
	case 'R':
		if owner < 0 {
			owner = ownerOf(r.Reserving)
		}
	}
	node.Owners = append(node.Owners, owner)
	node.Indices = append(node.Indices, r.Index())
	return leaves
}

// id is record i's cell ID (chain/address/.../address), from its ancestors.
func id(recs []cellcore.CellRecord, i int) string {
	var parts []string
	for j := int32(i); j >= 0; j = recs[j].Parent {
		parts = append(parts, recs[j].Address())
	}
	parts = append(parts, recs[i].Chain())
	for a, b := 0, len(parts)-1; a < b; a, b = a+1, b-1 {
		parts[a], parts[b] = parts[b], parts[a]
	}
	return strings.Join(parts, "/")
}

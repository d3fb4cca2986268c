package cellcore

import (
	"fmt"
	"sort"
	"strings"
)

// Config is the physical cluster: cell types and physical cells. The JSON names
// are HiveD's, so a HiveD physicalCluster section can be used unchanged.
type Config struct {
	CellTypes     map[string]CellTypeSpec `json:"cellTypes"`
	PhysicalCells []PhysicalCellSpec      `json:"physicalCells"`
}

// CellTypeSpec defines a non-leaf cell type: it has ChildCellNumber children
// of type ChildCellType. A type that is named as a child but not defined is a
// leaf cell type (a device model, for example a GPU model).
type CellTypeSpec struct {
	ChildCellType   string `json:"childCellType"`
	ChildCellNumber int32  `json:"childCellNumber"`
	IsNodeLevel     bool   `json:"isNodeLevel,omitempty"`
	// TopologyKey optionally names this type's level by a node label key
	// (for example topology.kubernetes.io/rack): a group that asks for all
	// its pods within one domain of that key is placed under one cell of
	// this level (AffinityGroupSpec.WithinTopologyKey). The core treats it
	// as an opaque string. Within one chain a key names at most one level;
	// levels of several chains may share it.
	TopologyKey string `json:"topologyKey,omitempty"`
}

// PhysicalCellSpec lists one physical cell. At node level CellAddress is the
// Kubernetes node name; below node level it is the index of the cell among its
// siblings (for leaves, the device index in the node); above node level it is
// a free-form name. Children below node level may be omitted and are then
// generated with consecutive indices.
type PhysicalCellSpec struct {
	CellType     string             `json:"cellType"`
	CellAddress  string             `json:"cellAddress,omitempty"`
	PinnedCellID string             `json:"pinnedCellId,omitempty"`
	CellChildren []PhysicalCellSpec `json:"cellChildren,omitempty"`
}

// MaxLeafCellsPerCell bounds the size of a single top cell, to keep the
// per-level bucket indexes small.
const MaxLeafCellsPerCell = 1 << 20

// typeInfo is a validated cell type.
type typeInfo struct {
	name        string
	child       string
	childNum    int32
	nodeLevel   bool
	level       int // 1 for leaf types
	leafType    string
	leafCount   int32 // leaves under one cell of this type
	isLeaf      bool
	nodeBelowOk bool // the chain below this type (inclusive) has a node level
	topologyKey string
	// keyed: the type at or below this one (inclusive) that each topology
	// key names, to find a key named twice in one chain.
	keyed map[string]string
}

// resolveTypes validates the cell type forest: no cycle, known children,
// positive child numbers, at most one node level per chain.
func resolveTypes(types map[string]CellTypeSpec) (map[string]*typeInfo, error) {
	infos := map[string]*typeInfo{}
	names := make([]string, 0, len(types))
	for n := range types {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if n == "" {
			return nil, fmt.Errorf("cell type with an empty name")
		}
		if strings.Contains(n, ".") {
			return nil, fmt.Errorf("cell type %q: names must not contain '.' (it separates chain and type in virtual cell paths)", n)
		}
		s := types[n]
		if s.ChildCellType == "" {
			return nil, fmt.Errorf("cell type %q: childCellType is empty", n)
		}
		if strings.Contains(s.ChildCellType, ".") {
			return nil, fmt.Errorf("cell type %q: child type %q must not contain '.'", n, s.ChildCellType)
		}
		if s.ChildCellNumber <= 0 {
			return nil, fmt.Errorf("cell type %q: childCellNumber must be positive, got %d", n, s.ChildCellNumber)
		}
	}
	var visit func(n string, path []string) (*typeInfo, error)
	visit = func(n string, path []string) (*typeInfo, error) {
		if ti, ok := infos[n]; ok {
			return ti, nil
		}
		for _, p := range path {
			if p == n {
				return nil, fmt.Errorf("cell type %q: cycle %s", n, strings.Join(append(path, n), " -> "))
			}
		}
		s, ok := types[n]
		if !ok {
			// A leaf type: named as a child but not defined.
			ti := &typeInfo{name: n, level: 1, leafType: n, leafCount: 1, isLeaf: true}
			infos[n] = ti
			return ti, nil
		}
		child, err := visit(s.ChildCellType, append(path, n))
		if err != nil {
			return nil, err
		}
		if s.IsNodeLevel && child.nodeBelowOk {
			return nil, fmt.Errorf("cell type %q: marked node level, but its descendant type already is a node level", n)
		}
		lc := int64(child.leafCount) * int64(s.ChildCellNumber)
		if lc > MaxLeafCellsPerCell {
			return nil, fmt.Errorf("cell type %q: holds %d leaf cells, more than the supported %d", n, lc, MaxLeafCellsPerCell)
		}
		ti := &typeInfo{
			name: n, child: s.ChildCellType, childNum: s.ChildCellNumber, nodeLevel: s.IsNodeLevel,
			level: child.level + 1, leafType: child.leafType, leafCount: int32(lc),
			nodeBelowOk: s.IsNodeLevel || child.nodeBelowOk, topologyKey: s.TopologyKey, keyed: child.keyed,
		}
		if key := s.TopologyKey; key != "" {
			// A chain is a path from a top type down to a leaf: a key named
			// here and below would make "one cell of the key's level"
			// ambiguous in every chain through this type.
			if below, dup := child.keyed[key]; dup {
				return nil, fmt.Errorf("cell type %q: topologyKey %q already names its descendant type %q (a key names at most one level of a chain)", n, key, below)
			}
			ti.keyed = make(map[string]string, len(child.keyed)+1)
			for k, t := range child.keyed {
				ti.keyed[k] = t
			}
			ti.keyed[key] = n
		}
		infos[n] = ti
		return ti, nil
	}
	for _, n := range names {
		if _, err := visit(n, nil); err != nil {
			return nil, err
		}
	}
	return infos, nil
}

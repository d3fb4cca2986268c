// Package cellspec turns the API's specs into the cell core's: the physical
// cluster of the plugin args (Config), a VirtualCluster's cells and
// policies (VirtualCluster), and what the cell type hierarchy says of the
// cell type a pod asks for (CellTypes). The simulator reads its inputs
// through it too, so that it cannot drift from the scheduler.
package cellspec

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/apis/config"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

// HostnameTopologyKey is the key a node-level cell type answers to when the
// args name it by no other: a Workload PodGroup constrained to one
// kubernetes.io/hostname asks for one node.
const HostnameTopologyKey = "kubernetes.io/hostname"

// Config converts the plugin args' physical cluster to the cell core's Config.
func Config(pc config.PhysicalClusterSpec) cellcore.Config {
	cfg := cellcore.Config{CellTypes: map[string]cellcore.CellTypeSpec{}}
	for n, t := range pc.CellTypes {
		key := t.TopologyKey
		if key == "" && t.IsNodeLevel {
			key = HostnameTopologyKey
		}
		cfg.CellTypes[n] = cellcore.CellTypeSpec{ChildCellType: t.ChildCellType, ChildCellNumber: t.ChildCellNumber, IsNodeLevel: t.IsNodeLevel, TopologyKey: key}
	}
	var conv func(s config.PhysicalCellSpec) cellcore.PhysicalCellSpec
	conv = func(s config.PhysicalCellSpec) cellcore.PhysicalCellSpec {
		c := cellcore.PhysicalCellSpec{CellType: s.CellType, CellAddress: s.CellAddress, PinnedCellID: s.PinnedCellID}
		for _, ch := range s.CellChildren {
			c.CellChildren = append(c.CellChildren, conv(ch))
		}
		return c
	}
	for _, s := range pc.PhysicalCells {
		cfg.PhysicalCells = append(cfg.PhysicalCells, conv(s))
	}
	return cfg
}

// VirtualCluster is the cell core's view of a VirtualCluster.
func VirtualCluster(vc *hv1.VirtualCluster) cellcore.VirtualClusterSpec {
	s := cellcore.VirtualClusterSpec{Name: vc.Name}
	for _, c := range vc.Spec.VirtualCells {
		if c.CellNumber > 0 {
			s.VirtualCells = append(s.VirtualCells, cellcore.VirtualCellSpec{CellType: c.CellType, CellNumber: c.CellNumber})
		}
	}
	for _, c := range vc.Spec.PinnedCells {
		s.PinnedCells = append(s.PinnedCells, cellcore.PinnedCellSpec{PinnedCellID: c.PinnedCellID})
	}
	s.Sequencer = cellcore.Sequencer(vc.Spec.Sequencer)
	s.Selector = cellcore.Selector(vc.Spec.Selector)
	for _, l := range vc.Spec.Limits {
		if s.Limits == nil {
			s.Limits = map[string]cellcore.NamespaceLimits{}
		}
		s.Limits[l.Namespace] = cellcore.NamespaceLimits{MaxLeafCells: l.MaxLeafCells, MaxRunningGroups: l.MaxRunningGroups,
			MaxGroupLeafCells: l.MaxGroupLeafCells, MaxPriority: l.MaxPriority}
	}
	return s
}

// CellTypes is what the physical cluster's cell type hierarchy says of the
// cell types pods and configurations name.
type CellTypes struct {
	// nonLeaf maps every cell type that is not a leaf cell type to its
	// size in leaf cells.
	nonLeaf map[string]leafCount
}

// leafCount is a cell type's size: Leaves cells of leaf cell type Leaf.
type leafCount struct {
	Leaf   string
	Leaves int32
}

// NewCellTypes reads the hierarchy of pc, which the cell core has
// validated (no cycles).
func NewCellTypes(pc config.PhysicalClusterSpec) CellTypes {
	out := map[string]leafCount{}
	var size func(t string, depth int) leafCount
	size = func(t string, depth int) leafCount {
		ct, ok := pc.CellTypes[t]
		if !ok || depth > len(pc.CellTypes) {
			return leafCount{Leaf: t, Leaves: 1}
		}
		if c, ok := out[t]; ok {
			return c
		}
		c := size(ct.ChildCellType, depth+1)
		c.Leaves *= ct.ChildCellNumber
		out[t] = c
		return c
	}
	for t := range pc.CellTypes {
		size(t, 0)
	}
	return CellTypes{nonLeaf: out}
}

// CheckLeafCellType refuses a request for a cell type that is not a leaf
// cell type (HiveD v2 lets a pod ask for whole cells such as a node): the
// core counts a pod's cells in leaf cells and would only say the type is
// unknown.
func (t CellTypes) CheckLeafCellType(cellType string) error {
	c, ok := t.nonLeaf[cellType]
	if !ok {
		return nil
	}
	return fmt.Errorf("cell type %q is not a leaf cell type (one %s is %d %s): ask for leaf cell type %s and count the pod's cells in %s (HiveD: leafCellType, or cellType in version v2)",
		cellType, cellType, c.Leaves, c.Leaf, c.Leaf, c.Leaf)
}

// WarnSkuTypes logs the skuTypes (HiveD's section, accepted and not used)
// whose name is not a leaf cell type: most likely a typo in a HiveD config.
func (t CellTypes) WarnSkuTypes(logger klog.Logger, pc config.PhysicalClusterSpec) {
	leaves := sets.New[string]()
	for _, c := range t.nonLeaf {
		leaves.Insert(c.Leaf)
	}
	for name := range pc.SkuTypes {
		if !leaves.Has(name) {
			logger.Info("physicalCluster.skuTypes names a type that is not a leaf cell type (skuTypes is accepted as in HiveD and not used for scheduling)",
				"skuType", name, "leafCellTypes", sets.List(leaves))
		}
	}
}

// Package slicetopology derives the physical cluster (the cell hierarchy of
// HiveSchedArgs.PhysicalCluster) from the Nodes and the ResourceSlices of
// the GPU driver, for physicalClusterFrom: ResourceSlices (docs/dra.md,
// "Topology from ResourceSlices"). It is plain Go over API objects: the
// plugin lists or watches them and hands them in.
//
// The hierarchy, bottom up:
//
//   - leaf cells: the node's devices that plugins/dra counts as leaf cells
//     (dra.LeafIndex: whole GPUs, gpu-<minor>), in complete pools only;
//     the leaf cell type is the devices' productName;
//   - PCIe root: the node's leaves grouped by the pcieRoot attribute, when
//     every leaf has one and every root holds as many leaves (a HiveD cell
//     type has one child count), and there are at least two roots;
//   - node;
//   - one level per node label key of Options.NodeGroupLabels, inner to
//     outer: the cells below grouped by the label's value.
//
// Type names (Name documents the rule): a type is named after its child
// type, the level and the child count, so one name always means one shape
// and the names are known before the cluster is: 8 V100 in two PCIe roots
// of 4 make Tesla-V100-SXM2-32GB-pcie4-node2, and a rack of four of them
// Tesla-V100-SXM2-32GB-pcie4-node2-rack4.
package slicetopology

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/hivesched/hivesched/apis/config"
	"github.com/hivesched/hivesched/apis/config/validation"
	"github.com/hivesched/hivesched/plugins/dra"
)

// The attributes read, as NVIDIA's gpu-kubelet-plugin publishes them
// (cmd/gpu-kubelet-plugin/deviceinfo.go; docs/dra.md cites the lines).
const (
	// PCIeRootAttribute is the standard attribute of the PCIe root complex
	// a device hangs off (KEP 4381's resource.kubernetes.io/pcieRoot, also
	// what DRA's own topology matching of NICs and GPUs uses).
	PCIeRootAttribute = "resource.kubernetes.io/pcieRoot"
	// pcieRootShort is the same attribute in the driver's own domain, for
	// a driver that publishes it there (read when the standard one is
	// absent).
	pcieRootShort = "pcieRoot"
	// ProductAttribute is the device's model (NVML's product name, e.g.
	// "Tesla V100-SXM2-32GB"), in the driver's domain.
	ProductAttribute = "productName"
)

// Level names of the two levels that do not come from a label.
const (
	pcieLevel = "pcie"
	nodeLevel = "node"
)

// Options say which driver's slices and which node labels make the
// hierarchy.
type Options struct {
	// Driver is the DRA driver of the GPUs (HiveSchedArgs.DRA.Driver).
	Driver string
	// NodeGroupLabels are node label keys, inner level first (e.g. an
	// NVLink clique label, then topology.kubernetes.io/rack): each is one
	// level above the node, named LevelName(key).
	NodeGroupLabels []string
	// NodeGroupSizes are the cells a complete group of a label holds
	// (NVL72: 18 trays): a smaller group is padded with absent nodes
	// (Result.Absent), so that its cell is of the complete type; a larger
	// one is not grouped at that level.
	NodeGroupSizes map[string]int32
}

// Skipped is a node whose GPUs are not in the topology, and why.
type Skipped struct {
	Node   string
	Reason string
}

// Result is a derived physical cluster.
type Result struct {
	// PhysicalCluster is the cell hierarchy, in the form of the args'
	// physicalCluster (empty when no node qualifies). Cells are in a fixed
	// order (top cells by type then address, children by address), so
	// the same inputs give an equal value.
	PhysicalCluster config.PhysicalClusterSpec
	// Nodes are the nodes in it, sorted.
	Nodes []string
	// Skipped are the nodes with slices of the driver that are not in it,
	// and why, sorted by node.
	Skipped []Skipped
	// Ungrouped lists nodes that miss a group label (or whose cell's nodes
	// disagree on it): they are in the topology, one level lower than
	// their neighbours. Informational, sorted.
	Ungrouped []Skipped
	// Absent are the node-level cells that pad a group short of its
	// NodeGroupSizes (named AbsentNodeName): nodes that do not exist,
	// which the plugin counts as lost capacity. Sorted.
	Absent []string
}

// AbsentNodeName names the i-th absent node that pads the group of a label
// key whose value is value (i counts from the group's present size). It
// carries the level and the group, so that a VC's doomed cells and the log
// say which domain is short: "absent-17.clique.<value>" (a value longer
// than a node name allows is cut). The plugin never sees a Node of that
// name: were one created, it would be a node of the cluster like any other
// at the next derivation, and the padding would take the next free index.
func AbsentNodeName(level, value string, i int) string {
	n := "absent-" + strconv.Itoa(i) + "." + level + "." + strings.ToLower(value)
	if len(n) > 253 {
		n = strings.TrimRight(n[:253], ".-")
	}
	return n
}

// LevelName is the name a node label key gives its level in type names:
// the key's name part after its last '.' (topology.kubernetes.io/rack:
// rack; nvidia.com/gpu.clique: clique). The args' validation refuses two
// keys of one level name.
func LevelName(labelKey string) string { return validation.LevelName(labelKey) }

// LeafType is the leaf cell type of a productName: every character other
// than a letter, digit, '-' or '_' becomes '-' (as GPU Feature Discovery's
// nvidia.com/gpu.product label writes a space), leading and trailing '-'
// and '_' are dropped, and the result is cut to 63 characters, so that it
// is a valid label value for hivesched.io/leaf-cell-type and has no '.'
// (which separates chain and type in a VC's cell types). "" when nothing
// is left.
func LeafType(product string) string {
	b := []byte(product)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '-'
		}
	}
	s := strings.Trim(string(b), "-_")
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "-_")
	}
	return s
}

// Name is the type of a cell of level whose count children are of type
// child: "<child>-<level><count>".
func Name(child, level string, count int) string {
	return child + "-" + level + strconv.Itoa(count)
}

// cell is a cell being built: its spec and, for grouping, the label values
// all its nodes share.
type cell struct {
	spec  config.PhysicalCellSpec
	nodes []*v1.Node
	// leaves, for the leaf type's node-count check.
	leafType string
}

// Build derives the physical cluster from the Nodes and the
// ResourceSlices (of any driver: only opts.Driver's node-local slices
// count, as in plugins/dra).
func Build(opts Options, nodes []*v1.Node, slices []*resourceapi.ResourceSlice) (Result, error) {
	var res Result
	idx := dra.NewSlices(opts.Driver)
	for _, s := range slices {
		idx.Update(s, false)
	}
	byName := make(map[string]*v1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	types := map[string]config.CellTypeSpec{}
	leafTypes := map[string]bool{}
	var cells []*cell

	// Nodes without a slice of the driver are not GPU nodes: not listed.
	for _, name := range idx.NodeNames() {
		node := byName[name]
		if node == nil {
			res.Skipped = append(res.Skipped, Skipped{name, "its ResourceSlices name a node that does not exist (no Node object: its labels are unknown)"})
			continue
		}
		c, reason := nodeCell(idx, opts.Driver, node, types)
		if c == nil {
			res.Skipped = append(res.Skipped, Skipped{name, reason})
			continue
		}
		leafTypes[c.leafType] = true
		res.Nodes = append(res.Nodes, name)
		cells = append(cells, c)
	}

	for _, key := range opts.NodeGroupLabels {
		cells = group(cells, key, LevelName(key), opts.NodeGroupSizes[key], byName, types, &res)
	}

	for t := range types {
		if leafTypes[t] {
			return Result{}, fmt.Errorf("productName gives leaf cell type %q, which is also the name of a derived cell type: rename a node group label or the product", t)
		}
	}
	sortCells(cells)
	for _, c := range cells {
		res.PhysicalCluster.PhysicalCells = append(res.PhysicalCluster.PhysicalCells, c.spec)
	}
	if len(types) > 0 {
		res.PhysicalCluster.CellTypes = types
	}
	sort.Strings(res.Absent)
	sort.Slice(res.Skipped, func(i, j int) bool { return res.Skipped[i].Node < res.Skipped[j].Node })
	sort.Slice(res.Ungrouped, func(i, j int) bool {
		if res.Ungrouped[i].Node != res.Ungrouped[j].Node {
			return res.Ungrouped[i].Node < res.Ungrouped[j].Node
		}
		return res.Ungrouped[i].Reason < res.Ungrouped[j].Reason
	})
	return res, nil
}

// attr reads a string attribute by any of its names (an unqualified name
// is in the driver's domain, so "<driver>/<name>" is the same attribute).
func attr(d *resourceapi.Device, driver string, names ...string) (string, bool) {
	for _, n := range names {
		for _, k := range []string{n, driver + "/" + n} {
			if a, ok := d.Attributes[resourceapi.QualifiedName(k)]; ok && a.StringValue != nil {
				return *a.StringValue, true
			}
		}
	}
	return "", false
}

// nodeCell is the node-level cell of a node, or nil and why not.
func nodeCell(idx *dra.Slices, driver string, node *v1.Node, types map[string]config.CellTypeSpec) (*cell, string) {
	has, complete := idx.HasDevices(node.Name)
	switch {
	case !has:
		return nil, "no ResourceSlice of driver " + driver
	case !complete:
		return nil, "its ResourceSlices of driver " + driver + " are incomplete (not every slice of the pool's newest generation is seen): it joins once they are"
	}
	leaves := idx.Devices(node.Name)
	if len(leaves) == 0 {
		return nil, "its ResourceSlices of driver " + driver + " have no whole-GPU device (name gpu-<N>, type gpu)"
	}
	// The device objects, to read their attributes.
	devs := map[int32]*resourceapi.Device{}
	for _, s := range idx.NodeSlices(node.Name) {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if ix, ok := dra.LeafIndex(d); ok {
				if l, ok := leaves[ix]; ok && l.Pool == s.Spec.Pool.Name && l.Name == d.Name && devs[ix] == nil {
					devs[ix] = d
				}
			}
		}
	}
	indices := make([]int32, 0, len(devs))
	for ix := range devs {
		indices = append(indices, ix)
	}
	sort.Slice(indices, func(i, j int) bool { return indices[i] < indices[j] })

	product := ""
	for _, ix := range indices {
		p, ok := attr(devs[ix], driver, ProductAttribute)
		if !ok || LeafType(p) == "" {
			return nil, fmt.Sprintf("device %s has no %s attribute: its leaf cell type is unknown", devs[ix].Name, ProductAttribute)
		}
		if product == "" {
			product = p
		} else if LeafType(p) != LeafType(product) {
			return nil, fmt.Sprintf("its devices are of two products (%q, %q): a node holds leaf cells of one type", product, p)
		}
	}
	leaf := LeafType(product)

	// PCIe roots, in the order of their lowest device index.
	var roots []string
	byRoot := map[string][]int32{}
	for _, ix := range indices {
		r, ok := attr(devs[ix], driver, PCIeRootAttribute, pcieRootShort)
		if !ok || r == "" {
			roots = nil
			break
		}
		if _, seen := byRoot[r]; !seen {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], ix)
	}
	even := len(roots) >= 2
	for _, r := range roots {
		even = even && len(byRoot[r]) == len(byRoot[roots[0]])
	}

	spec := config.PhysicalCellSpec{CellAddress: node.Name}
	// The cells below the node are listed only when the cell core's
	// defaults (consecutive indices from 0, in order) would not give the
	// same ones: a hand-written physicalCluster lists nodes only.
	consecutive := true
	var order []int32
	if even {
		for _, r := range roots {
			order = append(order, byRoot[r]...)
		}
	} else {
		order = indices
	}
	for i, ix := range order {
		consecutive = consecutive && ix == int32(i)
	}
	if even {
		g := len(byRoot[roots[0]])
		pcie := Name(leaf, pcieLevel, g)
		types[pcie] = config.CellTypeSpec{ChildCellType: leaf, ChildCellNumber: int32(g)}
		spec.CellType = Name(pcie, nodeLevel, len(roots))
		types[spec.CellType] = config.CellTypeSpec{ChildCellType: pcie, ChildCellNumber: int32(len(roots)), IsNodeLevel: true}
		if !consecutive {
			for i, r := range roots {
				rc := config.PhysicalCellSpec{CellAddress: strconv.Itoa(i)}
				for _, ix := range byRoot[r] {
					rc.CellChildren = append(rc.CellChildren, config.PhysicalCellSpec{CellAddress: strconv.Itoa(int(ix))})
				}
				spec.CellChildren = append(spec.CellChildren, rc)
			}
		}
	} else {
		spec.CellType = Name(leaf, nodeLevel, len(indices))
		types[spec.CellType] = config.CellTypeSpec{ChildCellType: leaf, ChildCellNumber: int32(len(indices)), IsNodeLevel: true}
		if !consecutive {
			for _, ix := range indices {
				spec.CellChildren = append(spec.CellChildren, config.PhysicalCellSpec{CellAddress: strconv.Itoa(int(ix))})
			}
		}
	}
	return &cell{spec: spec, nodes: []*v1.Node{node}, leafType: leaf}, ""
}

// group makes one level: the cells whose nodes all carry the same value of
// key, and are of one type, become the children of one cell. The others
// stay as they are, one level lower than their neighbours. With size (the
// complete group's cell count), a smaller group is padded with absent
// copies of its first cell (absentCell) and a larger one is not grouped.
func group(cells []*cell, key, level string, size int32, present map[string]*v1.Node, types map[string]config.CellTypeSpec, res *Result) []*cell {
	type groupKey struct{ value, childType string }
	groups := map[groupKey][]*cell{}
	var out []*cell
	for _, c := range cells {
		value, why := commonLabel(c.nodes, key)
		if why != "" {
			for _, n := range c.nodes {
				res.Ungrouped = append(res.Ungrouped, Skipped{n.Name, fmt.Sprintf("not grouped by %s: %s", key, why)})
			}
			out = append(out, c)
			continue
		}
		k := groupKey{value, c.spec.CellType}
		groups[k] = append(groups[k], c)
	}
	for k, kids := range groups {
		sortCells(kids)
		if size > 0 && int32(len(kids)) > size {
			for _, kid := range kids {
				for _, n := range kid.nodes {
					res.Ungrouped = append(res.Ungrouped, Skipped{n.Name, fmt.Sprintf("not grouped by %s: its group %s has %d cells of type %s, more than nodeGroupSizes gives (%d)",
						key, k.value, len(kids), k.childType, size)})
				}
			}
			out = append(out, kids...)
			continue
		}
		n := len(kids)
		if size > 0 {
			n = int(size)
		}
		t := Name(k.childType, level, n)
		types[t] = config.CellTypeSpec{ChildCellType: k.childType, ChildCellNumber: int32(n), TopologyKey: key}
		g := &cell{spec: config.PhysicalCellSpec{CellType: t, CellAddress: k.value}, leafType: kids[0].leafType}
		for i := len(kids); len(kids) < n; i++ {
			name := AbsentNodeName(level, k.value, i)
			if present[name] != nil {
				continue // a Node of that name exists: the next index
			}
			kid, absent := absentCell(kids[0], name)
			kids = append(kids, kid)
			res.Absent = append(res.Absent, absent...)
		}
		for _, kid := range kids {
			ks := kid.spec
			// A child's type is its parent's child type: written once, as
			// a hand-written physicalCluster does.
			ks.CellType = ""
			g.spec.CellChildren = append(g.spec.CellChildren, ks)
			g.nodes = append(g.nodes, kid.nodes...)
		}
		out = append(out, g)
	}
	return out
}

// absentCell is a copy of like, of the same shape, whose nodes are absent:
// named name when like is a node, name-<i> for its i-th node when it is
// above node level. It returns the absent nodes' names.
func absentCell(like *cell, name string) (*cell, []string) {
	c := &cell{spec: like.spec, leafType: like.leafType}
	c.spec.CellAddress = name
	if len(like.nodes) == 1 && like.spec.CellAddress == like.nodes[0].Name {
		return c, []string{name} // a node: its children are devices
	}
	isNode := map[string]bool{}
	for _, n := range like.nodes {
		isNode[n.Name] = true
	}
	var names []string
	var rename func(in []config.PhysicalCellSpec) []config.PhysicalCellSpec
	rename = func(in []config.PhysicalCellSpec) []config.PhysicalCellSpec {
		out := make([]config.PhysicalCellSpec, len(in))
		for j, ch := range in {
			out[j] = ch
			if isNode[ch.CellAddress] {
				out[j].CellAddress = name + "-" + strconv.Itoa(len(names))
				names = append(names, out[j].CellAddress)
				continue
			}
			out[j].CellChildren = rename(ch.CellChildren)
		}
		return out
	}
	c.spec.CellChildren = rename(like.spec.CellChildren)
	return c, names
}

// commonLabel is the value of key on every node, or why there is none.
func commonLabel(nodes []*v1.Node, key string) (string, string) {
	value := ""
	for i, n := range nodes {
		v, ok := n.Labels[key]
		if !ok || v == "" {
			return "", "node " + n.Name + " has no label " + key
		}
		if i > 0 && v != value {
			return "", fmt.Sprintf("its cell's nodes disagree on it (%s, %s)", value, v)
		}
		value = v
	}
	return value, ""
}

// sortCells orders cells by type, then address.
func sortCells(cells []*cell) {
	sort.Slice(cells, func(i, j int) bool {
		a, b := cells[i].spec, cells[j].spec
		if a.CellType != b.CellType {
			return a.CellType < b.CellType
		}
		return a.CellAddress < b.CellAddress
	})
}

package slicetopology

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"

	"github.com/hivesched/hivesched/apis/config"
	"github.com/hivesched/hivesched/apis/config/scheme"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/dra/dratest"
)

const (
	rackKey   = "topology.kubernetes.io/rack"
	cliqueKey = "nvidia.com/gpu.clique"
	v100      = "Tesla V100-SXM2-32GB"
	t4        = "Tesla T4"
)

func node(name string, labels ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	for i := 0; i+1 < len(labels); i += 2 {
		n.Labels[labels[i]] = labels[i+1]
	}
	return n
}

func opts(labels ...string) Options {
	return Options{Driver: dratest.Driver, NodeGroupLabels: labels}
}

// localCluster is make up's cluster (hack/local-up.sh, test/fakedra): racks
// a and b of four 8-GPU V100 nodes, two 4-GPU T4 nodes, the V100 nodes
// labelled with their rack, and the slices the fake driver publishes
// (dratest.Slice: NVIDIA's shape, two PCIe roots).
func localCluster() ([]*v1.Node, []*resourceapi.ResourceSlice) {
	var nodes []*v1.Node
	var slices []*resourceapi.ResourceSlice
	for _, r := range []string{"a", "b"} {
		for i := 0; i < 4; i++ {
			n := fmt.Sprintf("gpu-%s%d", r, i)
			nodes = append(nodes, node(n, rackKey, "rack-"+r))
			slices = append(slices, dratest.Slice(n, v100, 8))
		}
	}
	for i := 0; i < 2; i++ {
		n := fmt.Sprintf("t4-%d", i)
		nodes = append(nodes, node(n))
		slices = append(slices, dratest.Slice(n, t4, 4))
	}
	nodes = append(nodes, node("cpu-0")) // no GPUs: not a GPU node
	return nodes, slices
}

// handWritten is the physicalCluster an operator writes for the local
// cluster with the derived type names, decoded as kube-scheduler decodes
// its configuration.
const handWritten = `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: hivesched
  plugins:
    multiPoint:
      enabled:
      - name: HiveSched
  pluginConfig:
  - name: HiveSched
    args:
      physicalCluster:
        cellTypes:
          Tesla-V100-SXM2-32GB-pcie4: {childCellType: Tesla-V100-SXM2-32GB, childCellNumber: 4}
          Tesla-V100-SXM2-32GB-pcie4-node2: {childCellType: Tesla-V100-SXM2-32GB-pcie4, childCellNumber: 2, isNodeLevel: true}
          Tesla-V100-SXM2-32GB-pcie4-node2-rack4: {childCellType: Tesla-V100-SXM2-32GB-pcie4-node2, childCellNumber: 4, topologyKey: topology.kubernetes.io/rack}
          Tesla-T4-pcie2: {childCellType: Tesla-T4, childCellNumber: 2}
          Tesla-T4-pcie2-node2: {childCellType: Tesla-T4-pcie2, childCellNumber: 2, isNodeLevel: true}
        physicalCells:
        - cellType: Tesla-T4-pcie2-node2
          cellAddress: t4-0
        - cellType: Tesla-T4-pcie2-node2
          cellAddress: t4-1
        - cellType: Tesla-V100-SXM2-32GB-pcie4-node2-rack4
          cellAddress: rack-a
          cellChildren:
          - cellAddress: gpu-a0
          - cellAddress: gpu-a1
          - cellAddress: gpu-a2
          - cellAddress: gpu-a3
        - cellType: Tesla-V100-SXM2-32GB-pcie4-node2-rack4
          cellAddress: rack-b
          cellChildren:
          - cellAddress: gpu-b0
          - cellAddress: gpu-b1
          - cellAddress: gpu-b2
          - cellAddress: gpu-b3
`

func decodeArgs(t *testing.T, data string) *config.HiveSchedArgs {
	t.Helper()
	obj, _, err := scheme.Codecs.UniversalDecoder().Decode([]byte(data), nil, nil)
	require.NoError(t, err)
	cfg := obj.(*schedconfig.KubeSchedulerConfiguration)
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name == config.PluginName {
			return pc.Args.(*config.HiveSchedArgs)
		}
	}
	t.Fatal("no HiveSched args")
	return nil
}

// TestLocalClusterEqualsHandWritten: the slices of the local cluster give
// exactly the physicalCluster an operator would write for it, so every
// guarantee shown for written configs holds for the derived one.
func TestLocalClusterEqualsHandWritten(t *testing.T) {
	nodes, slices := localCluster()
	res, err := Build(opts(rackKey), nodes, slices)
	require.NoError(t, err)
	require.Empty(t, res.Skipped)
	require.Equal(t, []Skipped{{"t4-0", "not grouped by topology.kubernetes.io/rack: node t4-0 has no label topology.kubernetes.io/rack"},
		{"t4-1", "not grouped by topology.kubernetes.io/rack: node t4-1 has no label topology.kubernetes.io/rack"}}, res.Ungrouped)
	require.Equal(t, []string{"gpu-a0", "gpu-a1", "gpu-a2", "gpu-a3", "gpu-b0", "gpu-b1", "gpu-b2", "gpu-b3", "t4-0", "t4-1"}, res.Nodes)
	want := decodeArgs(t, handWritten).PhysicalCluster
	require.Equal(t, want, res.PhysicalCluster)

	// The same inputs in another order give the same config.
	r := rand.New(rand.NewSource(1))
	r.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	r.Shuffle(len(slices), func(i, j int) { slices[i], slices[j] = slices[j], slices[i] })
	again, err := Build(opts(rackKey), nodes, slices)
	require.NoError(t, err)
	require.Equal(t, res, again)

	// The cell core takes it, and the leaves are the devices' indices.
	core, err := cellcore.New(cellspec.Config(res.PhysicalCluster))
	require.NoError(t, err)
	require.NoError(t, core.CheckInvariants())
	ct := cellspec.NewCellTypes(res.PhysicalCluster)
	require.NoError(t, ct.CheckLeafCellType("Tesla-V100-SXM2-32GB"))
	require.Error(t, ct.CheckLeafCellType("Tesla-V100-SXM2-32GB-pcie4-node2"))
}

// TestMissingPCIeRoot: without the attribute on every leaf, or with roots
// of different sizes, a node has no PCIe level; a single root is no level
// either.
func TestMissingPCIeRoot(t *testing.T) {
	noRoot := dratest.Slice("n0", v100, 8)
	delete(noRoot.Spec.Devices[3].Attributes, PCIeRootAttribute)
	oneRoot := dratest.Slice("n1", v100, 8)
	for i := range oneRoot.Spec.Devices {
		oneRoot.Spec.Devices[i].Attributes[PCIeRootAttribute] = resourceapi.DeviceAttribute{StringValue: ptr.To("pci0000:00")}
	}
	uneven := dratest.Slice("n2", v100, 8)
	uneven.Spec.Devices = uneven.Spec.Devices[:7] // gpu-7 gone: roots of 4 and 3
	res, err := Build(opts(), []*v1.Node{node("n0"), node("n1"), node("n2")}, []*resourceapi.ResourceSlice{noRoot, oneRoot, uneven})
	require.NoError(t, err)
	require.Empty(t, res.Skipped)
	require.Equal(t, map[string]config.CellTypeSpec{
		"Tesla-V100-SXM2-32GB-node8": {ChildCellType: "Tesla-V100-SXM2-32GB", ChildCellNumber: 8, IsNodeLevel: true},
		"Tesla-V100-SXM2-32GB-node7": {ChildCellType: "Tesla-V100-SXM2-32GB", ChildCellNumber: 7, IsNodeLevel: true},
	}, res.PhysicalCluster.CellTypes)
	require.Equal(t, []config.PhysicalCellSpec{
		{CellType: "Tesla-V100-SXM2-32GB-node7", CellAddress: "n2"},
		{CellType: "Tesla-V100-SXM2-32GB-node8", CellAddress: "n0"},
		{CellType: "Tesla-V100-SXM2-32GB-node8", CellAddress: "n1"},
	}, res.PhysicalCluster.PhysicalCells)

	// The driver's own pcieRoot counts when the standard one is absent.
	own := dratest.Slice("n3", v100, 8)
	for i := range own.Spec.Devices {
		d := &own.Spec.Devices[i]
		d.Attributes["pcieRoot"] = d.Attributes[PCIeRootAttribute]
		delete(d.Attributes, PCIeRootAttribute)
	}
	res, err = Build(opts(), []*v1.Node{node("n3")}, []*resourceapi.ResourceSlice{own})
	require.NoError(t, err)
	require.Equal(t, "Tesla-V100-SXM2-32GB-pcie4-node2", res.PhysicalCluster.PhysicalCells[0].CellType)
}

// TestLeavesNotFromZero: a node whose leaves are not 0..n-1 in root order
// lists its cells below node level, so the core's leaf indices are the
// devices' numbers.
func TestLeavesNotFromZero(t *testing.T) {
	s := dratest.Slice("n0", v100, 8)
	s.Spec.Devices = append(s.Spec.Devices[:2], s.Spec.Devices[3:]...) // gpu-2 gone
	s2 := dratest.Slice("n1", v100, 8)
	// Roots crosswise: even GPUs on one root, odd on the other.
	for i := range s2.Spec.Devices {
		root := []string{"pci0000:17", "pci0000:85"}[i%2]
		s2.Spec.Devices[i].Attributes[PCIeRootAttribute] = resourceapi.DeviceAttribute{StringValue: ptr.To(root)}
	}
	res, err := Build(opts(), []*v1.Node{node("n0"), node("n1")}, []*resourceapi.ResourceSlice{s, s2})
	require.NoError(t, err)
	leaves := func(ix ...string) []config.PhysicalCellSpec {
		var out []config.PhysicalCellSpec
		for _, i := range ix {
			out = append(out, config.PhysicalCellSpec{CellAddress: i})
		}
		return out
	}
	require.Equal(t, []config.PhysicalCellSpec{
		{CellType: "Tesla-V100-SXM2-32GB-node7", CellAddress: "n0", CellChildren: leaves("0", "1", "3", "4", "5", "6", "7")},
		{CellType: "Tesla-V100-SXM2-32GB-pcie4-node2", CellAddress: "n1", CellChildren: []config.PhysicalCellSpec{
			{CellAddress: "0", CellChildren: leaves("0", "2", "4", "6")},
			{CellAddress: "1", CellChildren: leaves("1", "3", "5", "7")},
		}},
	}, res.PhysicalCluster.PhysicalCells)
	_, err = cellcore.New(cellspec.Config(res.PhysicalCluster))
	require.NoError(t, err)
}

// TestNodesLeftOut: what keeps a node out of the topology, and says why.
func TestNodesLeftOut(t *testing.T) {
	noProduct := dratest.Slice("no-product", v100, 8)
	delete(noProduct.Spec.Devices[5].Attributes, ProductAttribute)
	twoProducts := dratest.Slice("two-products", v100, 8)
	twoProducts.Spec.Devices[7].Attributes[ProductAttribute] = resourceapi.DeviceAttribute{StringValue: ptr.To("NVIDIA A100-SXM4-80GB")}
	incomplete := dratest.Slice("incomplete", v100, 8)
	incomplete.Spec.Pool.ResourceSliceCount = 2
	onlyMIG := dratest.Slice("only-mig", v100, 2)
	for i := range onlyMIG.Spec.Devices {
		onlyMIG.Spec.Devices[i].Name = fmt.Sprintf("gpu-%d-mig-1g5gb-0-%d", i, i)
		onlyMIG.Spec.Devices[i].Attributes["type"] = resourceapi.DeviceAttribute{StringValue: ptr.To("mig")}
	}
	noNode := dratest.Slice("no-node", v100, 8)
	other := dratest.Slice("other-driver", v100, 8)
	other.Spec.Driver = "gpu.example.com"
	good := dratest.Slice("good", v100, 8)
	// A MIG device beside whole GPUs is not a leaf.
	mig := good.Spec.Devices[0].DeepCopy()
	mig.Name = "gpu-0-mig-1g5gb-0-0"
	mig.Attributes["type"] = resourceapi.DeviceAttribute{StringValue: ptr.To("mig")}
	good.Spec.Devices = append(good.Spec.Devices, *mig)

	nodes := []*v1.Node{node("no-product"), node("two-products"), node("incomplete"), node("only-mig"), node("other-driver"), node("good")}
	res, err := Build(opts(), nodes, []*resourceapi.ResourceSlice{noProduct, twoProducts, incomplete, onlyMIG, noNode, other, good})
	require.NoError(t, err)
	require.Equal(t, []string{"good"}, res.Nodes)
	require.Equal(t, []Skipped{
		{"incomplete", "its ResourceSlices of driver gpu.nvidia.com are incomplete (not every slice of the pool's newest generation is seen): it joins once they are"},
		{"no-node", "its ResourceSlices name a node that does not exist (no Node object: its labels are unknown)"},
		{"no-product", "device gpu-5 has no productName attribute: its leaf cell type is unknown"},
		{"only-mig", "its ResourceSlices of driver gpu.nvidia.com have no whole-GPU device (name gpu-<N>, type gpu)"},
		{"two-products", `its devices are of two products ("Tesla V100-SXM2-32GB", "NVIDIA A100-SXM4-80GB"): a node holds leaf cells of one type`},
	}, res.Skipped)

	// Nothing qualifies: an empty cluster, which the plugin refuses to
	// start with (the args' validation wants cells).
	res, err = Build(opts(), nil, []*resourceapi.ResourceSlice{incomplete})
	require.NoError(t, err)
	require.Empty(t, res.PhysicalCluster.PhysicalCells)
	require.Nil(t, res.PhysicalCluster.CellTypes)
}

// TestNodeGroupLevels: an NVLink clique level inside racks. A node without
// the clique label stays a node of its rack, in a rack cell of its own
// type; a clique whose nodes are in two racks is not grouped by rack.
func TestNodeGroupLevels(t *testing.T) {
	var nodes []*v1.Node
	var slices []*resourceapi.ResourceSlice
	add := func(name string, labels ...string) {
		nodes = append(nodes, node(name, labels...))
		slices = append(slices, dratest.Slice(name, v100, 8))
	}
	for i := 0; i < 4; i++ {
		add(fmt.Sprintf("r1-n%d", i), rackKey, "r1", cliqueKey, fmt.Sprintf("c%d", i/2))
	}
	add("r1-n4", rackKey, "r1") // no clique label
	add("r2-n0", rackKey, "r2", cliqueKey, "c9")
	add("r3-n0", rackKey, "r3", cliqueKey, "c9") // c9 spans two racks
	res, err := Build(opts(cliqueKey, rackKey), nodes, slices)
	require.NoError(t, err)
	const nodeT = "Tesla-V100-SXM2-32GB-pcie4-node2"
	require.Equal(t, map[string]config.CellTypeSpec{
		"Tesla-V100-SXM2-32GB-pcie4": {ChildCellType: "Tesla-V100-SXM2-32GB", ChildCellNumber: 4},
		nodeT:                        {ChildCellType: "Tesla-V100-SXM2-32GB-pcie4", ChildCellNumber: 2, IsNodeLevel: true},
		nodeT + "-clique2":           {ChildCellType: nodeT, ChildCellNumber: 2, TopologyKey: cliqueKey},
		nodeT + "-clique2-rack2":     {ChildCellType: nodeT + "-clique2", ChildCellNumber: 2, TopologyKey: rackKey},
		nodeT + "-rack1":             {ChildCellType: nodeT, ChildCellNumber: 1, TopologyKey: rackKey},
	}, res.PhysicalCluster.CellTypes)
	kids := func(addr ...string) []config.PhysicalCellSpec {
		var out []config.PhysicalCellSpec
		for _, a := range addr {
			out = append(out, config.PhysicalCellSpec{CellAddress: a})
		}
		return out
	}
	require.Equal(t, []config.PhysicalCellSpec{
		{CellType: nodeT + "-clique2", CellAddress: "c9", CellChildren: kids("r2-n0", "r3-n0")},
		{CellType: nodeT + "-clique2-rack2", CellAddress: "r1", CellChildren: []config.PhysicalCellSpec{
			{CellAddress: "c0", CellChildren: kids("r1-n0", "r1-n1")},
			{CellAddress: "c1", CellChildren: kids("r1-n2", "r1-n3")},
		}},
		{CellType: nodeT + "-rack1", CellAddress: "r1", CellChildren: kids("r1-n4")},
	}, res.PhysicalCluster.PhysicalCells)
	require.Equal(t, []Skipped{
		{"r1-n4", "not grouped by nvidia.com/gpu.clique: node r1-n4 has no label nvidia.com/gpu.clique"},
		{"r2-n0", "not grouped by topology.kubernetes.io/rack: its cell's nodes disagree on it (r2, r3)"},
		{"r3-n0", "not grouped by topology.kubernetes.io/rack: its cell's nodes disagree on it (r2, r3)"},
	}, res.Ungrouped)
	_, err = cellcore.New(cellspec.Config(res.PhysicalCluster))
	require.NoError(t, err)
}

func TestNames(t *testing.T) {
	require.Equal(t, "rack", LevelName("topology.kubernetes.io/rack"))
	require.Equal(t, "clique", LevelName("nvidia.com/gpu.clique"))
	require.Equal(t, "pool", LevelName("pool"))
	require.Equal(t, "Tesla-V100-SXM2-32GB", LeafType("Tesla V100-SXM2-32GB"))
	require.Equal(t, "NVIDIA-H100-80GB-HBM3", LeafType("NVIDIA H100 80GB HBM3"))
	require.Equal(t, "A-B", LeafType(" A.B "))
	require.Equal(t, "", LeafType(" . "))
}

// TestShortDomainPadded (issue 45): with nodeGroupSizes, an NVLink domain
// short of trays is a cell of the complete type, its missing trays absent
// nodes (named after the level and the domain), so that it is of one type
// with the complete domains whatever is missing; a group larger than its
// size is not grouped.
func TestShortDomainPadded(t *testing.T) {
	const gb200 = "NVIDIA GB200"
	var nodes []*v1.Node
	var slices []*resourceapi.ResourceSlice
	add := func(name, clique string) {
		nodes = append(nodes, node(name, cliqueKey, clique))
		slices = append(slices, dratest.Slice(name, gb200, 4))
	}
	for i := 0; i < 4; i++ {
		add(fmt.Sprintf("a%d", i), "uuid-a.1")
	}
	for i := 0; i < 2; i++ {
		add(fmt.Sprintf("b%d", i), "uuid-b.1") // two trays out
	}
	for i := 0; i < 5; i++ {
		add(fmt.Sprintf("c%d", i), "uuid-c.1") // one tray more than a domain holds
	}
	// A Node named as b's third absent tray would be: the padding skips it.
	nodes = append(nodes, node(AbsentNodeName("clique", "uuid-b.1", 2)))
	o := opts(cliqueKey)
	o.NodeGroupSizes = map[string]int32{cliqueKey: 4}
	res, err := Build(o, nodes, slices)
	require.NoError(t, err)
	const nodeT = "NVIDIA-GB200-pcie2-node2"
	require.Equal(t, config.CellTypeSpec{ChildCellType: nodeT, ChildCellNumber: 4, TopologyKey: cliqueKey}, res.PhysicalCluster.CellTypes[nodeT+"-clique4"])
	require.NotContains(t, res.PhysicalCluster.CellTypes, nodeT+"-clique2")
	require.NotContains(t, res.PhysicalCluster.CellTypes, nodeT+"-clique5")
	absent := []string{"absent-3.clique.uuid-b.1", "absent-4.clique.uuid-b.1"}
	require.Equal(t, absent, res.Absent)
	var b config.PhysicalCellSpec
	for _, c := range res.PhysicalCluster.PhysicalCells {
		if c.CellAddress == "uuid-b.1" {
			b = c
		}
	}
	require.Equal(t, nodeT+"-clique4", b.CellType)
	var addrs []string
	for _, ch := range b.CellChildren {
		addrs = append(addrs, ch.CellAddress)
	}
	require.Equal(t, append([]string{"b0", "b1"}, absent...), addrs)
	var ungrouped []string
	for _, u := range res.Ungrouped {
		ungrouped = append(ungrouped, u.Node)
		require.Contains(t, u.Reason, "more than nodeGroupSizes gives (4)")
	}
	require.Equal(t, []string{"c0", "c1", "c2", "c3", "c4"}, ungrouped)
	// The cell core takes it: the absent trays are nodes it knows.
	k, err := cellcore.New(cellspec.Config(res.PhysicalCluster))
	require.NoError(t, err)
	for _, n := range absent {
		_, known := k.NodeHealthOf(n)
		require.True(t, known, n)
	}
}

package hivesched

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/hivesched/hivesched/apis/config"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

const gpu = v1.ResourceName("nvidia.com/gpu")

func pod(labels, ann map[string]string, gpus int64) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p0", Namespace: "ns", Labels: labels, Annotations: ann},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	if gpus > 0 {
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return p
}

func TestParsePodNative(t *testing.T) {
	r, err := parsePod(pod(map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "job"},
		map[string]string{AnnotationGroupMembers: "4", AnnotationPriority: "7", AnnotationLeafCellType: "V100", AnnotationLazyPreemption: "true"}, 8), gpu)
	require.NoError(t, err)
	require.Equal(t, cellcore.AffinityGroupSpec{Name: "ns/job", Namespace: "ns", VirtualCluster: "vc1", Priority: 7, LeafCellType: "V100", LazyPreemptionEnable: true,
		Members: []cellcore.AffinityGroupMember{{PodNumber: 4, LeafCellNumber: 8}}}, r.group)
	require.Equal(t, int32(8), r.leafCellNumber)
	require.Equal(t, 4, r.totalPods())

	// Alone: the pod is its own group.
	r, err = parsePod(pod(map[string]string{LabelVirtualCluster: "vc1"}, nil, 2), gpu)
	require.NoError(t, err)
	require.Equal(t, "ns/p0", r.group.Name)
	require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 2}}, r.group.Members)

	// Heterogeneous shape.
	r, err = parsePod(pod(map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "g"}, map[string]string{AnnotationGroupMembers: "2x8, 1x4"}, 4), gpu)
	require.NoError(t, err)
	require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}, {PodNumber: 1, LeafCellNumber: 4}}, r.group.Members)

	// Plain pods are not ours.
	r, err = parsePod(pod(nil, nil, 0), gpu)
	require.NoError(t, err)
	require.Nil(t, r)
}

func TestParsePodErrors(t *testing.T) {
	vc := map[string]string{LabelVirtualCluster: "vc1"}
	grp := map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "g"}
	for name, tc := range map[string]struct {
		p    *v1.Pod
		want string
	}{
		"gpus without a VC":   {pod(nil, nil, 1), "names no virtual cluster"},
		"VC without gpus":     {pod(vc, nil, 0), "requests no nvidia.com/gpu"},
		"bad priority":        {pod(vc, map[string]string{AnnotationPriority: "high"}, 1), "is not an integer"},
		"bad lazy":            {pod(vc, map[string]string{AnnotationLazyPreemption: "maybe"}, 1), "is not true or false"},
		"group without shape": {pod(grp, nil, 1), "needs annotation hivesched.io/group-members"},
		"shape without group": {pod(vc, map[string]string{AnnotationGroupMembers: "2"}, 1), "name the group"},
		"bad shape":           {pod(grp, map[string]string{AnnotationGroupMembers: "2by8"}, 8), "is not PODSxLEAFCELLS"},
		"size not in shape":   {pod(grp, map[string]string{AnnotationGroupMembers: "2x8"}, 4), "has no member of that size"},
		"hived bad yaml":      {pod(nil, map[string]string{HivedSpecAnnotation: "a: ["}, 0), "not valid YAML"},
		"hived no vc":         {pod(nil, map[string]string{HivedSpecAnnotation: "priority: 0\nleafCellNumber: 1"}, 0), "virtualCluster is empty"},
		"hived no leaves":     {pod(nil, map[string]string{HivedSpecAnnotation: "virtualCluster: a\npriority: 0"}, 0), "leafCellNumber must be positive"},
		"hived request disagrees": {pod(nil, map[string]string{HivedSpecAnnotation: "virtualCluster: a\nleafCellNumber: 4"}, 8),
			"pod requests 8 nvidia.com/gpu but its annotation hivedscheduler.microsoft.com/pod-scheduling-spec asks for leafCellNumber 4: request 4 nvidia.com/gpu, or none"},
		"hived empty members": {pod(nil, map[string]string{HivedSpecAnnotation: "virtualCluster: a\npriority: 0\nleafCellNumber: 1\naffinityGroup: {name: g}"}, 0), "members is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parsePod(tc.p, gpu)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestParsePodHived(t *testing.T) {
	spec := "virtualCluster: vc1\npriority: -1\ngpuType: K80\ngpuNumber: 2\naffinityGroup:\n  name: g\n  members:\n  - {podNumber: 3, gpuNumber: 2}\n"
	r, err := parsePod(pod(nil, map[string]string{HivedSpecAnnotation: spec}, 0), gpu)
	require.NoError(t, err)
	require.True(t, r.hived)
	require.Equal(t, cellcore.AffinityGroupSpec{Name: "ns/g", Namespace: "ns", VirtualCluster: "vc1", Priority: -1, LeafCellType: "K80",
		Members: []cellcore.AffinityGroupMember{{PodNumber: 3, LeafCellNumber: 2}}}, r.group)
}

// A HiveD pod may request the leaf cell resource (then exactly its
// leafCellNumber) or not at all, as HiveD's own pods do.
func TestParsePodHivedLeafRequest(t *testing.T) {
	spec := map[string]string{HivedSpecAnnotation: "virtualCluster: vc1\nleafCellNumber: 4"}
	for _, gpus := range []int64{0, 4} {
		r, err := parsePod(pod(nil, spec, gpus), gpu)
		require.NoError(t, err, "request %d", gpus)
		require.Equal(t, int32(4), r.leafCellNumber)
	}
	_, err := parsePod(pod(nil, spec, 2), gpu)
	require.ErrorContains(t, err, "pod requests 2 nvidia.com/gpu but its annotation "+HivedSpecAnnotation+" asks for leafCellNumber 4")
	// Another leaf resource name is what counts.
	_, err = parsePod(pod(nil, spec, 2), "example.com/npu")
	require.NoError(t, err)
}

// HiveD's priority defaults to 0 (guaranteed) when the spec leaves it out,
// as in HiveD; an explicit value is kept.
func TestParsePodHivedPriorityDefault(t *testing.T) {
	r, err := parsePod(pod(nil, map[string]string{HivedSpecAnnotation: "virtualCluster: vc1\nleafCellNumber: 1"}, 0), gpu)
	require.NoError(t, err)
	require.Equal(t, int32(0), r.group.Priority)
	r, err = parsePod(pod(nil, map[string]string{HivedSpecAnnotation: "virtualCluster: vc1\npriority: 7\nleafCellNumber: 1"}, 0), gpu)
	require.NoError(t, err)
	require.Equal(t, int32(7), r.group.Priority)
	r, err = parsePod(pod(nil, map[string]string{HivedSpecAnnotation: "virtualCluster: vc1\npriority: -1\nleafCellNumber: 1"}, 0), gpu)
	require.NoError(t, err)
	require.Equal(t, int32(-1), r.group.Priority)
}

// HiveD's version v2: cellType/cellNumber and a podRootGroup tree, whose
// pods (HiveD's "pod" entry or, in its first v2, a "pods" list) and child
// groups are one gang.
func TestParsePodHivedV2(t *testing.T) {
	v2 := func(spec string, gpus int64) (*podRequest, error) {
		return parsePod(pod(nil, map[string]string{HivedSpecAnnotation: spec}, gpus), gpu)
	}
	// HiveD's own example of a pod alone (example/request/basic).
	r, err := v2("version: v2\nvirtualCluster: VC1\npriority: 1000\ncellType: K80\ncellNumber: 1\npodRootGroup: null", 0)
	require.NoError(t, err)
	require.True(t, r.hived)
	require.Equal(t, cellcore.AffinityGroupSpec{Name: "ns/p0", Namespace: "ns", VirtualCluster: "VC1", Priority: 1000, LeafCellType: "K80",
		Members: []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 1}}}, r.group)
	require.Equal(t, int32(1), r.leafCellNumber)

	// The shape of HiveD's example/request/design tree (a root without pods,
	// two child groups), without withinOneCell; this pod is the 1-cell one.
	tree := `version: v2
virtualCluster: vc3
cellType: K80
cellNumber: 1
lazyPreemptionEnable: true
gangReleaseEnable: true
podRootGroup:
  name: demo3/group_0
  pod: null
  childGroups:
  - withinOneCell: null
    pod:
      podMinNumber: 2
      podMaxNumber: 2
      cellsPerPod: {cellType: K80, cellNumber: 2}
      containsCurrentPod: false
    childGroups: null
  - pod:
      podMinNumber: 1
      podMaxNumber: 1
      cellsPerPod: {cellNumber: 1}
      containsCurrentPod: true
`
	r, err = v2(tree, 1)
	require.NoError(t, err)
	require.Equal(t, cellcore.AffinityGroupSpec{Name: "ns/demo3/group_0", Namespace: "ns", VirtualCluster: "vc3", LeafCellType: "K80", LazyPreemptionEnable: true,
		Members: []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 2}, {PodNumber: 1, LeafCellNumber: 1}}}, r.group)
	require.Equal(t, 3, r.totalPods())

	// The first v2's "pods" list, and a pod that names no cell type: its
	// group's members do.
	r, err = v2(`version: v2
virtualCluster: vc1
cellNumber: 8
podRootGroup:
  name: g
  pods:
  - {podMinNumber: 4, podMaxNumber: 4, cellsPerPod: {cellType: V100, cellNumber: 8}, containsCurrentPod: true}
  childGroups:
  - pods:
    - {podMinNumber: 1, cellsPerPod: {cellType: V100, cellNumber: 4}}
`, 8)
	require.NoError(t, err)
	require.Equal(t, cellcore.AffinityGroupSpec{Name: "ns/g", Namespace: "ns", VirtualCluster: "vc1", LeafCellType: "V100",
		Members: []cellcore.AffinityGroupMember{{PodNumber: 4, LeafCellNumber: 8}, {PodNumber: 1, LeafCellNumber: 4}}}, r.group)

	member := func(extra string) string {
		return "version: v2\nvirtualCluster: a\ncellType: K80\ncellNumber: 2\npodRootGroup:\n  name: g\n" + extra
	}
	current := "  pod: {podMinNumber: 2, podMaxNumber: 2, cellsPerPod: {cellType: K80, cellNumber: 2}, containsCurrentPod: true}\n"
	for name, tc := range map[string]struct {
		spec string
		gpus int64
		want string
	}{
		"withinOneCell": {member("  withinOneCell: K80-NODE\n" + current), 0,
			`podRootGroup.withinOneCell "K80-NODE" is not supported: hivesched packs a group into the smallest cell that holds it`},
		"nested withinOneCell": {member(current + "  childGroups:\n  - withinOneCell: K80-SWITCH\n    pod: {podMinNumber: 1, cellsPerPod: {cellNumber: 1}}\n"), 0,
			`podRootGroup.childGroups[0].withinOneCell "K80-SWITCH" is not supported`},
		"elastic": {member("  pod: {podMinNumber: 2, podMaxNumber: 4, cellsPerPod: {cellNumber: 2}, containsCurrentPod: true}\n"), 0,
			"podRootGroup.pod: podMinNumber 2 and podMaxNumber 4 differ, and elastic groups are not supported"},
		"no pods":       {member(""), 0, "podRootGroup has no pods"},
		"no current":    {member("  pod: {podMinNumber: 2, cellsPerPod: {cellNumber: 2}}\n"), 0, "no member of podRootGroup has containsCurrentPod: true"},
		"two current":   {member(current + "  childGroups:\n  - pod: {podMinNumber: 1, cellsPerPod: {cellNumber: 2}, containsCurrentPod: true}\n"), 0, "podRootGroup.pod and podRootGroup.childGroups[0].pod both have containsCurrentPod"},
		"current size":  {member("  pod: {podMinNumber: 2, cellsPerPod: {cellNumber: 4}, containsCurrentPod: true}\n"), 0, "podRootGroup.pod has containsCurrentPod but cellsPerPod.cellNumber 4, not the pod's cellNumber 2"},
		"zero cells":    {member("  pods:\n  - {podMinNumber: 2, containsCurrentPod: true}\n"), 0, "podRootGroup.pods[0].cellsPerPod.cellNumber must be positive, got 0"},
		"zero pods":     {member("  pod: {cellsPerPod: {cellNumber: 2}, containsCurrentPod: true}\n"), 0, "podRootGroup.pod.podMinNumber must be positive, got 0"},
		"other type":    {member(current + "  childGroups:\n  - pod: {podMinNumber: 1, cellsPerPod: {cellType: K80-NODE, cellNumber: 1}}\n"), 0, `podRootGroup.childGroups[0].pod.cellsPerPod.cellType "K80-NODE" differs from cell type "K80"`},
		"no name":       {"version: v2\nvirtualCluster: a\ncellNumber: 2\npodRootGroup: {pod: {podMinNumber: 1}}", 0, "podRootGroup.name is empty"},
		"no cellNumber": {"version: v2\nvirtualCluster: a\ncellType: K80", 0, "cellNumber must be positive, got 0"},
		"v1 fields":     {"version: v2\nvirtualCluster: a\nleafCellNumber: 2", 0, "are fields of version v1: version v2 names cellType, cellNumber and podRootGroup"},
		"no version":    {"virtualCluster: a\ncellType: K80\ncellNumber: 2", 0, "are fields of HiveD's version v2: add version: v2"},
		"bad version":   {"version: v3\nvirtualCluster: a\ncellNumber: 2", 0, `version "v3" is not supported: write v1`},
		"gpu request":   {member(current), 4, "pod requests 4 nvidia.com/gpu but its annotation " + HivedSpecAnnotation + " asks for cellNumber 2"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := v2(tc.spec, tc.gpus)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// A request for a cell type that is not a leaf cell type is refused with its
// size in leaf cells.
func TestCheckLeafCellType(t *testing.T) {
	pc := config.PhysicalClusterSpec{CellTypes: map[string]config.CellTypeSpec{
		"V100-SWITCH": {ChildCellType: "V100", ChildCellNumber: 2},
		"V100-NODE":   {ChildCellType: "V100-SWITCH", ChildCellNumber: 4, IsNodeLevel: true},
		"T4-NODE":     {ChildCellType: "T4", ChildCellNumber: 4, IsNodeLevel: true},
	}}
	p := &HiveSched{nonLeafTypes: nonLeafCellTypes(pc)}
	require.Equal(t, map[string]leafCount{"V100-SWITCH": {"V100", 2}, "V100-NODE": {"V100", 8}, "T4-NODE": {"T4", 4}}, p.nonLeafTypes)
	for _, leaf := range []string{"", "V100", "T4", "H100"} { // unknown types are the core's to refuse
		require.NoError(t, p.checkLeafCellType(&podRequest{group: cellcore.AffinityGroupSpec{LeafCellType: leaf}}))
	}
	err := p.checkLeafCellType(&podRequest{group: cellcore.AffinityGroupSpec{LeafCellType: "V100-NODE"}})
	require.ErrorContains(t, err, `cell type "V100-NODE" is not a leaf cell type (one V100-NODE is 8 V100): ask for leaf cell type V100`)
}

// The shipped sample jobs parse.
func TestSampleJobsParse(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "manifests", "samples", "jobs.yaml"))
	require.NoError(t, err)
	dec := yaml.NewDocumentDecoder(io.NopCloser(bytes.NewReader(raw)))
	buf := make([]byte, 1<<16)
	n := 0
	for {
		m, err := dec.Read(buf)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		var p v1.Pod
		require.NoError(t, sigsyaml.UnmarshalStrict(buf[:m], &p))
		r, err := parsePod(&p, gpu)
		require.NoError(t, err, p.Name)
		require.NotNil(t, r, p.Name)
		n++
	}
	require.Equal(t, 3, n)
}

func TestNodeHealth(t *testing.T) {
	ready := func(s v1.ConditionStatus) *v1.Node {
		return &v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: s}}}}
	}
	require.Equal(t, cellcore.NodeHealthy, nodeHealth(ready(v1.ConditionTrue)))
	require.Equal(t, cellcore.NodeBad, nodeHealth(ready(v1.ConditionFalse)))
	require.Equal(t, cellcore.NodeBad, nodeHealth(ready(v1.ConditionUnknown)))
	require.Equal(t, cellcore.NodeUnknown, nodeHealth(&v1.Node{}))
	cordoned := ready(v1.ConditionTrue)
	cordoned.Spec.Unschedulable = true
	require.Equal(t, cellcore.NodeMaintenance, nodeHealth(cordoned))
	retired := ready(v1.ConditionTrue)
	retired.Labels = map[string]string{LabelHealth: "retired"}
	require.Equal(t, cellcore.NodeRetired, nodeHealth(retired))
}

func TestPlacementRecordRoundTrip(t *testing.T) {
	g := cellcore.AffinityGroupSpec{Name: "ns/g", Namespace: "ns", VirtualCluster: "vc", Priority: 3, Members: []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 4}}}
	rec := newPlacementRecord(g, cellcore.PodPlacement{Node: "n1", LeafCellType: "V100", LeafCellIndices: []int32{4, 5, 6, 7}}, false)
	back, err := decodePlacement(rec.encode())
	require.NoError(t, err)
	require.Equal(t, g, back.spec())
	require.Equal(t, "n1", back.Node)
	require.False(t, back.Downgraded)
	require.NotContains(t, rec.encode(), "downgraded", "records of groups never downgraded read as before")
	_, err = decodePlacement(`{"group":"x"}`)
	require.Error(t, err)
	require.Equal(t, "4,5,6,7", indicesString(rec.LeafCellIndices))

	// A lazy downgrade is part of the record; the spec keeps the priority
	// the pods asked for (recovery downgrades it again).
	down := newPlacementRecord(g, cellcore.PodPlacement{Node: "n1", LeafCellIndices: []int32{0}}, true)
	require.Contains(t, down.encode(), `"downgraded":true`)
	back, err = decodePlacement(down.encode())
	require.NoError(t, err)
	require.True(t, back.Downgraded)
	require.Equal(t, g, back.spec())
}

func TestCellsSummaryNamesPinnedCells(t *testing.T) {
	spec := func(pinned ...string) hv1.VirtualClusterSpec {
		s := hv1.VirtualClusterSpec{VirtualCells: []hv1.VirtualCellSpec{{CellType: "V100-NODE", CellNumber: 2}, {CellType: "T4-NODE", CellNumber: 0}}}
		for _, id := range pinned {
			s.PinnedCells = append(s.PinnedCells, hv1.PinnedCellSpec{PinnedCellID: id})
		}
		return s
	}
	require.Equal(t, "2xV100-NODE", cellsSummary(spec()))
	require.Equal(t, "2xV100-NODE,pinned:r1-n3", cellsSummary(spec("r1-n3")))
	require.Equal(t, "2xV100-NODE,pinned:a,b,c", cellsSummary(spec("a", "b", "c")))
	require.Equal(t, "2xV100-NODE,pinned:a,b,+3", cellsSummary(spec("a", "b", "c", "d", "e")))
	require.Equal(t, "pinned:a", cellsSummary(hv1.VirtualClusterSpec{PinnedCells: []hv1.PinnedCellSpec{{PinnedCellID: "a"}}}))
}

// skuTypes (HiveD's, accepted and unused) whose name is not a leaf cell
// type are logged with the leaf cell types.
func TestWarnSkuTypes(t *testing.T) {
	pc := config.PhysicalClusterSpec{
		CellTypes: map[string]config.CellTypeSpec{"K80-NODE": {ChildCellType: "K80", ChildCellNumber: 4, IsNodeLevel: true}},
		SkuTypes:  map[string]v1.ResourceList{"K80": {"gpu": resource.MustParse("1")}, "K8O": {"gpu": resource.MustParse("1")}},
	}
	p := &HiveSched{nonLeafTypes: nonLeafCellTypes(pc)}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	p.warnSkuTypes(logger, pc)
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	require.Contains(t, logs, `skuType="K8O"`)
	require.Contains(t, logs, `leafCellTypes=["K80"]`)
	require.NotContains(t, logs, `skuType="K80"`)
}

// Issue 15: what is booked is the effective request as the scheduler counts
// it, in int64; counts are bounded before anything is allocated.
func TestParsePodBounds(t *testing.T) {
	vc := map[string]string{LabelVirtualCluster: "vc1"}
	grp := map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "g"}
	qty := func(n int64) v1.ResourceList {
		return v1.ResourceList{gpu: *resource.NewQuantity(n, resource.DecimalSI)}
	}

	// A sidecar's GPUs add to the containers' (they run beside them); a
	// plain init container counts only if it needs more than they do.
	p := pod(vc, nil, 2)
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []v1.Container{
		{Name: "sidecar", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: qty(1), Limits: qty(1)}},
		{Name: "init", Resources: v1.ResourceRequirements{Limits: qty(2)}},
	}
	r, err := parsePod(p, gpu)
	require.NoError(t, err)
	require.Equal(t, int32(3), r.leafCellNumber, "2 for the container and 1 for the sidecar")
	p.Spec.InitContainers[1].Resources.Limits = qty(8)
	r, err = parsePod(p, gpu)
	require.NoError(t, err)
	require.Equal(t, int32(9), r.leafCellNumber, "the init container runs after the sidecar started: 8+1")

	for name, tc := range map[string]struct {
		p    *v1.Pod
		want string
	}{
		// 2^32 + 4 was truncated to 4 in int32.
		"request above int32":        {pod(vc, nil, 1<<32+4), "pod requests 4294967300 nvidia.com/gpu in all (containers, sidecars and init containers as the scheduler counts them): a leaf cell count must be a whole number from 0 to 2147483647"},
		"priority above range":       {pod(vc, map[string]string{AnnotationPriority: "100000"}, 1), "priority 100000 is out of range: -1 for opportunistic, 0..1000 for guaranteed"},
		"priority below range":       {pod(vc, map[string]string{AnnotationPriority: "-5"}, 1), "priority -5 is out of range"},
		"hived priority above range": {pod(nil, map[string]string{HivedSpecAnnotation: "virtualCluster: a\npriority: 5000\nleafCellNumber: 1"}, 0), "priority 5000 is out of range"},
		"huge group-members":         {pod(grp, map[string]string{AnnotationGroupMembers: "2147483647"}, 1), `affinity group "ns/g" has 2147483647 pods (members 2147483647x1), more than the supported 10000`},
		"huge shape sum":             {pod(grp, map[string]string{AnnotationGroupMembers: "2147483647x1,2147483647x1"}, 1), "has 4294967294 pods"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parsePod(tc.p, gpu)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// A pod without hivesched.io/priority takes its PriorityClass's value,
// bounded to the guaranteed range; the annotation wins.
func TestPriorityFromPriorityClass(t *testing.T) {
	pod := func(ann string, prio *int32) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{LabelVirtualCluster: "vc"}},
			Spec: v1.PodSpec{Priority: prio, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}}}
		if ann != "" {
			p.Annotations = map[string]string{AnnotationPriority: ann}
		}
		return p
	}
	for _, c := range []struct {
		ann  string
		prio *int32
		want int32
	}{{"", nil, 0}, {"", ptr.To[int32](100), 100}, {"", ptr.To[int32](2000000000), 1000}, {"", ptr.To[int32](-5), 0}, {"7", ptr.To[int32](100), 7}, {"-1", ptr.To[int32](100), -1}} {
		r, err := parsePod(pod(c.ann, c.prio), "nvidia.com/gpu")
		require.NoError(t, err)
		require.Equal(t, c.want, r.group.Priority, "%+v", c)
		require.Equal(t, "ns", r.group.Namespace)
	}
}

package podrequest

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
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/internal/podtest"
)

const gpu = podtest.GPU

var pod = podtest.Pod

func TestParsePodNative(t *testing.T) {
	r, err := Parse(pod(map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "job"},
		map[string]string{AnnotationGroupMembers: "4", AnnotationPriority: "7", AnnotationLeafCellType: "V100", AnnotationLazyPreemption: "true"}, 8), gpu)
	require.NoError(t, err)
	require.Equal(t, cellcore.AffinityGroupSpec{Name: "ns/job", Namespace: "ns", VirtualCluster: "vc1", Priority: 7, LeafCellType: "V100", LazyPreemptionEnable: true,
		Members: []cellcore.AffinityGroupMember{{PodNumber: 4, LeafCellNumber: 8}}}, r.Group)
	require.Equal(t, int32(8), r.LeafCellNumber)
	require.Equal(t, 4, r.TotalPods())

	// Alone: the pod is its own group.
	r, err = Parse(pod(map[string]string{LabelVirtualCluster: "vc1"}, nil, 2), gpu)
	require.NoError(t, err)
	require.Equal(t, "ns/p0", r.Group.Name)
	require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 2}}, r.Group.Members)

	// Heterogeneous shape.
	r, err = Parse(pod(map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "g"}, map[string]string{AnnotationGroupMembers: "2x8, 1x4"}, 4), gpu)
	require.NoError(t, err)
	require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}, {PodNumber: 1, LeafCellNumber: 4}}, r.Group.Members)

	// Plain pods are not ours.
	r, err = Parse(pod(nil, nil, 0), gpu)
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
			_, err := Parse(tc.p, gpu)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestParsePodHived(t *testing.T) {
	spec := "virtualCluster: vc1\npriority: -1\ngpuType: K80\ngpuNumber: 2\naffinityGroup:\n  name: g\n  members:\n  - {podNumber: 3, gpuNumber: 2}\n"
	r, err := Parse(pod(nil, map[string]string{HivedSpecAnnotation: spec}, 0), gpu)
	require.NoError(t, err)
	require.True(t, r.Hived)
	require.Equal(t, cellcore.AffinityGroupSpec{Name: "ns/g", Namespace: "ns", VirtualCluster: "vc1", Priority: -1, LeafCellType: "K80",
		Members: []cellcore.AffinityGroupMember{{PodNumber: 3, LeafCellNumber: 2}}}, r.Group)
}

// A HiveD pod may request the leaf cell resource (then exactly its
// leafCellNumber) or not at all, as HiveD's own pods do.
func TestParsePodHivedLeafRequest(t *testing.T) {
	spec := map[string]string{HivedSpecAnnotation: "virtualCluster: vc1\nleafCellNumber: 4"}
	for _, gpus := range []int64{0, 4} {
		r, err := Parse(pod(nil, spec, gpus), gpu)
		require.NoError(t, err, "request %d", gpus)
		require.Equal(t, int32(4), r.LeafCellNumber)
	}
	_, err := Parse(pod(nil, spec, 2), gpu)
	require.ErrorContains(t, err, "pod requests 2 nvidia.com/gpu but its annotation "+HivedSpecAnnotation+" asks for leafCellNumber 4")
	// Another leaf resource name is what counts.
	_, err = Parse(pod(nil, spec, 2), "example.com/npu")
	require.NoError(t, err)
}

// HiveD's priority defaults to 0 (guaranteed) when the spec leaves it out,
// as in HiveD; an explicit value is kept.
func TestParsePodHivedPriorityDefault(t *testing.T) {
	r, err := Parse(pod(nil, map[string]string{HivedSpecAnnotation: "virtualCluster: vc1\nleafCellNumber: 1"}, 0), gpu)
	require.NoError(t, err)
	require.Equal(t, int32(0), r.Group.Priority)
	r, err = Parse(pod(nil, map[string]string{HivedSpecAnnotation: "virtualCluster: vc1\npriority: 7\nleafCellNumber: 1"}, 0), gpu)
	require.NoError(t, err)
	require.Equal(t, int32(7), r.Group.Priority)
	r, err = Parse(pod(nil, map[string]string{HivedSpecAnnotation: "virtualCluster: vc1\npriority: -1\nleafCellNumber: 1"}, 0), gpu)
	require.NoError(t, err)
	require.Equal(t, int32(-1), r.Group.Priority)
}

// HiveD's version v2: cellType/cellNumber and a podRootGroup tree, whose
// pods (HiveD's "pod" entry or, in its first v2, a "pods" list) and child
// groups are one gang.
func TestParsePodHivedV2(t *testing.T) {
	v2 := func(spec string, gpus int64) (*Request, error) {
		return Parse(pod(nil, map[string]string{HivedSpecAnnotation: spec}, gpus), gpu)
	}
	// HiveD's own example of a pod alone (example/request/basic).
	r, err := v2("version: v2\nvirtualCluster: VC1\npriority: 1000\ncellType: K80\ncellNumber: 1\npodRootGroup: null", 0)
	require.NoError(t, err)
	require.True(t, r.Hived)
	require.Equal(t, cellcore.AffinityGroupSpec{Name: "ns/p0", Namespace: "ns", VirtualCluster: "VC1", Priority: 1000, LeafCellType: "K80",
		Members: []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 1}}}, r.Group)
	require.Equal(t, int32(1), r.LeafCellNumber)

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
		Members: []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 2}, {PodNumber: 1, LeafCellNumber: 1}}}, r.Group)
	require.Equal(t, 3, r.TotalPods())

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
		Members: []cellcore.AffinityGroupMember{{PodNumber: 4, LeafCellNumber: 8}, {PodNumber: 1, LeafCellNumber: 4}}}, r.Group)

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
		r, err := Parse(&p, gpu)
		require.NoError(t, err, p.Name)
		require.NotNil(t, r, p.Name)
		n++
	}
	require.Equal(t, 3, n)
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
	r, err := Parse(p, gpu)
	require.NoError(t, err)
	require.Equal(t, int32(3), r.LeafCellNumber, "2 for the container and 1 for the sidecar")
	p.Spec.InitContainers[1].Resources.Limits = qty(8)
	r, err = Parse(p, gpu)
	require.NoError(t, err)
	require.Equal(t, int32(9), r.LeafCellNumber, "the init container runs after the sidecar started: 8+1")

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
			_, err := Parse(tc.p, gpu)
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
		r, err := Parse(pod(c.ann, c.prio), "nvidia.com/gpu")
		require.NoError(t, err)
		require.Equal(t, c.want, r.Group.Priority, "%+v", c)
		require.Equal(t, "ns", r.Group.Namespace)
	}
}

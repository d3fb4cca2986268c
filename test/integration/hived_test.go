package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// hivedSchedulerName is the scheduler name HiveD's pods ask for: a profile of
// that name takes them as they are.
const hivedSchedulerName = "hivedscheduler"

// hivedPod is a pod written as HiveD's documentation writes one
// (example/request/basic/request.yaml of microsoft/hivedscheduler): the
// pod-scheduling-spec annotation, the pod-scheduling-enable limit, no GPU
// request, and the GPUs handed to the container through the isolation
// annotation. spec is the annotation's YAML.
func hivedPod(t *testing.T, ns, name, spec string) *v1.Pod {
	var b strings.Builder
	for _, line := range strings.Split(spec, "\n") {
		b.WriteString("      " + line + "\n")
	}
	text := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  annotations:
    hivedscheduler.microsoft.com/pod-scheduling-spec: |-
%sspec:
  schedulerName: hivedscheduler
  restartPolicy: Never
  priority: 1000
  containers:
  - name: ubuntu
    image: ubuntu:trusty
    command: ["sh", "-c", "nvidia-smi -L ; printenv ; sleep infinity"]
    resources:
      limits:
        hivedscheduler.microsoft.com/pod-scheduling-enable: 1
        cpu: 4
        memory: 8Gi
    env:
    - name: NVIDIA_VISIBLE_DEVICES
      valueFrom:
        fieldRef:
          fieldPath: metadata.annotations['hivedscheduler.microsoft.com/pod-leaf-cell-isolation']
`, name, ns, b.String())
	var p v1.Pod
	require.NoError(t, yaml.UnmarshalStrict([]byte(text), &p), text)
	return &p
}

// requireIsolation checks that a bound HiveD pod got HiveD's isolation
// annotation with n device indices, and returns them.
func (c *cluster) requireIsolation(t *testing.T, p *v1.Pod, n int) []string {
	got := c.getPod(t, p)
	iso := got.Annotations[hivesched.HivedIsolationAnnotation]
	require.NotEmpty(t, iso, "pod %s has no %s annotation: %v", p.Name, hivesched.HivedIsolationAnnotation, got.Annotations)
	idx := strings.Split(iso, ",")
	require.Len(t, idx, n, "pod %s: %s=%q", p.Name, hivesched.HivedIsolationAnnotation, iso)
	require.Contains(t, got.Annotations, hivesched.AnnotationPlacement)
	return idx
}

// TestHived: HiveD's jobs move over unchanged (issue 9).
func TestHived(t *testing.T) {
	c := startCluster(t)

	t.Run("HiveD's own pods bind unchanged under a profile named hivedscheduler", func(t *testing.T) {
		c.createNodes(t, "hd", 1, 2, 0)
		c.createNamespace(t, "hd")
		c.createVC(t, "hd-vc", []string{"hd"}, "V100-NODE", 2)
		c.startScheduler(t, physicalCluster("hd", 1, 2, 0), withSchedulerName(hivedSchedulerName))

		// A pod alone, as in HiveD's basic example.
		single := hivedPod(t, "hd", "demo1-a-0", strings.Join([]string{
			"virtualCluster: hd-vc", "priority: 1000", "leafCellType: V100", "leafCellNumber: 1", "affinityGroup: null"}, "\n"))
		// A gang of 2 x 4 GPUs; no priority: HiveD's default 0.
		var gang []*v1.Pod
		for i := 0; i < 2; i++ {
			gang = append(gang, hivedPod(t, "hd", fmt.Sprintf("train-%d", i), strings.Join([]string{
				"virtualCluster: hd-vc", "leafCellType: V100", "leafCellNumber: 4",
				"affinityGroup:", "  name: train", "  members:", "  - podNumber: 2", "    leafCellNumber: 4"}, "\n")))
		}
		c.createPods(t, append([]*v1.Pod{single}, gang...))
		c.waitBound(t, []*v1.Pod{single}, 30*time.Second)
		c.requireIsolation(t, single, 1)
		nodes := c.waitBound(t, gang, 30*time.Second)
		require.Equal(t, nodes[0], nodes[1], "a 2x4 gang packs into one node")
		a, b := c.requireIsolation(t, gang[0], 4), c.requireIsolation(t, gang[1], 4)
		require.Empty(t, intersect(a, b), "the gang's pods share no GPU: %v %v", a, b)
		c.waitVCStatus(t, "hd-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 9 })
	})

	t.Run("HiveD v2 pods: a podRootGroup tree is one gang", func(t *testing.T) {
		c.createNodes(t, "v2", 1, 2, 0)
		c.createNamespace(t, "v2")
		c.createVC(t, "v2-vc", []string{"v2"}, "V100-NODE", 2)
		c.startScheduler(t, physicalCluster("v2", 1, 2, 0), withSchedulerName(hivedSchedulerName))

		// One pod of 8 GPUs and two of 4 (a child group), in HiveD's latest
		// v2 form; each pod marks the member it belongs to.
		spec := func(cells int, big bool) string {
			return fmt.Sprintf(`version: v2
virtualCluster: v2-vc
priority: 10
cellType: V100
cellNumber: %d
podRootGroup:
  name: mixed
  pod:
    podMinNumber: 1
    podMaxNumber: 1
    cellsPerPod: {cellType: V100, cellNumber: 8}
    containsCurrentPod: %t
  childGroups:
  - pod:
      podMinNumber: 2
      podMaxNumber: 2
      cellsPerPod: {cellType: V100, cellNumber: 4}
      containsCurrentPod: %t`, cells, big, !big)
		}
		pods := []*v1.Pod{hivedPod(t, "v2", "mixed-big", spec(8, true)), hivedPod(t, "v2", "mixed-small-0", spec(4, false)), hivedPod(t, "v2", "mixed-small-1", spec(4, false))}
		c.createPods(t, pods)
		nodes := c.waitBound(t, pods, 30*time.Second)
		require.NotEqual(t, nodes[0], nodes[1], "the 8-GPU pod has a node of its own")
		require.Equal(t, nodes[1], nodes[2], "the two 4-GPU pods share the other node")
		c.requireIsolation(t, pods[0], 8)
		require.Empty(t, intersect(c.requireIsolation(t, pods[1], 4), c.requireIsolation(t, pods[2], 4)))
		c.waitVCStatus(t, "v2-vc", func(st hv1.VirtualClusterStatus) bool {
			return st.UsedLeafCells == 16 && st.AffinityGroups.Allocated == 1
		})

		// What hivesched cannot honour is refused where the user looks.
		within := hivedPod(t, "v2", "within", "version: v2\nvirtualCluster: v2-vc\ncellType: V100\ncellNumber: 2\npodRootGroup:\n  name: w\n  withinOneCell: V100-SWITCH\n"+
			"  pod: {podMinNumber: 1, podMaxNumber: 1, cellsPerPod: {cellType: V100, cellNumber: 2}, containsCurrentPod: true}")
		c.createPods(t, []*v1.Pod{within})
		// The pod's Warning event (the scheduler's FailedScheduling says it too).
		c.waitEvent(t, within, `InvalidSchedulingSpec: annotation `+hivesched.HivedSpecAnnotation+`: podRootGroup.withinOneCell "V100-SWITCH" is not supported`, 20*time.Second)
	})

	t.Run("a HiveD pod whose GPU request disagrees with its leafCellNumber is refused up front", func(t *testing.T) {
		c.createNodes(t, "mis", 1, 1, 0)
		c.createNamespace(t, "mis")
		c.createVC(t, "mis-vc", []string{"mis"}, "V100-NODE", 1)
		c.startScheduler(t, physicalCluster("mis", 1, 1, 0), withSchedulerName(hivedSchedulerName))

		bad := hivedPod(t, "mis", "bad", "virtualCluster: mis-vc\nleafCellNumber: 4")
		bad.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"] = resource.MustParse("8")
		c.createPods(t, []*v1.Pod{bad})
		c.waitEvent(t, bad, "InvalidSchedulingSpec: pod requests 8 nvidia.com/gpu but its annotation "+hivesched.HivedSpecAnnotation+" asks for leafCellNumber 4", 20*time.Second)
		c.requireUnbound(t, []*v1.Pod{bad}, 2*time.Second)
		// It holds nothing: the VC's only node takes a whole-node pod.
		good := hivedPod(t, "mis", "good", "virtualCluster: mis-vc\nleafCellNumber: 8")
		c.createPods(t, []*v1.Pod{good})
		c.waitBound(t, []*v1.Pod{good}, 30*time.Second)
		c.requireIsolation(t, good, 8)
	})

	t.Run("a placed pod its node rejects gives the cells back at once", func(t *testing.T) {
		// A profile that does not ignore pod-scheduling-enable: the core
		// places the HiveD pod, NodeResourcesFit rejects the node for good
		// (no node advertises the resource), and the group must not keep
		// the VC's only node from others while its pod waits.
		c.createNodes(t, "rb", 1, 2, 0)
		c.createNamespace(t, "rb")
		c.createVC(t, "rb-vc", []string{"rb"}, "V100-NODE", 1)
		c.startScheduler(t, physicalCluster("rb", 1, 2, 0), withSchedulerName(hivedSchedulerName), withoutPluginConfig("NodeResourcesFit"))

		stuck := hivedPod(t, "rb", "stuck", "virtualCluster: rb-vc\nleafCellNumber: 8")
		c.createPods(t, []*v1.Pod{stuck})
		ev := c.waitEvent(t, stuck, "PlacementRejected: affinity group rb/stuck gave its cells back", 20*time.Second)
		t.Logf("rejected placement: %s", ev)
		require.Contains(t, ev, "NodeResourcesFit: Insufficient "+hivesched.HivedSchedulingEnableResource)
		require.Contains(t, ev, "must list "+hivesched.HivedSchedulingEnableResource+" in NodeResourcesFit's ignoredResources")
		c.waitVCStatus(t, "rb-vc", func(st hv1.VirtualClusterStatus) bool {
			return st.UsedLeafCells == 0 && st.AffinityGroups.Allocated == 0 && st.AffinityGroups.Pending == 1
		})
		// A native pod of the VC takes the node the stuck pod was placed on.
		other := gangPods("rb", "other", "rb-vc", 0, 1, 8)
		other[0].Spec.SchedulerName = hivedSchedulerName
		c.createPods(t, other)
		c.waitBound(t, other, 30*time.Second)
		c.requireUnbound(t, []*v1.Pod{stuck}, time.Second)
	})
}

func intersect(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range a {
		in[x] = true
	}
	var out []string
	for _, x := range b {
		if in[x] {
			out = append(out, x)
		}
	}
	return out
}

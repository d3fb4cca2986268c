package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// foreignPod is a GPU pod hivesched did not place: created with
// spec.nodeName (as another scheduler's binding or a static assignment
// leaves it).
func foreignPod(ns, name, node string, gpus int64) *v1.Pod {
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "main", Image: "busybox",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"nvidia.com/gpu": q}, Limits: v1.ResourceList{"nvidia.com/gpu": q}}}}},
	}
}

// noEvent checks that no event about the pod contains what.
func (c *cluster) noEvent(t *testing.T, p *v1.Pod, what string) {
	for _, e := range c.events(t, p) {
		require.NotContains(t, e, what, "pod %s", p.Name)
	}
}

func cellsLost(st hv1.VirtualClusterStatus) *metav1.Condition {
	return apimeta.FindStatusCondition(st.Conditions, hv1.ConditionCellsLost)
}

// Pods hivesched did not place hold devices the core must not hand out
// (issue 14): they are counted per node, explained on the pod and in the
// VC's status, placed around, and counted again after a restart.
func TestForeignPods(t *testing.T) {
	c := startCluster(t)
	const ns = "fp"
	c.createNodes(t, ns, 1, 2, 0)
	c.createNamespace(t, ns)
	c.createVC(t, "fp-a", []string{ns}, "V100-NODE", 1)
	physical := physicalCluster(ns, 1, 2, 0)
	s := c.startScheduler(t, physical)

	// One GPU of node n0 is held by a pod another scheduler bound.
	f0 := foreignPod(ns, "f0", "fp-r0-n0", 1)
	c.createPods(t, []*v1.Pod{f0})
	c.waitEvent(t, f0, "ForeignDevicesCounted: hivesched did not place this pod: its 1 nvidia.com/gpu on node fp-r0-n0 are counted as taken", 30*time.Second)

	// The VC's whole-node job goes to the node that has 8 GPUs, at once:
	// the core never picks n0 to have the node filter refuse it.
	a1 := gangPods(ns, "a1", "fp-a", 0, 1, 8)
	c.createPods(t, a1)
	require.Equal(t, []string{"fp-r0-n1"}, c.waitBound(t, a1, 30*time.Second))
	c.noEvent(t, a1[0], "PlacementRejected")
	st := c.waitVCStatus(t, "fp-a", func(st hv1.VirtualClusterStatus) bool {
		cond := cellsLost(st)
		return st.UsedLeafCells == 8 && cond != nil && cond.Status == metav1.ConditionFalse
	})
	require.Zero(t, st.LostLeafCells)

	// A foreign pod lands on the VC's node (over-committing it): the VC's
	// status says which of its cells are lost, to whom, where.
	f1 := foreignPod(ns, "f1", "fp-r0-n1", 2)
	c.createPods(t, []*v1.Pod{f1})
	st = c.waitVCStatus(t, "fp-a", func(st hv1.VirtualClusterStatus) bool { return st.ForeignLeafCells == 2 })
	require.EqualValues(t, 2, st.LostLeafCells)
	cond := cellsLost(st)
	require.NotNil(t, cond)
	require.Equal(t, metav1.ConditionTrue, cond.Status)
	require.Equal(t, "ForeignPods", cond.Reason)
	require.Contains(t, cond.Message, "2 of the VC's leaf cells are lost, on nodes fp-r0-n1")
	require.Contains(t, cond.Message, "2 held by pods hivesched did not place (fp/f1 on fp-r0-n1)")

	// An opportunistic job fits the 7 GPUs n0 has left, not 8.
	o8 := gangPods(ns, "o8", "fp-a", -1, 1, 8)
	o7 := gangPods(ns, "o7", "fp-a", -1, 1, 7)
	c.createPods(t, o8)
	c.createPods(t, o7)
	require.Equal(t, []string{"fp-r0-n0"}, c.waitBound(t, o7, 30*time.Second))
	c.requireUnbound(t, o8, 2*time.Second)
	c.noEvent(t, o7[0], "PlacementRejected")

	// The foreign pods go: the VC's cells are whole again.
	c.deletePods(t, []*v1.Pod{f0, f1})
	st = c.waitVCStatus(t, "fp-a", func(st hv1.VirtualClusterStatus) bool {
		cond := cellsLost(st)
		return st.LostLeafCells == 0 && cond != nil && cond.Status == metav1.ConditionFalse
	})
	require.Zero(t, st.ForeignLeafCells)

	// After a restart, a foreign pod is counted from the API objects alone.
	running := c.fresh(t, append(a1, o7...))
	c.deletePods(t, append(append(a1, o7...), o8...))
	c.waitGone(t, running, 30*time.Second)
	s.stop()
	f2 := foreignPod(ns, "f2", "fp-r0-n1", 8)
	c.createPods(t, []*v1.Pod{f2})
	c.startScheduler(t, physical)
	a2 := gangPods(ns, "a2", "fp-a", 0, 1, 8)
	c.createPods(t, a2)
	require.Equal(t, []string{"fp-r0-n0"}, c.waitBound(t, a2, 30*time.Second))
	c.noEvent(t, a2[0], "PlacementRejected")
	c.waitEvent(t, f2, "ForeignDevicesCounted", 30*time.Second)
}

// TestPodsNamingDevicesWithoutRequesting (issue 28, finding 3): a pod
// hivesched did not place that requests no GPU but carries the annotations
// that name a pod's devices (as the samples hand them to containers) runs
// on those devices: exactly they are counted as taken (never placed on,
// the VC's status names the pod), it hears so in a Warning, and they are
// free again when it goes.
func TestPodsNamingDevicesWithoutRequesting(t *testing.T) {
	c := startCluster(t)
	const ns = "nd"
	c.createNodes(t, ns, 1, 1, 0)
	c.createNamespace(t, ns)
	c.createVC(t, "nd-a", []string{ns}, "V100-NODE", 1)
	c.startScheduler(t, physicalCluster(ns, 1, 1, 0))

	// Created with spec.nodeName and the devices hivesched writes at bind
	// (an identity the admission policy exempts could), requesting none;
	// an entry that is no device of the node names nothing.
	r := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: ns, Annotations: map[string]string{
		hivesched.AnnotationLeafCellIndices: "4,5", hivesched.HivedIsolationAnnotation: "5,6,7,99"}},
		Spec: v1.PodSpec{NodeName: "nd-r0-n0", Containers: []v1.Container{{Name: "main", Image: "busybox"}}}}
	c.createPods(t, []*v1.Pod{r})
	c.waitEvent(t, r, "ForeignDevicesCounted: hivesched did not place this pod, which requests no nvidia.com/gpu but names devices 4,5,6,7 of node nd-r0-n0", 30*time.Second)
	st := c.waitVCStatus(t, "nd-a", func(st hv1.VirtualClusterStatus) bool { return st.ForeignLeafCells == 4 })
	require.Contains(t, cellsLost(st).Message, "4 held by pods hivesched did not place (nd/r on nd-r0-n0)")

	// Half of the node fits, on the devices the pod does not name; the
	// other half is taken, even for an opportunistic job.
	a4 := gangPods(ns, "a4", "nd-a", 0, 1, 4)
	c.createPods(t, a4)
	c.waitBound(t, a4, 30*time.Second)
	require.Equal(t, "0,1,2,3", c.getPod(t, a4[0]).Annotations[hivesched.AnnotationLeafCellIndices])
	o4 := gangPods(ns, "o4", "nd-a", -1, 1, 4)
	c.createPods(t, o4)
	c.requireUnbound(t, o4, 2*time.Second)

	// The pod goes: its devices are free again.
	c.deletePods(t, append(o4, r))
	c.waitVCStatus(t, "nd-a", func(st hv1.VirtualClusterStatus) bool { return st.ForeignLeafCells == 0 })
	b4 := gangPods(ns, "b4", "nd-a", 0, 1, 4)
	c.createPods(t, b4)
	c.waitBound(t, b4, 30*time.Second)
	require.Equal(t, "4,5,6,7", c.getPod(t, b4[0]).Annotations[hivesched.AnnotationLeafCellIndices])
}

// setNode changes a node's annotation and its allocatable GPUs.
func (c *cluster) setNodeDevices(t *testing.T, name, annotation string, allocatable int64) {
	var ann any
	if annotation != "" {
		ann = annotation
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{hivesched.AnnotationDeviceHealth: ann}}})
	require.NoError(t, err)
	_, err = c.kube.CoreV1().Nodes().Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	n, err := c.kube.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	n.Status.Allocatable["nvidia.com/gpu"] = *resource.NewQuantity(allocatable, resource.DecimalSI)
	_, err = c.kube.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// nodeEvent waits for an event about a node containing want.
func (c *cluster) nodeEvent(t *testing.T, node, want string) string {
	return c.objectEvent(t, "Node", node, want)
}

// objectEvent waits for an event (core or events.k8s.io) about the object
// of that kind and name containing want, in any namespace (an event about a
// cluster-scoped object is written to "default").
func (c *cluster) objectEvent(t *testing.T, kind, name, want string) string {
	var found string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := c.kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && strings.Contains(e.Reason+": "+e.Message, want) {
				found = e.Reason + ": " + e.Message
				return true, nil
			}
		}
		evs2, err := c.kube.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range evs2.Items {
			if e.Regarding.Kind == kind && e.Regarding.Name == name && strings.Contains(e.Reason+": "+e.Note, want) {
				found = e.Reason + ": " + e.Note
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no event about %s %s containing %q", kind, name, want)
	return found
}

// Device health from what a node reports (issue 14, seed 003): a device
// listed in hivesched.io/device-health in any state but good is not placed
// on; a node whose allocatable GPUs drop below its capacity loses that many
// devices; Bad/Maintenance/Retired devices are lost capacity in the VC's
// status, Looping/Unknown ones are held back but not lost.
func TestDeviceHealthFromNodes(t *testing.T) {
	c := startCluster(t)
	const ns = "dh"
	c.createNodes(t, ns, 1, 2, 0)
	c.createNamespace(t, ns)
	c.createVC(t, "dh-a", []string{ns}, "V100-NODE", 2)
	c.startScheduler(t, physicalCluster(ns, 1, 2, 0))

	// n0: device 2 being checked, and an entry that names no device; n1: the
	// device plugin withdrew one GPU.
	c.setNodeDevices(t, "dh-r0-n0", "2=looping, x=bad", 8)
	c.setNodeDevices(t, "dh-r0-n1", "", 7)
	c.nodeEvent(t, "dh-r0-n0", `DeviceHealthInvalid: device health annotations: entries not understood, ignored: hivesched.io/device-health "x=bad"`)
	st := c.waitVCStatus(t, "dh-a", func(st hv1.VirtualClusterStatus) bool { return st.LostLeafCells == 1 })
	require.Zero(t, st.ForeignLeafCells)
	cond := cellsLost(st)
	require.NotNil(t, cond)
	require.Equal(t, "UnhealthyHardware", cond.Reason)
	require.Contains(t, cond.Message, "on nodes dh-r0-n1")

	// No node has 8 good GPUs; each has 7.
	j8 := gangPods(ns, "j8", "dh-a", 0, 1, 8)
	c.createPods(t, j8)
	c.waitEvent(t, j8[0], "FailedScheduling", 30*time.Second)
	j7 := gangPods(ns, "j7", "dh-a", 0, 2, 7)
	c.createPods(t, j7)
	c.waitBound(t, j7, 30*time.Second)
	for _, p := range c.fresh(t, j7) {
		if p.Spec.NodeName == "dh-r0-n0" {
			require.NotContains(t, strings.Split(p.Annotations[hivesched.AnnotationLeafCellIndices], ","), "2", "device 2 is being checked")
		}
	}
	c.deletePods(t, j7)

	// Maintenance is lost capacity; back to good, the whole node is there.
	c.setNodeDevices(t, "dh-r0-n0", "2=maintenance", 8)
	c.waitVCStatus(t, "dh-a", func(st hv1.VirtualClusterStatus) bool { return st.LostLeafCells == 2 })
	c.setNodeDevices(t, "dh-r0-n0", "", 8)
	require.Equal(t, []string{"dh-r0-n0"}, c.waitBound(t, j8, 30*time.Second))
	c.waitVCStatus(t, "dh-a", func(st hv1.VirtualClusterStatus) bool { return st.LostLeafCells == 1 && st.UsedLeafCells == 8 })
}

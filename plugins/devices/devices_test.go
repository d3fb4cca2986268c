package devices

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

func TestParseDeviceHealth(t *testing.T) {
	got, bad := parseDeviceHealth(" 3, 5=Maintenance,T4/2=retired,6=looping,7=unknown,1=good,,")
	require.Empty(t, bad)
	require.Equal(t, []cellcore.DeviceStatus{
		{Index: 3, Health: cellcore.DeviceBad},
		{Index: 5, Health: cellcore.DeviceMaintenance},
		{LeafCellType: "T4", Index: 2, Health: cellcore.DeviceRetired},
		{Index: 6, Health: cellcore.DeviceLooping},
		{Index: 7, Health: cellcore.DeviceUnknown},
	}, got)
	got, bad = parseDeviceHealth("x,-1,2=broken,4=bad,99999999999")
	require.Equal(t, []cellcore.DeviceStatus{{Index: 4, Health: cellcore.DeviceBad}}, got)
	require.Len(t, bad, 4)
	require.Contains(t, bad[2], `unknown state "broken"`)
}

func gpuNode(capacity, allocatable int64, ann string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: v1.NodeStatus{
		Capacity:    v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(capacity, resource.DecimalSI)},
		Allocatable: v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(allocatable, resource.DecimalSI)},
	}}
	if ann != "" {
		n.Annotations = map[string]string{AnnotationDeviceHealth: ann}
	}
	return n
}

// A device plugin withdraws a failed device from allocatable; when the
// operator names it too, it is not counted twice.
func TestNodeDevicesFromAllocatable(t *testing.T) {
	in, bad := nodeDevices(gpuNode(8, 6, ""), "nvidia.com/gpu")
	require.Empty(t, bad)
	require.EqualValues(t, 2, in.unhealthy)
	in, _ = nodeDevices(gpuNode(8, 6, "3"), "nvidia.com/gpu")
	require.EqualValues(t, 1, in.unhealthy)
	require.Len(t, in.devices, 1)
	in, _ = nodeDevices(gpuNode(8, 7, "3,4"), "nvidia.com/gpu")
	require.Zero(t, in.unhealthy)
	in, _ = nodeDevices(gpuNode(8, 8, ""), "nvidia.com/gpu")
	require.Zero(t, in.unhealthy)
	in, _ = nodeDevices(&v1.Node{}, "nvidia.com/gpu")
	require.Zero(t, in.unhealthy, "a node that reports no GPUs")
}

func TestDeviceInputsForeignCounts(t *testing.T) {
	d := newInputs()
	require.Equal(t, []string{"n0"}, d.setForeign("a", "ns/a", "n0", Taken{Devices: 2}))
	require.True(t, d.announce("a"))
	require.False(t, d.announce("a"), "once")
	require.Nil(t, d.setForeign("a", "ns/a", "n0", Taken{Devices: 2}), "unchanged")
	require.Equal(t, []string{"n0"}, d.setForeign("b", "ns/b", "n0", Taken{Devices: 3}))
	require.EqualValues(t, 5, d.coreInput("n0").Foreign)
	names, more := d.foreignPodsOn([]string{"n0"}, 1)
	require.Equal(t, []string{"ns/a"}, names)
	require.Equal(t, 1, more)
	require.Equal(t, []string{"n0"}, d.setForeign("a", "ns/a", "", Taken{Devices: 0}))
	require.EqualValues(t, 3, d.coreInput("n0").Foreign)
	require.False(t, d.announce("a"), "gone")
	require.Equal(t, []string{"n0"}, d.resetForeign())
	require.Zero(t, d.coreInput("n0").Foreign)
	require.True(t, d.setNode("n1", nodeDeviceInput{unhealthy: 1}))
	require.False(t, d.setNode("n1", nodeDeviceInput{unhealthy: 1}))
	require.EqualValues(t, 1, d.coreInput("n1").Unhealthy)
}

func TestNodeHealth(t *testing.T) {
	ready := func(s v1.ConditionStatus) *v1.Node {
		return &v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: s}}}}
	}
	require.Equal(t, cellcore.NodeHealthy, NodeHealth(ready(v1.ConditionTrue)))
	require.Equal(t, cellcore.NodeBad, NodeHealth(ready(v1.ConditionFalse)))
	require.Equal(t, cellcore.NodeBad, NodeHealth(ready(v1.ConditionUnknown)))
	require.Equal(t, cellcore.NodeUnknown, NodeHealth(&v1.Node{}))
	cordoned := ready(v1.ConditionTrue)
	cordoned.Spec.Unschedulable = true
	require.Equal(t, cellcore.NodeMaintenance, NodeHealth(cordoned))
	retired := ready(v1.ConditionTrue)
	retired.Labels = map[string]string{LabelHealth: "retired"}
	require.Equal(t, cellcore.NodeRetired, NodeHealth(retired))
}

// TestForeignCountDoesNotWrap (issue 28, finding 11): a foreign pod whose
// GPU request cannot be read counts as every device of its node
// (MaxInt32); beside another foreign pod the node's sum must stay the most
// the core can take, not wrap negative (which freed the node).
func TestForeignCountDoesNotWrap(t *testing.T) {
	d := newInputs()
	d.setForeign("a", "ns/a", "n0", Taken{Devices: 8})
	d.setForeign("b", "ns/b", "n0", Taken{Devices: math.MaxInt32})
	require.EqualValues(t, math.MaxInt32, d.coreInput("n0").Foreign)
	d.setForeign("b", "ns/b", "", Taken{Devices: 0})
	require.EqualValues(t, 8, d.coreInput("n0").Foreign)
}

// Issue 28, finding 4: the operator's verdict is read from a label a
// kubelet cannot touch (NodeRestriction) as well as from hivesched's own;
// the worse counts, so a node that drops or rewrites hivesched.io/health
// where no policy stops it still stays out of service.
func TestOperatorVerdictLabels(t *testing.T) {
	node := func(labels map[string]string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
	}
	require.Equal(t, cellcore.NodeBad, NodeHealth(node(map[string]string{LabelHealthRestricted: "bad"})))
	require.Equal(t, cellcore.NodeBad, NodeHealth(node(map[string]string{LabelHealthRestricted: "bad", LabelHealth: "good"})),
		"the node relabelled itself good: the restricted verdict holds")
	require.Equal(t, cellcore.NodeRetired, NodeHealth(node(map[string]string{LabelHealthRestricted: "bad", LabelHealth: "retired"})))
	require.Equal(t, cellcore.NodeMaintenance, NodeHealth(node(map[string]string{LabelHealthRestricted: "maintenance", LabelHealth: "looping"})))
	require.Equal(t, cellcore.NodeHealthy, NodeHealth(node(map[string]string{LabelHealthRestricted: "good"})))
	require.Equal(t, cellcore.NodeHealthy, NodeHealth(node(map[string]string{LabelHealth: "fine"})), "an unknown word is no verdict")
}

// Issue 28, finding 4: devices the node reports itself can only get worse
// than the operator says; each device counts at the worse state of the
// two annotations.
func TestNodeReportedDeviceHealthOnlyWorsens(t *testing.T) {
	n := gpuNode(8, 8, "3=bad,5=maintenance")
	n.Annotations[AnnotationNodeDeviceHealth] = "3=good,5=retired,6=looping,x"
	in, bad := nodeDevices(n, "nvidia.com/gpu")
	require.Equal(t, []cellcore.DeviceStatus{
		{Index: 6, Health: cellcore.DeviceLooping},
		{Index: 3, Health: cellcore.DeviceBad},
		{Index: 5, Health: cellcore.DeviceRetired},
	}, in.devices, "3 stays bad though the node says good; 5 gets worse; 6 is the node's own")
	require.Len(t, bad, 1)
	require.Contains(t, bad[0], AnnotationNodeDeviceHealth+` "x"`)

	// An untyped and a typed entry for one device: the worse is applied last.
	n = gpuNode(8, 8, "V100/2=bad")
	n.Annotations[AnnotationNodeDeviceHealth] = "2=unknown"
	in, _ = nodeDevices(n, "nvidia.com/gpu")
	require.Equal(t, cellcore.DeviceBad, in.devices[len(in.devices)-1].Health)
}

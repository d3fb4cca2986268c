package hivesched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// TestEntityPod: QueueSort keys a pod by itself and a pod group (the
// Workload API's queued entity) by its first unscheduled member, a
// composite group's from its children.
func TestEntityPod(t *testing.T) {
	pod := func(name string) *v1.Pod { return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	a, b := pod("a"), pod("b")
	queuedPod := &framework.QueuedPodInfo{PodInfo: &framework.PodInfo{Pod: a}}
	require.Same(t, a, entityPod(queuedPod))

	group := &framework.QueuedPodGroupInfo{PodGroupInfo: &framework.PodGroupInfo{
		PodGroup: &schedv1beta1.PodGroup{}, UnscheduledPods: []*v1.Pod{b, a}}}
	require.Same(t, b, entityPod(group))

	composite := &framework.QueuedPodGroupInfo{PodGroupInfo: &framework.PodGroupInfo{
		Children: []*framework.PodGroupInfo{{PodGroup: &schedv1beta1.PodGroup{}}, {PodGroup: &schedv1beta1.PodGroup{}, UnscheduledPods: []*v1.Pod{a}}}}}
	require.Same(t, a, entityPod(composite))
	require.Nil(t, entityPod(&framework.QueuedPodGroupInfo{PodGroupInfo: &framework.PodGroupInfo{}}))
	require.Equal(t, []*v1.Pod{a}, podGroupPods(composite), "each pod once")
}

// TestRootCycle: a composite pod group's children run under cycle states of
// their own, below their parent's placement; a hold is keyed by the root.
func TestRootCycle(t *testing.T) {
	root := framework.NewCycleState()
	placement := framework.NewCycleState()
	placement.SetPodGroupSchedulingCycle(root)
	child := framework.NewCycleState()
	child.SetPlacementCycleState(placement)
	require.Same(t, root, rootCycle(child))
	require.Same(t, root, rootCycle(root))
	require.Nil(t, rootCycle(nil))
}

// TestGroupHolds: holds are taken once, by group, by cycle or by age.
func TestGroupHolds(t *testing.T) {
	h := newGroupHolds()
	c1, c2 := framework.NewCycleState(), framework.NewCycleState()
	require.False(t, h.take("ns/a"), "nothing held")
	h.add("ns/a", c1)
	h.add("ns/b", c2)
	require.True(t, h.heldBy("ns/a", c1))
	require.False(t, h.heldBy("ns/a", c2))
	require.Equal(t, []string{"ns/b"}, h.takeIf(func(x groupHold) bool { return x.cycle != fwk.PodGroupCycleState(c1) }))
	require.True(t, h.take("ns/a"))
	require.False(t, h.take("ns/a"), "taken once")
	require.Equal(t, int32(0), h.n.Load())
	h.add("ns/c", c1)
	require.Empty(t, h.takeIf(func(x groupHold) bool { return x.since.Before(time.Now().Add(-time.Minute)) }), "young")
}

// TestPreemptNode: members are nominated to distinct slots of their size,
// their own slot first.
func TestPreemptNode(t *testing.T) {
	d := &cellcore.Decision{Pods: []cellcore.PodPlacement{
		{Node: "n1", LeafCellNumber: 8}, {Node: "n2", LeafCellNumber: 8}, {Node: "n3", LeafCellNumber: 4, PodKey: "own"}, {Node: "n4", LeafCellNumber: 4},
	}}
	taken := map[int]bool{}
	require.Equal(t, "n1", preemptNode(d, "x", 8, taken))
	require.Equal(t, "n2", preemptNode(d, "y", 8, taken))
	require.Equal(t, "", preemptNode(d, "z", 8, taken), "no slot left of that size")
	require.Equal(t, "n3", preemptNode(d, "own", 4, taken))
	require.Equal(t, "n4", preemptNode(d, "w", 4, taken))
}

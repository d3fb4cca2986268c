package affinitygroups

import (
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/types"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/hivesched/hivesched/apis/generated/clientset/versioned/fake"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

type members map[string][]*v1.Pod

func (m members) Pods(group string) []*v1.Pod { return m[group] }

type vcs map[string]*hv1.VirtualCluster

func (v vcs) Object(name string) *hv1.VirtualCluster { return v[name] }

// A group that waits in the core longer than its VC's pending timeout
// fails (the plugin is told, with its pods), its pods are refused from
// then on, and its implicit object is created Failed.
func TestPendingTimeout(t *testing.T) {
	core, err := cellcore.New(cellcore.Config{
		CellTypes:     map[string]cellcore.CellTypeSpec{"NODE": {ChildCellType: "GPU", ChildCellNumber: 4, IsNodeLevel: true}},
		PhysicalCells: []cellcore.PhysicalCellSpec{{CellType: "NODE", CellAddress: "n0"}},
	})
	require.NoError(t, err)
	require.NoError(t, core.SetNodeHealth("n0", cellcore.NodeHealthy))
	_, err = core.SetVirtualCluster(cellcore.VirtualClusterSpec{Name: "vc", VirtualCells: []cellcore.VirtualCellSpec{{CellType: "NODE", CellNumber: 1}}})
	require.NoError(t, err)
	spec := func(name string) cellcore.AffinityGroupSpec {
		return cellcore.AffinityGroupSpec{Name: "ns/" + name, Namespace: "ns", VirtualCluster: "vc", Members: []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 4}}}
	}
	d, err := core.Schedule(spec("first"))
	require.NoError(t, err)
	require.Equal(t, cellcore.Placed, d.Kind)
	d, err = core.Schedule(spec("waits"))
	require.NoError(t, err)
	require.Equal(t, cellcore.Wait, d.Kind, "the VC's cells are taken")

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "waits-0", UID: "u0", CreationTimestamp: metav1.Now()}}
	client := fake.NewSimpleClientset()
	var timedOut []*v1.Pod
	tr := New(Config{Writes: true, Client: client, Pods: kubefake.NewSimpleClientset(), Core: core,
		Members:         members{"ns/waits": {pod}},
		VirtualClusters: vcs{"vc": {Spec: hv1.VirtualClusterSpec{PendingTimeoutSeconds: ptr.To[int32](1)}}},
		Every:           time.Second, Retention: time.Hour, Recovered: func() bool { return true },
		TimedOut: func(_ klog.Logger, group string, pods []*v1.Pod) {
			require.Equal(t, "ns/waits", group)
			timedOut = pods
		}})
	tr.Seen(pod, &podrequest.Request{Group: spec("waits"), LeafCellNumber: 4})
	tr.Waiting("ns/waits", "Waiting", "it waits for ns/first", nil)

	ctx, logger := context.Background(), ktesting.NewLogger(t, ktesting.NewConfig())
	start := time.Now()
	next := tr.write(ctx, logger, start, true)
	require.False(t, next.IsZero())
	require.False(t, next.After(start.Add(time.Second)), "woken by the deadline at the latest")
	require.Empty(t, tr.Ended("ns/waits", pod))
	require.Nil(t, timedOut)
	_, err = client.HiveschedV1alpha1().AffinityGroups("ns").Get(ctx, "waits", metav1.GetOptions{})
	require.Error(t, err, "an implicit object is created once the group has been known for an interval")

	tr.write(ctx, logger, start.Add(2*time.Second), false)
	require.Equal(t, []*v1.Pod{pod}, timedOut)
	require.Contains(t, tr.Ended("ns/waits", pod), "affinity group ns/waits is Failed (PendingTimeout)")
	ag, err := client.HiveschedV1alpha1().AffinityGroups("ns").Get(ctx, "waits", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, hv1.ManagedByHivesched, ag.Labels[hv1.LabelManagedBy])
	require.Equal(t, hv1.AffinityGroupFailed, ag.Status.Phase)
	require.Equal(t, "PendingTimeout", ag.Status.Reason)
	require.NotNil(t, ag.Status.AdmittedTime)

	later := pod.DeepCopy()
	later.UID, later.CreationTimestamp = "u1", metav1.NewTime(time.Now().Add(time.Hour))
	require.Empty(t, tr.Ended("ns/waits", later), "a pod of a new attempt may be scheduled")
}

// newTracker is a tracker over a one-node core with VC "vc" whose pending
// timeout is timeout (0: none), and a fake client.
func newTracker(t *testing.T, timeout int32, m members, timedOut func(string)) (*Tracker, *cellcore.Core, *fake.Clientset) {
	core, err := cellcore.New(cellcore.Config{
		CellTypes:     map[string]cellcore.CellTypeSpec{"NODE": {ChildCellType: "GPU", ChildCellNumber: 4, IsNodeLevel: true}},
		PhysicalCells: []cellcore.PhysicalCellSpec{{CellType: "NODE", CellAddress: "n0"}},
	})
	require.NoError(t, err)
	require.NoError(t, core.SetNodeHealth("n0", cellcore.NodeHealthy))
	_, err = core.SetVirtualCluster(cellcore.VirtualClusterSpec{Name: "vc", VirtualCells: []cellcore.VirtualCellSpec{{CellType: "NODE", CellNumber: 1}}})
	require.NoError(t, err)
	vc := &hv1.VirtualCluster{}
	if timeout > 0 {
		vc.Spec.PendingTimeoutSeconds = ptr.To(timeout)
	}
	client := fake.NewSimpleClientset()
	tr := New(Config{Writes: true, Client: client, Pods: kubefake.NewSimpleClientset(), Core: core, Members: m,
		VirtualClusters: vcs{"vc": vc}, Every: time.Second, Retention: time.Hour, Recovered: func() bool { return true },
		TimedOut: func(_ klog.Logger, group string, _ []*v1.Pod) {
			if timedOut != nil {
				timedOut(group)
			}
		}})
	return tr, core, client
}

func groupSpec(name string) cellcore.AffinityGroupSpec {
	return cellcore.AffinityGroupSpec{Name: "ns/" + name, Namespace: "ns", VirtualCluster: "vc", Members: []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 4}}}
}

// TestPendingTimeoutOwnTimer (issue 28, finding 5): the pending timeout is
// decided on its own timer, at the group's deadline, with no pass of the
// writer (whose rate-limited writes every tenant shares) in between.
func TestPendingTimeoutOwnTimer(t *testing.T) {
	fired := make(chan string, 1)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "waits-0", UID: "u0", CreationTimestamp: metav1.Now()}}
	tr, core, _ := newTracker(t, 1, members{"ns/waits": {pod}}, func(g string) { fired <- g })
	_, err := core.Schedule(groupSpec("first"))
	require.NoError(t, err)
	_, err = core.Schedule(groupSpec("waits"))
	require.NoError(t, err)
	tr.Seen(pod, &podrequest.Request{Group: groupSpec("waits"), LeafCellNumber: 4})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	tr.write(ctx, logger, time.Now(), true) // admits it: its deadline is set
	go tr.runTimeouts(ctx, logger)
	select {
	case g := <-fired:
		require.Equal(t, "ns/waits", g)
	case <-time.After(10 * time.Second):
		t.Fatal("the pending timeout did not fire without the writer")
	}
	require.Contains(t, tr.Ended("ns/waits", pod), "PendingTimeout")
}

// TestTrackerForgetsAndCaps (issue 28, finding 5): an explicit group deleted
// before any pod came is forgotten; one namespace cannot make the tracker
// follow more than MaxPerNamespace groups, and others are not held back.
func TestTrackerForgetsAndCaps(t *testing.T) {
	tr, _, _ := newTracker(t, 0, members{}, nil)
	ag := &hv1.AffinityGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "early", UID: "ag1"},
		Spec: hv1.AffinityGroupSpec{VirtualCluster: "vc", Members: []hv1.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 4}}}}
	for i := 0; i < 1000; i++ {
		ag.UID = types.UID(fmt.Sprint("ag", i))
		tr.Object(ag, false)
		tr.Object(ag, true)
	}
	require.Empty(t, tr.groups, "1,000 created and deleted leave nothing")

	for i := 0; i <= MaxPerNamespace; i++ {
		spec := groupSpec(fmt.Sprint("g", i))
		tr.Seen(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("p", i), UID: types.UID(fmt.Sprint("p", i))}},
			&podrequest.Request{Group: spec, LeafCellNumber: 4})
	}
	require.Len(t, tr.groups, MaxPerNamespace)
	other := groupSpec("x")
	other.Name, other.Namespace = "other/x", "other"
	tr.Seen(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "x", UID: "x"}}, &podrequest.Request{Group: other, LeafCellNumber: 4})
	require.Contains(t, tr.groups, "other/x")
}

// TestFairOrder: a pass's writes take the namespaces in turn.
func TestFairOrder(t *testing.T) {
	var work []item
	for _, k := range []string{"a/1", "a/2", "a/3", "b/1", "c/1", "c/2"} {
		ns, _ := splitGroup(k)
		work = append(work, item{key: k, e: &entry{namespace: ns}})
	}
	var got []string
	for _, w := range fairOrder(work, time.Unix(0, 0)) {
		got = append(got, w.key)
	}
	require.Equal(t, []string{"a/1", "b/1", "c/1", "a/2", "c/2", "a/3"}, got)
}

// TestObjectForInvalidName (issue 28, finding 5): a group whose name is not
// an object name gets a valid object, annotated with the name, and the
// informer's copy maps back to the group.
func TestObjectForInvalidName(t *testing.T) {
	tr, core, client := newTracker(t, 0, members{}, nil)
	spec := groupSpec("alice~job1/default")
	_, err := core.Schedule(spec)
	require.NoError(t, err)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "p", CreationTimestamp: metav1.Now()}}
	tr.Seen(pod, &podrequest.Request{Group: spec, LeafCellNumber: 4})
	ctx, logger := context.Background(), ktesting.NewLogger(t, ktesting.NewConfig())
	tr.write(ctx, logger, time.Now().Add(time.Minute), true)
	list, err := client.HiveschedV1alpha1().AffinityGroups("ns").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	obj := list.Items[0]
	require.Equal(t, ObjectName("alice~job1/default"), obj.Name)
	require.Equal(t, "alice~job1/default", obj.Annotations[AnnotationGroupName])
	require.Equal(t, "ns/alice~job1/default", groupKey(&obj))
}

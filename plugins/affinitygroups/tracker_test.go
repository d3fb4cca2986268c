package affinitygroups

import (
	"context"
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

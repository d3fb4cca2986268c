package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// TestForgedPlacementAfterRestart (issue 10): a tenant creates a pod with
// spec.nodeName and a forged hivesched.io/placement naming another tenant's
// VC at priority 1000, and requests GPUs. After a restart the record counts
// for nothing: no affinity group of it exists (no AffinityGroup either), the
// other tenant's VC uses none of its cells for it and its jobs bind there
// without preempting anything; the GPUs the pod really requests are counted
// as devices taken on its node (foreign, visible in the VC's status), never
// as VC cells. Recovery reads signed pod records only, never AffinityGroup
// status, which a tenant cannot write anyway (docs/affinitygroups.md).
func TestForgedPlacementAfterRestart(t *testing.T) {
	c := startCluster(t)
	c.createNodes(t, "fpr", 1, 2, 0)
	c.createNamespace(t, "fpr-a")
	c.createNamespace(t, "fpr-b")
	c.createVC(t, "fpr-va", []string{"fpr-a"}, "V100-NODE", 1)
	c.createVC(t, "fpr-vb", []string{"fpr-b"}, "V100-NODE", 1)
	s := c.startScheduler(t, physicalCluster("fpr", 1, 2, 0))
	real := gangPods("fpr-b", "real", "fpr-vb", 0, 1, 8)
	c.createPods(t, real)
	realNode := c.waitBound(t, real, 30*time.Second)[0]
	otherNode := "fpr-r0-n0"
	if realNode == otherNode {
		otherNode = "fpr-r0-n1"
	}
	c.waitAG(t, "fpr-b", "real", phaseIs(hv1.AffinityGroupRunning))

	// Tenant b: a pod on VC a's node, 2 GPUs, a record claiming a
	// priority-1000 group of namespace a holding all 8 GPUs of the node.
	forged := gangPods("fpr-b", "forged", "fpr-vb", 0, 1, 2)[0]
	forged.Spec.NodeName = otherNode
	forged.Annotations[hivesched.AnnotationPlacement] = `{"group":"fpr-a/x","virtualCluster":"fpr-va","priority":1000,` +
		`"members":[{"podNumber":1,"leafCellNumber":8}],"node":"` + otherNode + `","leafCellIndices":[0,1,2,3,4,5,6,7]}`
	forged.Annotations[hivesched.AnnotationPlacementSignature] = "forged"
	c.createPods(t, []*v1.Pod{forged})
	// And an AffinityGroup with a made-up status: the status subresource
	// drops it on create (tenants need no, and get no, status access).
	made, err := c.vc.HiveschedV1alpha1().AffinityGroups("fpr-a").Create(t.Context(), &hv1.AffinityGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "made-up"},
		Spec:       hv1.AffinityGroupSpec{VirtualCluster: "fpr-va", Priority: ptr.To[int32](1000), Members: []hv1.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 8}}},
		Status:     hv1.AffinityGroupStatus{Phase: hv1.AffinityGroupRunning, State: "Allocated", Pods: []hv1.AffinityGroupPodStatus{{Name: "p", Node: otherNode, LeafCellIndices: []int32{0, 1, 2, 3, 4, 5, 6, 7}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Empty(t, made.Status.Phase, "status is not written on create")
	require.Empty(t, made.Status.Pods)

	s.stop()
	c.startScheduler(t, physicalCluster("fpr", 1, 2, 0))
	c.waitEvent(t, forged, "PlacementNotTrusted", 20*time.Second)
	c.waitEvent(t, forged, "its 2 nvidia.com/gpu on node "+otherNode+" are counted as taken", 20*time.Second)
	// VC a: the 2 devices the pod really holds are lost (foreign), none of
	// its cells is used by the forged group.
	st := c.waitVCStatus(t, "fpr-va", func(st hv1.VirtualClusterStatus) bool {
		return st.ForeignLeafCells == 2 && st.UsedLeafCells == 0 && st.AffinityGroups.Allocated == 0
	})
	require.Equal(t, int32(2), st.LostLeafCells)
	// The real group was recovered from its signed record.
	c.waitVCStatus(t, "fpr-vb", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 8 })
	// No affinity group came of the forged record or the pod.
	for _, ns := range []string{"fpr-a", "fpr-b"} {
		for _, name := range []string{"x", "forged"} {
			_, err := c.vc.HiveschedV1alpha1().AffinityGroups(ns).Get(t.Context(), name, metav1.GetOptions{})
			require.True(t, apierrors.IsNotFound(err), "AffinityGroup %s/%s: %v", ns, name, err)
		}
	}

	// VC a's own job of 6 GPUs binds on its node, beside the pod's 2, and
	// preempts nothing (there is no priority-1000 group to preempt or to
	// wait for).
	a := gangPods("fpr-a", "a", "fpr-va", 0, 1, 6)
	c.createPods(t, a)
	require.Equal(t, []string{otherNode}, c.waitBound(t, a, 30*time.Second))
	c.waitAG(t, "fpr-a", "a", phaseIs(hv1.AffinityGroupRunning))
	for _, e := range c.events(t, forged) {
		require.NotContains(t, e, "Preempted")
	}
	require.Nil(t, c.getPod(t, forged).DeletionTimestamp)
	// The user-made AffinityGroup has no pods: the scheduler writes its
	// status (New, waiting for members), and never places anything for it.
	ag := c.waitAG(t, "fpr-a", "made-up", func(ag *hv1.AffinityGroup) bool { return ag.Status.Phase == hv1.AffinityGroupNew })
	require.Equal(t, "0/1", ag.Status.MembersSummary)
	require.Empty(t, ag.Status.Pods)
	// Its node is full now (6 for a, 2 the pod really holds): one more job
	// of VC a waits, and its reason names only a's own group; once the
	// forged pod is gone, its devices come back and the job binds.
	more := gangPods("fpr-a", "more", "fpr-va", 0, 1, 2)
	c.createPods(t, more)
	reason := c.failedScheduling(t, more[0], "fpr-a/more", 20*time.Second)
	require.Contains(t, reason, "(fpr-a/a)")
	require.NotContains(t, reason, "fpr-a/x")
	c.deletePods(t, []*v1.Pod{forged})
	c.waitBound(t, more, 30*time.Second)
}

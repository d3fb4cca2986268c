package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// withArg sets one HiveSched arg.
func withArg(key string, value any) profileOption {
	return func(profile map[string]any) {
		for _, pc := range profile["pluginConfig"].([]any) {
			if pc.(map[string]any)["name"] == hivesched.Name {
				pc.(map[string]any)["args"].(map[string]any)[key] = value
			}
		}
	}
}

// waitAG waits until AffinityGroup ns/name exists and ok holds, and returns it.
func (c *cluster) waitAG(t *testing.T, ns, name string, ok func(*hv1.AffinityGroup) bool) *hv1.AffinityGroup {
	t.Helper()
	var last *hv1.AffinityGroup
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ag, err := c.vc.HiveschedV1alpha1().AffinityGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = ag
		return ok(ag), nil
	})
	require.NoError(t, err, "AffinityGroup %s/%s: %+v", ns, name, last)
	return last
}

func phaseIs(p hv1.AffinityGroupPhase) func(*hv1.AffinityGroup) bool {
	return func(ag *hv1.AffinityGroup) bool { return ag.Status.Phase == p }
}

// finishPods marks pods Succeeded (or Failed), as a kubelet would.
func (c *cluster) finishPods(t *testing.T, pods []*v1.Pod, phase v1.PodPhase) {
	for _, p := range pods {
		got := c.getPod(t, p)
		got.Status.Phase = phase
		_, err := c.kube.CoreV1().Pods(p.Namespace).UpdateStatus(t.Context(), got, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

// runPods marks bound pods Running.
func (c *cluster) runPods(t *testing.T, pods []*v1.Pod) {
	for _, p := range pods {
		got := c.getPod(t, p)
		got.Status.Phase = v1.PodRunning
		_, err := c.kube.CoreV1().Pods(p.Namespace).UpdateStatus(t.Context(), got, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

// TestAffinityGroupImplicit (issue 10): the scheduler creates an
// AffinityGroup for every gang it sees, owned by the pods' controller, and
// its status follows the seed-002 lifecycle: Accepted while it waits (with
// the core's one sentence), Running once every member is bound (nodes and
// device indices per pod), Completed when its pods succeed, Failed when it
// is preempted, Rejected when its VC refuses its namespace; a group with
// no owner Expires after the retention time and is deleted.
func TestAffinityGroupImplicit(t *testing.T) {
	c := startCluster(t)
	c.createNodes(t, "ag", 1, 2, 0)
	c.createNamespace(t, "ag")
	c.createNamespace(t, "ag-other")
	c.createVC(t, "ag-vc", []string{"ag"}, "V100-NODE", 1)
	c.startScheduler(t, physicalCluster("ag", 1, 2, 0), withArg("affinityGroupRetentionSeconds", 3))
	ags := c.vc.HiveschedV1alpha1().AffinityGroups("ag")

	t.Run("a Job's gang: Running with its cells, Completed, owned by the Job", func(t *testing.T) {
		job, err := c.kube.BatchV1().Jobs("ag").Create(t.Context(), &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "train"},
			Spec: batchv1.JobSpec{ManualSelector: ptr.To(true), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"job": "train"}},
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": "train"}},
					Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{Name: "m", Image: "busybox"}}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		pods := gangPods("ag", "train", "ag-vc", 1, 2, 4)
		for _, p := range pods {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}
		}
		c.createPods(t, pods)
		nodes := c.waitBound(t, pods, 30*time.Second)
		c.runPods(t, pods)

		ag := c.waitAG(t, "ag", "train", func(ag *hv1.AffinityGroup) bool {
			return ag.Status.Phase == hv1.AffinityGroupRunning && ag.Status.Members.Running == 2
		})
		require.Equal(t, hv1.ManagedByHivesched, ag.Labels[hv1.LabelManagedBy])
		require.Equal(t, []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: job.UID}}, ag.OwnerReferences,
			"garbage-collected with its Job")
		require.Equal(t, "ag-vc", ag.Spec.VirtualCluster)
		require.Equal(t, int32(1), *ag.Spec.Priority)
		require.Equal(t, []hv1.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 4}}, ag.Spec.Members)
		st := ag.Status
		require.Equal(t, "Allocated", st.State)
		require.Equal(t, "2/2", st.MembersSummary)
		require.Equal(t, hv1.AffinityGroupMemberCounts{Total: 2, Bound: 2, Running: 2}, st.Members)
		require.NotNil(t, st.AdmittedTime)
		require.NotNil(t, st.FirstBoundTime)
		require.NotNil(t, st.RunningTime)
		require.Nil(t, st.FinishedTime)
		require.Len(t, st.Pods, 2)
		for i, p := range pods {
			got := c.getPod(t, p)
			ps := st.Pods[i]
			require.Equal(t, p.Name, ps.Name)
			require.Equal(t, nodes[i], ps.Node)
			require.Equal(t, got.Annotations[hivesched.AnnotationLeafCellIndices], joinIndices(ps.LeafCellIndices), "the pod's devices")
			require.Len(t, ps.LeafCellIndices, 4)
			require.Equal(t, "V100", ps.LeafCellType)
		}
		cond := findCondition(st.Conditions, hv1.ConditionScheduled)
		require.NotNil(t, cond)
		require.Equal(t, metav1.ConditionTrue, cond.Status)

		c.finishPods(t, pods, v1.PodSucceeded)
		ag = c.waitAG(t, "ag", "train", phaseIs(hv1.AffinityGroupCompleted))
		require.Equal(t, "Deleted", ag.Status.State, "its cells are free")
		require.Equal(t, "Succeeded", ag.Status.Reason)
		require.Equal(t, int32(2), ag.Status.Members.Succeeded)
		require.NotNil(t, ag.Status.FinishedTime)
		c.waitVCStatus(t, "ag-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 0 })
		// Owned by the Job: the garbage collector deletes it with the Job;
		// the scheduler marks it Expired after the retention and leaves it.
		c.waitAG(t, "ag", "train", phaseIs(hv1.AffinityGroupExpired))
		c.deletePods(t, pods)
	})

	t.Run("a waiting group is Accepted with the core's reason; a group without owner expires and is deleted", func(t *testing.T) {
		hold := gangPods("ag", "hold", "ag-vc", 5, 1, 8)
		c.createPods(t, hold)
		c.waitBound(t, hold, 30*time.Second)
		big := gangPods("ag", "big", "ag-vc", 1, 2, 4)
		c.createPods(t, big)
		ag := c.waitAG(t, "ag", "big", func(ag *hv1.AffinityGroup) bool {
			return ag.Status.Phase == hv1.AffinityGroupAccepted && ag.Status.Reason == "Waiting"
		})
		require.Equal(t, "Pending", ag.Status.State)
		require.Equal(t, "0/2", ag.Status.MembersSummary)
		require.Contains(t, ag.Status.Message, `virtual cluster "ag-vc"`)
		require.Contains(t, ag.Status.Message, "ag/hold", "names the group that holds the cells")
		event := c.failedScheduling(t, big[0], "ag/big", 20*time.Second)
		require.Contains(t, event, ag.Status.Message, "the same sentence as the pod's event")
		require.Empty(t, ag.OwnerReferences)
		c.deletePods(t, hold)
		c.waitGone(t, hold, 20*time.Second)
		// The cells came free: big runs, then its pods are deleted.
		c.waitBound(t, big, 30*time.Second)
		c.waitAG(t, "ag", "big", phaseIs(hv1.AffinityGroupRunning))

		c.deletePods(t, big)
		c.waitGone(t, big, 20*time.Second)
		// Deleted whole by a user while it ran: it ended, it did not fail
		// (issue 46).
		ag = c.waitAG(t, "ag", "big", phaseIs(hv1.AffinityGroupCompleted))
		require.Equal(t, "Deleted", ag.Status.Reason, "deleted while they ran, on purpose: %+v", ag.Status)
		require.Contains(t, ag.Status.Message, "deleted by their owner or a user (2 of them while they ran)")
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := ags.Get(ctx, "big", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}), "expired after the retention time and deleted: the scheduler created it and nothing owns it")
	})

	t.Run("a preempted group Fails naming its preemptor", func(t *testing.T) {
		low := gangPods("ag", "low", "ag-vc", 1, 1, 8)
		c.createPods(t, low)
		c.waitBound(t, low, 30*time.Second)
		c.waitAG(t, "ag", "low", phaseIs(hv1.AffinityGroupRunning))
		high := gangPods("ag", "high", "ag-vc", 5, 1, 8)
		c.createPods(t, high)
		c.waitBound(t, high, 30*time.Second)
		ag := c.waitAG(t, "ag", "low", phaseIs(hv1.AffinityGroupFailed))
		require.Equal(t, "Preempted", ag.Status.Reason)
		require.Equal(t, "ag/high", ag.Status.PreemptedBy)
		require.Contains(t, ag.Status.Message, "ag/high")
		c.waitAG(t, "ag", "high", phaseIs(hv1.AffinityGroupRunning))
		c.deletePods(t, high)
	})

	t.Run("a namespace the VC does not allow: Rejected", func(t *testing.T) {
		pods := gangPods("ag-other", "nope", "ag-vc", 1, 1, 1)
		c.createPods(t, pods)
		ag := c.waitAG(t, "ag-other", "nope", phaseIs(hv1.AffinityGroupRejected))
		require.Equal(t, "Rejected", ag.Status.Reason)
		require.Contains(t, ag.Status.Message, "allowedNamespaces")
		require.NotNil(t, ag.Status.FinishedTime)
		c.deletePods(t, pods)
	})
}

func joinIndices(ix []int32) string {
	s := make([]string, len(ix))
	for i, x := range ix {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// explicitPods are pods of an explicit AffinityGroup: only the group label
// and the GPU request.
func explicitPods(ns, group string, n int, gpus int64) []*v1.Pod {
	pods := gangPods(ns, group, "unused", 0, n, gpus)
	for _, p := range pods {
		p.Labels = map[string]string{hivesched.LabelAffinityGroup: group}
		p.Annotations = nil
	}
	return pods
}

func (c *cluster) createAG(t *testing.T, ns, name, vc string, priority int32, members ...hv1.AffinityGroupMember) *hv1.AffinityGroup {
	ag, err := c.vc.HiveschedV1alpha1().AffinityGroups(ns).Create(t.Context(), &hv1.AffinityGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       hv1.AffinityGroupSpec{VirtualCluster: vc, Priority: ptr.To(priority), Members: members},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return ag
}

// TestAffinityGroupExplicit (issue 10): a user creates the AffinityGroup
// first and its pods carry only hivesched.io/affinity-group and their GPU
// request; the group's spec (VC, priority, members) is the request. Pods
// that come before their AffinityGroup wait for it.
func TestAffinityGroupExplicit(t *testing.T) {
	c := startCluster(t)
	c.createNodes(t, "agx", 1, 2, 0)
	c.createNamespace(t, "agx")
	c.createVC(t, "agx-vc", []string{"agx"}, "V100-NODE", 2)
	c.startScheduler(t, physicalCluster("agx", 1, 2, 0))

	t.Run("group first, then its pods", func(t *testing.T) {
		c.createAG(t, "agx", "exp", "agx-vc", 7, hv1.AffinityGroupMember{PodNumber: 1, LeafCellNumber: 8}, hv1.AffinityGroupMember{PodNumber: 2, LeafCellNumber: 4})
		ag := c.waitAG(t, "agx", "exp", func(ag *hv1.AffinityGroup) bool { return ag.Status.Reason == "WaitingForMembers" })
		require.Equal(t, hv1.AffinityGroupNew, ag.Status.Phase)
		require.Equal(t, "0/3", ag.Status.MembersSummary)
		require.Empty(t, ag.Labels[hv1.LabelManagedBy], "the user's object")

		pods := append(explicitPods("agx", "exp", 1, 8), explicitPods("agx", "exp", 2, 4)...)
		pods[1].Name, pods[2].Name = "exp-small-0", "exp-small-1"
		c.createPods(t, pods)
		c.waitBound(t, pods, 30*time.Second)
		for _, p := range pods {
			rec := c.getPod(t, p).Annotations[hivesched.AnnotationPlacement]
			require.Contains(t, rec, `"group":"agx/exp"`)
			require.Contains(t, rec, `"virtualCluster":"agx-vc"`)
			require.Contains(t, rec, `"priority":7`)
		}
		ag = c.waitAG(t, "agx", "exp", phaseIs(hv1.AffinityGroupRunning))
		require.Equal(t, "3/3", ag.Status.MembersSummary)
		require.Len(t, ag.Status.Pods, 3)
		c.waitVCStatus(t, "agx-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 16 })
		c.deletePods(t, pods)
		c.waitGone(t, pods, 20*time.Second)
		c.waitVCStatus(t, "agx-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 0 })
	})

	t.Run("pods first: they wait for their AffinityGroup", func(t *testing.T) {
		pods := explicitPods("agx", "late", 2, 8)
		c.createPods(t, pods)
		c.waitEvent(t, pods[0], "names no virtual cluster", 20*time.Second)
		c.requireUnbound(t, pods, time.Second)
		c.createAG(t, "agx", "late", "agx-vc", 0, hv1.AffinityGroupMember{PodNumber: 2, LeafCellNumber: 8})
		c.waitBound(t, pods, 30*time.Second)
		c.waitAG(t, "agx", "late", phaseIs(hv1.AffinityGroupRunning))
		c.deletePods(t, pods)
	})

	t.Run("a pod whose size is not a member's is refused, saying so", func(t *testing.T) {
		c.createAG(t, "agx", "odd", "agx-vc", 0, hv1.AffinityGroupMember{PodNumber: 1, LeafCellNumber: 8})
		pods := explicitPods("agx", "odd", 1, 2)
		c.createPods(t, pods)
		c.waitEvent(t, pods[0], "has no member of that size", 20*time.Second)
		c.deletePods(t, pods)
	})
}

// TestPendingTimeout (issue 10, seed 004): a group pending longer than its
// VC's spec.pendingTimeoutSeconds (or its AffinityGroup's override) goes
// Failed with reason PendingTimeout; its pods get an event and are no
// longer scheduled, even once cells come free; they are left to their owner
// unless the VC says deletePodsOnPendingTimeout. New pods of the group
// start a new attempt.
func TestPendingTimeout(t *testing.T) {
	c := startCluster(t)
	c.createNodes(t, "pt", 1, 2, 0)
	c.createNamespace(t, "pt")
	c.createVC(t, "pt-keep", []string{"pt"}, "V100-NODE", 1)
	c.createVC(t, "pt-del", []string{"pt"}, "V100-NODE", 1)
	setTimeout := func(vc string, seconds int32, del bool) {
		obj, err := c.vc.HiveschedV1alpha1().VirtualClusters().Get(t.Context(), vc, metav1.GetOptions{})
		require.NoError(t, err)
		obj.Spec.PendingTimeoutSeconds = ptr.To(seconds)
		obj.Spec.DeletePodsOnPendingTimeout = del
		_, err = c.vc.HiveschedV1alpha1().VirtualClusters().Update(t.Context(), obj, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	setTimeout("pt-keep", 2, false)
	setTimeout("pt-del", 2, true)
	// A status interval longer than the timeouts: the timeout must fire
	// on time, not at the writer's next pass.
	s := c.startScheduler(t, physicalCluster("pt", 1, 2, 0), withStatusInterval(5))

	// Each VC's node is held by a higher-priority group.
	holdKeep := gangPods("pt", "hold-keep", "pt-keep", 9, 1, 8)
	holdDel := gangPods("pt", "hold-del", "pt-del", 9, 1, 8)
	c.createPods(t, append(holdKeep, holdDel...))
	c.waitBound(t, append(holdKeep, holdDel...), 30*time.Second)

	t.Run("left to their owner, never scheduled", func(t *testing.T) {
		pods := gangPods("pt", "slow", "pt-keep", 1, 2, 4)
		c.createPods(t, pods)
		ag := c.waitAG(t, "pt", "slow", phaseIs(hv1.AffinityGroupFailed))
		require.Equal(t, "PendingTimeout", ag.Status.Reason)
		require.Contains(t, ag.Status.Message, "pending timeout of 2s")
		require.Contains(t, ag.Status.Message, "pt/hold-keep", "and what it waited for")
		require.NotNil(t, ag.Status.FinishedTime)
		require.True(t, ag.Status.FinishedTime.Sub(ag.Status.AdmittedTime.Time) >= 2*time.Second)
		// On time (the times have whole seconds), not up to an interval
		// (5 s) late.
		require.LessOrEqual(t, ag.Status.FinishedTime.Sub(ag.Status.AdmittedTime.Time), 3*time.Second)
		c.waitEvent(t, pods[0], "pending longer than its pending timeout; its pods are no longer scheduled and are left to their owner", 20*time.Second)
		c.waitEvent(t, pods[1], "pending timeout", 20*time.Second)

		// Cells come free: the timed-out pods stay unscheduled, and the
		// core does not hold the group any more.
		c.deletePods(t, holdKeep)
		c.waitGone(t, holdKeep, 20*time.Second)
		c.waitVCStatus(t, "pt-keep", func(st hv1.VirtualClusterStatus) bool {
			return st.UsedLeafCells == 0 && st.AffinityGroups.Pending == 0
		})
		c.requireUnbound(t, pods, 3*time.Second)
		for _, p := range pods {
			got := c.getPod(t, p)
			require.Nil(t, got.DeletionTimestamp, "left to its owner")
		}
		c.failedScheduling(t, pods[0], "is Failed (PendingTimeout)", 20*time.Second)

		// The owner replaces the pods: a new attempt, which fits now.
		c.deletePods(t, pods)
		c.waitGone(t, pods, 20*time.Second)
		again := gangPods("pt", "slow", "pt-keep", 1, 2, 4)
		c.createPods(t, again)
		c.waitBound(t, again, 30*time.Second)
		ag = c.waitAG(t, "pt", "slow", phaseIs(hv1.AffinityGroupRunning))
		require.Empty(t, ag.Status.FinishedTime)
		c.deletePods(t, again)
	})

	t.Run("deleted when the VC says so", func(t *testing.T) {
		pods := gangPods("pt", "gone", "pt-del", 1, 1, 8)
		c.createPods(t, pods)
		ag := c.waitAG(t, "pt", "gone", phaseIs(hv1.AffinityGroupFailed))
		require.Equal(t, "PendingTimeout", ag.Status.Reason)
		c.waitGone(t, pods, 20*time.Second)
		c.deletePods(t, holdDel)
	})

	t.Run("an AffinityGroup's own timeout overrides the VC's", func(t *testing.T) {
		setTimeout("pt-del", 0, false) // no VC timeout any more
		hold := gangPods("pt", "hold-none", "pt-del", 9, 1, 8)
		c.createPods(t, hold)
		c.waitBound(t, hold, 30*time.Second)
		ag := c.createAG(t, "pt", "own", "pt-del", 1, hv1.AffinityGroupMember{PodNumber: 1, LeafCellNumber: 8})
		ag.Spec.PendingTimeoutSeconds = ptr.To[int32](1)
		_, err := c.vc.HiveschedV1alpha1().AffinityGroups("pt").Update(t.Context(), ag, metav1.UpdateOptions{})
		require.NoError(t, err)
		pods := explicitPods("pt", "own", 1, 8)
		c.createPods(t, pods)
		got := c.waitAG(t, "pt", "own", phaseIs(hv1.AffinityGroupFailed))
		require.Equal(t, "PendingTimeout", got.Status.Reason)
		require.Contains(t, got.Status.Message, "pending timeout of 1s")

		// A restarted scheduler continues the lifecycle from the status:
		// the group stays Failed and its pods stay refused, even with the
		// cells free.
		s.stop()
		c.startScheduler(t, physicalCluster("pt", 1, 2, 0))
		c.deletePods(t, hold)
		c.waitGone(t, hold, 20*time.Second)
		c.requireUnbound(t, pods, 4*time.Second)
		after := c.waitAG(t, "pt", "own", phaseIs(hv1.AffinityGroupFailed))
		require.Equal(t, got.Status.FinishedTime, after.Status.FinishedTime)
		require.Equal(t, "PendingTimeout", after.Status.Reason)
		c.deletePods(t, pods)
	})
}

// withoutAGStatus sets HiveSched's affinityGroupStatus: false.
func withoutAGStatus(profile map[string]any) {
	for _, pc := range profile["pluginConfig"].([]any) {
		if pc.(map[string]any)["name"] == hivesched.Name {
			pc.(map[string]any)["args"].(map[string]any)["affinityGroupStatus"] = false
		}
	}
}

// TestPendingTimeoutWithoutStatus (issue 31): the pending timeout fires
// with the AffinityGroup status writer off too; no AffinityGroup object is
// created.
func TestPendingTimeoutWithoutStatus(t *testing.T) {
	c := startCluster(t)
	c.createNodes(t, "pn", 1, 1, 0)
	c.createNamespace(t, "pn")
	c.createVC(t, "pn-vc", []string{"pn"}, "V100-NODE", 1)
	vc, err := c.vc.HiveschedV1alpha1().VirtualClusters().Get(t.Context(), "pn-vc", metav1.GetOptions{})
	require.NoError(t, err)
	vc.Spec.PendingTimeoutSeconds = ptr.To[int32](2)
	_, err = c.vc.HiveschedV1alpha1().VirtualClusters().Update(t.Context(), vc, metav1.UpdateOptions{})
	require.NoError(t, err)
	c.startScheduler(t, physicalCluster("pn", 1, 1, 0), withoutAGStatus)

	hold := gangPods("pn", "hold", "pn-vc", 9, 1, 8)
	c.createPods(t, hold)
	c.waitBound(t, hold, 30*time.Second)
	pods := gangPods("pn", "late", "pn-vc", 1, 1, 8)
	c.createPods(t, pods)
	c.waitEvent(t, pods[0], "pending longer than its pending timeout", 20*time.Second)
	c.deletePods(t, hold)
	c.waitGone(t, hold, 20*time.Second)
	c.requireUnbound(t, pods, 3*time.Second)
	ags, err := c.vc.HiveschedV1alpha1().AffinityGroups("pn").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, ags.Items, "affinityGroupStatus: false writes no AffinityGroup")
}

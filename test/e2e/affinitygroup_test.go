package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// waitPhase waits until AffinityGroup ns/name is in phase and returns it.
func (e *env) waitPhase(t *testing.T, ns, name string, phase hv1.AffinityGroupPhase, timeout time.Duration) *hv1.AffinityGroup {
	t.Helper()
	return e.waitAG(t, ns, name, string(phase), timeout, func(ag *hv1.AffinityGroup) bool { return ag.Status.Phase == phase })
}

// waitAG waits until AffinityGroup ns/name satisfies ok (what says how, in
// the failure) and returns it.
func (e *env) waitAG(t *testing.T, ns, name, what string, timeout time.Duration, ok func(*hv1.AffinityGroup) bool) *hv1.AffinityGroup {
	t.Helper()
	var last *hv1.AffinityGroup
	err := wait.PollUntilContextTimeout(t.Context(), 300*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ag, err := e.vc.HiveschedV1alpha1().AffinityGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = ag
		return ok(ag), nil
	})
	require.NoError(t, err, "AffinityGroup %s/%s never %s: %+v", ns, name, what, last)
	return last
}

func (e *env) createAG(t *testing.T, ag *hv1.AffinityGroup) {
	_, err := e.vc.HiveschedV1alpha1().AffinityGroups(ag.Namespace).Create(t.Context(), ag, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = e.vc.HiveschedV1alpha1().AffinityGroups(ag.Namespace).Delete(context.Background(), ag.Name, metav1.DeleteOptions{})
	})
}

// explicitPods are pods of an explicit AffinityGroup: its label and their
// GPU request only.
func explicitPods(ns, group string, n int, gpus int64) []*v1.Pod {
	ps := pods(ns, group, "unused", 0, n, gpus, "hivesched")
	for _, p := range ps {
		p.Labels = map[string]string{hivesched.LabelAffinityGroup: group}
		p.Annotations = nil
	}
	return ps
}

// TestAffinityGroupPhases (issue 10): the phases a user sees with `kubectl
// get ag`: New (the group waits for its pods), Accepted (it waits for
// cells, the reason naming who holds them), Running, Completed; Rejected
// for a namespace its VC does not allow; Failed by pending timeout.
func TestAffinityGroupPhases(t *testing.T) {
	e := setup(t)

	t.Run("New -> Accepted -> Running -> Completed", func(t *testing.T) {
		// vc-speech's three V100 nodes are taken by a gang of its own.
		hog := pods("speech", "hog", "vc-speech", 50, 3, 8, "hivesched")
		for _, p := range hog {
			p.Annotations[hivesched.AnnotationLeafCellType] = "V100"
		}
		e.create(t, hog)
		e.waitRunning(t, hog, 60*time.Second)

		e.createAG(t, &hv1.AffinityGroup{ObjectMeta: metav1.ObjectMeta{Name: "life", Namespace: "speech"},
			Spec: hv1.AffinityGroupSpec{VirtualCluster: "vc-speech", Priority: ptr.To[int32](1), LeafCellType: "V100",
				Members: []hv1.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}}}})
		ag := e.waitPhase(t, "speech", "life", hv1.AffinityGroupNew, 30*time.Second)
		require.Equal(t, "0/2", ag.Status.MembersSummary)

		life := explicitPods("speech", "life", 2, 8)
		e.create(t, life)
		ag = e.waitPhase(t, "speech", "life", hv1.AffinityGroupAccepted, 30*time.Second)
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 300*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			ag, _ = e.vc.HiveschedV1alpha1().AffinityGroups("speech").Get(ctx, "life", metav1.GetOptions{})
			return ag != nil && strings.Contains(ag.Status.Message, "speech/hog"), nil
		}), "the reason names the group holding the cells: %+v", ag.Status)
		out := e.kubectl(t, "get", "ag", "-A")
		for _, col := range []string{"VC", "PRIORITY", "MEMBERS", "PHASE", "STATE", "REASON", "AGE"} {
			require.Contains(t, out, col)
		}
		require.Regexp(t, `speech\s+life\s+vc-speech\s+1\s+0/2\s+Accepted\s+Pending\s+Waiting`, out)

		e.remove(t, hog)
		e.waitRunning(t, life, 60*time.Second)
		ag = e.waitPhase(t, "speech", "life", hv1.AffinityGroupRunning, 30*time.Second)
		require.Equal(t, "2/2", ag.Status.MembersSummary)
		require.Len(t, ag.Status.Pods, 2)

		// The pods finish, as a kubelet reports it.
		for _, p := range life {
			got, err := e.kube.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
			require.NoError(t, err)
			got.Status.Phase = v1.PodSucceeded
			_, err = e.kube.CoreV1().Pods(p.Namespace).UpdateStatus(t.Context(), got, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		ag = e.waitPhase(t, "speech", "life", hv1.AffinityGroupCompleted, 60*time.Second)
		require.Equal(t, "Deleted", ag.Status.State)
	})

	t.Run("Rejected: a namespace its VC does not allow", func(t *testing.T) {
		g := pods("speech", "elsewhere", "vc-vision", 0, 1, 1, "hivesched")
		e.create(t, g)
		ag := e.waitPhase(t, "speech", "elsewhere", hv1.AffinityGroupRejected, 30*time.Second)
		require.Contains(t, ag.Status.Message, "allowedNamespaces")
	})

	t.Run("Failed: pending longer than its timeout", func(t *testing.T) {
		hog := pods("speech", "hog2", "vc-speech", 50, 3, 8, "hivesched")
		for _, p := range hog {
			p.Annotations[hivesched.AnnotationLeafCellType] = "V100"
		}
		e.create(t, hog)
		e.waitRunning(t, hog, 60*time.Second)
		e.createAG(t, &hv1.AffinityGroup{ObjectMeta: metav1.ObjectMeta{Name: "impatient", Namespace: "speech"},
			Spec: hv1.AffinityGroupSpec{VirtualCluster: "vc-speech", LeafCellType: "V100", PendingTimeoutSeconds: ptr.To[int32](3),
				Members: []hv1.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 8}}}})
		g := explicitPods("speech", "impatient", 1, 8)
		e.create(t, g)
		ag := e.waitPhase(t, "speech", "impatient", hv1.AffinityGroupFailed, 60*time.Second)
		require.Equal(t, "PendingTimeout", ag.Status.Reason)
		e.remove(t, hog)
		e.requirePending(t, g, 5*time.Second)
	})
}

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// renamed renames pods (an autoscaler's new worker gets a new name).
func renamed(pods []*v1.Pod, name string) []*v1.Pod {
	for i, p := range pods {
		p.Name = fmt.Sprintf("%s-%d", name, i)
	}
	return pods
}

// waitDeleted waits until no pod of these names is left.
func (c *cluster) waitDeleted(t *testing.T, pods []*v1.Pod, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			if _, err := c.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "pods not deleted: %s", c.describe(t, pods))
}

// eventsNamed are the reasons and notes of the events about the object of
// that name (a pod already gone included).
func (c *cluster) eventsNamed(t *testing.T, ns, name string) string {
	t.Helper()
	list, err := c.kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	require.NoError(t, err)
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return strings.Join(out, "\n")
}

// requireStillBound checks that the pods are bound and not on their way out.
func (c *cluster) requireStillBound(t *testing.T, pods []*v1.Pod) {
	t.Helper()
	for _, p := range pods {
		got := c.getPod(t, p)
		require.NotEmpty(t, got.Spec.NodeName, "pod %s", p.Name)
		require.Nil(t, got.DeletionTimestamp, "pod %s is being deleted", p.Name)
	}
}

// TestElasticGangs (issue 46): a gang's minimum is placed whole; its pods
// beyond the minimum (a Ray worker the autoscaler adds) are placed one by
// one once the minimum runs, inside the VC's cells, of any size; with no
// room they wait with a reason and disturb nothing; deleting one is no
// loss; a gang of the VC takes extras back before it preempts any gang;
// a gang dropping below its minimum ends whole, extras included.
func TestElasticGangs(t *testing.T) {
	c := startWorkloadCluster(t)
	pgc := c.installPodGroupCRD(t)
	const ns = "el"
	c.createNodes(t, ns, 1, 4, 0)
	cpuNode := ns + "-cpu-0"
	c.createNode(t, cpuNode, "nvidia.com/gpu", 0, true)
	c.createNamespace(t, ns)
	c.createVC(t, ns+"-vc", []string{ns}, "V100-NODE", 3)
	c.startScheduler(t, physicalCluster(ns, 1, 4, 0))
	vcLabel := map[string]string{hivesched.LabelVirtualCluster: ns + "-vc"}

	t.Run("a scheduler-plugins PodGroup as KubeRay makes it, scaled up and down", func(t *testing.T) {
		_, err := pgc.SchedulingV1alpha1().PodGroups(ns).Create(t.Context(), &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "ray", Labels: vcLabel},
			Spec: pgv1alpha1.PodGroupSpec{MinMember: 3}}, metav1.CreateOptions{})
		require.NoError(t, err)
		head := onNode(withoutGPUs(renamed(podGroupPods(ns, "ray", 1, 0, nil), "ray-head"))[0], cpuNode)
		workers := renamed(podGroupPods(ns, "ray", 2, 4, nil), "ray-worker")
		minimum := append([]*v1.Pod{head}, workers...)
		c.createPods(t, minimum)
		c.waitBound(t, minimum, 30*time.Second)
		c.waitAG(t, ns, "ray", phaseIs(hv1.AffinityGroupRunning))
		c.usedIs(t, ns+"-vc", 8)

		// The autoscaler adds a 4-GPU worker, then an 8-GPU one (another
		// worker group): each binds by itself.
		up := renamed(podGroupPods(ns, "ray", 1, 4, nil), "ray-up4")
		c.createPods(t, up)
		c.waitBound(t, up, 30*time.Second)
		up8 := renamed(podGroupPods(ns, "ray", 1, 8, nil), "ray-up8")
		c.createPods(t, up8)
		c.waitBound(t, up8, 30*time.Second)
		c.usedIs(t, ns+"-vc", 20)
		rec := c.getPod(t, up8[0]).Annotations[hivesched.AnnotationPlacement]
		require.Contains(t, rec, `"extraOf":"el/ray"`, "an extra's placement record names its gang")
		ag := c.waitAG(t, ns, "ray", func(ag *hv1.AffinityGroup) bool { return ag.Status.MembersSummary == "3/3 min, +2/2 extra" })
		require.Equal(t, hv1.AffinityGroupRunning, ag.Status.Phase)

		// No room left in the VC (24 GPUs): the next one waits, says why,
		// and nothing else moves.
		full := renamed(podGroupPods(ns, "ray", 1, 8, nil), "ray-full")
		c.createPods(t, full)
		msg := c.failedScheduling(t, full[0], `extra pod of elastic affinity group "el/ray"`, 30*time.Second)
		t.Logf("an extra with no room: %s", msg)
		c.requireUnbound(t, full, 2*time.Second)
		c.requireStillBound(t, append(append(minimum, up...), up8...))

		// The autoscaler removes an idle worker: no loss, the gang runs on,
		// and the waiting extra takes the room.
		c.deletePods(t, up8)
		c.waitBound(t, full, 30*time.Second)
		c.requireStillBound(t, append(minimum, up...))
		ag = c.waitAG(t, ns, "ray", func(ag *hv1.AffinityGroup) bool { return ag.Status.MembersSummary == "3/3 min, +2/2 extra" })
		require.Equal(t, hv1.AffinityGroupRunning, ag.Status.Phase, "deleting an extra is no member loss: %+v", ag.Status)

		// Another gang of the VC (priority 0, the same as ray's) needs a
		// node: it takes an extra back (the 4-GPU one: its node then holds
		// nothing else), never ray's minimum.
		told := make(chan string, 1)
		w, err := c.kube.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + up[0].Name})
		require.NoError(t, err)
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				if p, ok := ev.Object.(*v1.Pod); ok {
					for _, cond := range p.Status.Conditions {
						if cond.Type == v1.DisruptionTarget && cond.Status == v1.ConditionTrue {
							told <- cond.Reason + ": " + cond.Message
							return
						}
					}
				}
			}
		}()
		other := gangPods(ns, "other", ns+"-vc", 0, 1, 8)
		c.createPods(t, other)
		select {
		case why := <-told:
			require.Contains(t, why, "PreemptionByScheduler: HiveSched: extra pod of elastic affinity group el/ray taken back")
		case <-time.After(30 * time.Second):
			t.Fatal("the extra taken back got no DisruptionTarget condition")
		}
		c.waitDeleted(t, up, 30*time.Second)
		c.waitBound(t, other, 30*time.Second)
		c.requireStillBound(t, append(minimum, full...))
		require.Contains(t, c.eventsNamed(t, ns, up[0].Name), "Preempted: preempted by affinity group el/other")
		ag = c.waitAG(t, ns, "ray", func(ag *hv1.AffinityGroup) bool { return ag.Status.MembersSummary == "3/3 min, +1/1 extra" })
		require.Equal(t, hv1.AffinityGroupRunning, ag.Status.Phase, "a gang that gave back an extra runs on: %+v", ag.Status)

		// A worker of the minimum is lost: the gang ends whole, its
		// extra with it (the 8-GPU extra is not of the lost worker's
		// size, and no other is left).
		c.deletePods(t, workers[:1])
		c.waitDeleted(t, append(append([]*v1.Pod{head}, workers...), full...), 30*time.Second)
		c.usedIs(t, ns+"-vc", 8) // other's node
		c.deletePods(t, other)
		c.usedIs(t, ns+"-vc", 0)
	})

	t.Run("a member deleted while an extra of its size runs: the extra takes its place", func(t *testing.T) {
		_, err := pgc.SchedulingV1alpha1().PodGroups(ns).Create(t.Context(), &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "tr", Labels: vcLabel},
			Spec: pgv1alpha1.PodGroupSpec{MinMember: 2}}, metav1.CreateOptions{})
		require.NoError(t, err)
		minimum := renamed(podGroupPods(ns, "tr", 2, 8, nil), "tr-min")
		c.createPods(t, minimum)
		c.waitBound(t, minimum, 30*time.Second)
		extra := renamed(podGroupPods(ns, "tr", 1, 8, nil), "tr-extra")
		c.createPods(t, extra)
		c.waitBound(t, extra, 30*time.Second)
		c.usedIs(t, ns+"-vc", 24)

		// torchrun's elastic agent, or the autoscaler, removes a pod of
		// the minimum: the extra takes its slot, the gang runs on, its
		// cells come back.
		// With a grace period, as a kubelet ends a pod: the deletion is
		// seen twice (its timestamp, then its going), each starting a
		// loss timer; neither may end the gang (KubeRay's scale-down of
		// a minimum's worker found that).
		grace := int64(1)
		require.NoError(t, c.kube.CoreV1().Pods(ns).Delete(t.Context(), minimum[0].Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}))
		c.waitDeleted(t, minimum[:1], 30*time.Second)
		c.usedIs(t, ns+"-vc", 16)
		time.Sleep(3 * time.Second) // past the loss timers (2 s)
		c.requireStillBound(t, append(minimum[1:], extra...))
		require.NotContains(t, c.eventsNamed(t, ns, extra[0].Name), "GangMemberLost")
		require.Contains(t, c.eventsNamed(t, ns, extra[0].Name), "PromotedToMinimum")
		err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			rec := c.getPod(t, extra[0]).Annotations[hivesched.AnnotationPlacement]
			return strings.Contains(rec, `"group":"el/tr"`) && !strings.Contains(rec, "extraOf"), nil
		})
		require.NoError(t, err, "the promoted pod's record names the gang: %s", c.getPod(t, extra[0]).Annotations[hivesched.AnnotationPlacement])
		ag := c.waitAG(t, ns, "tr", func(ag *hv1.AffinityGroup) bool { return ag.Status.MembersSummary == "2/2" })
		require.Equal(t, hv1.AffinityGroupRunning, ag.Status.Phase, "%+v", ag.Status)

		// Now a member goes with no extra left: the gang ends whole.
		c.deletePods(t, minimum[1:2])
		c.waitDeleted(t, append(minimum, extra...), 30*time.Second)
		c.usedIs(t, ns+"-vc", 0)
	})

	t.Run("a member deleted before its gang is placed: an extra takes its place in the minimum", func(t *testing.T) {
		hold := gangPods(ns, "hold", ns+"-vc", 0, 3, 8) // the VC's three nodes
		c.createPods(t, hold)
		c.waitBound(t, hold, 30*time.Second)
		_, err := pgc.SchedulingV1alpha1().PodGroups(ns).Create(t.Context(), &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "early", Labels: vcLabel},
			Spec: pgv1alpha1.PodGroupSpec{MinMember: 2}}, metav1.CreateOptions{})
		require.NoError(t, err)
		pods := renamed(podGroupPods(ns, "early", 3, 8, nil), "early")
		c.createPods(t, pods[:2])
		time.Sleep(1100 * time.Millisecond) // the third is younger: the extra
		c.createPods(t, pods[2:])
		c.failedScheduling(t, pods[2], `waits for the gang's minimum to be placed`, 30*time.Second)
		c.deletePods(t, pods[:1])
		c.deletePods(t, hold)
		nodes := c.waitBound(t, pods[1:], 30*time.Second)
		require.NotEqual(t, nodes[0], nodes[1])
		rec := c.getPod(t, pods[2]).Annotations[hivesched.AnnotationPlacement]
		require.NotContains(t, rec, "extraOf", "the former extra is a member of the minimum now: %s", rec)
		require.Contains(t, rec, `"group":"el/early"`)
		c.deletePods(t, pods[1:])
		c.usedIs(t, ns+"-vc", 0)
	})

	t.Run("hivesched's own form: group-members the minimum, max-members the most", func(t *testing.T) {
		native := func(name string, n int) []*v1.Pod {
			pods := renamed(gangPods(ns, "nat", ns+"-vc", 0, n, 8), name)
			for _, p := range pods {
				p.Annotations[podrequest.AnnotationGroupMembers] = "2"
				p.Annotations[podrequest.AnnotationMaxMembers] = "3"
			}
			return pods
		}
		minimum := native("nat-min", 2)
		c.createPods(t, minimum)
		c.waitBound(t, minimum, 30*time.Second)
		extra := native("nat-extra", 1)
		c.createPods(t, extra)
		c.waitBound(t, extra, 30*time.Second)
		require.Contains(t, c.getPod(t, extra[0]).Annotations[hivesched.AnnotationPlacement], `"extraOf":"el/nat"`)
		over := native("nat-over", 1)
		c.createPods(t, over)
		c.waitEvent(t, over[0], "one too many", 30*time.Second)
		c.deletePods(t, append(append(minimum, extra...), over...))
		c.usedIs(t, ns+"-vc", 0)
	})

	t.Run("extras beyond the VC run as opportunistic when the gang asks for it", func(t *testing.T) {
		const ns2 = "el2"
		c.createNamespace(t, ns2)
		c.createVC(t, ns+"-vc2", []string{ns2}, "V100-NODE", 1) // the fourth node
		native := func(name string, n int) []*v1.Pod {
			pods := renamed(gangPods(ns, "ov", ns+"-vc", 0, n, 8), name)
			for _, p := range pods {
				p.Annotations[podrequest.AnnotationGroupMembers] = "1"
				p.Annotations[podrequest.AnnotationMaxMembers] = "3"
				p.Annotations[podrequest.AnnotationExtrasBeyondVC] = "opportunistic"
			}
			return pods
		}
		fill := gangPods(ns, "fill", ns+"-vc", 0, 2, 8)
		minimum := native("ov-min", 1)
		c.createPods(t, append(fill, minimum...))
		held := c.waitBound(t, append(fill, minimum...), 30*time.Second)
		c.usedIs(t, ns+"-vc", 24) // the VC is full
		t.Logf("the VC's gangs run on %v", held)

		extra := native("ov-extra", 1)
		c.createPods(t, extra)
		nodes := c.waitBound(t, extra, 30*time.Second)
		rec := c.getPod(t, extra[0]).Annotations[hivesched.AnnotationPlacement]
		require.Contains(t, rec, `"downgraded":true`, "beyond its VC the extra runs as opportunistic: %s", rec)
		t.Logf("the extra runs beyond its full VC on %s", nodes[0])

		// The fourth node's VC claims it: the extra is taken back, the gang
		// runs on.
		owner := gangPods(ns2, "own", ns+"-vc2", 0, 1, 8)
		c.createPods(t, owner)
		c.waitDeleted(t, extra, 30*time.Second)
		c.waitBound(t, owner, 30*time.Second)
		c.requireStillBound(t, append(fill, minimum...))
		require.Contains(t, c.eventsNamed(t, ns, extra[0].Name), "Preempted: preempted by affinity group el2/own")
		c.deletePods(t, append(append(fill, minimum...), owner...))
		c.usedIs(t, ns+"-vc", 0)
	})

	t.Run("a Workload API gang of minCount 2 with three pods", func(t *testing.T) {
		c.createPodGroup(t, ns, "wl", 2, vcLabel)
		pods := workloadPods(ns, "wl", "", 3, 8)
		c.createPods(t, pods)
		c.waitBound(t, pods, 60*time.Second)
		rec := c.getPod(t, pods[2]).Annotations[hivesched.AnnotationPlacement]
		require.Contains(t, rec, `"extraOf":"el/wl"`, "the newest pod (by name in one second) is the extra")
		c.usedIs(t, ns+"-vc", 24)
		c.deletePods(t, pods[2:])
		c.usedIs(t, ns+"-vc", 16)
		c.requireStillBound(t, pods[:2])
		c.deletePods(t, pods[:2])
		c.usedIs(t, ns+"-vc", 0)
	})
}

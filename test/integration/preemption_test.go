package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
)

// Priorities of the system-critical PriorityClasses (the API server's
// Priority admission, off in these tests, would set them from the names).
const (
	systemNodeCritical = 2000001000
	important          = 1000000000 // the highest a user PriorityClass may have
)

// plainPod is a pod hivesched does not place: no GPUs, no VC, cpu cores on
// node (a DaemonSet pod's node affinity), of the given priority.
func plainPod(ns, name, schedulerName, node string, cpu int64, priority int32) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.PodSpec{
			SchedulerName: schedulerName,
			Priority:      &priority,
			Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}}}}},
			}}},
			Containers: []v1.Container{{Name: "main", Image: "busybox", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI)}}}},
		},
	}
}

// withCPU gives each pod cpu cores.
func withCPU(pods []*v1.Pod, cpu int64) []*v1.Pod {
	for _, p := range pods {
		p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = *resource.NewQuantity(cpu, resource.DecimalSI)
	}
	return pods
}

// runBeside runs a stock kube-scheduler (its default profile only, no
// hivesched plugin) in this process beside hivesched's: the second
// scheduler of a cluster where hivesched is the second one. It runs what
// app.Run runs but the process-wide configz registration, which one
// process allows once.
func (c *cluster) runBeside(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	opts := schedulerOptions(t, c.kubeconfig, []any{map[string]any{"schedulerName": v1.DefaultSchedulerName}}, "stock-config.yaml")
	cc, sched, err := app.Setup(ctx, opts)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	cc.EventBroadcaster.StartRecordingToSink(ctx.Done())
	cc.InformerFactory.Start(ctx.Done())
	if cc.DynInformerFactory != nil {
		cc.DynInformerFactory.Start(ctx.Done())
	}
	cc.InformerFactory.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	})
}

// twoNodeVC makes two 8-GPU nodes, namespace ns with VC ns-vc of both, and
// a hivesched scheduler of them; it returns the first node's name.
func (c *cluster) twoNodeVC(t *testing.T, ns string) string {
	c.createNodes(t, ns, 1, 2, 0)
	c.createNamespace(t, ns)
	c.createVC(t, ns+"-vc", []string{ns}, "V100-NODE", 2)
	c.startScheduler(t, physicalCluster(ns, 1, 2, 0))
	return ns + "-r0-n0"
}

// requireGangLost checks that a gang that lost a member ended whole: none of
// its pods is left, its AffinityGroup failed with reason MemberLost, and its
// VC counts none of its cells.
func (c *cluster) requireGangLost(t *testing.T, gang []*v1.Pod, group, vc string) {
	t.Helper()
	c.waitGone(t, gang, 30*time.Second)
	c.waitAG(t, gang[0].Namespace, group, func(ag *hv1.AffinityGroup) bool {
		return (ag.Status.Phase == hv1.AffinityGroupFailed || ag.Status.Phase == hv1.AffinityGroupFailing) && ag.Status.Reason == "MemberLost"
	})
	c.waitVCStatus(t, vc, func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 0 })
}

// TestPreemptionForOtherPods (issue 38): pods hivesched does not place
// preempt as upstream's DefaultPreemption does (HiveSchedPreemption), but
// never a pod hivesched placed, unless the preemptor is system-critical;
// then, and whenever anyone else takes a member of a running gang (here the
// stock default scheduler beside hivesched), the whole gang ends: no gang
// ever runs partly.
func TestPreemptionForOtherPods(t *testing.T) {
	c := startCluster(t)

	t.Run("plain pods preempt as upstream, preemptionPolicy Never does not", func(t *testing.T) {
		const ns = "pre-plain"
		c.createNodes(t, ns, 1, 2, 0)
		c.createNamespace(t, ns)
		c.startScheduler(t, physicalCluster(ns, 1, 2, 0))
		node := ns + "-r0-n0"

		low := plainPod(ns, "low", schedulerName, node, 60, 0)
		c.createPods(t, []*v1.Pod{low})
		c.waitBound(t, []*v1.Pod{low}, 30*time.Second)

		never := plainPod(ns, "never", schedulerName, node, 10, important)
		policy := v1.PreemptNever
		never.Spec.PreemptionPolicy = &policy
		c.createPods(t, []*v1.Pod{never})
		c.requireUnbound(t, []*v1.Pod{never}, 3*time.Second)
		c.deletePods(t, []*v1.Pod{never})

		high := plainPod(ns, "high", schedulerName, node, 10, important)
		c.createPods(t, []*v1.Pod{high})
		c.waitGone(t, []*v1.Pod{low}, 30*time.Second)
		require.Equal(t, []string{node}, c.waitBound(t, []*v1.Pod{high}, 30*time.Second))
		c.waitEvent(t, low, "Preempted by pod", 10*time.Second)
	})

	t.Run("a gang's pods: victims of a system-critical pod only, and then the whole gang", func(t *testing.T) {
		const ns = "pre-gang"
		n0 := c.twoNodeVC(t, ns)

		gang := withCPU(gangPods(ns, "train", ns+"-vc", 0, 2, 8), 40)
		c.createPods(t, gang)
		nodes := c.waitBound(t, gang, 30*time.Second)
		require.ElementsMatch(t, []string{n0, ns + "-r0-n1"}, nodes)
		onN0 := gang[0]
		if nodes[1] == n0 {
			onN0 = gang[1]
		}

		// A plain pod beside the gang's member on n0: a non-critical
		// preemptor of the highest user priority takes it, never the
		// gang's pod.
		filler := plainPod(ns, "filler", schedulerName, n0, 20, -10)
		c.createPods(t, []*v1.Pod{filler})
		c.waitBound(t, []*v1.Pod{filler}, 30*time.Second)
		imp := plainPod(ns, "important", schedulerName, n0, 10, important)
		c.createPods(t, []*v1.Pod{imp})
		c.waitGone(t, []*v1.Pod{filler}, 30*time.Second)
		c.waitBound(t, []*v1.Pod{imp}, 30*time.Second)

		// No room on n0 but the gang's member's: a non-critical pod waits.
		imp2 := plainPod(ns, "important-2", schedulerName, n0, 20, important)
		c.createPods(t, []*v1.Pod{imp2})
		c.requireUnbound(t, []*v1.Pod{imp2}, 4*time.Second)
		for _, p := range gang {
			require.Nil(t, c.getPod(t, p).DeletionTimestamp, "pod %s of the gang was deleted for a non-critical pod", p.Name)
		}
		c.deletePods(t, []*v1.Pod{imp2})
		c.waitGone(t, []*v1.Pod{imp2}, 10*time.Second)

		// A system-node-critical pod (a device plugin's, say) takes the
		// gang's member on n0 (the least important pod that frees enough),
		// and hivesched ends the whole gang.
		crit := plainPod(ns, "node-critical", schedulerName, n0, 20, systemNodeCritical)
		crit.Spec.PriorityClassName = "system-node-critical"
		c.createPods(t, []*v1.Pod{crit})
		require.Equal(t, []string{n0}, c.waitBound(t, []*v1.Pod{crit}, 30*time.Second))
		c.requireGangLost(t, gang, "train", ns+"-vc")
		require.Nil(t, c.getPod(t, imp).DeletionTimestamp, "the more important plain pod stays")
		other := gang[0]
		if other == onN0 {
			other = gang[1]
		}
		c.waitEvent(t, other, "GangMemberLost", 10*time.Second)
	})

	t.Run("beside the stock scheduler: its preemption of one member ends the whole gang", func(t *testing.T) {
		const ns = "pre-beside"
		n0 := c.twoNodeVC(t, ns)
		c.runBeside(t)

		gang := withCPU(gangPods(ns, "train", ns+"-vc", 0, 2, 8), 60)
		c.createPods(t, gang)
		c.waitBound(t, gang, 30*time.Second)

		// The stock scheduler's DefaultPreemption evicts one member for a
		// critical pod it places; hivesched deletes the other.
		crit := plainPod(ns, "node-critical", "", n0, 10, systemNodeCritical)
		c.createPods(t, []*v1.Pod{crit})
		require.Equal(t, []string{n0}, c.waitBound(t, []*v1.Pod{crit}, 30*time.Second))
		c.requireGangLost(t, gang, "train", ns+"-vc")

		// The owner creates the gang again: it is placed anew, whole, on
		// the room left (n1 and, once the critical pod is gone, n0).
		c.deletePods(t, []*v1.Pod{crit})
		again := withCPU(gangPods(ns, "train", ns+"-vc", 0, 2, 8), 60)
		c.createPods(t, again)
		c.waitBound(t, again, 30*time.Second)
		c.waitVCStatus(t, ns+"-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 16 })
	})
}

package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// onNode pins a pod to a node by name (a node selector on metadata.name).
func onNode(p *v1.Pod, node string) *v1.Pod {
	p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}}}}},
	}}}
	return p
}

// withoutGPUs drops the pods' GPU requests (a launcher, a head).
func withoutGPUs(pods []*v1.Pod) []*v1.Pod {
	for _, p := range pods {
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{}
	}
	return pods
}

// lwsPod is pod <set>-<group> (worker 0, the leader) or
// <set>-<group>-<worker> of a LeaderWorkerSet replica group of size pods in
// VC <ns>-vc, with the labels and annotation LWS v0.8.0 puts on them.
func lwsPod(ns, set string, group, worker, size int, gpus int64) *v1.Pod {
	p := gangPods(ns, "unused", ns+"-vc", 0, 1, gpus)[0]
	p.Name = fmt.Sprintf("%s-%d", set, group)
	if worker > 0 {
		p.Name = fmt.Sprintf("%s-%d-%d", set, group, worker)
	}
	p.Labels = map[string]string{hivesched.LabelVirtualCluster: ns + "-vc", podrequest.LabelLWSName: set,
		podrequest.LabelLWSGroupIndex: fmt.Sprint(group), "leaderworkerset.sigs.k8s.io/worker-index": fmt.Sprint(worker)}
	p.Annotations = map[string]string{podrequest.AnnotationLWSSize: fmt.Sprint(size)}
	return p
}

// TestGangMembersWithoutGPUs (issue 39): a gang may hold members that ask
// for no GPU (an MPI launcher, a Ray head): they count toward the gang, are
// placed and bound with it, all or nothing, on any node the profile allows
// (a CPU node outside the physical cluster here), hold no cells, show in the
// AffinityGroup as members of 0 leaf cells, and their loss ends the gang as
// any member's does. A gang that cannot fill says why on its pods.
func TestGangMembersWithoutGPUs(t *testing.T) {
	c := startWorkloadCluster(t)
	pgc := c.installPodGroupCRD(t)
	const ns = "cl"
	c.createNodes(t, ns, 1, 2, 0)
	cpuNode := ns + "-cpu-0"
	c.createNode(t, cpuNode, "nvidia.com/gpu", 0, true)
	c.createNamespace(t, ns)
	c.createVC(t, ns+"-vc", []string{ns}, "V100-NODE", 2)
	c.startScheduler(t, physicalCluster(ns, 1, 2, 0))
	vcLabel := map[string]string{hivesched.LabelVirtualCluster: ns + "-vc"}
	createPG := func(name string, min int32) {
		_, err := pgc.SchedulingV1alpha1().PodGroups(ns).Create(t.Context(), &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: vcLabel},
			Spec: pgv1alpha1.PodGroupSpec{MinMember: min}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	t.Run("an MPIJob's shape: a PodGroup with a CPU launcher and two 8-GPU workers", func(t *testing.T) {
		createPG("mpi", 3)
		workers := podGroupPods(ns, "mpi", 2, 8, nil)
		launcher := onNode(withoutGPUs(podGroupPods(ns, "mpi", 1, 0, nil))[0], cpuNode)
		launcher.Name = "mpi-launcher"
		c.createPods(t, workers)
		c.requireUnbound(t, workers, 2*time.Second) // 2 of minMember 3
		c.createPods(t, []*v1.Pod{launcher})
		all := append([]*v1.Pod{launcher}, workers...)
		nodes := c.waitBound(t, all, 30*time.Second)
		require.Equal(t, cpuNode, nodes[0], "the launcher runs on the CPU node its affinity names")
		got := c.getPod(t, launcher)
		require.Contains(t, got.Annotations[hivesched.AnnotationPlacement], `"cellLessPods":1`)
		require.NotContains(t, got.Annotations, hivesched.AnnotationLeafCellIndices, "a member without GPUs names no devices")
		ag := c.waitAG(t, ns, "mpi", phaseIs(hv1.AffinityGroupRunning))
		require.Equal(t, []hv1.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}, {PodNumber: 1, LeafCellNumber: 0}}, ag.Spec.Members)
		require.Equal(t, "3/3", ag.Status.MembersSummary)
		c.usedIs(t, ns+"-vc", 16) // the launcher holds no cells

		// The launcher is lost (a drain, another scheduler's
		// preemption): the workers go too, the cells come back.
		require.NoError(t, c.kube.CoreV1().Pods(ns).Delete(t.Context(), launcher.Name, metav1.DeleteOptions{}))
		c.waitGone(t, all, 30*time.Second)
		c.usedIs(t, ns+"-vc", 0)
	})

	t.Run("a Ray cluster's shape: a Workload API gang with a CPU head and two 4-GPU workers", func(t *testing.T) {
		c.createPodGroup(t, ns, "ray", 3, vcLabel)
		pods := workloadPods(ns, "ray", "", 3, 4)
		head := withoutGPUs(pods[:1])[0]
		c.createPods(t, pods)
		c.waitBound(t, pods, 60*time.Second)
		require.Contains(t, c.getPod(t, head).Annotations[hivesched.AnnotationPlacement], `"cellLessPods":1`)
		c.usedIs(t, ns+"-vc", 8)
		c.deletePods(t, pods)
		c.waitGone(t, pods, 30*time.Second)
		c.usedIs(t, ns+"-vc", 0)
	})

	t.Run("a LeaderWorkerSet's shape: a gang per replica group, each a CPU leader and an 8-GPU worker", func(t *testing.T) {
		// As LWS v0.8.0 makes them: the leader StatefulSet's pod lws-<i>
		// first, then its worker StatefulSet's pod lws-<i>-1 (LeaderCreated).
		lwsPod := func(group, worker int, gpus int64) *v1.Pod { return lwsPod(ns, "lws", group, worker, 2, gpus) }
		var all []*v1.Pod
		for g := 0; g < 2; g++ {
			leader := withoutGPUs([]*v1.Pod{lwsPod(g, 0, 8)})[0]
			worker := lwsPod(g, 1, 8)
			c.createPods(t, []*v1.Pod{leader})
			c.requireUnbound(t, []*v1.Pod{leader}, time.Second) // its worker is not made yet
			c.createPods(t, []*v1.Pod{worker})
			c.waitBound(t, []*v1.Pod{leader, worker}, 30*time.Second)
			for _, p := range []*v1.Pod{leader, worker} {
				require.Contains(t, c.getPod(t, p).Annotations[hivesched.AnnotationPlacement], fmt.Sprintf(`"group":"%s/lws-%d"`, ns, g), "one gang per replica group, named after its leader")
			}
			all = append(all, leader, worker)
		}
		c.usedIs(t, ns+"-vc", 16)
		c.deletePods(t, all)
		c.waitGone(t, all, 30*time.Second)
		c.usedIs(t, ns+"-vc", 0)

		// A group label on the templates (every replica's) is refused.
		bad := lwsPod(0, 1, 8)
		bad.Labels[hivesched.LabelAffinityGroup] = "lws"
		c.createPods(t, []*v1.Pod{bad})
		c.waitEvent(t, bad, "that name would make one gang across replicas", 20*time.Second)
		c.deletePods(t, []*v1.Pod{bad})
	})

	t.Run("no gang waits silently", func(t *testing.T) {
		// One incomplete gang of each form; each of its pods is told what
		// it waits for.
		native := withoutGPUs(gangPods(ns, "native", ns+"-vc", 0, 1, 0))
		native[0].Annotations[hivesched.AnnotationGroupMembers] = "2x8,1x0"
		createPG("pgwait", 3)
		podGroup := podGroupPods(ns, "pgwait", 2, 8, nil)
		c.createPodGroup(t, ns, "wlwait", 3, vcLabel)
		workload := workloadPods(ns, "wlwait", "", 1, 4)
		workload[0].Spec.SchedulingGroup.PodGroupName = ptr.To("wlwait")
		leader := withoutGPUs([]*v1.Pod{lwsPod(ns, "lwswait", 0, 0, 3, 0)}) // its workers never come (startupPolicy LeaderReady)
		for _, tc := range []struct {
			pods []*v1.Pod
			want string
		}{
			{native, "affinity group cl/native waits for its members: 1 of its 3 pods exist (members 2x8,1x0)"},
			{podGroup, "PodGroup cl/pgwait waits for its pods: 2 of its 3 exist"},
			{workload, "pod group cl/wlwait waits for its pods: 1 of its 3 exist"},
			{leader, "LeaderWorkerSet cl/lwswait replica group 0 waits for its pods: 1 of its 3 exist"},
		} {
			c.createPods(t, tc.pods)
			for _, p := range tc.pods {
				ev := c.waitEvent(t, p, tc.want, 20*time.Second)
				require.Contains(t, ev, "WaitingForMembers: ")
			}
			c.requireUnbound(t, tc.pods, time.Second)
			c.deletePods(t, tc.pods)
		}
	})
}

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// startWorkloadCluster starts an API server and sets the process's feature
// gates as a 1.37 cluster with the Workload API has them (the in-process API
// server and scheduler share them; they are restored when the test ends).
func startWorkloadCluster(t *testing.T) *cluster {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	return startCluster(t, "--runtime-config=scheduling.k8s.io/v1beta1=true")
}

// createPodGroup creates a Workload API PodGroup with a gang policy of
// minCount (0: a basic policy) and the labels given.
func (c *cluster) createPodGroup(t *testing.T, ns, name string, minCount int32, labels map[string]string, set ...func(*schedv1beta1.PodGroup)) *schedv1beta1.PodGroup {
	pg := &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	if minCount > 0 {
		pg.Spec.SchedulingPolicy.Gang = &schedv1beta1.GangSchedulingPolicy{MinCount: minCount}
	} else {
		pg.Spec.SchedulingPolicy.Basic = &schedv1beta1.BasicSchedulingPolicy{}
	}
	for _, f := range set {
		f(pg)
	}
	created, err := c.kube.SchedulingV1beta1().PodGroups(ns).Create(t.Context(), pg, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

// workloadPods are n pods of gpus GPUs each in pod group group (by
// spec.schedulingGroup), with no hivesched label but the VC's, if any.
func workloadPods(ns, group, vc string, n int, gpus int64) []*v1.Pod {
	pods := gangPods(ns, group, vc, 0, n, gpus)
	for _, p := range pods {
		p.Labels = map[string]string{}
		if vc != "" {
			p.Labels[hivesched.LabelVirtualCluster] = vc
		}
		p.Annotations = nil
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	}
	return pods
}

// usedIs waits until the VC's status says used leaf cells.
func (c *cluster) usedIs(t *testing.T, vc string, used int32) {
	c.waitVCStatus(t, vc, func(s hv1.VirtualClusterStatus) bool { return s.UsedLeafCells == used })
}

// TestWorkloadGangs (issue 23): Workload API pod groups as hivesched
// affinity groups: the VC from the PodGroup, its Workload or the pod; a
// basic policy one pod at a time; priority from the PodGroup; bad input
// refused with an event that says what to write, holding no cells.
func TestWorkloadGangs(t *testing.T) {
	c := startWorkloadCluster(t)
	c.createNodes(t, "wl", 1, 4, 1)
	c.createNamespace(t, "wl")
	c.createVC(t, "wl-vc", []string{"wl"}, "V100-RACK", 1)
	c.startScheduler(t, physicalCluster("wl", 1, 4, 1))

	t.Run("VC on the Workload", func(t *testing.T) {
		_, err := c.kube.SchedulingV1beta1().Workloads("wl").Create(t.Context(), &schedv1beta1.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: "job", Labels: map[string]string{hivesched.LabelVirtualCluster: "wl-vc"}},
			Spec: schedv1beta1.WorkloadSpec{PodGroupTemplates: []schedv1beta1.PodGroupTemplate{{
				Name: "workers", SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: 2}},
			}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		c.createPodGroup(t, "wl", "job-workers", 2, nil, func(pg *schedv1beta1.PodGroup) {
			pg.Spec.WorkloadRef = &schedv1beta1.WorkloadReference{WorkloadName: "job", TemplateName: "workers"}
		})
		pods := workloadPods("wl", "job-workers", "", 2, 4)
		c.createPods(t, pods)
		c.waitBound(t, pods, 60*time.Second)
		for _, p := range pods {
			require.Contains(t, c.getPod(t, p).Annotations[hivesched.AnnotationPlacement], `"virtualCluster":"wl-vc"`)
		}
		c.deletePods(t, pods)
		c.waitGone(t, pods, 30*time.Second)
	})

	t.Run("basic policy: one pod at a time", func(t *testing.T) {
		c.createPodGroup(t, "wl", "svc", 0, nil)
		pods := workloadPods("wl", "svc", "wl-vc", 3, 8)
		c.createPods(t, pods[:1])
		c.waitBound(t, pods[:1], 60*time.Second) // no gang: it does not wait for the others
		c.createPods(t, pods[1:])
		c.waitBound(t, pods, 60*time.Second)
		for _, p := range pods {
			require.Contains(t, c.getPod(t, p).Annotations[hivesched.AnnotationPlacement], fmt.Sprintf(`"group":"wl/%s"`, p.Name))
		}
		c.deletePods(t, pods)
		c.waitGone(t, pods, 30*time.Second)
	})

	t.Run("disruptionMode Single: served whole, said once on the PodGroup", func(t *testing.T) {
		c.createPodGroup(t, "wl", "single", 2, map[string]string{hivesched.LabelVirtualCluster: "wl-vc"}, func(pg *schedv1beta1.PodGroup) {
			pg.Spec.DisruptionMode = &schedv1beta1.DisruptionMode{Single: &schedv1beta1.SingleDisruptionMode{}}
		})
		pods := workloadPods("wl", "single", "", 2, 4)
		c.createPods(t, pods)
		c.waitBound(t, pods, 60*time.Second)
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			evs, err := c.kube.EventsV1().Events("wl").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, e := range evs.Items {
				if e.Regarding.Kind == "PodGroup" && e.Regarding.Name == "single" && e.Reason == "WholeGangDisruption" {
					return strings.Contains(e.Note, "preempts an affinity group whole"), nil
				}
			}
			return false, nil
		}))
		c.deletePods(t, pods)
		c.waitGone(t, pods, 30*time.Second)
	})

	t.Run("no VC anywhere", func(t *testing.T) {
		c.createPodGroup(t, "wl", "novc", 1, nil)
		pods := workloadPods("wl", "novc", "", 1, 1)
		c.createPods(t, pods)
		c.waitEvent(t, pods[0], "pod group wl/novc names no virtual cluster: label the PodGroup, its Workload or the pod", 30*time.Second)
		c.usedIs(t, "wl-vc", 0)
		c.deletePods(t, pods)
	})

	t.Run("a VC the namespace may not use", func(t *testing.T) {
		c.createVC(t, "other-vc", []string{"someone-else"}, "V100-NODE", 1)
		c.createPodGroup(t, "wl", "steal", 1, map[string]string{hivesched.LabelVirtualCluster: "other-vc"})
		pods := workloadPods("wl", "steal", "", 1, 8)
		c.createPods(t, pods)
		c.waitEvent(t, pods[0], "VirtualClusterRefused", 30*time.Second)
		c.requireUnbound(t, pods, time.Second)
		c.deletePods(t, pods)
	})

	t.Run("a Workload naming a VC the namespace may not use (issue 28, new inputs)", func(t *testing.T) {
		c.createVC(t, "theirs-vc", []string{"someone-else"}, "V100-NODE", 1)
		_, err := c.kube.SchedulingV1beta1().Workloads("wl").Create(t.Context(), &schedv1beta1.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: "steal-wl", Labels: map[string]string{hivesched.LabelVirtualCluster: "theirs-vc"}},
			Spec: schedv1beta1.WorkloadSpec{PodGroupTemplates: []schedv1beta1.PodGroupTemplate{{
				Name: "w", SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: 1}},
			}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		c.createPodGroup(t, "wl", "steal-wl-w", 1, nil, func(pg *schedv1beta1.PodGroup) {
			pg.Spec.WorkloadRef = &schedv1beta1.WorkloadReference{WorkloadName: "steal-wl", TemplateName: "w"}
		})
		pods := workloadPods("wl", "steal-wl-w", "", 1, 8)
		c.createPods(t, pods)
		c.waitEvent(t, pods[0], "VirtualClusterRefused", 30*time.Second)
		c.requireUnbound(t, pods, time.Second)
		c.deletePods(t, pods)
	})

	t.Run("a PodGroup's priority above the namespace's limit (issue 28, new inputs)", func(t *testing.T) {
		capVC := &hv1.VirtualCluster{ObjectMeta: metav1.ObjectMeta{Name: "capped-vc"}, Spec: hv1.VirtualClusterSpec{
			AllowedNamespaces: []string{"wl"}, VirtualCells: []hv1.VirtualCellSpec{{CellType: "T4-NODE", CellNumber: 1}},
			Limits: []hv1.NamespaceLimits{{Namespace: "*", MaxPriority: ptr.To[int32](10)}}}}
		_, err := c.vc.HiveschedV1alpha1().VirtualClusters().Create(t.Context(), capVC, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = c.vc.HiveschedV1alpha1().VirtualClusters().Delete(context.Background(), "capped-vc", metav1.DeleteOptions{})
		})
		capped := map[string]string{hivesched.LabelVirtualCluster: "capped-vc"}
		c.createPodGroup(t, "wl", "vip", 1, capped, func(pg *schedv1beta1.PodGroup) { pg.Spec.Priority = ptr.To[int32](500) })
		c.createPodGroup(t, "wl", "vip-ann", 1, capped, func(pg *schedv1beta1.PodGroup) {
			pg.Annotations = map[string]string{hivesched.AnnotationPriority: "500"}
		})
		pods := append(workloadPods("wl", "vip", "", 1, 1), workloadPods("wl", "vip-ann", "", 1, 1)...)
		// The scheduler holds a pod group's pods to its priority (their
		// PriorityClass would give it to them).
		pods[0].Spec.Priority = ptr.To[int32](500)
		c.createPods(t, pods)
		for _, p := range pods {
			c.waitEvent(t, p, "above the highest priority namespace wl may use in virtual cluster \"capped-vc\" (maxPriority 10)", 30*time.Second)
		}
		c.requireUnbound(t, pods, time.Second)
		c.usedIs(t, "capped-vc", 0)
		c.deletePods(t, pods)
	})

	t.Run("minCount larger than the cluster", func(t *testing.T) {
		c.createPodGroup(t, "wl", "huge", 40, map[string]string{hivesched.LabelVirtualCluster: "wl-vc"})
		pods := workloadPods("wl", "huge", "", 40, 8)
		c.createPods(t, pods)
		c.waitEvent(t, pods[0], `affinity group "wl/huge"`, 60*time.Second)
		c.requireUnbound(t, pods[:1], time.Second)
		c.usedIs(t, "wl-vc", 0)
		c.deletePods(t, pods)
		c.waitGone(t, pods, 30*time.Second)
	})

	t.Run("a pod in two gangs", func(t *testing.T) {
		c.createPodGroup(t, "wl", "twice", 1, map[string]string{hivesched.LabelVirtualCluster: "wl-vc"})
		pods := workloadPods("wl", "twice", "", 1, 1)
		pods[0].Labels[hivesched.LabelAffinityGroup] = "other"
		c.createPods(t, pods)
		c.waitEvent(t, pods[0], "a pod belongs to one gang", 30*time.Second)
		c.deletePods(t, pods)
	})

	t.Run("a basic pod group (a Job's default) leaves the pod's own gang in charge", func(t *testing.T) {
		c.createPodGroup(t, "wl", "job-basic", 0, nil)
		pods := gangPods("wl", "native", "wl-vc", 0, 2, 4)
		for _, p := range pods {
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("job-basic")}
		}
		c.createPods(t, pods[:1])
		c.requireUnbound(t, pods[:1], 2*time.Second) // a gang of 2: it waits for its other member
		c.createPods(t, pods[1:])
		c.waitBound(t, pods, 60*time.Second)
		for _, p := range pods {
			require.Contains(t, c.getPod(t, p).Annotations[hivesched.AnnotationPlacement], `"group":"wl/native"`)
		}
		c.deletePods(t, pods)
		c.waitGone(t, pods, 30*time.Second)
	})

	t.Run("priority from the PodGroup; annotations on the PodGroup apply to its pods", func(t *testing.T) {
		c.createPodGroup(t, "wl", "opp", 2, map[string]string{hivesched.LabelVirtualCluster: "wl-vc"}, func(pg *schedv1beta1.PodGroup) {
			pg.Annotations = map[string]string{hivesched.AnnotationPriority: "-1"}
		})
		pods := workloadPods("wl", "opp", "", 2, 2)
		c.createPods(t, pods)
		c.waitBound(t, pods, 60*time.Second)
		require.Contains(t, c.getPod(t, pods[0]).Annotations[hivesched.AnnotationPlacement], `"priority":-1`)
		c.deletePods(t, pods)
		c.waitGone(t, pods, 30*time.Second)
	})
}

// TestWorkloadBasicGangWaitsToldWhy: with the gates of the local cluster
// (hack/local-env.sh: placements, composites, DRA's pod-group claims), a
// native gang whose pods are in a basic pod group (a Job's, as 1.37's Job
// controller makes it) and that waits for its VC's cells is told why: no
// member got as far as DynamicResources' PreFilter (HiveSchedDRA), and its
// PodGroupPostFilter must not fail the pod group's cycle for the state it
// never wrote (its error "not found" replaced the reason in every member's
// event, and sent the group into error backoff).
func TestWorkloadBasicGangWaitsToldWhy(t *testing.T) {
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload:                 true,
		features.TopologyAwareWorkloadScheduling: true,
		features.CompositePodGroup:               true,
		features.DRAWorkloadResourceClaims:       true,
	})
	c := startCluster(t, "--runtime-config=scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true")
	c.createNodes(t, "bw", 1, 4, 0)
	c.createNamespace(t, "bw")
	c.createVC(t, "bw-vc", []string{"bw"}, "V100-RACK", 1)
	c.startScheduler(t, physicalCluster("bw", 1, 4, 0))

	hold := gangPods("bw", "hold", "bw-vc", 0, 4, 8)
	c.createPods(t, hold)
	c.waitBound(t, hold, 60*time.Second)
	c.createPodGroup(t, "bw", "waits-basic", 0, nil)
	pods := gangPods("bw", "waits", "bw-vc", 0, 2, 8)
	for _, p := range pods {
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("waits-basic")}
	}
	c.createPods(t, pods)
	c.failedScheduling(t, pods[0], `affinity group "bw/waits"`, 30*time.Second)
	for _, e := range c.events(t, pods[0]) {
		require.NotContains(t, e, "PodGroupPostFilter", "the cycle failed with an error instead of the gang's reason")
	}
	c.requireUnbound(t, pods, time.Second)
	c.deletePods(t, hold)
	c.waitBound(t, pods, 60*time.Second)
}

// TestWorkloadComposite (issue 23): a CompositePodGroup (v1alpha3, gates
// CompositePodGroup and TopologyAwareWorkloadScheduling) whose gang policy
// needs all of its pod groups is one affinity group of several member
// shapes, placed whole through hivesched's placement generator; one that
// does not map onto an affinity group is refused with what to write.
func TestWorkloadComposite(t *testing.T) {
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload:                 true,
		features.TopologyAwareWorkloadScheduling: true,
		features.CompositePodGroup:               true,
	})
	c := startCluster(t, "--runtime-config=scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true")
	c.createNodes(t, "cp", 1, 4, 0)
	c.createNamespace(t, "cp")
	c.createVC(t, "cp-vc", []string{"cp"}, "V100-RACK", 1)
	addr := freeAddr(t)
	c.startScheduler(t, physicalCluster("cp", 1, 4, 0), withInspect(addr))

	composite := func(name string, minGroups int32, children map[string]int32) {
		ref := &schedv1alpha3.WorkloadReference{WorkloadName: name, TemplateName: name}
		_, err := c.kube.SchedulingV1alpha3().CompositePodGroups("cp").Create(t.Context(), &schedv1alpha3.CompositePodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hivesched.LabelVirtualCluster: "cp-vc"}},
			Spec: schedv1alpha3.CompositePodGroupSpec{WorkloadRef: ref, SchedulingPolicy: schedv1alpha3.CompositePodGroupSchedulingPolicy{
				Gang: &schedv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: minGroups}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		for child, min := range children {
			c.createPodGroup(t, "cp", child, min, nil, func(pg *schedv1beta1.PodGroup) {
				pg.Spec.ParentCompositePodGroupName = ptr.To(name)
				pg.Spec.WorkloadRef = &schedv1beta1.WorkloadReference{WorkloadName: name, TemplateName: child}
			})
		}
	}

	t.Run("all pod groups required: one affinity group of two shapes", func(t *testing.T) {
		composite("ps", 2, map[string]int32{"ps-master": 1, "ps-workers": 2})
		pods := append(workloadPods("cp", "ps-master", "", 1, 4), workloadPods("cp", "ps-workers", "", 2, 8)...)
		c.createPods(t, pods)
		c.waitBound(t, pods, 60*time.Second)
		require.Equal(t, 3, c.requireCoreAgrees(t, addr, "cp"))
		for _, p := range pods {
			require.Contains(t, c.getPod(t, p).Annotations[hivesched.AnnotationPlacement], `"group":"cp/ps"`)
		}
		ag := c.waitAG(t, "cp", "ps", phaseIs(hv1.AffinityGroupRunning))
		require.Equal(t, []hv1.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 4}, {PodNumber: 2, LeafCellNumber: 8}}, ag.Spec.Members)
		c.deletePods(t, pods)
		c.waitGone(t, pods, 30*time.Second)
	})

	t.Run("a composite that needs only some of its pod groups: refused", func(t *testing.T) {
		composite("any", 1, map[string]int32{"any-a": 1, "any-b": 1})
		pods := append(workloadPods("cp", "any-a", "", 1, 1), workloadPods("cp", "any-b", "", 1, 1)...)
		c.createPods(t, pods)
		c.waitEvent(t, pods[0], "give it a gang policy with minGroupCount 2", 30*time.Second)
		c.requireUnbound(t, pods, time.Second)
		c.usedIs(t, "cp-vc", 0)
	})
}

// withRackKey names physicalCluster's rack level by the rack label key.
func withRackKey(pc map[string]any) map[string]any {
	pc["cellTypes"].(map[string]any)["V100-RACK"].(map[string]any)["topologyKey"] = "topology.kubernetes.io/rack"
	return pc
}

// withTopology gives a PodGroup a topology constraint.
func withTopology(key string) func(*schedv1beta1.PodGroup) {
	return func(pg *schedv1beta1.PodGroup) {
		pg.Spec.SchedulingConstraints = &schedv1beta1.PodGroupSchedulingConstraints{Topology: []schedv1beta1.TopologyConstraint{{Key: key}}}
	}
}

// TestWorkloadTopology (issue 23): a Workload API gang's topology
// constraint holds it under one cell of the level the args name by that key
// (the rack level by topology.kubernetes.io/rack, the node level by
// kubernetes.io/hostname); a gang that cannot fit one such cell, or names a
// key no level answers to, is told so and holds no cells.
func TestWorkloadTopology(t *testing.T) {
	// Without TopologyAwareWorkloadScheduling the API server drops a
	// PodGroup's schedulingConstraints.
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload:                 true,
		features.TopologyAwareWorkloadScheduling: true,
	})
	c := startCluster(t, "--runtime-config=scheduling.k8s.io/v1beta1=true")
	// Two racks of two nodes; the second node of each rack is not ready,
	// so each rack has 8 usable GPUs and 16 are usable in all.
	for r := 0; r < 2; r++ {
		c.createNode(t, fmt.Sprintf("tp-r%d-n0", r), "nvidia.com/gpu", 8, true)
		c.createNode(t, fmt.Sprintf("tp-r%d-n1", r), "nvidia.com/gpu", 8, false)
	}
	c.createNamespace(t, "tp")
	c.createVC(t, "tp-vc", []string{"tp"}, "V100-RACK", 2)
	c.startScheduler(t, withRackKey(physicalCluster("tp", 2, 2, 0)))
	vcLabel := map[string]string{hivesched.LabelVirtualCluster: "tp-vc"}

	t.Run("one rack: the gang shares a rack", func(t *testing.T) {
		c.createPodGroup(t, "tp", "rack", 2, vcLabel, withTopology("topology.kubernetes.io/rack"))
		pods := workloadPods("tp", "rack", "", 2, 4)
		c.createPods(t, pods)
		nodes := c.waitBound(t, pods, 60*time.Second)
		require.Equal(t, nodes[0], nodes[1], "the only usable node of a rack holds both pods")
		for _, p := range pods {
			require.Contains(t, c.getPod(t, p).Annotations[hivesched.AnnotationPlacement], `"withinTopologyKey":"topology.kubernetes.io/rack"`)
		}
		ag := c.waitAG(t, "tp", "rack", phaseIs(hv1.AffinityGroupRunning))
		require.Equal(t, "topology.kubernetes.io/rack", ag.Spec.WithinTopologyKey)
		c.deletePods(t, pods)
		c.waitGone(t, pods, 30*time.Second)
		c.usedIs(t, "tp-vc", 0)
	})

	t.Run("more than a rack's usable GPUs: waits, said why; without the constraint it binds", func(t *testing.T) {
		c.createPodGroup(t, "tp", "big", 2, vcLabel, withTopology("topology.kubernetes.io/rack"))
		pods := workloadPods("tp", "big", "", 2, 8)
		c.createPods(t, pods)
		c.waitEvent(t, pods[0], "in one V100-RACK", 30*time.Second)
		c.requireUnbound(t, pods, 2*time.Second)
		c.usedIs(t, "tp-vc", 0)
		c.deletePods(t, pods)
		c.waitGone(t, pods, 30*time.Second)

		c.createPodGroup(t, "tp", "big-free", 2, vcLabel)
		free := workloadPods("tp", "big-free", "", 2, 8)
		c.createPods(t, free)
		nodes := c.waitBound(t, free, 60*time.Second)
		require.ElementsMatch(t, []string{"tp-r0-n0", "tp-r1-n0"}, nodes)
		c.deletePods(t, free)
		c.waitGone(t, free, 30*time.Second)
		c.usedIs(t, "tp-vc", 0)
	})

	t.Run("one host", func(t *testing.T) {
		c.createPodGroup(t, "tp", "host", 2, vcLabel, withTopology("kubernetes.io/hostname"))
		pods := workloadPods("tp", "host", "", 2, 2)
		c.createPods(t, pods)
		nodes := c.waitBound(t, pods, 60*time.Second)
		require.Equal(t, nodes[0], nodes[1])
		c.deletePods(t, pods)
		c.waitGone(t, pods, 30*time.Second)

		c.createPodGroup(t, "tp", "host-big", 2, vcLabel, withTopology("kubernetes.io/hostname"))
		big := workloadPods("tp", "host-big", "", 2, 8)
		c.createPods(t, big)
		c.waitEvent(t, big[0], "does not fit in one V100-NODE (8 leaf cells)", 30*time.Second)
		c.requireUnbound(t, big, time.Second)
		c.usedIs(t, "tp-vc", 0)
	})

	t.Run("a key no level answers to", func(t *testing.T) {
		c.createPodGroup(t, "tp", "zone", 1, vcLabel, withTopology("topology.kubernetes.io/zone"))
		pods := workloadPods("tp", "zone", "", 1, 1)
		c.createPods(t, pods)
		c.waitEvent(t, pods[0], `withinTopologyKey "topology.kubernetes.io/zone" names no cell level`, 30*time.Second)
		c.requireUnbound(t, pods, time.Second)
		c.usedIs(t, "tp-vc", 0)
	})
}

// TestWorkloadUnknownPodGroup (issue 23, bad input): a pod that names a
// Workload API PodGroup that does not exist is kept aside by the
// scheduler's queue (no cycle, no FailedScheduling event): hivesched tells
// it so with an event, holds no cells for it, and it is scheduled once the
// PodGroup is created.
func TestWorkloadUnknownPodGroup(t *testing.T) {
	c := startWorkloadCluster(t)
	c.createNodes(t, "up", 1, 1, 0)
	c.createNamespace(t, "up")
	c.createVC(t, "up-vc", []string{"up"}, "V100-NODE", 1)
	addr := freeAddr(t)
	c.startScheduler(t, physicalCluster("up", 1, 1, 0), withInspect(addr))

	pods := workloadPods("up", "later", "", 2, 4)
	c.createPods(t, pods)
	for _, p := range pods {
		c.waitEvent(t, p, `InvalidSchedulingSpec: pod names pod group "later" (spec.schedulingGroup.podGroupName, a PodGroup of the pod's own namespace), which does not exist in namespace "up" yet`, 30*time.Second)
	}
	c.requireUnbound(t, pods, time.Second)
	v, err := c.readCore(t.Context(), addr, "up/later", "up-vc")
	require.NoError(t, err)
	require.Equal(t, coreView{}, v, "the core knows no group and holds no cells")
	evs, err := c.kube.EventsV1().Events("up").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	n := 0
	for _, e := range evs.Items {
		if e.Regarding.Name == pods[0].Name && strings.Contains(e.Note, `pod group "later"`) {
			n++
			require.Nil(t, e.Series, "told once, not once per update of the pod")
		}
	}
	require.Equal(t, 1, n, "one event: %v", c.events(t, pods[0]))

	c.createPodGroup(t, "up", "later", 2, map[string]string{hivesched.LabelVirtualCluster: "up-vc"})
	c.waitBound(t, pods, 60*time.Second)
	require.Equal(t, 2, c.requireCoreAgrees(t, addr, "up"))

	t.Run("a PodGroup that exists: no such event", func(t *testing.T) {
		c.createPodGroup(t, "up", "now", 1, map[string]string{hivesched.LabelVirtualCluster: "up-vc"})
		now := workloadPods("up", "now", "", 1, 8)
		c.createPods(t, now)
		c.failedScheduling(t, now[0], `affinity group "up/now"`, 30*time.Second) // the VC is full: it waits
		for _, e := range c.events(t, now[0]) {
			require.NotContains(t, e, "does not exist")
		}
	})
}

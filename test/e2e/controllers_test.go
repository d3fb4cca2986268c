package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/test/util"
)

// livePods lists the pods of namespace ns matching selector that are not
// being deleted.
func (e *env) livePods(t *testing.T, ns, selector string) []v1.Pod {
	list, err := e.kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	var out []v1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitPods waits until n live pods match selector and every one satisfies
// ok, and returns them.
func (e *env) waitPods(t *testing.T, ns, selector string, n int, timeout time.Duration, what string, ok func(v1.Pod) bool) []v1.Pod {
	t.Helper()
	var got []v1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 300*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		got = e.livePods(t, ns, selector)
		if len(got) != n {
			return false, nil
		}
		for _, p := range got {
			if !ok(p) {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "want %d pods %s in %s (%s); have %s", n, what, ns, selector, podStates(got))
	return got
}

func podStates(ps []v1.Pod) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("\n  " + p.Name + ": node=" + p.Spec.NodeName + " phase=" + string(p.Status.Phase))
	}
	return b.String()
}

func running(p v1.Pod) bool { return p.Spec.NodeName != "" && p.Status.Phase == v1.PodRunning }

// TestControllers (issue 23): the local cluster runs the real
// kube-controller-manager, so what users apply (Jobs, Deployments) becomes
// pods through the Job, ReplicaSet, Deployment and garbage collector
// controllers, and hivesched schedules those pods.
func TestControllers(t *testing.T) {
	e := setup(t)

	t.Run("the Indexed Job sample runs as one gang, on distinct devices, and completes", func(t *testing.T) {
		// vc-vision (one rack and the pinned node gpu-b3) is full, held by
		// a gang of higher priority than the Job's (10): the Job's four
		// pods must wait, all of them, and are bound once it goes.
		hog := pods("vision", "hog", "vc-vision", 100, 4, 8, "hivesched")
		pinned := pods("vision", "hogpin", "vc-vision", 100, 1, 8, "hivesched")
		pinned[0].Annotations[hivesched.AnnotationPinnedCell] = "pinned-b3"
		e.create(t, append(hog, pinned...))
		e.waitRunning(t, append(hog, pinned...), 60*time.Second)

		const sel = "job-name=bert"
		sample := filepath.Join(e.root, "manifests", "samples", "indexed-job.yaml")
		// deleteSample: background propagation, the garbage collector
		// deletes the Job's pods (and its Workload and PodGroup). A Job
		// left by an earlier run would make "apply" a no-op.
		deleteSample := func(t *testing.T) {
			e.kubectl(t, "delete", "-f", sample, "--ignore-not-found", "--wait=true")
			require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 300*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
				l, err := e.kube.CoreV1().Pods("vision").List(ctx, metav1.ListOptions{LabelSelector: sel})
				return err == nil && len(l.Items) == 0, nil
			}), "the sample Job's pods were not garbage-collected")
		}
		deleteSample(t)
		e.kubectl(t, "apply", "-f", sample)
		t.Cleanup(func() { deleteSample(t) })

		e.waitPods(t, "vision", sel, 4, 60*time.Second, "created by the Job controller", func(v1.Pod) bool { return true })
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			for _, p := range e.livePods(t, "vision", sel) {
				require.Empty(t, p.Spec.NodeName, "pod %s was bound while its VC is full: the gang must wait whole", p.Name)
			}
			time.Sleep(300 * time.Millisecond)
		}
		ag := e.waitPhase(t, "vision", "bert", hv1.AffinityGroupAccepted, 30*time.Second)
		require.Equal(t, "0/4", ag.Status.MembersSummary)

		e.remove(t, append(hog, pinned...))
		got := e.waitPods(t, "vision", sel, 4, 60*time.Second, "Running", running)

		// One affinity group: every pod's placement record names the
		// sample's AffinityGroup and VC; each pod has 2 GPUs, and pods on
		// one node have distinct ones.
		byNode := map[string]map[string]string{}
		indices := map[string]bool{}
		for _, p := range got {
			spec, rp, err := placement.Recorded(&p)
			require.NoError(t, err, "pod %s", p.Name)
			require.Equal(t, "vc-vision", spec.VirtualCluster, "pod %s", p.Name)
			require.True(t, spec.Name == "bert" || strings.HasSuffix(spec.Name, "/bert"), "pod %s is in group %q, want the AffinityGroup bert", p.Name, spec.Name)
			require.Len(t, rp.LeafCellIndices, 2, "pod %s", p.Name)
			ann := p.Annotations[hivesched.AnnotationLeafCellIndices]
			require.Len(t, strings.Split(ann, ","), 2, "pod %s: %s=%q", p.Name, hivesched.AnnotationLeafCellIndices, ann)
			if byNode[p.Spec.NodeName] == nil {
				byNode[p.Spec.NodeName] = map[string]string{}
			}
			for _, i := range strings.Split(ann, ",") {
				other, dup := byNode[p.Spec.NodeName][i]
				require.False(t, dup, "GPU %s/%s given to %s and %s", p.Spec.NodeName, i, other, p.Name)
				byNode[p.Spec.NodeName][i] = p.Name
			}
			indices[p.Annotations[batchv1.JobCompletionIndexAnnotation]] = true
		}
		require.Len(t, indices, 4, "the Indexed Job's pods have completion indices 0..3")
		ag = e.waitPhase(t, "vision", "bert", hv1.AffinityGroupRunning, 30*time.Second)
		require.Equal(t, "4/4", ag.Status.MembersSummary)
		t.Logf("gang bert bound: %v", byNode)

		// With WorkloadWithJob (local-env.sh turns it on), the Job
		// controller itself made the Job a Workload API workload: a
		// Workload with one PodGroupTemplate, a PodGroup, and every pod
		// joined to it by spec.schedulingGroup.
		if on, err := util.LocalFeatureGate(e.root, "WorkloadWithJob"); err == nil && on {
			job, err := e.kube.BatchV1().Jobs("vision").Get(t.Context(), "bert", metav1.GetOptions{})
			require.NoError(t, err)
			wls, err := e.kube.SchedulingV1beta1().Workloads("vision").List(t.Context(), metav1.ListOptions{})
			require.NoError(t, err)
			var wlName string
			for _, wl := range wls.Items {
				if metav1.IsControlledBy(&wl, job) {
					wlName = wl.Name
					require.Len(t, wl.Spec.PodGroupTemplates, 1)
					require.Equal(t, "bert-pgt-0", wl.Spec.PodGroupTemplates[0].Name)
				}
			}
			require.NotEmpty(t, wlName, "no Workload controlled by Job vision/bert")
			pgs, err := e.kube.SchedulingV1beta1().PodGroups("vision").List(t.Context(), metav1.ListOptions{})
			require.NoError(t, err)
			var pgName string
			for _, pg := range pgs.Items {
				if metav1.IsControlledBy(&pg, job) {
					pgName = pg.Name
					require.NotNil(t, pg.Spec.WorkloadRef)
					require.Equal(t, wlName, pg.Spec.WorkloadRef.WorkloadName)
				}
			}
			require.NotEmpty(t, pgName, "no PodGroup controlled by Job vision/bert")
			for _, p := range got {
				require.NotNil(t, p.Spec.SchedulingGroup, "pod %s", p.Name)
				require.Equal(t, pgName, ptr.Deref(p.Spec.SchedulingGroup.PodGroupName, ""), "pod %s", p.Name)
			}
			t.Logf("Job controller made Workload %s and PodGroup %s", wlName, pgName)
		}

		// kwok lets a Job's pods succeed 10 s after they run
		// (hack/kwok-pod-complete.yaml): the Job controller completes the
		// Job, and the AffinityGroup follows.
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			job, err := e.kube.BatchV1().Jobs("vision").Get(ctx, "bert", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range job.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == v1.ConditionTrue {
					return job.Status.Succeeded == 4, nil
				}
			}
			return false, nil
		}), "Job vision/bert did not complete: %s", podStates(e.livePods(t, "vision", sel)))
		e.waitPhase(t, "vision", "bert", hv1.AffinityGroupCompleted, 60*time.Second)
	})

	t.Run("the Indexed Job written the 1.37 way: the Job controller's gang PodGroup is the affinity group", func(t *testing.T) {
		if on, err := util.LocalFeatureGate(e.root, "WorkloadWithJob"); err != nil || !on {
			t.Skip("the local cluster runs without WorkloadWithJob")
		}
		const sel = "job-name=bert-wl"
		sample := filepath.Join(e.root, "manifests", "samples", "indexed-job-workload.yaml")
		e.kubectl(t, "delete", "-f", sample, "--ignore-not-found", "--wait=true")
		e.kubectl(t, "apply", "-f", sample)
		t.Cleanup(func() { e.kubectl(t, "delete", "-f", sample, "--ignore-not-found", "--wait=true") })

		got := e.waitPods(t, "vision", sel, 4, 90*time.Second, "Running", running)
		job, err := e.kube.BatchV1().Jobs("vision").Get(t.Context(), "bert-wl", metav1.GetOptions{})
		require.NoError(t, err)
		pgs, err := e.kube.SchedulingV1beta1().PodGroups("vision").List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		var pgName string
		for _, pg := range pgs.Items {
			if metav1.IsControlledBy(&pg, job) {
				pgName = pg.Name
				require.NotNil(t, pg.Spec.SchedulingPolicy.Gang, "spec.scheduling asked for a gang")
				require.Equal(t, int32(4), pg.Spec.SchedulingPolicy.Gang.MinCount, "minCount defaults to the parallelism")
			}
		}
		require.NotEmpty(t, pgName, "no PodGroup controlled by Job vision/bert-wl")
		seen := map[string]string{}
		for _, p := range got {
			require.Equal(t, pgName, ptr.Deref(p.Spec.SchedulingGroup.PodGroupName, ""), "pod %s", p.Name)
			for k := range p.Labels {
				require.False(t, strings.HasPrefix(k, "hivesched.io/") && k != hivesched.LabelVirtualCluster, "pod %s carries hivesched label %s beyond the VC", p.Name, k)
			}
			spec, rp, err := placement.Recorded(&p)
			require.NoError(t, err, "pod %s", p.Name)
			require.Equal(t, "vision/"+pgName, spec.Name, "pod %s: the affinity group is the PodGroup", p.Name)
			require.Equal(t, []int32{4}, []int32{spec.Members[0].PodNumber}, "pod %s", p.Name)
			for _, i := range rp.LeafCellIndices {
				k := fmt.Sprintf("%s/%d", p.Spec.NodeName, i)
				require.Empty(t, seen[k], "GPU %s given to %s and %s", k, seen[k], p.Name)
				seen[k] = p.Name
			}
		}
		e.waitPhase(t, "vision", pgName, hv1.AffinityGroupRunning, 30*time.Second)
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			job, err := e.kube.BatchV1().Jobs("vision").Get(ctx, "bert-wl", metav1.GetOptions{})
			return err == nil && job.Status.Succeeded == 4, nil
		}), "Job vision/bert-wl did not complete: %s", podStates(e.livePods(t, "vision", sel)))
		e.waitPhase(t, "vision", pgName, hv1.AffinityGroupCompleted, 60*time.Second)
	})

	t.Run("a 3-replica Deployment spreads over nodes in a Spread VC", func(t *testing.T) {
		e.kubectl(t, "patch", "vc", "vc-vision", "--type", "merge", "-p", `{"spec":{"selector":"Spread"}}`)
		t.Cleanup(func() {
			e.kubectl(t, "patch", "vc", "vc-vision", "--type", "merge", "-p", `{"spec":{"selector":"Pack"}}`)
		})
		gpu := *resource.NewQuantity(1, resource.DecimalSI)
		labels := map[string]string{"app": "serve", hivesched.LabelVirtualCluster: "vc-vision", hivesched.LabelSpreadKey: "serve"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "serve", Namespace: "vision"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](3),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "serve"}},
				Template: v1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: v1.PodSpec{
						SchedulerName: "hivesched",
						Containers: []v1.Container{{Name: "serve", Image: "busybox", Resources: v1.ResourceRequirements{
							Requests: v1.ResourceList{"nvidia.com/gpu": gpu}, Limits: v1.ResourceList{"nvidia.com/gpu": gpu}}}},
					},
				},
			},
		}
		_, err := e.kube.AppsV1().Deployments("vision").Create(t.Context(), d, metav1.CreateOptions{})
		require.NoError(t, err)
		deleted := false
		t.Cleanup(func() {
			if !deleted {
				_ = e.kube.AppsV1().Deployments("vision").Delete(context.Background(), "serve", metav1.DeleteOptions{})
			}
		})

		got := e.waitPods(t, "vision", "app=serve", 3, 60*time.Second, "Running", running)
		var nodes []string
		for _, p := range got {
			nodes = append(nodes, p.Spec.NodeName)
			ref := metav1.GetControllerOf(&p)
			require.NotNil(t, ref, "pod %s", p.Name)
			require.Equal(t, "ReplicaSet", ref.Kind, "pod %s is owned by the Deployment's ReplicaSet", p.Name)
		}
		sort.Strings(nodes)
		for i := 1; i < len(nodes); i++ {
			require.NotEqual(t, nodes[i-1], nodes[i], "Spread with spread key serve: one replica per node: %v", nodes)
		}
		t.Logf("Deployment serve: replicas on %v", nodes)

		// The garbage collector takes the ReplicaSet and its pods with the
		// Deployment.
		require.NoError(t, e.kube.AppsV1().Deployments("vision").Delete(t.Context(), "serve", metav1.DeleteOptions{
			PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
		deleted = true
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 300*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			l, err := e.kube.CoreV1().Pods("vision").List(ctx, metav1.ListOptions{LabelSelector: "app=serve"})
			return err == nil && len(l.Items) == 0, nil
		}), "the Deployment's pods were not garbage-collected")
	})
}

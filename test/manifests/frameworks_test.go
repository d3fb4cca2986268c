package manifests

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// The framework samples of issue 39 (README "MPI jobs", "KubeRay",
// "JobSet"), without their controllers: the pods and the PodGroup each
// framework makes of its sample, as its source says it makes them, read by
// hivesched as one gang of vc-vision shaped 3x8,1x0 (three 8-GPU pods and
// one without GPUs). test/e2e runs the same samples through the real
// controllers; this keeps the samples honest in make test.

// mpiJobSample is the part of training-operator v1.8.1's kubeflow.org/v1
// MPIJob the sample uses (strict decoding refuses a misspelt field).
type mpiJobSample struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		SlotsPerWorker int32 `json:"slotsPerWorker"`
		RunPolicy      struct {
			CleanPodPolicy string `json:"cleanPodPolicy"`
		} `json:"runPolicy"`
		MPIReplicaSpecs map[string]struct {
			Replicas int32                  `json:"replicas"`
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"mpiReplicaSpecs"`
	} `json:"spec"`
}

// rayClusterSample is the part of KubeRay v1.5.0's ray.io/v1 RayCluster the
// sample uses.
type rayClusterSample struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		RayVersion              string `json:"rayVersion"`
		EnableInTreeAutoscaling bool   `json:"enableInTreeAutoscaling,omitempty"`
		HeadGroupSpec           struct {
			RayStartParams map[string]string      `json:"rayStartParams"`
			Template       corev1.PodTemplateSpec `json:"template"`
		} `json:"headGroupSpec"`
		WorkerGroupSpecs []struct {
			GroupName      string                 `json:"groupName"`
			Replicas       int32                  `json:"replicas"`
			MinReplicas    int32                  `json:"minReplicas"`
			MaxReplicas    int32                  `json:"maxReplicas"`
			RayStartParams map[string]string      `json:"rayStartParams"`
			Template       corev1.PodTemplateSpec `json:"template"`
		} `json:"workerGroupSpecs"`
	} `json:"spec"`
}

// jobSetSample is the part of JobSet v0.12.0's jobset.x-k8s.io/v1alpha2
// JobSet the sample uses.
type jobSetSample struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		ReplicatedJobs []struct {
			Name     string `json:"name"`
			Replicas int32  `json:"replicas"`
			Template struct {
				Spec struct {
					Parallelism    int32                  `json:"parallelism"`
					Completions    int32                  `json:"completions"`
					CompletionMode string                 `json:"completionMode,omitempty"`
					BackoffLimit   int32                  `json:"backoffLimit"`
					Template       corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"replicatedJobs"`
	} `json:"spec"`
}

// podsOf makes n pods of template t named prefix-i in namespace ns.
func podsOf(t corev1.PodTemplateSpec, ns, prefix string, n int32) []*corev1.Pod {
	var out []*corev1.Pod
	for i := int32(0); i < n; i++ {
		p := &corev1.Pod{ObjectMeta: *t.ObjectMeta.DeepCopy(), Spec: *t.Spec.DeepCopy()}
		p.Name = fmt.Sprintf("%s-%d", prefix, i)
		p.Namespace = ns
		p.UID = types.UID(p.Name)
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		out = append(out, p)
	}
	return out
}

// requireGang reads every pod with pg as the only PodGroup and the pods as
// its gang, and checks that they are one gang of vc-vision shaped 3x8,1x0.
func requireGang(t *testing.T, pg *pgv1alpha1.PodGroup, pods []*corev1.Pod) {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, indexer.Add(pg))
	lister := pglisters.NewPodGroupLister(indexer)
	resolver := podrequest.NewResolver("nvidia.com/gpu", podrequest.Lookups{
		PodGroups: func() pglisters.PodGroupLister { return lister },
		GangPods:  func(podrequest.GangKey) []*corev1.Pod { return pods },
	})
	var first *podrequest.Request
	for _, pod := range pods {
		require.Equal(t, pg.Name, pod.Labels[pgv1alpha1.PodGroupLabel], "%s: the PodGroup's label", pod.Name)
		req, err := resolver.Read(pod)
		require.NoError(t, err, pod.Name)
		require.NotNil(t, req, "%s: hivesched's", pod.Name)
		if first == nil {
			first = req
		}
		require.Equal(t, first.Group, req.Group, "%s: one gang", pod.Name)
	}
	require.Equal(t, pg.Namespace+"/"+pg.Name, first.Group.Name)
	require.Equal(t, "vc-vision", first.Group.VirtualCluster)
	require.Equal(t, "3x8,1x0", podrequest.Shape(first), "three 8-GPU pods and one without GPUs")
}

// TestMPIJobSample: training-operator v1.8.1 with
// --gang-scheduler-name=hivesched labels every pod with a PodGroup named
// after the job, of minMember launcher + workers (no labels), and sets
// schedulerName hivesched where the template names none.
func TestMPIJobSample(t *testing.T) {
	docs := documents(t, "manifests", "samples", "mpijob.yaml")
	require.Len(t, docs, 1)
	var job mpiJobSample
	require.NoError(t, sigsyaml.UnmarshalStrict(docs[0], &job))
	require.Equal(t, "kubeflow.org/v1", job.APIVersion)
	require.Equal(t, "MPIJob", job.Kind)
	var pods []*corev1.Pod
	for _, rt := range []string{"Launcher", "Worker"} {
		spec, ok := job.Spec.MPIReplicaSpecs[rt]
		require.True(t, ok, "replica type %s", rt)
		require.Equal(t, "vc-vision", spec.Template.Labels[hivesched.LabelVirtualCluster], "%s: the template names the VC", rt)
		for _, p := range podsOf(spec.Template, job.Metadata.Namespace, job.Metadata.Name+"-"+rt, spec.Replicas) {
			p.Labels[pgv1alpha1.PodGroupLabel] = job.Metadata.Name
			if p.Spec.SchedulerName == "" {
				p.Spec.SchedulerName = "hivesched"
			}
			pods = append(pods, p)
		}
	}
	requireGang(t, &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: job.Metadata.Name, Namespace: job.Metadata.Namespace},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: int32(len(pods))}}, pods)
}

// TestRayClusterSample: KubeRay v1.5.0 with --batch-scheduler=scheduler-plugins
// gangs a RayCluster labelled ray.io/gang-scheduling-enabled: a PodGroup
// named after it of minMember workers + 1 (no labels), the pods labelled
// with it and their schedulerName overwritten with
// scheduler-plugins-scheduler. A gang has a fixed size: the worker groups
// do not autoscale.
func TestRayClusterSample(t *testing.T) {
	docs := documents(t, "manifests", "samples", "raycluster.yaml")
	require.Len(t, docs, 1)
	var rc rayClusterSample
	require.NoError(t, sigsyaml.UnmarshalStrict(docs[0], &rc))
	require.Equal(t, "ray.io/v1", rc.APIVersion)
	require.Equal(t, "RayCluster", rc.Kind)
	require.Contains(t, rc.Metadata.Labels, "ray.io/gang-scheduling-enabled", "KubeRay makes a PodGroup only for a RayCluster so labelled")
	require.Equal(t, "vc-vision", rc.Spec.HeadGroupSpec.Template.Labels[hivesched.LabelVirtualCluster], "the head's template names the VC")
	pods := podsOf(rc.Spec.HeadGroupSpec.Template, rc.Metadata.Namespace, rc.Metadata.Name+"-head", 1)
	for _, g := range rc.Spec.WorkerGroupSpecs {
		require.Equal(t, "vc-vision", g.Template.Labels[hivesched.LabelVirtualCluster], "%s: the template names the VC", g.GroupName)
		require.True(t, g.MinReplicas == g.Replicas && g.MaxReplicas == g.Replicas, "%s: a fixed size", g.GroupName)
		pods = append(pods, podsOf(g.Template, rc.Metadata.Namespace, rc.Metadata.Name+"-"+g.GroupName, g.Replicas)...)
	}
	for _, p := range pods {
		p.Labels[pgv1alpha1.PodGroupLabel] = rc.Metadata.Name
		p.Spec.SchedulerName = "scheduler-plugins-scheduler"
	}
	requireGang(t, &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: rc.Metadata.Name, Namespace: rc.Metadata.Namespace},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: int32(len(pods))}}, pods)
}

// TestRayClusterAutoscalingSample (issue 46): the autoscaling sample is an
// elastic gang: KubeRay's PodGroup counts the head and the worker group's
// replicas at creation (its minReplicas), so the minimum is the head and one
// 8-GPU worker, and the workers the autoscaler adds up to maxReplicas are
// extra pods, each a one-pod group of its own tied to the gang.
func TestRayClusterAutoscalingSample(t *testing.T) {
	docs := documents(t, "manifests", "samples", "raycluster-autoscaling.yaml")
	require.Len(t, docs, 1)
	var rc rayClusterSample
	require.NoError(t, sigsyaml.UnmarshalStrict(docs[0], &rc))
	require.Equal(t, "RayCluster", rc.Kind)
	require.Contains(t, rc.Metadata.Labels, "ray.io/gang-scheduling-enabled")
	require.True(t, rc.Spec.EnableInTreeAutoscaling, "Ray's autoscaler scales it")
	require.Len(t, rc.Spec.WorkerGroupSpecs, 1)
	g := rc.Spec.WorkerGroupSpecs[0]
	require.Equal(t, g.MinReplicas, g.Replicas, "created at its minimum: KubeRay's minMember counts replicas at creation")
	require.Less(t, g.MinReplicas, g.MaxReplicas, "a worker group that grows")
	require.Equal(t, "vc-vision", rc.Spec.HeadGroupSpec.Template.Labels[hivesched.LabelVirtualCluster])
	require.Equal(t, "vc-vision", g.Template.Labels[hivesched.LabelVirtualCluster])
	head := podsOf(rc.Spec.HeadGroupSpec.Template, rc.Metadata.Namespace, rc.Metadata.Name+"-head", 1)
	workers := podsOf(g.Template, rc.Metadata.Namespace, rc.Metadata.Name+"-"+g.GroupName, g.MaxReplicas)
	for i, p := range workers {
		p.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 7, 0, i, 0, 0, time.UTC)) // the autoscaler adds them one by one
	}
	pods := append(head, workers...)
	for _, p := range pods {
		p.Labels[pgv1alpha1.PodGroupLabel] = rc.Metadata.Name
		p.Spec.SchedulerName = "scheduler-plugins-scheduler"
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, indexer.Add(&pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: rc.Metadata.Name, Namespace: rc.Metadata.Namespace},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: 1 + g.Replicas}}))
	lister := pglisters.NewPodGroupLister(indexer)
	resolver := podrequest.NewResolver("nvidia.com/gpu", podrequest.Lookups{
		PodGroups: func() pglisters.PodGroupLister { return lister },
		GangPods:  func(podrequest.GangKey) []*corev1.Pod { return pods },
	})
	gang := rc.Metadata.Namespace + "/" + rc.Metadata.Name
	for i, p := range pods {
		req, err := resolver.Read(p)
		require.NoError(t, err, p.Name)
		if i < int(1+g.Replicas) {
			require.Equal(t, gang, req.Group.Name, "%s: a member of the minimum", p.Name)
			require.Equal(t, "1x8,1x0", podrequest.Shape(req))
		} else {
			require.Equal(t, gang, req.Group.ExtraOf, "%s: an extra pod", p.Name)
			require.Equal(t, int32(8), req.LeafCellNumber)
		}
	}
}

// TestJobSetSample: the sample's own PodGroup (with the VC label) counts
// every pod of every replicated job, and each pod template names it.
func TestJobSetSample(t *testing.T) {
	docs := documents(t, "manifests", "samples", "jobset.yaml")
	require.Len(t, docs, 2)
	var pg pgv1alpha1.PodGroup
	require.NoError(t, sigsyaml.UnmarshalStrict(docs[0], &pg))
	require.Equal(t, "PodGroup", pg.Kind)
	var js jobSetSample
	require.NoError(t, sigsyaml.UnmarshalStrict(docs[1], &js))
	require.Equal(t, "jobset.x-k8s.io/v1alpha2", js.APIVersion)
	require.Equal(t, "JobSet", js.Kind)
	require.NotContains(t, js.Metadata.Annotations, "alpha.jobset.sigs.k8s.io/exclusive-topology", "exclusive placement deadlocks a gang")
	var pods []*corev1.Pod
	for _, rj := range js.Spec.ReplicatedJobs {
		tmpl := rj.Template.Spec.Template
		require.Equal(t, "hivesched", tmpl.Spec.SchedulerName, "%s: the template names hivesched", rj.Name)
		for r := int32(0); r < rj.Replicas; r++ {
			pods = append(pods, podsOf(tmpl, js.Metadata.Namespace, fmt.Sprintf("%s-%s-%d", js.Metadata.Name, rj.Name, r), rj.Template.Spec.Parallelism)...)
		}
	}
	require.Equal(t, pg.Spec.MinMember, int32(len(pods)), "the PodGroup counts every pod of every replicated job")
	requireGang(t, &pg, pods)
}

// lwsSample is the part of LeaderWorkerSet v0.8.0's
// leaderworkerset.x-k8s.io/v1 LeaderWorkerSet the sample uses.
type lwsSample struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Replicas             int32  `json:"replicas"`
		StartupPolicy        string `json:"startupPolicy"`
		LeaderWorkerTemplate struct {
			Size           int32                  `json:"size"`
			RestartPolicy  string                 `json:"restartPolicy"`
			LeaderTemplate corev1.PodTemplateSpec `json:"leaderTemplate"`
			WorkerTemplate corev1.PodTemplateSpec `json:"workerTemplate"`
		} `json:"leaderWorkerTemplate"`
	} `json:"spec"`
}

// TestLeaderWorkerSetSample: LeaderWorkerSet v0.8.0 makes each replica
// group i a leader pod <name>-i (its leader StatefulSet's template with the
// set's name, worker index 0 and the size annotation; the group index and
// key added by its pod webhook) and a worker StatefulSet <name>-i of
// size-1 pods <name>-i-<j> (the worker template with the set's name, the
// leader's group index and key, the size and leader-name annotations).
// Each group reads as its own gang of vc-vision shaped 3x8,1x0, named after
// its leader.
func TestLeaderWorkerSetSample(t *testing.T) {
	docs := documents(t, "manifests", "samples", "leaderworkerset.yaml")
	require.Len(t, docs, 1)
	var lws lwsSample
	require.NoError(t, sigsyaml.UnmarshalStrict(docs[0], &lws))
	require.Equal(t, "leaderworkerset.x-k8s.io/v1", lws.APIVersion)
	require.Equal(t, "LeaderWorkerSet", lws.Kind)
	require.Equal(t, "LeaderCreated", lws.Spec.StartupPolicy, "LeaderReady deadlocks a gang")
	require.NotContains(t, lws.Metadata.Annotations, "leaderworkerset.sigs.k8s.io/exclusive-topology", "exclusive placement deadlocks a gang")
	tmpl := lws.Spec.LeaderWorkerTemplate
	ns, name, size := lws.Metadata.Namespace, lws.Metadata.Name, tmpl.Size
	var all []*corev1.Pod
	groups := map[string][]*corev1.Pod{}
	leaders := podsOf(tmpl.LeaderTemplate, ns, name, lws.Spec.Replicas) // the leader StatefulSet's pods <name>-i
	for i := int32(0); i < lws.Spec.Replicas; i++ {
		group := fmt.Sprintf("%s-%d", name, i)
		key := fmt.Sprintf("sha1-of-%s/%s", ns, group)
		leader := leaders[i]
		for k, v := range map[string]string{podrequest.LabelLWSName: name, "leaderworkerset.sigs.k8s.io/worker-index": "0",
			podrequest.LabelLWSGroupIndex: fmt.Sprint(i), "leaderworkerset.sigs.k8s.io/group-key": key} {
			leader.Labels[k] = v
		}
		leader.Annotations = map[string]string{podrequest.AnnotationLWSSize: fmt.Sprint(size)}
		pods := []*corev1.Pod{leader}
		for _, w := range podsOf(tmpl.WorkerTemplate, ns, group, size)[1:] { // ordinals start at 1
			for k, v := range map[string]string{podrequest.LabelLWSName: name, podrequest.LabelLWSGroupIndex: fmt.Sprint(i),
				"leaderworkerset.sigs.k8s.io/group-key": key, "leaderworkerset.sigs.k8s.io/worker-index": w.Name[len(group)+1:]} {
				w.Labels[k] = v
			}
			w.Annotations = map[string]string{podrequest.AnnotationLWSSize: fmt.Sprint(size), "leaderworkerset.sigs.k8s.io/leader-name": leader.Name}
			pods = append(pods, w)
		}
		for _, p := range pods {
			require.Equal(t, "hivesched", p.Spec.SchedulerName, "%s: the template names hivesched", p.Name)
		}
		groups[group] = pods
		all = append(all, pods...)
	}
	resolver := podrequest.NewResolver("nvidia.com/gpu", podrequest.Lookups{GangPods: func(k podrequest.GangKey) []*corev1.Pod {
		return groups[k.Name]
	}})
	for group, pods := range groups {
		for _, p := range pods {
			req, err := resolver.Read(p)
			require.NoError(t, err, p.Name)
			require.Equal(t, ns+"/"+group, req.Group.Name, "%s: its replica group's gang", p.Name)
			require.Equal(t, "vc-vision", req.Group.VirtualCluster)
			require.Equal(t, "3x8,1x0", podrequest.Shape(req), "%s: three 8-GPU workers and a leader without GPUs", p.Name)
		}
	}
	require.Len(t, all, int(lws.Spec.Replicas*size))
}

package manifests

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"
	sigsyaml "sigs.k8s.io/yaml"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// pyTorchJob is the part of Kubeflow training-operator v1.8.1's
// kubeflow.org/v1 PyTorchJob the sample uses, under its JSON names: strict
// decoding refuses a field the sample misspells.
type pyTorchJob struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		RunPolicy *struct {
			SchedulingPolicy *struct {
				MinAvailable *int32 `json:"minAvailable,omitempty"`
			} `json:"schedulingPolicy,omitempty"`
		} `json:"runPolicy,omitempty"`
		PyTorchReplicaSpecs map[string]struct {
			Replicas      int32                  `json:"replicas"`
			RestartPolicy string                 `json:"restartPolicy,omitempty"`
			Template      corev1.PodTemplateSpec `json:"template"`
		} `json:"pytorchReplicaSpecs"`
	} `json:"spec"`
}

// TestPyTorchJobSample: manifests/samples/pytorchjob.yaml carries what
// README "Kubeflow training jobs" says a PyTorchJob needs, and the pods and
// PodGroup training-operator v1.8.1 makes of it with
// --gang-scheduler-name=hivesched (schedulerName set where the template
// names none, the pod-group label, a PodGroup without labels whose
// minMember is every replica) are read by hivesched as one gang of the
// sample VC vc-vision, which the sample cluster places whole.
func TestPyTorchJobSample(t *testing.T) {
	docs := documents(t, "manifests", "samples", "pytorchjob.yaml")
	require.Len(t, docs, 1)
	var job pyTorchJob
	require.NoError(t, sigsyaml.UnmarshalStrict(docs[0], &job))
	require.Equal(t, "kubeflow.org/v1", job.APIVersion)
	require.Equal(t, "PyTorchJob", job.Kind)
	require.True(t, job.Spec.RunPolicy == nil || job.Spec.RunPolicy.SchedulingPolicy == nil || job.Spec.RunPolicy.SchedulingPolicy.MinAvailable == nil,
		"minAvailable below the replicas would make a gang smaller than the job")

	// As training-operator creates them.
	var pods []*corev1.Pod
	var replicas int32
	for rt, spec := range job.Spec.PyTorchReplicaSpecs {
		require.NotEmpty(t, spec.Template.Labels[hivesched.LabelVirtualCluster], "%s: the pod template names the VC (the operator's PodGroup has no labels)", rt)
		require.Contains(t, []string{"", "hivesched"}, spec.Template.Spec.SchedulerName, "%s: another scheduler name is kept by the operator", rt)
		for i := int32(0); i < spec.Replicas; i++ {
			pod := &corev1.Pod{ObjectMeta: *spec.Template.ObjectMeta.DeepCopy(), Spec: *spec.Template.Spec.DeepCopy()}
			pod.Name = fmt.Sprintf("%s-%s-%d", job.Metadata.Name, rt, i)
			pod.Namespace = job.Metadata.Namespace
			pod.UID = types.UID(pod.Name)
			pod.Labels[pgv1alpha1.PodGroupLabel] = job.Metadata.Name
			if pod.Spec.SchedulerName == "" {
				pod.Spec.SchedulerName = "hivesched"
			}
			pods = append(pods, pod)
		}
		replicas += spec.Replicas
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, indexer.Add(&pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: job.Metadata.Name, Namespace: job.Metadata.Namespace},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: replicas}}))
	lister := pglisters.NewPodGroupLister(indexer)
	resolver := podrequest.NewResolver("nvidia.com/gpu", podrequest.Lookups{PodGroups: func() pglisters.PodGroupLister { return lister }})

	var group *cellcore.AffinityGroupSpec
	for _, pod := range pods {
		req, err := resolver.Read(pod)
		require.NoError(t, err, pod.Name)
		require.NotNil(t, req, "%s: hivesched's", pod.Name)
		require.Positive(t, req.LeafCellNumber, "%s: its GPU limit", pod.Name)
		if group == nil {
			group = &req.Group
		}
		require.Equal(t, *group, req.Group, "%s: one gang", pod.Name)
	}
	require.Equal(t, job.Metadata.Namespace+"/"+job.Metadata.Name, group.Name)
	members := int32(0)
	for _, m := range group.Members {
		members += m.PodNumber
	}
	require.Equal(t, replicas, members, "every replica is a member")

	// The sample VC admits the job's namespace, and the sample cluster
	// places the gang whole.
	k := coreFromConfig(t, filepath.Join("..", "..", "manifests", "scheduler", "config-second-scheduler.yaml"))
	var vc hv1.VirtualCluster
	for _, doc := range documents(t, "manifests", "samples", "virtualclusters.yaml") {
		var v hv1.VirtualCluster
		require.NoError(t, sigsyaml.UnmarshalStrict(doc, &v))
		spec := cellcore.VirtualClusterSpec{Name: v.Name}
		for _, c := range v.Spec.VirtualCells {
			spec.VirtualCells = append(spec.VirtualCells, cellcore.VirtualCellSpec{CellType: c.CellType, CellNumber: c.CellNumber})
		}
		for _, c := range v.Spec.PinnedCells {
			spec.PinnedCells = append(spec.PinnedCells, cellcore.PinnedCellSpec{PinnedCellID: c.PinnedCellID})
		}
		_, err := k.SetVirtualCluster(spec)
		require.NoError(t, err, v.Name)
		if v.Name == group.VirtualCluster {
			vc = v
		}
	}
	require.Equal(t, group.VirtualCluster, vc.Name, "the sample's VC is in samples/virtualclusters.yaml")
	require.True(t, slices.Contains(vc.Spec.AllowedNamespaces, job.Metadata.Namespace) || slices.Contains(vc.Spec.AllowedNamespaces, "*"))
	args, _ := argsFromConfig(t, filepath.Join("..", "..", "manifests", "scheduler", "config-second-scheduler.yaml"))
	cfg := cellspec.Config(args.PhysicalCluster)
	nodes := nodeNames(cfg, cfg.PhysicalCells, "")
	require.Len(t, nodes, 10)
	for _, node := range nodes {
		require.NoError(t, k.SetNodeHealth(node, cellcore.NodeHealthy))
	}
	d, err := k.Schedule(*group)
	require.NoError(t, err)
	require.Equal(t, cellcore.Placed, d.Kind, "the sample cluster places the job whole: %s", d.Reason)
	require.Len(t, d.Pods, int(replicas))
}

// nodeNames are the node-level cells' addresses (a child's type is its
// parent's childCellType when it names none).
func nodeNames(cfg cellcore.Config, cells []cellcore.PhysicalCellSpec, typ string) []string {
	var out []string
	for _, c := range cells {
		t := c.CellType
		if t == "" {
			t = typ
		}
		if cfg.CellTypes[t].IsNodeLevel {
			out = append(out, c.CellAddress)
			continue
		}
		out = append(out, nodeNames(cfg, c.CellChildren, cfg.CellTypes[t].ChildCellType)...)
	}
	return out
}

package manifests

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// kueueObject is the part of Kueue v0.17.0's kueue.x-k8s.io/v1beta2
// ResourceFlavor, ClusterQueue and LocalQueue the sample uses.
type kueueObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		// ResourceFlavor
		NodeLabels   map[string]string `json:"nodeLabels"`
		TopologyName string            `json:"topologyName"`
		// ClusterQueue
		NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
		CohortName        string                `json:"cohortName"`
		QueueingStrategy  string                `json:"queueingStrategy"`
		Preemption        struct {
			WithinClusterQueue  string `json:"withinClusterQueue"`
			ReclaimWithinCohort string `json:"reclaimWithinCohort"`
		} `json:"preemption"`
		ResourceGroups []struct {
			CoveredResources []corev1.ResourceName `json:"coveredResources"`
			Flavors          []struct {
				Name      string `json:"name"`
				Resources []struct {
					Name         corev1.ResourceName `json:"name"`
					NominalQuota resource.Quantity   `json:"nominalQuota"`
				} `json:"resources"`
			} `json:"flavors"`
		} `json:"resourceGroups"`
		// LocalQueue
		ClusterQueue string `json:"clusterQueue"`
	} `json:"spec"`
}

// TestKueueSample: manifests/samples/kueue.yaml maps vc-vision onto Kueue
// as README "Kueue in front" says: one ClusterQueue, no cohort, its GPU
// quota the VC's GPUs (manifests/samples/virtualclusters.yaml on the
// sample cluster), its namespaces the VC's, a flavor without node labels
// or topology; a LocalQueue in the VC's namespace; the Job names it, and
// its pods read as one gang of 4 x 8 GPUs of vc-vision.
func TestKueueSample(t *testing.T) {
	docs := documents(t, "manifests", "samples", "kueue.yaml")
	require.Len(t, docs, 4)
	var flavor, cq, lq kueueObject
	for i, o := range []*kueueObject{&flavor, &cq, &lq} {
		require.NoError(t, sigsyaml.UnmarshalStrict(docs[i], o))
		require.Equal(t, "kueue.x-k8s.io/v1beta2", o.APIVersion)
	}
	require.Equal(t, []string{"ResourceFlavor", "ClusterQueue", "LocalQueue"}, []string{flavor.Kind, cq.Kind, lq.Kind})
	require.Empty(t, flavor.Spec.NodeLabels, "hivesched picks the nodes")
	require.Empty(t, flavor.Spec.TopologyName, "Kueue's topology-aware scheduling stays off on hivesched's nodes")

	var vc hv1.VirtualCluster
	for _, d := range documents(t, "manifests", "samples", "virtualclusters.yaml") {
		require.NoError(t, sigsyaml.UnmarshalStrict(d, &vc))
		if vc.Name == cq.Metadata.Name {
			break
		}
	}
	require.Equal(t, cq.Metadata.Name, vc.Name, "one ClusterQueue per VC, of its name")
	k := coreFromConfig(t, filepath.Join("..", "..", "manifests", "scheduler", "config-second-scheduler.yaml"))
	spec := vcSpec(vc)
	_, err := k.SetVirtualCluster(spec)
	require.NoError(t, err)
	st, ok := k.VirtualClusterStatus(vc.Name)
	require.True(t, ok)
	var gpus int64
	for _, c := range st.Cells {
		gpus += int64(c.LeafCells)
	}
	for _, c := range st.PinnedCells {
		gpus += int64(c.LeafCells)
	}

	require.Empty(t, cq.Spec.CohortName, "no cohort: nothing borrowed across VCs")
	require.Equal(t, "LowerPriority", cq.Spec.Preemption.WithinClusterQueue)
	require.Equal(t, "Never", cq.Spec.Preemption.ReclaimWithinCohort)
	require.Equal(t, map[string]string{"kubernetes.io/metadata.name": vc.Spec.AllowedNamespaces[0]}, cq.Spec.NamespaceSelector.MatchLabels)
	require.Len(t, vc.Spec.AllowedNamespaces, 1)
	require.Len(t, cq.Spec.ResourceGroups, 1)
	require.Len(t, cq.Spec.ResourceGroups[0].Flavors, 1)
	require.Equal(t, flavor.Metadata.Name, cq.Spec.ResourceGroups[0].Flavors[0].Name)
	quota := map[corev1.ResourceName]resource.Quantity{}
	for _, r := range cq.Spec.ResourceGroups[0].Flavors[0].Resources {
		quota[r.Name] = r.NominalQuota
	}
	gpuQuota := quota["nvidia.com/gpu"]
	require.Equal(t, gpus, gpuQuota.Value(), "the queue's GPU quota is the VC's GPUs")

	require.Equal(t, cq.Metadata.Name, lq.Spec.ClusterQueue)
	require.Equal(t, vc.Spec.AllowedNamespaces[0], lq.Metadata.Namespace)

	var job batchv1.Job
	require.NoError(t, sigsyaml.UnmarshalStrict(docs[3], &job))
	require.Equal(t, lq.Metadata.Name, job.Labels["kueue.x-k8s.io/queue-name"], "the Job names the LocalQueue")
	pods := podsOf(job.Spec.Template, job.Namespace, job.Name, *job.Spec.Parallelism)
	for _, p := range pods {
		req, err := podrequest.Parse(p, "nvidia.com/gpu")
		require.NoError(t, err, p.Name)
		require.Equal(t, job.Namespace+"/"+job.Name, req.Group.Name)
		require.Equal(t, vc.Name, req.Group.VirtualCluster)
		require.Equal(t, "4x8", podrequest.Shape(req))
	}
}

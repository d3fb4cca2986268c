package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kubernetes/pkg/fieldpath"
	"k8s.io/utils/ptr"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// TestIndexedJobSample (issue 10): manifests/samples/indexed-job.yaml as
// shipped. Its AffinityGroup and Job are created on the API server; no Job
// controller runs here, so the test creates the Job's pods from its
// template as the controller does (index annotation and env, owner). The
// gang binds all or nothing, and each container's NVIDIA_VISIBLE_DEVICES,
// resolved from the downward API by the kubelet's own fieldpath code, is
// the device list hivesched placed the pod on; the AffinityGroup goes
// Running and, when the pods succeed, Completed.
func TestIndexedJobSample(t *testing.T) {
	c := startCluster(t)
	c.createNodes(t, "ij", 1, 2, 0)
	c.createNamespace(t, "vision")
	c.createVC(t, "vc-vision", []string{"vision"}, "V100-NODE", 1)
	c.startScheduler(t, physicalCluster("ij", 1, 2, 0))

	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "manifests", "samples", "indexed-job.yaml"))
	require.NoError(t, err)
	var ag hv1.AffinityGroup
	var job batchv1.Job
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := json.Marshal(obj)
		require.NoError(t, err)
		switch obj["kind"] {
		case "AffinityGroup":
			require.NoError(t, json.Unmarshal(b, &ag))
		case "Job":
			require.NoError(t, json.Unmarshal(b, &job))
		default:
			t.Fatalf("unexpected kind %v", obj["kind"])
		}
	}
	_, err = c.vc.HiveschedV1alpha1().AffinityGroups(ag.Namespace).Create(t.Context(), &ag, metav1.CreateOptions{})
	require.NoError(t, err)
	created, err := c.kube.BatchV1().Jobs(job.Namespace).Create(t.Context(), &job, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, batchv1.IndexedCompletion, *created.Spec.CompletionMode)

	// The Job controller's pods: the template, the index, the owner.
	var pods []*v1.Pod
	for i := 0; i < int(*created.Spec.Completions); i++ {
		p := &v1.Pod{ObjectMeta: *created.Spec.Template.ObjectMeta.DeepCopy(), Spec: *created.Spec.Template.Spec.DeepCopy()}
		p.Name, p.Namespace = fmt.Sprintf("%s-%d", created.Name, i), created.Namespace
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels["job-name"] = created.Name
		p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: fmt.Sprint(i)}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: created.Name, UID: created.UID, Controller: ptr.To(true)}}
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, v1.EnvVar{Name: "JOB_COMPLETION_INDEX", Value: fmt.Sprint(i)})
		pods = append(pods, p)
	}
	c.createPods(t, pods[:3])
	c.requireUnbound(t, pods[:3], 2*time.Second) // 3 of 4: the gang waits
	c.createPods(t, pods[3:])
	c.waitBound(t, pods, 30*time.Second)

	status := c.waitAG(t, "vision", "bert", phaseIs(hv1.AffinityGroupRunning))
	require.Equal(t, "4/4", status.Status.MembersSummary)
	seen := map[string]bool{}
	for i, p := range pods {
		got := c.getPod(t, p)
		env := got.Spec.Containers[0].Env[0]
		require.Equal(t, "NVIDIA_VISIBLE_DEVICES", env.Name)
		// What the kubelet puts into the container's environment.
		visible, err := fieldpath.ExtractFieldPathAsString(got, env.ValueFrom.FieldRef.FieldPath)
		require.NoError(t, err)
		require.Equal(t, got.Annotations[hivesched.AnnotationLeafCellIndices], visible)
		require.Len(t, strings.Split(visible, ","), 2, "pod %d: 2 GPUs", i)
		require.Equal(t, joinIndices(status.Status.Pods[i].LeafCellIndices), visible, "the AffinityGroup shows the same devices")
		key := got.Spec.NodeName + "/" + visible
		require.False(t, seen[key], "two pods on the same devices: %s", key)
		seen[key] = true
	}
	require.Equal(t, []metav1.OwnerReference(nil), status.OwnerReferences, "the user's AffinityGroup is left as it is")

	c.finishPods(t, pods, v1.PodSucceeded)
	done := c.waitAG(t, "vision", "bert", phaseIs(hv1.AffinityGroupCompleted))
	require.Equal(t, int32(4), done.Status.Members.Succeeded)
}

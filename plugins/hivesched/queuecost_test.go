package hivesched

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hivesched/hivesched/plugins/groupindex"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// hugeSpec is HiveD's annotation padded as issue 28 (finding 1) describes:
// 255 KiB of small unknown keys.
func hugeSpec() string {
	var b strings.Builder
	b.WriteString("virtualCluster: vc1\nleafCellNumber: 1\n")
	for i := 0; b.Len() < 255<<10; i++ {
		fmt.Fprintf(&b, "k%d: v\n", i)
	}
	return b.String()
}

// waitingPods are n pending GPU pods of the native form, as the queue would
// hold them.
func waitingPods(n int) []*v1.Pod {
	var out []*v1.Pod
	for i := 0; i < n; i++ {
		out = append(out, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%d", i), Namespace: "ns", UID: types.UID(fmt.Sprintf("w%d", i)),
				Labels: map[string]string{podrequest.LabelVirtualCluster: "vc1"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}},
		})
	}
	return out
}

// BenchmarkQueueCallbacksWithHugeAnnotation (issue 28, finding 1): what the
// scheduling queue's callbacks cost, under the queue's lock, when a tenant
// deletes a bound pod carrying a 255 KiB HiveD annotation while 200 pods
// wait (the pod-deleted hint runs once per waiting pod), and when such a
// pod is queued (PreEnqueue, QueueSort). None of them parses: compare with
// BenchmarkParseHugeSpec, one parse of that annotation, which only the pod
// informer's handler does, outside every lock.
func BenchmarkQueueCallbacksWithHugeAnnotation(b *testing.B) {
	p := &HiveSched{resource: "nvidia.com/gpu", groups: groupindex.New("nvidia.com/gpu")}
	deleted := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pad", Namespace: "ns", UID: "pad",
		Annotations: map[string]string{podrequest.HivedSpecAnnotation: hugeSpec()}}, Spec: v1.PodSpec{NodeName: "n1"}}
	waiting := waitingPods(200)
	for _, w := range waiting {
		p.groups.Track(w) // the handler read them
	}
	logger := klog.Background()
	b.Run("hint per deletion, 200 waiting", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for _, w := range waiting {
				if h, _ := p.hintPodDeleted(logger, w, deleted, nil); h != fwk.Queue {
					b.Fatal("a bound pod that may have asked for cells frees devices")
				}
			}
		}
	})
	pending := deleted.DeepCopy()
	pending.Spec.NodeName = ""
	b.Run("PreEnqueue and QueueSort of the padded pod", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			p.PreEnqueue(b.Context(), pending)
			p.groups.SortKey(pending)
		}
	})
}

// BenchmarkParseHugeSpec: one read of the padded annotation (refused by its
// size before it is decoded).
func BenchmarkParseHugeSpec(b *testing.B) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pad", Namespace: "ns",
		Annotations: map[string]string{podrequest.HivedSpecAnnotation: hugeSpec()}}}
	for i := 0; i < b.N; i++ {
		if _, err := podrequest.Parse(pod, "nvidia.com/gpu"); err == nil {
			b.Fatal("a 255 KiB spec is refused")
		}
	}
}

// TestQueueCallbacksDoNotParse: the queue's callbacks never read a request;
// PreEnqueue holds a pod that may ask for cells until the informer's
// handler has read it.
func TestQueueCallbacksDoNotParse(t *testing.T) {
	p := &HiveSched{resource: "nvidia.com/gpu", groups: groupindex.New("nvidia.com/gpu")}
	pod := waitingPods(1)[0]
	st := p.PreEnqueue(t.Context(), pod)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code())
	require.Contains(t, st.Message(), "waiting for hivesched to read the pod's request")
	_, _, read := p.groups.Cached(pod)
	require.False(t, read, "PreEnqueue read nothing")
	require.True(t, p.groups.Ungate(pod), "the handler sends the gated pod back")

	plain := pod.DeepCopy()
	plain.Labels = nil
	plain.Spec.Containers[0].Resources = v1.ResourceRequirements{}
	require.Nil(t, p.PreEnqueue(t.Context(), plain), "a plain pod passes untouched")
}

// TestPodDeletedHintDoesNotParse (issue 28, finding 1): the pod-deleted
// queueing hint, which kube-scheduler calls once per waiting pod under the
// queue's lock, reads no request. Every read of the plugin goes through
// the group index's resolver; here its claim look-up, which every read
// makes first, counts them. A deleted pod with a huge, invalid HiveD
// annotation, bound or not, is read by nobody, and neither is it cached.
func TestPodDeletedHintDoesNotParse(t *testing.T) {
	reads := 0
	p := &HiveSched{resource: "nvidia.com/gpu", groups: groupindex.New("nvidia.com/gpu")}
	p.groups.SetResolver(podrequest.NewResolver("nvidia.com/gpu", podrequest.Lookups{
		Claims: func(*v1.Pod) (int64, bool, error) { reads++; return 0, false, nil }}))
	waiting := waitingPods(20)
	for _, w := range waiting {
		p.groups.Track(w) // the pod informer's handler read them
	}
	require.Equal(t, len(waiting), reads, "the counter sees the handler's reads")
	reads = 0

	bound := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pad", Namespace: "ns", UID: "pad",
		Annotations: map[string]string{podrequest.HivedSpecAnnotation: hugeSpec()}}, Spec: v1.PodSpec{NodeName: "n1"}}
	pending := bound.DeepCopy()
	pending.UID, pending.Spec.NodeName = "pad-pending", ""
	logger := klog.Background()
	for _, w := range waiting {
		h, err := p.hintPodDeleted(logger, w, bound, nil)
		require.NoError(t, err)
		require.Equal(t, fwk.Queue, h, "a bound pod that may have asked for cells frees devices")
		h, err = p.hintPodDeleted(logger, w, pending, nil)
		require.NoError(t, err)
		require.Equal(t, fwk.QueueSkip, h, "an unbound pod hivesched does not hold freed nothing")
	}
	require.Zero(t, reads, "the hint read no request")
	for _, d := range []*v1.Pod{bound, pending} {
		_, _, read := p.groups.Cached(d)
		require.False(t, read, "nor did anything else")
	}
}

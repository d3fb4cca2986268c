package hivesched

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/hivesched/hivesched/plugins/groupindex"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// podsHandle is the part of the framework's handle the informers' handlers
// use: the pod lister and Activate.
type podsHandle struct {
	fwk.Handle
	f         informers.SharedInformerFactory
	activated []string
}

func (h *podsHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.f }

func (h *podsHandle) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	for k := range pods {
		h.activated = append(h.activated, k)
	}
}

// TestGroupObjectStatusWritesReadNothing (issue 28, finding 1): a pod whose
// request was refused is read again when the object that describes its
// group appears or changes what the request is read from (spec, labels,
// annotations), not at each of the object's status writes or resyncs,
// which kube-scheduler and hivesched itself make often.
func TestGroupObjectStatusWritesReadNothing(t *testing.T) {
	h := &podsHandle{f: informers.NewSharedInformerFactory(fake.NewClientset(), 0)}
	reads := 0
	p := &HiveSched{handle: h, resource: "nvidia.com/gpu", groups: groupindex.New("nvidia.com/gpu")}
	// PodGroups not served (no lister): a pod of one is refused. The
	// claim look-up, which every read makes first, counts the reads.
	p.groups.SetResolver(podrequest.NewResolver("nvidia.com/gpu", podrequest.Lookups{
		PodGroups: func() pglisters.PodGroupLister { return nil },
		Claims:    func(*v1.Pod) (int64, bool, error) { reads++; return 0, false, nil }}))
	pod := waitingPods(1)[0]
	pod.Labels[podrequest.LabelPodGroup] = "pg"
	pod.ResourceVersion = "1"
	require.NoError(t, h.f.Core().V1().Pods().Informer().GetIndexer().Add(pod))
	_, err := p.groups.Request(pod)
	require.Error(t, err, "refused")
	require.Equal(t, 1, reads)

	logger := klog.Background()
	on := handleGroupObject(logger, p.onPodGroup)
	pg := &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "ns", UID: "pg", Generation: 1, ResourceVersion: "10"},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: 1}}
	on.OnAdd(pg, false)
	require.Equal(t, 2, reads, "the PodGroup appeared: its pods are read again")
	require.Equal(t, []string{"ns/w0"}, h.activated)

	status := pg.DeepCopy()
	status.ResourceVersion = "11"
	status.Status.Phase = pgv1alpha1.PodGroupPending
	on.OnUpdate(pg, status)
	on.OnUpdate(status, status) // a resync
	require.Equal(t, 2, reads, "a status write or a resync reads nothing")
	require.Len(t, h.activated, 1)

	for _, change := range []func(*pgv1alpha1.PodGroup){
		func(o *pgv1alpha1.PodGroup) { o.Generation++; o.Spec.MinMember = 2 },
		func(o *pgv1alpha1.PodGroup) { o.Labels = map[string]string{podrequest.LabelVirtualCluster: "vc1"} },
		func(o *pgv1alpha1.PodGroup) { o.Annotations = map[string]string{"a": "b"} },
		func(o *pgv1alpha1.PodGroup) { now := metav1.Now(); o.DeletionTimestamp = &now },
	} {
		changed := status.DeepCopy()
		change(changed)
		before := reads
		on.OnUpdate(status, changed)
		require.Equal(t, before+1, reads, "what the request is read from changed: read again")
	}
	on.OnDelete(pg)
	require.Equal(t, 6, reads, "a deletion reads nothing")
}

// The Workload API's pod groups keep no generation: their specs are
// compared.
func TestRequestInputsChangedWithoutGeneration(t *testing.T) {
	pg := &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "ns", UID: "pg", ResourceVersion: "1"}}
	status := pg.DeepCopy()
	status.ResourceVersion = "2"
	status.Status.Conditions = []metav1.Condition{{Type: "PodGroupScheduled", Status: metav1.ConditionTrue}}
	require.False(t, requestInputsChanged(pg, status), "a status write")
	spec := status.DeepCopy()
	spec.Spec.ParentCompositePodGroupName = ptr.To("c")
	require.True(t, requestInputsChanged(status, spec), "its spec changed")
	require.True(t, requestInputsChanged(&v1.Pod{}, &v1.Pod{}), "another kind without a generation counts as changed")
}

// TestRereadCompletingAGangReleasesItsMembers: a gang member whose GPU claim
// the scheduler had not seen when its request was read (the pod's status
// named the claim before the claim informer showed it) is read again when
// the claim appears (onClaim, rereadRefused). That read completes the gang:
// the member PreEnqueue held back before ("waiting for the members: 1 of 2
// pods exist") must go back to the active queue with it. No other event
// releases it, so it stayed in the queue while the other member waited in
// Permit until it timed out (TestDRATopologyFromSlices' flake).
func TestRereadCompletingAGangReleasesItsMembers(t *testing.T) {
	h := &podsHandle{f: informers.NewSharedInformerFactory(fake.NewClientset(), 0)}
	p := &HiveSched{handle: h, resource: "nvidia.com/gpu", groups: groupindex.New("nvidia.com/gpu")}
	seen := map[string]bool{"w0": true}
	p.groups.SetResolver(podrequest.NewResolver("nvidia.com/gpu", podrequest.Lookups{
		Claims: func(pod *v1.Pod) (int64, bool, error) {
			if !seen[pod.Name] {
				return 0, false, podrequest.Awaiting("waiting for ResourceClaim ns/" + pod.Name + "-gpus")
			}
			return 0, false, nil
		}}))
	gang := waitingPods(2)
	for _, pod := range gang {
		pod.Labels[podrequest.LabelAffinityGroup] = "g"
		pod.Annotations = map[string]string{podrequest.AnnotationGroupMembers: "2"}
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(pod.Name + "-gpus")}}
		pod.ResourceVersion = "1"
		require.NoError(t, h.f.Core().V1().Pods().Informer().GetIndexer().Add(pod))
	}
	// w0 is read and waits for its gang; w1's claim is not seen yet.
	group, complete := p.groups.Track(gang[0])
	require.Equal(t, "ns/g", group)
	require.False(t, complete)
	_, err := p.groups.Request(gang[1])
	require.True(t, podrequest.IsAwaiting(err), "%v", err)
	require.Equal(t, 1, p.groups.MemberCount("ns/g"))

	// w1's claim appears.
	seen["w1"] = true
	require.Equal(t, 1, p.groups.RefusedCount(), "w1 waits in the refused pods' index")
	p.rereadReleased(klog.Background(), "claim", []string{podrequest.ReleaseKeyClaim("ns", "w1-gpus")}, func(pod *v1.Pod) bool { return pod.Name == "w1" })
	require.Equal(t, 0, p.groups.RefusedCount(), "w1 was read again, and its request is valid")
	require.Equal(t, 2, p.groups.MemberCount("ns/g"))
	require.ElementsMatch(t, []string{"ns/w0", "ns/w1"}, h.activated, "the re-read completes the gang: both members go")
}

// BenchmarkPodGroupEventIn40kPods (issue 48): what a Workload API
// PodGroup's event costs the pod handler side in a namespace of 40,000 pods
// of which the PodGroup concerns 8 (refused: they came before it), side by
// side: "namespaceScan" is what the handler did before the refused pods
// were indexed by what releases them (list every pod, match each; the
// matching ones are read again), "releaseIndex" what rereadReleased does now.
func BenchmarkPodGroupEventIn40kPods(b *testing.B) {
	const pods, groups = 40000, 1000
	h := &podsHandle{f: informers.NewSharedInformerFactory(fake.NewClientset(), 0)}
	p := &HiveSched{handle: h, resource: "nvidia.com/gpu", groups: groupindex.New("nvidia.com/gpu")}
	p.groups.SetResolver(podrequest.NewResolver("nvidia.com/gpu", podrequest.Lookups{}))
	indexer := h.f.Core().V1().Pods().Informer().GetIndexer()
	for i := 0; i < pods; i++ {
		pod := waitingPods(1)[0]
		pod.Name, pod.UID, pod.ResourceVersion = fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("p%d", i)), "1"
		if i < groups*8 {
			// A member of pod group pg-<i/8>, which does not exist yet:
			// the scheduler runs without GenericWorkload here, so it is
			// refused ("names pod group ... without feature gate") and
			// indexed by its pod group's key.
			pod.Labels = map[string]string{podrequest.LabelVirtualCluster: "vc1"}
			pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(fmt.Sprintf("pg-%d", i/8))}
		} else {
			pod.Labels = nil
			pod.Spec.NodeName = "n" // running, placed by anyone
			pod.Spec.Containers[0].Resources = v1.ResourceRequirements{}
		}
		require.NoError(b, indexer.Add(pod))
		if _, err := p.groups.Request(pod); i < groups*8 && err == nil {
			b.Fatalf("pod %s: want a refusal", pod.Name)
		}
	}
	lister := h.f.Core().V1().Pods().Lister()
	b.Run("namespaceScan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			name := fmt.Sprintf("pg-%d", i%groups)
			all, err := podrequest.PodsOfNamespace(lister, "ns")
			require.NoError(b, err)
			n := 0
			for _, pod := range all {
				if pod.Spec.NodeName == "" && podrequest.PodGroupName(pod) == name {
					n++
				}
			}
			if n != 8 {
				b.Fatalf("found %d pods", n)
			}
		}
	})
	b.Run("releaseIndex", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			name := fmt.Sprintf("pg-%d", i%groups)
			// What rereadReleased does before it reads the pods again:
			// the index's refused pods of the key, read from the lister.
			n := 0
			for _, old := range p.groups.Released(podrequest.ReleaseKeyWorkloadPodGroup("ns", name)) {
				if cur, err := lister.Pods(old.Namespace).Get(old.Name); err == nil && cur.UID == old.UID && podrequest.PodGroupName(cur) == name {
					n++
				}
			}
			if n != 8 {
				b.Fatalf("found %d pods", n)
			}
		}
	})
}

package groupindex

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/hivesched/hivesched/plugins/podrequest"
)

// claimPod is an unbound pod of explicit group g that names GPU claim claim.
func claimPod(name, claim string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name), ResourceVersion: "1",
			Labels:      map[string]string{podrequest.LabelVirtualCluster: "vc1", podrequest.LabelAffinityGroup: "g-" + name},
			Annotations: map[string]string{podrequest.AnnotationGroupMembers: "1"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}},
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim)}}},
	}
}

// An object's event finds the refused pods it concerns through their
// release keys, and only those: the namespace's other pods (refused for
// other objects, or valid) are not looked at.
func TestReleasedFindsOnlyTheConcernedPods(t *testing.T) {
	seen := map[string]bool{}
	x := New(gpu)
	x.SetResolver(podrequest.NewResolver(gpu, podrequest.Lookups{Claims: func(pod *v1.Pod) (int64, bool, error) {
		c := *pod.Spec.ResourceClaims[0].ResourceClaimName
		if !seen[c] {
			return 0, false, podrequest.Awaiting("waiting for ResourceClaim ns/" + c)
		}
		return 1, true, nil
	}}))
	const n = 1000
	for i := 0; i < n; i++ {
		_, err := x.Request(claimPod(fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i)))
		require.True(t, podrequest.IsAwaiting(err), "%v", err)
	}
	require.Equal(t, n, x.RefusedCount())

	got := x.Released(podrequest.ReleaseKeyClaim("ns", "c7"))
	require.Len(t, got, 1)
	require.Equal(t, "p7", got[0].Name)
	require.Empty(t, x.Released(podrequest.ReleaseKeyClaim("ns", "unknown")))
	require.Empty(t, x.Released(podrequest.ReleaseKeyClaim("other", "c7")), "another namespace's claim of the same name")

	// Read again once its claim is seen: valid, out of the index.
	seen["c7"] = true
	require.True(t, x.ForgetRefused(got[0]))
	req, err := x.Request(got[0])
	require.NoError(t, err)
	require.NotNil(t, req)
	require.Equal(t, n-1, x.RefusedCount())
	require.Empty(t, x.Released(podrequest.ReleaseKeyClaim("ns", "c7")))

	// A deleted pod leaves the index, whichever way it goes.
	p8 := claimPod("p8", "c8")
	x.DropRefused(p8.UID)
	require.Empty(t, x.Released(podrequest.ReleaseKeyClaim("ns", "c8")))
	p9 := claimPod("p9", "c9")
	x.Untrack(p9)
	require.Empty(t, x.Released(podrequest.ReleaseKeyClaim("ns", "c9")))
	require.Equal(t, n-3, x.RefusedCount())

	// Its claim from a template is found through the pod (the claim's owner).
	require.Len(t, x.Released(podrequest.ReleaseKeyPod("p10")), 1)
}

// No wake-up is lost (issue 48): a pod whose read started before its
// object appeared and ends refused after the object's event looked for it
// (it was not in the index yet) is read again by its own read, which then
// sees the object. Without the re-read the pod kept the refusal for good:
// nothing else reads it again.
func TestReadInFlightDuringReleaseIsReadAgain(t *testing.T) {
	var exists atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	calls := atomic.Int32{}
	x := New(gpu)
	x.SetResolver(podrequest.NewResolver(gpu, podrequest.Lookups{Claims: func(*v1.Pod) (int64, bool, error) {
		had := exists.Load()
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		if !had {
			return 0, false, podrequest.Awaiting("waiting for ResourceClaim ns/c")
		}
		return 1, true, nil
	}}))
	pod := claimPod("p", "c")

	done := make(chan error, 1)
	var req *podrequest.Request
	go func() {
		var err error
		req, err = x.Request(pod)
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the read never started")
	}
	// The claim appears while the pod's read, which did not see it, runs;
	// its event finds no refused pod to read again.
	exists.Store(true)
	require.Empty(t, x.Released(podrequest.ReleaseKeyClaim("ns", "c")))
	close(release)
	require.NoError(t, <-done)
	require.NotNil(t, req, "the read was made again and saw the claim")
	require.Equal(t, int32(2), calls.Load())
	require.Zero(t, x.RefusedCount())
	_, err, read := x.Cached(pod)
	require.True(t, read)
	require.NoError(t, err)

	// A release of another object during a read changes nothing.
	other := claimPod("q", "d")
	exists.Store(false)
	_, err = x.Request(other)
	require.True(t, podrequest.IsAwaiting(err))
	require.Len(t, x.Released(podrequest.ReleaseKeyClaim("ns", "d")), 1)
	require.Empty(t, x.releasedAt, "no read in flight: nothing is kept of releases")
}

// BenchmarkReleasedIn40kPods: an object's event in a namespace of 40,000
// pods, 1,000 of them refused (waiting for their objects): the cost is the
// pods it concerns, whatever the namespace holds.
func BenchmarkReleasedIn40kPods(b *testing.B) {
	x := New(gpu)
	x.SetResolver(podrequest.NewResolver(gpu, podrequest.Lookups{Claims: func(pod *v1.Pod) (int64, bool, error) {
		if len(pod.Spec.ResourceClaims) > 0 {
			return 0, false, podrequest.Awaiting("waiting")
		}
		return 0, false, nil
	}}))
	for i := 0; i < 40000; i++ {
		var p *v1.Pod
		if i%40 == 0 {
			p = claimPod(fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i))
		} else {
			p = pod(map[string]string{podrequest.LabelVirtualCluster: "vc1", podrequest.LabelAffinityGroup: fmt.Sprintf("g%d", i/8)},
				map[string]string{podrequest.AnnotationGroupMembers: "8"}, 1)
			p.Name, p.UID = fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("p%d", i))
		}
		x.Track(p)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := x.Released(podrequest.ReleaseKeyClaim("ns", fmt.Sprintf("c%d", (i%1000)*40))); len(got) != 1 {
			b.Fatalf("found %d pods", len(got))
		}
	}
}

// The waiting pods woken when cells go free are the unbound tracked pods:
// a member leaves that set when it is seen bound or goes, whichever group
// it is in.
func TestUnboundPodsFollowBinding(t *testing.T) {
	x := New(gpu)
	var pods []*v1.Pod
	for i := 0; i < 3; i++ {
		p := pod(map[string]string{podrequest.LabelVirtualCluster: "vc1", podrequest.LabelAffinityGroup: "g"}, map[string]string{podrequest.AnnotationGroupMembers: "3"}, 1)
		p.Name, p.UID = fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("uid%d", i))
		x.Track(p)
		pods = append(pods, p)
	}
	all := func(*podrequest.Request) bool { return true }
	require.Len(t, x.UnboundPods(all), 3)
	bound := pods[0].DeepCopy()
	bound.Spec.NodeName = "n1"
	x.Track(bound)
	require.Len(t, x.UnboundPods(all), 2)
	require.NotContains(t, x.UnboundPods(all), "ns/p0")
	x.Untrack(pods[1])
	require.Equal(t, map[string]*v1.Pod{"ns/p2": pods[2]}, x.UnboundPods(all))
	require.Empty(t, x.UnboundPods(func(r *podrequest.Request) bool { return r.Group.VirtualCluster == "other" }))
}

package groupindex

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hivesched/hivesched/plugins/podrequest"
)

// A read that started before ForgetRefused (it saw the objects as they were
// before the group's object appeared) must not overwrite the read after
// it, or the pod keeps the stale refusal for good (TestPodGroupInterop's
// "no VC anywhere" waited for ever in one CI run: the pod handler's read and
// the PodGroup handler's re-read raced). The first read is held inside the
// resolver until the forget and the second read are done.
func TestStaleReadDoesNotOverwrite(t *testing.T) {
	errStale, errFresh := errors.New("stale: the PodGroup does not exist yet"), errors.New("fresh: the PodGroup names no VC")
	entered, release := make(chan struct{}), make(chan struct{})
	calls := 0
	x := New("nvidia.com/gpu")
	x.SetResolver(podrequest.NewResolver("nvidia.com/gpu", podrequest.Lookups{Claims: func(*v1.Pod) (int64, bool, error) {
		calls++
		if calls == 1 {
			close(entered)
			<-release
			return 0, false, errStale
		}
		return 0, false, errFresh
	}}))
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", ResourceVersion: "5"}}

	staleDone := make(chan error, 1)
	go func() { _, err := x.Request(pod); staleDone <- err }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first read never started")
	}
	require.True(t, x.ForgetRefused(pod))
	_, err := x.Request(pod)
	require.ErrorIs(t, err, errFresh)
	close(release)
	require.ErrorIs(t, <-staleDone, errStale, "the stale reader gets its own answer")

	_, err, read := x.Cached(pod)
	require.True(t, read)
	require.ErrorIs(t, err, errFresh, "the later read stands")
}

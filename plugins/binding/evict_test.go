package binding

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// The evictor's retry and de-duplication; the deletion itself is the API
// server's (test/integration preempts on a real one).
func TestEvictorRetriesAndDeduplicates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	calls := map[types.UID]int{}
	failFirst := map[types.UID]int{"b": 2} // b fails twice, then succeeds
	e := NewEvictor(ctx, func(_ context.Context, p *v1.Pod) error {
		mu.Lock()
		defer mu.Unlock()
		calls[p.UID]++
		if calls[p.UID] <= failFirst[p.UID] {
			return errors.New("apiserver unavailable")
		}
		return nil
	}, func(*v1.Pod) bool { return true })
	e.backoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 5}
	pod := func(uid string, terminating bool) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}}
		if terminating {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		return p
	}
	logger := klog.Background()

	started := e.Evict(logger, []*v1.Pod{pod("a", false), pod("b", false), pod("c", true)})
	require.Len(t, started, 2, "a pod with a deletion timestamp is on its way out")
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls["a"] == 1 && calls["b"] == 3
	}, 5*time.Second, time.Millisecond, "b is retried until it succeeds")
	waitIdle(t, e)

	// Asked again while the informer has not seen them go: nothing new.
	require.Empty(t, e.Evict(logger, []*v1.Pod{pod("a", false), pod("b", false)}))
	mu.Lock()
	require.Equal(t, 1, calls["a"])
	require.Equal(t, 0, calls["c"])
	mu.Unlock()

	// After the quiet period a pod still listed is deleted again.
	e.quiet = 0
	time.Sleep(time.Millisecond)
	require.Len(t, e.Evict(logger, []*v1.Pod{pod("a", false)}), 1)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls["a"] == 2
	}, 5*time.Second, time.Millisecond)
}

// A deletion that keeps failing gives up after the backoff's steps and may be
// asked for again (the preemptor's next PreFilter does).
func TestEvictorGivesUpAndCanRetry(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	n := 0
	e := NewEvictor(ctx, func(context.Context, *v1.Pod) error {
		mu.Lock()
		defer mu.Unlock()
		n++
		return errors.New("forbidden")
	}, func(*v1.Pod) bool { return true })
	e.backoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "x"}}
	require.Len(t, e.Evict(klog.Background(), []*v1.Pod{p}), 1)
	waitIdle(t, e)
	mu.Lock()
	require.Equal(t, 3, n)
	mu.Unlock()
	require.Len(t, e.Evict(klog.Background(), []*v1.Pod{p}), 1, "a failed pod is not quiet: it is asked for again")
}

// A preemption called off while a victim's deletion is being retried (its
// preemptor was deleted: the victim group went back to Allocated) must not
// kill the victim on the next retry.
func TestEvictorSparesPodsNoLongerVictims(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	calls := 0
	victim := true
	e := NewEvictor(ctx, func(context.Context, *v1.Pod) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		victim = false // the preemption is called off while this attempt fails
		return errors.New("apiserver unavailable")
	}, func(*v1.Pod) bool {
		mu.Lock()
		defer mu.Unlock()
		return victim
	})
	e.backoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 5}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "x"}}
	require.Len(t, e.Evict(klog.Background(), []*v1.Pod{p}), 1)
	waitIdle(t, e)
	mu.Lock()
	require.Equal(t, 1, calls, "no retry once the pod is no longer a victim")
	mu.Unlock()
	e.mu.Lock()
	require.NotContains(t, e.deleted, types.UID("x"), "a spared pod is not recorded as deleted: a later preemption may ask again")
	e.mu.Unlock()
}

func TestVictimGracePeriodIsCapped(t *testing.T) {
	pod := func(grace *int64) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{TerminationGracePeriodSeconds: grace}}
	}
	year := int64(365 * 24 * 3600)
	require.Equal(t, int64(30), *gracePeriod(pod(&year), 30), "a tenant's year-long grace period is capped")
	require.Equal(t, int64(5), *gracePeriod(pod(ptr.To[int64](5)), 30), "a shorter one is kept")
	require.Equal(t, int64(30), *gracePeriod(pod(nil), 3600), "unset is Kubernetes' default, 30 s")
	require.Equal(t, int64(0), *gracePeriod(pod(&year), 0), "0 deletes at once")
}

// waitIdle waits until no deletion of e is in flight.
func waitIdle(t *testing.T, e *Evictor) {
	t.Helper()
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.inflight) == 0
	}, 5*time.Second, time.Millisecond)
}

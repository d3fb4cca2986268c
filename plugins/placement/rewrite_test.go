package placement

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
)

// The record writer's queue: a pod asked for many times before it is
// written is written once, a failed write is retried until it succeeds, and nothing runs
// before the informer it reads from has synced. The write itself is the API
// server's (test/integration checks the records on a real one).
func TestRecordWriterRetriesAndCollapses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	calls := map[string]int{}
	synced := make(chan struct{})
	w := newRecordWriter(func(_ context.Context, key string) error {
		mu.Lock()
		calls[key]++
		n := calls[key]
		mu.Unlock()
		if key == "ns/flaky" && n <= 2 {
			return errors.New("apiserver unavailable")
		}
		return nil
	}, func() bool {
		select {
		case <-synced:
			return true
		default:
			return false
		}
	})
	w.queue = workqueue.NewTypedRateLimitingQueue[string](workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
	pod := func(name string) *v1.Pod { return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}} }

	for i := 0; i < 5; i++ {
		w.Add(pod("a"))
		w.Add(pod("flaky"))
	}
	go w.Run(ctx)
	time.Sleep(150 * time.Millisecond) // WaitForCacheSync polls every 100 ms
	mu.Lock()
	require.Empty(t, calls, "nothing is written before the pod informer has synced")
	mu.Unlock()
	close(synced)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls["ns/a"] == 1 && calls["ns/flaky"] == 3
	}, 5*time.Second, time.Millisecond, "requests made before the first write collapse; a failed write is retried")
	require.Eventually(t, func() bool { return w.queue.Len() == 0 }, 5*time.Second, time.Millisecond)
	require.Zero(t, w.queue.NumRequeues("ns/flaky"), "a write that succeeded forgets its failures")

	// Asked again later: written again (the sync decides whether to patch).
	w.Add(pod("a"))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls["ns/a"] == 2
	}, 5*time.Second, time.Millisecond)

	cancel()
	require.Eventually(t, w.queue.ShuttingDown, 5*time.Second, time.Millisecond, "the queue stops with the scheduler")
}

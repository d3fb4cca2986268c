// Package recovery is when and from what a scheduler rebuilds the cell
// core's allocations (the seed's ec): the gate that runs the rebuild once
// (at start without leader election, else when the process starts leading
// or first schedules, whichever comes first) and orders it with the pod
// event handler, the wait for leadership, and the running groups gathered
// from their pods' signed placement records.
package recovery

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// Gate runs a rebuild of the allocations once, and orders it with the
// pod event handler (Hold): no pod event is lost between the rebuild's
// read of the pods and the handler.
type Gate struct {
	done atomic.Bool // the allocations were rebuilt
	mu   sync.Mutex
}

// Done reports whether the allocations were rebuilt: until then this
// process's view is empty (a standby's), and it writes no status.
func (g *Gate) Done() bool { return g.done.Load() }

// Once runs rebuild unless the allocations were rebuilt already; when it
// succeeds, it marks them rebuilt and runs after, all under the gate's
// lock.
func (g *Gate) Once(rebuild func() error, after func()) error {
	if g.done.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done.Load() {
		return nil
	}
	if err := rebuild(); err != nil {
		return err
	}
	g.done.Store(true)
	after()
	return nil
}

// Hold runs f with whether the allocations were rebuilt, and no rebuild
// runs meanwhile.
func (g *Gate) Hold(f func(rebuilt bool)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g.done.Load())
}

// WhenLeading waits until the process leads, then calls ensure (which
// rebuilds through Once) until the allocations are rebuilt: the first
// scheduling cycle may have done it already.
func (g *Gate) WhenLeading(ctx context.Context, ensure func(context.Context) error) {
	logger := klog.FromContext(ctx)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for !g.Done() {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !leadingNow() {
			continue
		}
		if err := ensure(ctx); err != nil {
			logger.Error(err, "recovering allocations on becoming leader; retrying")
			continue
		}
		logger.Info("leading: allocations recovered")
	}
}

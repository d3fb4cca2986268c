// Package binding holds what the plugin's binding path needs beyond the
// core's decision: the bind gate that lets whole gangs bind at a time
// (maxBindingPods), the count of a group's binding failures
// (maxBindAttempts), and the evictor that deletes pods in the background,
// with a capped grace period: a preemption's victims and the bound members
// of a placement given up.
package binding

import (
	"context"
	"sync"
	"time"
)

// Gate paces the binding API calls of HiveSched's pods by whole affinity
// groups, first come first served, with at most limit pods in flight.
//
// Why: the framework binds every pod in its own goroutine as soon as Permit
// lets it go, with no bound on how many bindings are in flight. HiveSched's
// scheduling cycle is cheap, so after any hold-up upstream (an informer that
// lagged, a burst of gangs completing at once) it releases hundreds of pods
// within milliseconds. The API server then has that many bindings in flight
// and finishes each at a random point of a window that grows with their
// number: a gang's members land up to seconds apart, and the gang is partly
// bound meanwhile (docs/perf.md, "Bind spread"). Only the API server's
// throughput is gained by more bindings in flight, and only up to its
// saturation; past it, Little's law says latency grows instead.
//
// With the gate, the queue forms here, where it is ordered by gang, instead
// of inside the API server, where it is not: a gang is admitted as a whole
// when there is room for all its members, and its bindings go out together
// into an API server that is never more than limit bindings deep. A flood
// then waits here instead of stretching every gang's bindings over its
// window; what is left is the API server's own latency variance at that
// depth (docs/perf.md has the figures). A gang larger than the limit is
// admitted when nothing is in flight.
type Gate struct {
	limit int
	// claimTimeout: the members of an admitted gang that have not come to
	// Bind by then (one failed before binding) give their room back.
	claimTimeout time.Duration

	mu       sync.Mutex
	inflight int                    // pods binding, or room held for members of admitted gangs
	queue    []*gateTicket          // gangs waiting for room, in arrival order
	tickets  map[string]*gateTicket // per group: its queued or admitted ticket with members to come
	expected map[string]expectation // per group: members Permit let go together
}

// expectation is what Permit announced for a group: n members, at.
type expectation struct {
	n  int
	at time.Time
}

// staleExpectation: an announcement no member took up in this long is
// dropped (every member failed before Bind); members reach Bind right after
// Permit, the wait at the gate comes after they took it up.
const staleExpectation = time.Minute

// gateTicket is one gang's turn at the gate.
type gateTicket struct {
	group    string
	want     int           // members expected to bind in this turn
	unclaim  int           // room held for members that have not come yet
	admitted chan struct{} // closed on admission
	timer    *time.Timer
}

// NewGate returns a gate for limit pods in flight; limit <= 0 is no gate.
func NewGate(limit int) *Gate {
	if limit <= 0 {
		return nil
	}
	return &Gate{
		limit:        limit,
		claimTimeout: time.Second,
		tickets:      map[string]*gateTicket{},
		expected:     map[string]expectation{},
	}
}

// Expect records that n members of group are let go together (Permit, before
// it allows the waiting ones): the first of them to reach Bind asks room for
// all n.
func (g *Gate) Expect(group string, n int) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	if len(g.expected) >= 256 {
		// Bounded memory: forget the announcements nobody took up.
		for k, e := range g.expected {
			if now.Sub(e.at) > staleExpectation {
				delete(g.expected, k)
			}
		}
	}
	g.expected[group] = expectation{n: n, at: now}
}

// Forget drops what Permit announced for group (its members will not bind
// this time: the group was rolled back).
func (g *Gate) Forget(group string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.expected, group)
}

// Acquire waits until the pod's gang is admitted, then takes the pod's
// place. Every successful Acquire must be followed by one Release.
func (g *Gate) Acquire(ctx context.Context, group string) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	t := g.tickets[group]
	if t == nil {
		want := g.expected[group].n
		delete(g.expected, group)
		t = &gateTicket{group: group, want: max(want, 1), admitted: make(chan struct{})}
		g.tickets[group] = t
		g.queue = append(g.queue, t)
		g.admitLocked()
	}
	g.mu.Unlock()

	select {
	case <-t.admitted:
	case <-ctx.Done():
		g.mu.Lock()
		select {
		case <-t.admitted: // admitted meanwhile: its room is released by the timer
		default:
			g.dropLocked(t)
		}
		g.mu.Unlock()
		return ctx.Err()
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if t.unclaim > 0 {
		t.unclaim-- // the room held for this member
		if t.unclaim == 0 {
			t.timer.Stop()
			if g.tickets[group] == t {
				delete(g.tickets, group)
			}
		}
		return nil
	}
	// More members than Permit announced (or they came after the claim
	// timeout): the gang is binding, so the pod goes too.
	g.inflight++
	return nil
}

// Release gives back one pod's place and admits the gangs that fit now.
func (g *Gate) Release() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	g.admitLocked()
}

// admitLocked admits queued gangs in order while they fit (a gang larger
// than the limit fits an empty gate). It does not skip ahead: a big gang is
// not starved by small ones behind it.
func (g *Gate) admitLocked() {
	for len(g.queue) > 0 {
		t := g.queue[0]
		if g.inflight > 0 && g.inflight+t.want > g.limit {
			return
		}
		g.queue = g.queue[1:]
		g.inflight += t.want
		t.unclaim = t.want
		close(t.admitted)
		t.timer = time.AfterFunc(g.claimTimeout, func() { g.expire(t) })
	}
}

// expire gives back the room still held for members of an admitted gang
// that never came to Bind (their binding cycle failed before it).
func (g *Gate) expire(t *gateTicket) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.unclaim == 0 {
		return
	}
	g.inflight -= t.unclaim
	t.unclaim = 0
	if g.tickets[t.group] == t {
		delete(g.tickets, t.group)
	}
	g.admitLocked()
}

// dropLocked removes a queued ticket whose waiters gave up (context done).
// Other members still waiting on it see their own context end too: the
// binding cycles of one scheduler share its context.
func (g *Gate) dropLocked(t *gateTicket) {
	for i, q := range g.queue {
		if q == t {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			break
		}
	}
	if g.tickets[t.group] == t {
		delete(g.tickets, t.group)
	}
}

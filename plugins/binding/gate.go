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

	"k8s.io/klog/v2"
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
//
// Opportunistic gangs bind in the room guaranteed ones leave: a queued
// guaranteed gang goes ahead of every queued opportunistic one, and is
// admitted as if no opportunistic binding were in flight. A huge
// opportunistic gang (admitted alone, above the limit) therefore never holds
// a guaranteed gang at the gate; the API server is then at most the limit
// plus the opportunistic bindings in flight deep (issue 28, finding 12).
type Gate struct {
	// limit is the fixed limit (no controller), or the ceiling of the
	// adaptive one.
	limit int
	// ctl moves the limit between a floor and limit after the binding
	// calls' latency (gate_adaptive.go); nil: the limit is fixed.
	ctl *controller
	// est smooths the binding calls' latency, for the controller and for
	// the metrics (a fixed gate reports it too).
	est latencyEstimate
	// claimTimeout: the members of an admitted gang that have not come to
	// Bind by then (one failed before binding) give their room back.
	claimTimeout time.Duration
	// now is the clock of the latency estimate and the controller (tests
	// set it; the claim timeout runs on the real clock).
	now func() time.Time
	// log tells when the adaptive limit changes (V(4)).
	log klog.Logger

	mu       sync.Mutex
	inflight int // pods binding, or room held for members of admitted gangs
	// inflightOpp: the part of inflight that is opportunistic gangs';
	// oppBinding counts, per group, its opportunistic members binding.
	inflightOpp int
	oppBinding  map[string]int
	queue       []*gateTicket          // gangs waiting for room, in arrival order
	tickets     map[string]*gateTicket // per group: its queued or admitted ticket with members to come
	expected    map[string]expectation // per group: members Permit let go together
	// binding: per group, its admitted ticket while members of that turn
	// are binding, so that Release can give the turn's latencies to the
	// controller when the last of them returns.
	binding map[string]*gateTicket
}

// GateConfig configures a gate: NewGateWith.
type GateConfig struct {
	// Limit is the most pods binding at once: the fixed limit, or the
	// adaptive limit's ceiling. <= 0 is no gate.
	Limit int
	// Adaptive makes the limit follow the binding calls' latency between
	// Floor and Limit (gate_adaptive.go); otherwise it stays at Limit.
	Adaptive bool
	// Floor is the adaptive limit's lowest value (clamped to 1..Limit).
	Floor int
	// SpreadBudget is how far apart the binding calls of one gang may
	// return before the adaptive limit is cut; 0 is DefaultSpreadBudget.
	SpreadBudget time.Duration
	// Logger gets a V(4) line when the adaptive limit changes.
	Logger klog.Logger
	// Now is the controller's clock (tests); nil is time.Now.
	Now func() time.Time
}

// GateStats is what the metrics report of a gate.
type GateStats struct {
	Limit    int           // current limit (the fixed one, or where the controller is)
	Floor    int           // adaptive floor (= Limit when fixed)
	Ceiling  int           // adaptive ceiling (= Limit when fixed)
	InFlight int           // pods binding or room held for admitted gangs
	Queued   int           // gangs waiting for room
	Latency  time.Duration // smoothed binding call latency
	Baseline time.Duration // its recent minimum (the controller's reference)
	Adaptive bool
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
	opp      bool          // an opportunistic gang's
	want     int           // members expected to bind in this turn
	unclaim  int           // room held for members that have not come yet
	admitted chan struct{} // closed on admission
	timer    *time.Timer

	// For the controller: when the turn came and was admitted, whether it
	// had to wait for room (the limit held it back, so a higher limit would
	// have been used), members of the turn binding now, and the fastest
	// and slowest of their calls so far.
	arrived    time.Time // its first member reached the gate
	at         time.Time // admitted
	waited     bool
	out        int
	calls      int
	fast, slow time.Duration
}

// NewGate returns a gate with a fixed limit of pods in flight; limit <= 0
// is no gate.
func NewGate(limit int) *Gate {
	return NewGateWith(GateConfig{Limit: limit})
}

// NewGateWith returns a gate configured by c; c.Limit <= 0 is no gate.
func NewGateWith(c GateConfig) *Gate {
	if c.Limit <= 0 {
		return nil
	}
	g := &Gate{
		limit:        c.Limit,
		claimTimeout: time.Second,
		now:          c.Now,
		log:          c.Logger,
		tickets:      map[string]*gateTicket{},
		expected:     map[string]expectation{},
		binding:      map[string]*gateTicket{},
		oppBinding:   map[string]int{},
	}
	if g.now == nil {
		g.now = time.Now
	}
	if c.Adaptive {
		g.ctl = newController(c.Floor, c.Limit, c.SpreadBudget)
	}
	return g
}

// curLimit is the limit in force: the controller's, or the fixed one.
func (g *Gate) curLimit() int {
	if g.ctl != nil {
		return g.ctl.current()
	}
	return g.limit
}

// Stats reads the gate's state for the metrics.
func (g *Gate) Stats() GateStats {
	if g == nil {
		return GateStats{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := GateStats{Limit: g.curLimit(), Floor: g.limit, Ceiling: g.limit, InFlight: g.inflight, Queued: len(g.queue),
		Latency: g.est.smoothed(), Baseline: g.est.baseline(g.now())}
	if g.ctl != nil {
		s.Adaptive, s.Floor = true, int(g.ctl.floor)
	}
	return s
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
// place; opportunistic: the gang is an opportunistic one (it binds in the
// room guaranteed gangs leave). Every successful Acquire must be followed by
// one Release.
func (g *Gate) Acquire(ctx context.Context, group string, opportunistic bool) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	t := g.tickets[group]
	if t == nil {
		want := g.expected[group].n
		delete(g.expected, group)
		t = &gateTicket{group: group, opp: opportunistic, want: max(want, 1), admitted: make(chan struct{}), arrived: g.now()}
		g.tickets[group] = t
		g.queue = append(g.queue, t)
		g.admitLocked()
		select {
		case <-t.admitted:
		default:
			t.waited = true // the limit held it back
		}
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
	if t.opp {
		g.oppBinding[group]++
	}
	if t.unclaim > 0 {
		t.unclaim-- // the room held for this member
		t.out++
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
	if t.opp {
		g.inflightOpp++
	}
	if b := g.binding[group]; b != nil {
		b.out++
	}
	return nil
}

// Release gives back one pod's place, whose binding call (of a member of
// group) took took, and admits the gangs that fit now. The call's latency
// feeds the latency estimate; when it is the last of its gang's turn, the
// adaptive limit is adjusted after the turn (gate_adaptive.go).
func (g *Gate) Release(group string, took time.Duration) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	if n := g.oppBinding[group]; n > 0 {
		g.inflightOpp--
		if n == 1 {
			delete(g.oppBinding, group)
		} else {
			g.oppBinding[group] = n - 1
		}
	}
	now := g.now()
	g.est.observe(now, took)
	if t := g.binding[group]; t != nil && t.out > 0 {
		t.out--
		if t.calls == 0 || took < t.fast {
			t.fast = took
		}
		if took > t.slow {
			t.slow = took
		}
		t.calls++
		if t.out == 0 && t.unclaim == 0 {
			g.turnDoneLocked(now, t)
		}
	}
	g.admitLocked()
}

// turnDoneLocked: every member of t's turn has returned (or given up its
// room); the controller learns from the turn.
func (g *Gate) turnDoneLocked(now time.Time, t *gateTicket) {
	if g.binding[t.group] == t {
		delete(g.binding, t.group)
	}
	if g.ctl == nil || t.calls == 0 {
		return
	}
	before := g.ctl.current()
	why := g.ctl.turn(now, t, &g.est, len(g.queue))
	if after := g.ctl.current(); after != before {
		g.log.V(4).Info("bind gate limit changed", "from", before, "to", after, "reason", why,
			"latency", g.est.smoothed(), "baseline", g.est.baseline(now), "gangSpread", t.slow-t.fast,
			"gangSize", t.calls, "inFlight", g.inflight, "queued", len(g.queue))
	}
}

// admitLocked admits queued gangs in order while they fit in the current
// limit (a gang larger than the limit fits an empty gate, whatever the
// limit: the adaptive limit going down never holds a gang back for good). It
// does not skip ahead within a class: a big gang is not starved by small ones
// behind it. Guaranteed gangs come first and count only guaranteed bindings
// in flight; opportunistic ones count everything (see Gate).
func (g *Gate) admitLocked() {
	for len(g.queue) > 0 {
		i := 0
		for j, q := range g.queue {
			if !q.opp {
				i = j
				break
			}
		}
		t := g.queue[i]
		busy := g.inflight
		if !t.opp {
			busy -= g.inflightOpp
		}
		if busy > 0 && busy+t.want > g.curLimit() {
			return
		}
		g.queue = append(g.queue[:i], g.queue[i+1:]...)
		g.inflight += t.want
		if t.opp {
			g.inflightOpp += t.want
		}
		t.unclaim = t.want
		t.at = g.now()
		g.binding[t.group] = t
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
	if t.opp {
		g.inflightOpp -= t.unclaim
	}
	t.unclaim = 0
	if g.tickets[t.group] == t {
		delete(g.tickets, t.group)
	}
	if t.out == 0 && g.binding[t.group] == t {
		g.turnDoneLocked(g.now(), t) // the members that came have all returned
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

package binding

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// fakeClock is the controller's clock: it moves only when the test says.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func adaptiveGate(floor, ceiling int) (*Gate, *fakeClock) {
	clock := &fakeClock{now: time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)}
	return NewGateWith(GateConfig{Limit: ceiling, Adaptive: true, Floor: floor, Now: clock.Now}), clock
}

// flood queues gangs of size members at once (as Permit would let them
// go), and returns a driver that takes the gangs through the gate turn by
// turn: a turn is the gang whose members all got through; its calls
// return after the latencies calls(turn index, member) on the fake clock.
type flood struct {
	t        *testing.T
	g        *Gate
	clock    *fakeClock
	size     int
	got      chan string // a member of the group got through
	count    map[string]int
	admitted []string // gangs in the order their last member got through
	names    []string
	// limits is the gate's limit after each turn.
	limits []int
}

func newFlood(t *testing.T, g *Gate, clock *fakeClock, gangs, size int) *flood {
	f := &flood{t: t, g: g, clock: clock, size: size, got: make(chan string, gangs*size), count: map[string]int{}}
	for i := 0; i < gangs; i++ {
		f.add(fmt.Sprintf("g%03d", i), size)
	}
	return f
}

// add queues one more gang of n members (they arrive at Bind together),
// after the gangs added before it.
func (f *flood) add(group string, n int) {
	f.names = append(f.names, group)
	f.g.Expect(group, n)
	for j := 0; j < n; j++ {
		go func() {
			if err := f.g.Acquire(context.Background(), group, false); err != nil {
				f.t.Error(err)
				return
			}
			f.got <- group
		}()
	}
	// The gang's turn is taken when its first member reaches the gate:
	// wait for it, so that the gangs arrive in the order they are added.
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.g.mu.Lock()
		in := f.g.tickets[group] != nil || f.g.binding[group] != nil
		f.g.mu.Unlock()
		if in {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("gang %s never reached the gate", group)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// turn waits for the next gang whose members all got through, checks that
// no gang queued before it is still waiting (first come first served),
// and returns it.
func (f *flood) turn(want int) string {
	f.t.Helper()
	for {
		select {
		case group := <-f.got:
			f.count[group]++
			if f.count[group] < want {
				continue
			}
			f.g.mu.Lock()
			for _, q := range f.g.queue {
				if q.group < group {
					f.g.mu.Unlock()
					f.t.Fatalf("gang %s got through while %s, queued before it, waits", group, q.group)
				}
			}
			f.g.mu.Unlock()
			f.admitted = append(f.admitted, group)
			return group
		case <-time.After(10 * time.Second):
			f.t.Fatalf("no gang got through (admitted so far: %v)", f.admitted)
		}
	}
}

// finish returns the turn's calls with the given latencies, the clock
// moved by the slowest.
func (f *flood) finish(group string, took []time.Duration) {
	var slowest time.Duration
	for _, d := range took {
		slowest = max(slowest, d)
	}
	f.clock.step(slowest)
	for _, d := range took {
		f.g.Release(group, d)
	}
	f.limits = append(f.limits, f.g.Stats().Limit)
}

// drain takes the gangs left through the gate with flat latencies.
func (f *flood) drain() {
	for len(f.admitted) < len(f.names) {
		f.finish(f.turn(f.size), same(f.size, 20*time.Millisecond))
	}
}

func same(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// spread: n calls from d to d+w.
func spread(n int, d, w time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d + w*time.Duration(i)/time.Duration(n-1)
	}
	return out
}

// While the calls take as long as ever and the limit holds gangs back, the
// limit grows to the ceiling, and no higher.
func TestAdaptiveGateGrowsWhileLatencyIsFlat(t *testing.T) {
	g, clock := adaptiveGate(8, 64)
	f := newFlood(t, g, clock, 60, 8)
	for i := 0; i < 60; i++ {
		f.finish(f.turn(8), same(8, 20*time.Millisecond))
	}
	if got := g.Stats().Limit; got != 64 {
		t.Fatalf("limit %d after 60 flat turns, want the ceiling 64 (limits %v)", got, f.limits)
	}
	for i := 1; i < len(f.limits); i++ {
		if f.limits[i] < f.limits[i-1] || f.limits[i] > 64 {
			t.Fatalf("limit went %d -> %d on flat latency (limits %v)", f.limits[i-1], f.limits[i], f.limits)
		}
	}
	checkDrained(t, g)
}

// A gate that holds nothing back learns nothing about a higher limit: one
// gang at a time keeps it where it is.
func TestAdaptiveGateDoesNotGrowWhenNotFull(t *testing.T) {
	g, clock := adaptiveGate(8, 64)
	for i := 0; i < 30; i++ {
		f := newFlood(t, g, clock, 0, 8)
		f.add(fmt.Sprintf("g%03d", i), 8)
		f.finish(f.turn(8), same(8, 20*time.Millisecond))
	}
	if got := g.Stats().Limit; got != 8 {
		t.Fatalf("limit %d, want the floor 8: the gate was never full", got)
	}
}

// When the calls slow down well past their recent minimum, the limit is cut,
// once per round trip, down to the floor and never below; when they are
// steady again it grows back.
func TestAdaptiveGateShrinksWhenLatencyRises(t *testing.T) {
	g, clock := adaptiveGate(8, 64)
	f := newFlood(t, g, clock, 200, 8)
	for i := 0; i < 40; i++ {
		f.finish(f.turn(8), same(8, 20*time.Millisecond))
	}
	if got := g.Stats().Limit; got != 64 {
		t.Fatalf("limit %d after the flat start, want 64", got)
	}
	// The API server queues: every call takes 10x as long.
	for i := 0; i < 60; i++ {
		f.finish(f.turn(8), same(8, 200*time.Millisecond))
	}
	low := g.Stats()
	if low.Limit != 8 {
		t.Fatalf("limit %d after 60 slow turns, want the floor 8 (limits %v)", low.Limit, f.limits)
	}
	for _, l := range f.limits {
		if l < 8 {
			t.Fatalf("limit %d below the floor (limits %v)", l, f.limits)
		}
	}
	if low.Latency < 150*time.Millisecond || low.Baseline != 20*time.Millisecond {
		t.Fatalf("latency %v baseline %v, want about 200 ms against 20 ms", low.Latency, low.Baseline)
	}
	// Back to 20 ms: the limit grows again.
	for i := 0; i < 100; i++ {
		f.finish(f.turn(8), same(8, 20*time.Millisecond))
	}
	if got := g.Stats().Limit; got <= 8 {
		t.Fatalf("limit %d after 100 fast turns, want it growing again (limits %v)", got, f.limits)
	}
	checkDrained(t, g)
}

// oneByOne takes n gangs through the gate one at a time, each arriving
// when the gate has room (no backlog), with the given latencies.
func oneByOne(t *testing.T, g *Gate, clock *fakeClock, from, n int, took func() []time.Duration) {
	t.Helper()
	for i := from; i < from+n; i++ {
		f := newFlood(t, g, clock, 0, 8)
		f.add(fmt.Sprintf("h%03d", i), 8)
		f.finish(f.turn(8), took())
	}
}

// A gang whose calls return further apart than the spread budget cuts the
// limit even when the average latency is steady, while nothing waits at the
// gate: the API server is interleaving the gang's bindings with others',
// and the gate has room to spare.
func TestAdaptiveGateShrinksWhenAGangSpreads(t *testing.T) {
	g, clock := adaptiveGate(8, 64)
	f := newFlood(t, g, clock, 40, 8)
	f.drain() // flat latency, a backlog: up to the ceiling
	if got := g.Stats().Limit; got != 64 {
		t.Fatalf("limit %d, want 64", got)
	}
	// Same average (40 ms), but each gang's calls 10..70 ms apart: 60 ms
	// spread, over the 50 ms budget.
	var limits []int
	oneByOne(t, g, clock, 0, 20, func() []time.Duration {
		limits = append(limits, g.Stats().Limit)
		return spread(8, 10*time.Millisecond, 60*time.Millisecond)
	})
	if got := g.Stats().Limit; got != 8 {
		t.Fatalf("limit %d, want the floor 8 after 20 gangs spread over the budget (limits %v)", got, limits)
	}
	// Within the budget (30 ms apart): no cut.
	oneByOne(t, g, clock, 20, 20, func() []time.Duration { return spread(8, 25*time.Millisecond, 30*time.Millisecond) })
	if got := g.Stats().Limit; got != 8 {
		t.Fatalf("limit %d, want 8: gangs within the budget, nothing held back", got)
	}
	checkDrained(t, g)
}

// While pods wait at the gate longer than a call takes, the gate is the
// bottleneck: the limit grows although the calls are slower than their
// recent minimum (the API server is busy with others: a cut would only
// lengthen the wait), holds when a gang's calls return apart, and is cut
// only when the latency is far over its minimum (a flood).
func TestAdaptiveGateBacklog(t *testing.T) {
	g, clock := adaptiveGate(8, 64)
	oneByOne(t, g, clock, 0, 5, func() []time.Duration { return same(8, 20*time.Millisecond) })
	f := newFlood(t, g, clock, 100, 8)
	// 3-4x the minimum: over latencyTolerance, under floodTolerance.
	for i := 0; i < 10; i++ {
		f.finish(f.turn(8), same(8, 70*time.Millisecond))
	}
	grown := g.Stats().Limit
	if grown <= 8 {
		t.Fatalf("limit %d, want grown while pods wait at the gate (limits %v)", grown, f.limits)
	}
	// Spread over the budget: hold.
	for i := 0; i < 10; i++ {
		f.finish(f.turn(8), spread(8, 40*time.Millisecond, 60*time.Millisecond))
	}
	if got := g.Stats().Limit; got != grown {
		t.Fatalf("limit %d, want held at %d while gangs spread (limits %v)", got, grown, f.limits)
	}
	// A flood: 10x the minimum.
	for i := 0; i < 10; i++ {
		f.finish(f.turn(8), same(8, 200*time.Millisecond))
	}
	if got := g.Stats().Limit; got >= grown {
		t.Fatalf("limit %d, want cut below %d in a flood (limits %v)", got, grown, f.limits)
	}
	f.drain()
	checkDrained(t, g)
}

// One flood cuts once per round trip, not once per gang in it: the turns
// admitted before a cut went out under the old limit.
func TestAdaptiveGateCutsOncePerRoundTrip(t *testing.T) {
	g, clock := adaptiveGate(8, 64)
	f := newFlood(t, g, clock, 100, 8)
	for i := 0; i < 40; i++ {
		f.finish(f.turn(8), same(8, 20*time.Millisecond))
	}
	// Eight gangs are in flight at 64: they all come back slow, at once
	// (no clock step between them).
	var turns []string
	for i := 0; i < 8; i++ {
		turns = append(turns, f.turn(8))
	}
	for _, group := range turns {
		for j := 0; j < 8; j++ {
			g.Release(group, 300*time.Millisecond)
		}
	}
	if got := g.Stats().Limit; got != 48 {
		t.Fatalf("limit %d after one slow round trip, want one cut, 64 * 0.75 = 48", got)
	}
	f.drain()
	checkDrained(t, g)
}

// A gang larger than the current limit (here cut to the floor) is
// admitted alone once the gate is empty, and the gangs behind it wait for
// it: no deadlock, no skipping ahead.
func TestAdaptiveGateBigGangAtTheFloor(t *testing.T) {
	g, clock := adaptiveGate(4, 32)
	f := newFlood(t, g, clock, 10, 4)
	for i := 0; i < 10; i++ {
		f.finish(f.turn(4), spread(4, 10*time.Millisecond, 200*time.Millisecond))
	}
	if got := g.Stats().Limit; got != 4 {
		t.Fatalf("limit %d, want the floor 4", got)
	}
	f.add("g100", 4)
	first := f.turn(4)
	f.add("g101", 20) // five times the limit
	f.add("g102", 2)
	waitQueued(t, g, 2)
	f.finish(first, same(4, 20*time.Millisecond))
	if big := f.turn(20); big != "g101" {
		t.Fatalf("%s got through, want the big gang g101", big)
	}
	g.mu.Lock()
	if len(g.queue) != 1 || g.queue[0].group != "g102" {
		t.Errorf("queue %v, want g102 waiting behind the big gang", g.queue)
	}
	g.mu.Unlock()
	f.finish("g101", same(20, 20*time.Millisecond))
	if last := f.turn(2); last != "g102" {
		t.Fatalf("%s got through, want g102", last)
	}
	f.finish("g102", same(2, 20*time.Millisecond))
	checkDrained(t, g)
}

// Members that never come to Bind (the claim timeout gives their room
// back) still end their gang's turn: the controller sees what came, and
// the gate empties.
func TestAdaptiveGateTurnEndsWithUnclaimedRoom(t *testing.T) {
	g, _ := adaptiveGate(8, 64)
	g.claimTimeout = 10 * time.Millisecond
	g.Expect("a", 8)
	through(t, "a's only member", member(context.Background(), g, "a"))
	g.Release("a", 20*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		empty := g.inflight == 0 && len(g.binding) == 0 && len(g.tickets) == 0
		g.mu.Unlock()
		if empty {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn of a gang with unclaimed room never ended")
		}
		time.Sleep(time.Millisecond)
	}
}

// A fixed gate keeps its limit whatever the latency, and still reports it.
func TestFixedGateIgnoresLatency(t *testing.T) {
	clock := &fakeClock{now: time.Unix(0, 0)}
	g := NewGateWith(GateConfig{Limit: 16, Now: clock.Now})
	f := newFlood(t, g, clock, 20, 8)
	for i := 0; i < 20; i++ {
		f.finish(f.turn(8), spread(8, 10*time.Millisecond, time.Second))
	}
	s := g.Stats()
	if s.Limit != 16 || s.Adaptive || s.Floor != 16 || s.Ceiling != 16 || s.Latency == 0 {
		t.Fatalf("stats %+v, want a fixed limit of 16 and a latency", s)
	}
}

func checkDrained(t *testing.T, g *Gate) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight != 0 || len(g.queue) != 0 || len(g.binding) != 0 {
		t.Errorf("gate not empty: in flight %d, queued %d, binding %d", g.inflight, len(g.queue), len(g.binding))
	}
}

// Issue 48: a gate whose calls come back apart holds its limit while the
// backlog drains (TestAdaptiveGateBacklog), but not while it grows: with
// more gangs arriving than leaving, holding lets every later pod wait
// longer for the whole burst. Here two gangs arrive per turn that ends,
// every turn's calls return over the spread budget, and the limit grows.
func TestAdaptiveGateGrowsWhileTheBacklogGrows(t *testing.T) {
	g, clock := adaptiveGate(8, 64)
	oneByOne(t, g, clock, 0, 5, func() []time.Duration { return same(8, 20*time.Millisecond) })
	f := newFlood(t, g, clock, 4, 8)
	start := g.Stats().Limit
	next := 4
	for i := 0; i < 12; i++ {
		f.finish(f.turn(8), spread(8, 40*time.Millisecond, 60*time.Millisecond))
		for j := 0; j < 2; j++ {
			f.add(fmt.Sprintf("g%03d", next), 8)
			next++
		}
	}
	if got := g.Stats().Limit; got <= start {
		t.Fatalf("limit %d, want grown above %d while the backlog grows (limits %v)", got, start, f.limits)
	}
	f.drain()
	checkDrained(t, g)
}

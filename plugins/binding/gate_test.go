package binding

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// member starts one member's Acquire in the background; the returned
// channel gets Acquire's result once the gate lets it through.
func member(ctx context.Context, g *Gate, group string) <-chan error {
	return memberOf(ctx, g, group, false)
}

// memberOf is member for a gang that is opportunistic or not.
func memberOf(ctx context.Context, g *Gate, group string, opportunistic bool) <-chan error {
	done := make(chan error, 1)
	go func() { done <- g.Acquire(ctx, group, opportunistic) }()
	return done
}

// through waits (a long time, it is not a timing assertion) for every member
// to be let through.
func through(t *testing.T, what string, ms ...<-chan error) {
	t.Helper()
	for _, m := range ms {
		select {
		case err := <-m:
			if err != nil {
				t.Fatalf("%s: acquire: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: a member was never let through", what)
		}
	}
}

// held checks that none of the members got through: the gate holds them
// (checked once the gate has seen them all, see waitQueued).
func held(t *testing.T, what string, ms ...<-chan error) {
	t.Helper()
	for _, m := range ms {
		select {
		case err := <-m:
			t.Fatalf("%s: a member got through (err %v) while its gang should wait", what, err)
		default:
		}
	}
}

// waitQueued waits until n gangs are queued at the gate.
func waitQueued(t *testing.T, g *Gate, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		q := len(g.queue)
		g.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d gangs queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func gang(ctx context.Context, g *Gate, group string, n int) []<-chan error {
	g.Expect(group, n)
	var ms []<-chan error
	for i := 0; i < n; i++ {
		ms = append(ms, member(ctx, g, group))
	}
	return ms
}

func TestBindGateAdmitsWholeGangsInOrder(t *testing.T) {
	ctx := context.Background()
	g := NewGate(16)
	a := gang(ctx, g, "a", 8)
	through(t, "a", a...)
	b := gang(ctx, g, "b", 8)
	through(t, "b (a and b fit 16)", b...)
	c := gang(ctx, g, "c", 8)
	waitQueued(t, g, 1)
	held(t, "c (16 in flight)", c...)
	d := gang(ctx, g, "d", 1)
	waitQueued(t, g, 2)
	held(t, "d (queued behind c, no skipping ahead)", d...)

	// Seven of a's bindings finish: 9 in flight, c (8) still does not fit.
	for i := 0; i < 7; i++ {
		g.Release("", 0)
	}
	held(t, "c (9 in flight)", c...)
	// The last of a: 8 in flight, c fits, and then d (17 > 16) waits.
	g.Release("", 0)
	through(t, "c", c...)
	held(t, "d (16 in flight)", d...)
	g.Release("", 0)
	through(t, "d", d...)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight != 16 {
		t.Errorf("in flight = %d, want 16 (b 8, c 7, d 1)", g.inflight)
	}
}

func TestBindGateLargeGangGoesAlone(t *testing.T) {
	ctx := context.Background()
	g := NewGate(4)
	small := gang(ctx, g, "small", 2)
	through(t, "small", small...)
	big := gang(ctx, g, "big", 10)
	waitQueued(t, g, 1)
	held(t, "big (gate not empty)", big...)
	g.Release("", 0)
	g.Release("", 0)
	through(t, "big (alone in an empty gate)", big...)
	after := gang(ctx, g, "after", 1)
	waitQueued(t, g, 1)
	held(t, "after (10 in flight)", after...)
	for i := 0; i < 10; i++ {
		g.Release("", 0)
	}
	through(t, "after", after...)
}

func oppGang(ctx context.Context, g *Gate, group string, n int) []<-chan error {
	g.Expect(group, n)
	var ms []<-chan error
	for i := 0; i < n; i++ {
		ms = append(ms, memberOf(ctx, g, group, true))
	}
	return ms
}

// A huge opportunistic gang does not hold the gate alone (issue 28, finding
// 12): before this rule, the guaranteed gang behind it waited until all of
// its 40 bindings returned.
func TestBindGateOpportunisticNeverHoldsGuaranteed(t *testing.T) {
	ctx := context.Background()
	g := NewGate(8)
	huge := oppGang(ctx, g, "huge-opp", 40)
	through(t, "huge opportunistic gang (alone in an empty gate)", huge...)
	guaranteed := gang(ctx, g, "guaranteed", 8)
	through(t, "a guaranteed gang while 40 opportunistic bindings are in flight", guaranteed...)

	// Queued opportunistic gangs wait for all of it; a guaranteed gang that
	// comes after them goes first.
	opp := oppGang(ctx, g, "opp", 2)
	waitQueued(t, g, 1)
	g2 := gang(ctx, g, "g2", 4)
	waitQueued(t, g, 2)
	held(t, "opp (48 in flight)", opp...)
	held(t, "g2 (8 guaranteed in flight)", g2...)
	for i := 0; i < 4; i++ {
		g.Release("guaranteed", 0)
	}
	through(t, "g2 (ahead of the opportunistic gang queued before it)", g2...)
	held(t, "opp (still 48 in flight)", opp...)
	for i := 0; i < 40; i++ {
		g.Release("huge-opp", 0)
	}
	held(t, "opp (8 guaranteed in flight: no room)", opp...)
	for i := 0; i < 4; i++ {
		g.Release("guaranteed", 0)
	}
	for i := 0; i < 4; i++ {
		g.Release("g2", 0)
	}
	through(t, "opp (an empty gate)", opp...)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight != 2 || g.inflightOpp != 2 {
		t.Errorf("in flight %d (opportunistic %d), want 2 (2)", g.inflight, g.inflightOpp)
	}
}

// A member that never reaches Bind (its binding cycle failed earlier) must
// not hold its room for good.
func TestBindGateUnclaimedRoomExpires(t *testing.T) {
	ctx := context.Background()
	g := NewGate(9)
	g.claimTimeout = 10 * time.Millisecond
	g.Expect("a", 8)
	through(t, "a's only member", member(ctx, g, "a"))
	next := gang(ctx, g, "b", 8)
	// 1 in flight and 7 held for a's missing members until they expire;
	// then b fits beside the one binding.
	through(t, "b after a's unclaimed room expired", next...)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight != 9 {
		t.Errorf("in flight = %d, want 9 (a's one, b's eight)", g.inflight)
	}
	if len(g.tickets) != 0 || len(g.expected) != 0 {
		t.Errorf("left over: tickets %v, expected %v", g.tickets, g.expected)
	}
}

func TestBindGateCancelledWaiterLeavesTheQueue(t *testing.T) {
	g := NewGate(1)
	through(t, "first", member(context.Background(), g, "first"))
	ctx, cancel := context.WithCancel(context.Background())
	waiting := member(ctx, g, "second")
	waitQueued(t, g, 0+1)
	cancel()
	select {
	case err := <-waiting:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("acquire = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled waiter was never let go")
	}
	waitQueued(t, g, 0)
	g.Release("", 0)
	through(t, "third, not blocked by the cancelled one", member(context.Background(), g, "third"))
}

// Many gangs through a small gate from many goroutines: every member gets
// through once, and the gate ends empty (run with -race).
func TestBindGateConcurrent(t *testing.T) {
	g := NewGate(16)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		group := string(rune('A' + i))
		g.Expect(group, 8)
		for j := 0; j < 8; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := g.Acquire(context.Background(), group, false); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(100 * time.Microsecond) // the API call
				g.Release("", 0)
			}()
		}
	}
	wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight != 0 || len(g.queue) != 0 || len(g.tickets) != 0 {
		t.Errorf("gate not empty: in flight %d, queued %d, tickets %d", g.inflight, len(g.queue), len(g.tickets))
	}
}

func TestBindGateOff(t *testing.T) {
	g := NewGate(0)
	if g != nil {
		t.Fatalf("limit 0 made a gate")
	}
	g.Expect("a", 8) // a nil gate is a no-op
	if err := g.Acquire(context.Background(), "a", false); err != nil {
		t.Fatal(err)
	}
	g.Release("", 0)
}

// Announcements nobody takes up (every member failed before Bind) are
// dropped once they are stale, so the map stays bounded.
func TestBindGateForgetsStaleExpectations(t *testing.T) {
	g := NewGate(8)
	for i := 0; i < 300; i++ {
		g.Expect(fmt.Sprintf("old-%d", i), 8)
	}
	g.mu.Lock()
	for k, e := range g.expected {
		e.at = e.at.Add(-2 * staleExpectation)
		g.expected[k] = e
	}
	g.mu.Unlock()
	g.Expect("new", 8)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.expected) != 1 || g.expected["new"].n != 8 {
		t.Errorf("expected = %d entries (new: %+v), want only the new one", len(g.expected), g.expected["new"])
	}
}

package binding

import "time"

// The adaptive limit (bindGate: Adaptive).
//
// Why a limit that moves: a fixed limit is right for one API server under
// one load only. The gate exists because a gang's members land apart by
// about the API server's latency variance at the depth it is kept at, and
// the depth grows without bound when a flood of bindings is released at
// once (docs/perf.md, "Bind spread"). But while pods are created faster
// than a small limit lets them bind, the queue at the gate grows and every
// pod waits there: at 5000 nodes in test/perf a limit of 16 made the
// scheduling latency p50 14-19 s against 0.1 s with 64. The depth that is
// right is the knee of the API server's throughput curve: below it more
// calls in flight bring more bindings a second at the same latency; past it
// they only queue inside the API server, where the queue is not ordered by
// gang and stretches every gang's bindings apart. Where that knee is
// depends on the API server's size and on what else it serves (the pod
// creations of a burst compete with the bindings), so the gate looks for
// it from what it sees of its own calls, the way TCP looks for a path's
// capacity: additive increase while the calls come back as fast as
// before, multiplicative decrease when they do not.
//
// The signals, read from the binding calls' own durations (Release) and
// from the gate itself:
//
//   - A gang's spread: the slowest minus the fastest call of one gang's
//     turn. The members go out together (within a millisecond), so this
//     is how far apart the API server finished them: the quantity the gate
//     is for (a launcher sees the gang partly bound meanwhile). Above
//     SpreadBudget the API server is interleaving our calls with others.
//   - The smoothed latency (an average over the last few gangs' calls)
//     against its own minimum over the last 10-20 s, the baseline: above
//     latencyTolerance times the baseline, the calls queue inside the API
//     server (Little's law: at a fixed throughput, latency grows with the
//     depth); above floodTolerance times, it is drowning. The baseline is
//     a recent minimum, not the minimum since start, so that it follows
//     the API server when it gets slower for good (a bigger cluster, more
//     watchers).
//   - The backlog: the turn waited at the gate longer than a call takes.
//     Then the gate, not the API server, is what holds the pods, and
//     every pod's scheduling latency grows by its wait here.
//
// Why the backlog matters: the API server serves the bindings beside
// everything else, above all the creations of the very pods being bound.
// Measured in test/perf (docs/perf.md, "The adaptive bind gate"), while
// pods are created the calls take 3-6 times their quiet minimum even with
// one gang in flight, and a gang's calls return up to 100 ms apart
// whatever the depth. A controller that cuts on those signals alone (the
// first version of this one did) keeps the limit at its floor for the whole
// burst: the bindings then get a small share of the API server, pods queue
// here, and the scheduling latency is the fixed limit of 16's, seconds
// (its p50 was 2-3.5 s at 500 nodes against 0.2 s without a gate). Only a
// deeper gate gets the bindings their share then. So:
//
//   - Cut (limit = max(floor, limit * cutFactor)): when the latency is
//     over floodTolerance times the baseline (a flood: more depth only
//     queues inside the API server), or, with no backlog, when a gang's
//     spread is over budget or the latency over latencyTolerance times the
//     baseline (the gate is deeper than the load needs, and the depth
//     costs spread). At most once per smoothed latency, and never for a
//     turn admitted before the last cut: its calls went out under the old
//     limit, and one flood must not cut the limit once per gang in it.
//   - Hold: with a backlog, when the gang's spread was over budget: more
//     depth would spread the next gangs further, less would lengthen the
//     wait. But not while the backlog grows (more gangs queued than at the
//     last turn's end): then the limit is below what keeps up with the
//     gangs arriving, and holding it lets every later pod wait longer, for
//     as long as the spread stays over budget, which on a busy API server
//     is the whole burst. The 5000-node tail of issue 48 was this: a
//     binding stall (calls of 1.7 s) cut the limit to 10-13 by the flood
//     rule, the calls then came back 250-400 ms and apart, every turn held,
//     and for 15-20 s pods queued at the gate at the rate they were
//     created (test/perf's timeline; docs/perf.md). A growing backlog grows
//     the limit as any backlog does.
//   - Grow: with a backlog, by the turn's size (about doubling per round
//     trip, TCP's slow start: the wait grows by the round trip, so the
//     limit must catch up fast). Without one, when the turn's calls were
//     within the signals and the limit held something back (the turn
//     waited for room, or gangs are queued now): by the turn's size until
//     the first cut, by the turn's size over the limit after it (about
//     one pod per round trip). A gate that held nothing back learns nothing
//     about a higher limit and keeps it (TCP's congestion window
//     validation): the limit stays near the depth in use, so a flood after
//     a quiet spell meets that depth, not the ceiling.
//
// Decisions are taken when the last call of a gang's turn returns: a gang
// of 8 weighs as one observation, not 8 correlated ones.
//
// What it gives (docs/perf.md): the ungated contender's scheduling latency
// within 1.03-1.17x (one run each at 500 and 5000 nodes), and a bind
// spread below the ungated and the fixed 64's under floods, but not the spread of a fixed 16: on the 2-core benchmark
// machine a gang's bindings land more than 100 ms apart at p99 at any depth
// that keeps up with the pods' creation, and only a depth that does not
// keep up (16) keeps them closer. The spread budget and the backlog decide
// between the two; an operator who wants the spread of 16 whatever the
// wait sets bindGate: Fixed.
//
// The floor keeps the gate useful when the signals are noise (the limit
// never goes below what binds a gang or two at a time), and a gang larger
// than the current limit is still admitted alone into an empty gate
// (admitLocked): a lower limit delays it at most until the gate drains.

const (
	// DefaultSpreadBudget is how far apart a gang's binding calls may
	// return before the limit is cut: half the 100 ms a gang may be seen
	// partly bound (issue 26), leaving the other half to what the watchers
	// add (informers, the API server's watch cache).
	DefaultSpreadBudget = 50 * time.Millisecond
	// DefaultGateFloor is the adaptive limit's default floor: one gang of 8
	// at a time.
	DefaultGateFloor = 8
	// latencyTolerance: the smoothed latency above this times its recent
	// minimum is taken for queueing inside the API server. Loose enough
	// that the noise of a shared machine (a GC pause, another process)
	// does not cut; a flood multiplies the latency by tens.
	latencyTolerance = 3.0
	// floodTolerance: the smoothed latency above this times its recent
	// minimum cuts the limit even while pods wait at the gate: the API
	// server is drowning (a flood of bindings, or something else), and more
	// bindings in flight would only queue inside it.
	floodTolerance = 6.0
	// cutFactor: the multiplicative decrease.
	cutFactor = 0.75
	// ewmaWeight: the smoothed latency takes 1/ewmaWeight of each call.
	ewmaWeight = 16
	// baselineBucket: the baseline is the smoothed latency's minimum over
	// the current bucket and the one before, 10 to 20 s.
	baselineBucket = 10 * time.Second
)

// latencyEstimate smooths the binding calls' latency and keeps its recent
// minimum.
type latencyEstimate struct {
	ewma            time.Duration // 0 until the first call
	curMin, prevMin time.Duration // minimum of ewma in the current and the previous bucket (0: none)
	bucketAt        time.Time     // start of the current bucket
	samples         int
}

func (e *latencyEstimate) observe(now time.Time, took time.Duration) {
	if took < 0 {
		took = 0
	}
	if e.samples == 0 {
		e.ewma = took
	} else {
		e.ewma += (took - e.ewma) / ewmaWeight
	}
	e.samples++
	if e.bucketAt.IsZero() || now.Sub(e.bucketAt) >= baselineBucket {
		if now.Sub(e.bucketAt) >= 2*baselineBucket {
			e.prevMin = 0 // idle for a whole bucket: nothing to carry over
		} else {
			e.prevMin = e.curMin
		}
		e.curMin, e.bucketAt = 0, now
	}
	if e.curMin == 0 || e.ewma < e.curMin {
		e.curMin = e.ewma
	}
}

func (e *latencyEstimate) smoothed() time.Duration { return e.ewma }

// baseline is the smoothed latency's minimum over the last 10-20 s (0 before
// any call).
func (e *latencyEstimate) baseline(now time.Time) time.Duration {
	b := e.curMin
	if e.prevMin > 0 && (b == 0 || e.prevMin < b) {
		b = e.prevMin
	}
	return b
}

// controller is the adaptive limit.
type controller struct {
	floor, ceiling float64
	limit          float64
	budget         time.Duration
	slowStart      bool
	lastCut        time.Time
	// lastQueued: gangs waiting at the gate when the last turn ended.
	lastQueued int
}

func newController(floor, ceiling int, budget time.Duration) *controller {
	if floor <= 0 {
		floor = DefaultGateFloor
	}
	floor = min(floor, ceiling)
	if budget <= 0 {
		budget = DefaultSpreadBudget
	}
	return &controller{floor: float64(floor), ceiling: float64(ceiling), limit: float64(floor), budget: budget, slowStart: true}
}

// current is the limit in force.
func (c *controller) current() int { return int(c.limit) }

// turn learns from a gang's finished turn t (queuedGangs: gangs waiting at
// the gate now) and says why the limit moved ("" if it did not).
func (c *controller) turn(now time.Time, t *gateTicket, est *latencyEstimate, queuedGangs int) string {
	queued, growing := queuedGangs > 0, queuedGangs > c.lastQueued
	c.lastQueued = queuedGangs
	lat, base := est.smoothed(), est.baseline(now)
	wide := t.calls >= 2 && t.slow-t.fast > c.budget
	slow := base > 0 && float64(lat) > latencyTolerance*float64(base)
	flood := base > 0 && float64(lat) > floodTolerance*float64(base)
	// The gate is the bottleneck: this turn waited at the gate longer than
	// its calls took.
	backlog := t.at.Sub(t.arrived) > lat
	switch {
	case flood || ((wide || slow) && !backlog):
		if t.at.Before(c.lastCut) || now.Sub(c.lastCut) < lat {
			return "" // went out before the last cut took effect
		}
		c.limit = max(c.floor, c.limit*cutFactor)
		c.lastCut = now
		c.slowStart = false
		switch {
		case flood:
			return "latency far over baseline"
		case wide:
			return "gang spread over budget"
		}
		return "latency over baseline"
	case wide && !(backlog && growing):
		// Pods wait at the gate, but this gang's calls came back apart:
		// more calls in flight would spread the next gangs further. Hold,
		// unless the wait grows (above).
		return ""
	case !backlog && !t.waited && !queued:
		return "" // the limit held nothing back: no news about a higher one
	}
	if c.slowStart || backlog {
		c.limit += float64(t.calls)
	} else {
		c.limit += float64(t.calls) / c.limit
	}
	c.limit = min(c.limit, c.ceiling)
	if backlog {
		return "backlog at the gate, latency steady"
	}
	return "latency steady"
}

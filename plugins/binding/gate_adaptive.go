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
// The signals, both read from the binding calls' own durations (Release):
//
//   - A gang's spread: the slowest minus the fastest call of one gang's
//     turn. The members go out together (within a millisecond), so this
//     is how far apart the API server finished them: the quantity the gate
//     is for (a launcher sees the gang partly bound meanwhile). Above
//     SpreadBudget the API server is queueing our calls among others.
//   - The smoothed latency (an average over the last few calls) against
//     its own minimum over the last 10-20 s, the baseline: above
//     latencyTolerance times the baseline, the calls queue inside the API
//     server (Little's law: at a fixed throughput, latency grows with the
//     depth). This catches the floods, and gangs of one pod, which have no
//     spread. The baseline is a recent minimum, not the minimum since
//     start: the API server's unloaded latency is never seen while a burst
//     of creations is served beside the bindings, and a baseline from an
//     idle moment long ago would hold the limit at its floor for the whole
//     burst, which is the latency the fixed limit of 16 paid.
//
// The rules, applied when the last call of a gang's turn returns (one
// decision per turn, so a gang of 8 weighs as one observation, not 8
// correlated ones):
//
//   - Cut: on either signal, limit = max(floor, limit * cutFactor). At
//     most once per smoothed latency, and never for a turn admitted before
//     the last cut: its calls went out under the old limit, and one flood
//     must not cut the limit once per gang in it.
//   - Grow: when neither signal fired and the limit held something back
//     (this turn waited for room, or gangs are queued now). A gate that is
//     not full learns nothing about a higher limit, so it does not grow it
//     (TCP's congestion window validation): the limit stays near the depth
//     in use, and a flood that comes after a quiet spell meets that depth,
//     not the ceiling. Until the first cut the limit grows by the turn's
//     size (doubling about once per round trip, TCP's slow start, so a
//     fresh scheduler finds the knee within a few round trips); after it,
//     by the turn's size over the limit (about one pod per round trip).
//
// With additive increase a and multiplicative decrease b the limit settles
// where a fraction of about a/(limit*(1-b)) of the turns cut it: with gangs
// of 8 at a limit of 32, about 3% of the gangs see a spread above the
// budget, so the budget sits near the spread's 97th percentile.
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
	// cutFactor: the multiplicative decrease.
	cutFactor = 0.75
	// ewmaWeight: the smoothed latency takes 1/ewmaWeight of each call.
	ewmaWeight = 8
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

// turn learns from a gang's finished turn t (queued: gangs wait at the gate
// now) and says why the limit moved ("" if it did not).
func (c *controller) turn(now time.Time, t *gateTicket, est *latencyEstimate, queued bool) string {
	lat, base := est.smoothed(), est.baseline(now)
	wide := t.calls >= 2 && t.slow-t.fast > c.budget
	slow := base > 0 && float64(lat) > latencyTolerance*float64(base)
	if wide || slow {
		if t.at.Before(c.lastCut) || now.Sub(c.lastCut) < lat {
			return "" // went out before the last cut took effect
		}
		c.limit = max(c.floor, c.limit*cutFactor)
		c.lastCut = now
		c.slowStart = false
		if wide {
			return "gang spread over budget"
		}
		return "latency over baseline"
	}
	if !t.waited && !queued {
		return "" // the limit held nothing back: no news about a higher one
	}
	if c.slowStart {
		c.limit += float64(t.calls)
	} else {
		c.limit += float64(t.calls) / c.limit
	}
	c.limit = min(c.limit, c.ceiling)
	return "latency steady"
}

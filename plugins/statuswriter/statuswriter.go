// Package statuswriter is what hivesched's background status writers (the
// VirtualClusters' and the AffinityGroups') share: the loop that writes a
// change shortly after it is announced, yet each object at most once per
// interval, with a pass every interval for what nobody announced; and
// comparing statuses but for their conditions' timestamps. The scheduling
// path only announces (Kick.Announce never blocks); it never writes.
package statuswriter

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Settle is how long a writer waits after a change is announced: the
// changes of one decision (a gang placed, its victims' pods going) land in
// one write.
const Settle = 100 * time.Millisecond

// Kick carries announcements that statuses may have changed; those that
// come while one is pending are one.
type Kick chan struct{}

// NewKick returns a Kick with room for the one pending announcement.
func NewKick() Kick { return make(Kick, 1) }

// Announce says that a status may have changed. It never blocks.
func (k Kick) Announce() {
	select {
	case k <- struct{}{}:
	default:
	}
}

// Run calls pass until ctx ends: Settle (at most every) after an
// announcement, every interval (all true: a pass over every object, for
// the time-driven changes), and when the time pass returned last comes
// (the first object a rate limit held back may be written then; zero:
// none waits). pass writes each object at most once per every itself.
func Run(ctx context.Context, every time.Duration, kick Kick, pass func(now time.Time, all bool) time.Time) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	held := time.NewTimer(every) // changes held back by the rate limit
	held.Stop()
	defer held.Stop()
	settle := min(Settle, every)
	for {
		all := false
		select {
		case <-ctx.Done():
			return
		case <-kick:
			select {
			case <-ctx.Done():
				return
			case <-time.After(settle):
			}
			select { // an announcement made while settling is in this pass
			case <-kick:
			default:
			}
		case <-tick.C:
			all = true
		case <-held.C:
		}
		if next := pass(time.Now(), all); !next.IsZero() {
			held.Reset(time.Until(next))
		}
	}
}

// Equal compares two statuses but for their conditions'
// LastTransitionTime (SetStatusCondition stamps a new condition with the
// time it is built, so a status built again would always differ);
// conditions returns a status's conditions.
func Equal[S any, P interface {
	*S
	DeepCopy() *S
}](a, b P, conditions func(P) []metav1.Condition) bool {
	a, b = P(a.DeepCopy()), P(b.DeepCopy())
	for _, cs := range [][]metav1.Condition{conditions(a), conditions(b)} {
		for i := range cs {
			cs[i].LastTransitionTime = metav1.Time{}
		}
	}
	return equality.Semantic.DeepEqual(a, b)
}

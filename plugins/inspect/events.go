package inspect

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
)

// EventLog keeps the scheduler's last few decisions an operator looks for
// (preemptions, lazy downgrades, placements given up, pending timeouts),
// as the scheduler emits them as Kubernetes events: a fixed number of
// entries in memory, the same event about several pods (a gang's) counted
// in one entry. Note is cheap (a lock and a copy): it runs on the
// scheduling path. A nil *EventLog records nothing.
type EventLog struct {
	mu      sync.Mutex
	entries []logged // a ring of at most size, next is the oldest once full
	next    int
	size    int
	now     func() time.Time
}

type logged struct {
	iv1.Event
	namespace string // of the object ("" for a VC)
}

// EventLogSize is how many entries an EventLog keeps.
const EventLogSize = 256

// loggedReasons are the events kept, and what they are.
var loggedReasons = map[string]bool{
	"Preempted":        true, // a victim pod of a preemption (its whole group is deleted)
	"LazilyPreempted":  true, // a pod of a group downgraded to opportunistic
	"Downgraded":       true, // on a VC: a group no longer fits it and runs as opportunistic
	"PlacementGivenUp": true, // a gang's placement given up after binding failures
	"PendingTimeout":   true, // a group pending longer than its timeout failed
}

// NewEventLog returns an empty log of EventLogSize entries.
func NewEventLog() *EventLog {
	return &EventLog{size: EventLogSize, now: time.Now}
}

// sameEventWindow: the same reason and message within it, about another
// object, counts in the entry already logged.
const sameEventWindow = 2 * time.Minute

// Note logs an event the scheduler emitted about obj, if it is of a kind
// the log keeps.
func (l *EventLog) Note(obj runtime.Object, eventType, reason, message string) {
	if l == nil || !loggedReasons[reason] {
		return
	}
	var ns, name string
	if m, err := meta.Accessor(obj); err == nil {
		ns, name = m.GetNamespace(), m.GetName()
	}
	object := name
	if ns != "" {
		object = ns + "/" + name
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	// The same event about the other pods of a gang comes right after.
	for k := 0; k < min(len(l.entries), 16); k++ {
		e := &l.entries[(l.next-1-k+2*len(l.entries))%len(l.entries)]
		if e.Reason == reason && e.Message == message && e.namespace == ns && now.Sub(e.LastTime) < sameEventWindow {
			e.Count++
			e.LastTime = now
			return
		}
	}
	e := logged{Event: iv1.Event{Time: now, LastTime: now, Reason: reason, Type: eventType, Object: object, Count: 1, Message: message}, namespace: ns}
	if len(l.entries) < l.size {
		l.entries = append(l.entries, e)
		l.next = len(l.entries) % l.size
		return
	}
	l.entries[l.next] = e
	l.next = (l.next + 1) % l.size
}

// list returns the entries newest first, those keep accepts.
func (l *EventLog) list(keep func(namespace string) bool) []logged {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]logged, 0, len(l.entries))
	for k := 0; k < len(l.entries); k++ {
		e := l.entries[(l.next-1-k+2*len(l.entries))%len(l.entries)]
		if keep(e.namespace) {
			out = append(out, e)
		}
	}
	return out
}

package binding

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Retries counts the binding failures of each group's members in a row
// and remembers the groups the scheduler gave up on.
type Retries struct {
	limit int

	mu     sync.Mutex
	groups map[string]*bindRecord
}

type bindRecord struct {
	failures map[types.UID]int // binding failures in a row, per member
	// gaveUp: the placement is abandoned; once no member is bound (the
	// bound ones are being deleted) the group is rolled back to Pending.
	gaveUp bool
}

// NewRetries gives a placement up at limit failures of a member in a row
// (at least one).
func NewRetries(limit int) *Retries {
	if limit < 1 {
		limit = 1
	}
	return &Retries{limit: limit, groups: map[string]*bindRecord{}}
}

// recordLocked returns the group's record, created if missing.
func (r *Retries) recordLocked(group string) *bindRecord {
	rec := r.groups[group]
	if rec == nil {
		rec = &bindRecord{failures: map[types.UID]int{}}
		r.groups[group] = rec
	}
	return rec
}

// Failed counts one binding failure of the member and returns its failures
// in a row and whether that reaches the limit.
func (r *Retries) Failed(group string, uid types.UID) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.recordLocked(group)
	rec.failures[uid]++
	n := rec.failures[uid]
	return n, n >= r.limit
}

// Bound forgets a member's failures: its binding went through.
func (r *Retries) Bound(group string, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.groups[group]; rec != nil && !rec.gaveUp {
		delete(rec.failures, uid)
		if len(rec.failures) == 0 {
			delete(r.groups, group)
		}
	}
}

// GiveUp marks the group's placement abandoned.
func (r *Retries) GiveUp(group string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.recordLocked(group)
	rec.gaveUp = true
}

// GaveUp reports whether the group's placement is abandoned.
func (r *Retries) GaveUp(group string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.groups[group]
	return rec != nil && rec.gaveUp
}

// Forget drops everything about the group: it went back to Pending, or
// it is gone.
func (r *Retries) Forget(group string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.groups, group)
}

// Limit is how many failures of a member in a row give the placement up.
func (r *Retries) Limit() int { return r.limit }

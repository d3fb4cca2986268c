// Package selfcheck notices when the cluster refuses the scheduler's own
// writes: a placement record patched onto a pod, a Binding that carries it,
// a record rewritten after a lazy downgrade. Those writes are exempt from
// hivesched's admission policies only for whoever RBAC lets write
// placements.hivesched.io (manifests/admission); a scheduler installed under
// an identity that lacks that right has every such write refused, and then
// binds nothing, or (a rewrite) lets a downgraded group recover as
// guaranteed. That is an installation error, not a pod's: it is reported
// where an operator looks (an error log line naming the write, the object
// and the policy's message; a counter; the scheduler's readiness), not only
// in one pod's events.
package selfcheck

import (
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Kinds of the scheduler's own writes.
const (
	WriteBinding   = "binding"   // a Binding with the placement record (Bind)
	WritePlacement = "placement" // the record patched onto the pod (PreBind)
	WriteDowngrade = "downgrade" // the record rewritten after a lazy downgrade
)

// Refused reports whether err is an admission refusal of a write: a
// ValidatingAdmissionPolicy's or a webhook's denial (Forbidden or Invalid,
// with the admission layer's message), as opposed to a conflict, a missing
// object or an RBAC denial of the verb (also Forbidden, but without an
// admission message).
func Refused(err error) bool {
	if err == nil || !(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "ValidatingAdmissionPolicy") || strings.Contains(msg, "admission webhook") ||
		strings.Contains(msg, "denied the request")
}

// Refusal is the last refused write of a kind.
type Refusal struct {
	Write   string
	Object  string // namespace/name
	Message string
	At      time.Time
}

// Writes follows the outcome of the scheduler's own writes, by kind.
type Writes struct {
	mu      sync.Mutex
	refused map[string]Refusal // per kind: refused, and no write of that kind succeeded since
	total   map[string]int64   // refusals per kind, ever
	now     func() time.Time
}

// New is a Writes with nothing refused.
func New() *Writes {
	return &Writes{refused: map[string]Refusal{}, total: map[string]int64{}, now: time.Now}
}

// Observe notes the outcome of one own write of kind write on object; it
// reports whether the write was refused by admission. A later success of the
// same kind clears the refusal (the policy or the RBAC was fixed).
func (w *Writes) Observe(write, object string, err error) bool {
	if w == nil {
		return Refused(err)
	}
	if err == nil {
		w.mu.Lock()
		delete(w.refused, write)
		w.mu.Unlock()
		return false
	}
	if !Refused(err) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refused[write] = Refusal{Write: write, Object: object, Message: err.Error(), At: w.now()}
	w.total[write]++
	return true
}

// Ready is nil while no kind of own write stands refused; otherwise it says
// which write of which object was refused, with the policy's message.
func (w *Writes) Ready() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var last *Refusal
	for _, r := range w.refused {
		if last == nil || r.At.After(last.At) {
			r := r
			last = &r
		}
	}
	if last == nil {
		return nil
	}
	return fmt.Errorf("the scheduler's own %s write of %s was refused by admission (is it the identity RBAC lets write placements.hivesched.io? manifests/admission): %s",
		last.Write, last.Object, last.Message)
}

// Totals are the refusals per kind since the start.
func (w *Writes) Totals() map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int64, len(w.total))
	for k, v := range w.total {
		out[k] = v
	}
	return out
}

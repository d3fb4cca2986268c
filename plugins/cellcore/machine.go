package cellcore

import "fmt"

// AGState is an affinity group state of the seed's AG state machine.
type AGState uint8

const (
	AGPending AGState = iota
	AGPreempting
	AGAllocated
	AGBeingPreempted
	AGDeleted
)

var agStateNames = [...]string{"Pending", "Preempting", "Allocated", "Being preempted", "Deleted"}

func (s AGState) String() string {
	if int(s) < len(agStateNames) {
		return agStateNames[s]
	}
	return fmt.Sprintf("AGState(%d)", s)
}

// Persistent reports whether the state survives a scheduler restart (seed:
// only Pending, Allocated and Deleted are recovery points).
func (s AGState) Persistent() bool {
	return s == AGPending || s == AGAllocated || s == AGDeleted
}

// AGEvent is an event of the AG state machine. e0-e8 and ec are the seed's;
// the x events are Kubernetes extensions, documented in docs/state-machines.md.
type AGEvent string

const (
	AGe0 AGEvent = "e0" // Pending -> Allocated: all chosen cells Free or Reserved
	AGe1 AGEvent = "e1" // Pending -> Preempting: some chosen cell Used or Reserving
	AGe2 AGEvent = "e2" // Preempting -> Allocated: all its cells Reserved
	AGe3 AGEvent = "e3" // Allocated -> Deleted: all pods deleted
	AGe4 AGEvent = "e4" // Being preempted -> Deleted: all pods deleted
	AGe5 AGEvent = "e5" // Preempting -> Pending: a reservation overwritten
	AGe6 AGEvent = "e6" // Allocated -> Being preempted: a cell Used -> Reserving
	AGe7 AGEvent = "e7" // Preempting -> Deleted: all pods deleted
	AGe8 AGEvent = "e8" // Pending -> Deleted: all pods deleted
	AGec AGEvent = "ec" // scheduler restart: volatile states fall back
	// AGx1 (rollback): Allocated -> Pending. The gang's members did not all
	// arrive (Permit timed out) before binding, so its allocation is undone.
	AGx1 AGEvent = "x1"
	// AGx2 (preemption cancelled): Being preempted -> Allocated. Every
	// preemptor that reserved this AG's cells went back to Pending or was
	// deleted (e5/e7 via cell e4), so no cell of it is Reserving any more.
	AGx2 AGEvent = "x2"
	// AGx3 (late member after recovery): Allocated -> Allocated. A group
	// recovered with fewer running pods than members gives a member that
	// arrives later Free cells next to the group's (cell e0).
	AGx3 AGEvent = "x3"
	// AGx4 (promotion, elastic gangs): Allocated -> Allocated. A member of
	// an elastic gang's minimum is gone while an extra pod of its size
	// runs: the extra takes its slot (PromoteExtra, docs/elastic.md).
	AGx4 AGEvent = "x4"
)

type agTransition struct {
	from []AGState
	to   AGState
}

// agTransitions is the AG state machine: for each event, the states it may
// fire in and the state it leads to. ec maps each volatile state to the
// persistent state it falls back to (see agRecoveryState).
var agTransitions = map[AGEvent]agTransition{
	AGe0: {[]AGState{AGPending}, AGAllocated},
	AGe1: {[]AGState{AGPending}, AGPreempting},
	AGe2: {[]AGState{AGPreempting}, AGAllocated},
	AGe3: {[]AGState{AGAllocated}, AGDeleted},
	AGe4: {[]AGState{AGBeingPreempted}, AGDeleted},
	AGe5: {[]AGState{AGPreempting}, AGPending},
	// A second cell of an AG already Being preempted may go Reserving too.
	AGe6: {[]AGState{AGAllocated, AGBeingPreempted}, AGBeingPreempted},
	AGe7: {[]AGState{AGPreempting}, AGDeleted},
	AGe8: {[]AGState{AGPending}, AGDeleted},
	AGx1: {[]AGState{AGAllocated}, AGPending},
	AGx2: {[]AGState{AGBeingPreempted}, AGAllocated},
	AGx3: {[]AGState{AGAllocated}, AGAllocated},
	AGx4: {[]AGState{AGAllocated}, AGAllocated},
}

// agRecoveryState is ec: what a state becomes after a restart.
var agRecoveryState = map[AGState]AGState{
	AGPending:        AGPending,
	AGPreempting:     AGPending,
	AGAllocated:      AGAllocated,
	AGBeingPreempted: AGAllocated,
	AGDeleted:        AGDeleted,
}

// TransitionError is an illegal transition: the event does not fire in the
// current state. Operations check before they change anything, so such an
// error leaves the state as it was.
type TransitionError struct {
	Machine string // "affinity group" or "cell"
	Object  string
	State   string
	Event   string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("illegal %s transition: event %s in state %s (%s)", e.Machine, e.Event, e.State, e.Object)
}

// agNext returns the state event ev leads to from s, or an error.
func agNext(s AGState, ev AGEvent, name string) (AGState, error) {
	if ev == AGec {
		return agRecoveryState[s], nil
	}
	t, ok := agTransitions[ev]
	if ok {
		for _, f := range t.from {
			if f == s {
				return t.to, nil
			}
		}
	}
	return s, &TransitionError{Machine: "affinity group", Object: name, State: s.String(), Event: string(ev)}
}

// CellEvent is an event of the seed's cell state machine.
type CellEvent string

const (
	Celle0 CellEvent = "e0" // Free -> Used: AG e0
	Celle1 CellEvent = "e1" // Used -> Free: AG e3 / e4
	Celle2 CellEvent = "e2" // Used -> Reserving: AG e1 preempts the user
	Celle3 CellEvent = "e3" // Reserving -> Reserving: AG e1 overwrites a preemptor
	Celle4 CellEvent = "e4" // Reserving -> Used: the preemptor goes Pending (e5) or Deleted (e7)
	Celle5 CellEvent = "e5" // Free -> Reserved: AG e1
	Celle6 CellEvent = "e6" // Reserved -> Reserved: AG e1 overwrites a preemptor
	Celle7 CellEvent = "e7" // Reserved -> Free: the preemptor goes Pending (e5) or Deleted (e7)
	Celle8 CellEvent = "e8" // Reserved -> Used: AG e0 takes it, or the preemptor's AG e2
	Celle9 CellEvent = "e9" // Reserving -> Reserved: the victim's pod on it is deleted
	Cellec CellEvent = "ec" // restart: cells are rebuilt from persisted allocations
)

type cellTransition struct{ from, to CellState }

// cellTransitions is the cell state machine.
var cellTransitions = map[CellEvent]cellTransition{
	Celle0: {CellFree, CellUsed},
	Celle1: {CellUsed, CellFree},
	Celle2: {CellUsed, CellReserving},
	Celle3: {CellReserving, CellReserving},
	Celle4: {CellReserving, CellUsed},
	Celle5: {CellFree, CellReserved},
	Celle6: {CellReserved, CellReserved},
	Celle7: {CellReserved, CellFree},
	Celle8: {CellReserved, CellUsed},
	Celle9: {CellReserving, CellReserved},
}

// cellTransitionsByDigit is cellTransitions indexed by the digit of the
// event's name (e0 to e9): setLeaf looks one up for every leaf it changes,
// and hashing the name cost more than the rest of the change.
var cellTransitionsByDigit = func() (byDigit [10]*cellTransition) {
	for ev, t := range cellTransitions {
		if len(ev) != 2 || ev[0] != 'e' || ev[1] < '0' || ev[1] > '9' {
			panic("cell event " + string(ev) + " is not named e0 to e9")
		}
		byDigit[ev[1]-'0'] = &t
	}
	return byDigit
}()

// cellCheck returns the state event ev leads to from c's, or an error.
func cellCheck(c *Cell, ev CellEvent) (CellState, error) {
	var t *cellTransition
	if len(ev) == 2 && ev[0] == 'e' && ev[1] >= '0' && ev[1] <= '9' {
		t = cellTransitionsByDigit[ev[1]-'0']
	}
	if t == nil || t.from != c.state {
		return c.state, &TransitionError{Machine: "cell", Object: c.ID(), State: c.state.String(), Event: string(ev)}
	}
	return t.to, nil
}

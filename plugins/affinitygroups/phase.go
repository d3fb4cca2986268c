package affinitygroups

import (
	"fmt"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
)

// AffinityGroup phases follow YuniKorn's application states (seeds 001/002)
// with the seed's event names; docs/affinitygroups.md maps them to HiveD's
// AG states. The table is the whole machine: a transition not in it is a
// PhaseTransitionError, never a panic, and leaves the phase as it was.

// PhaseEvent is an event of the AffinityGroup phase machine (seed 002's).
type PhaseEvent string

const (
	// PhaseRun progresses a group to the next active phase: admitted
	// (New -> Accepted), first member bound (Accepted -> Starting), every
	// member bound (Starting -> Running), members back after some finished
	// (Completing -> Running).
	PhaseRun PhaseEvent = "Run"
	// PhaseReject refuses a New group (its VC refuses it, its request is
	// invalid).
	PhaseReject PhaseEvent = "Reject"
	// PhaseComplete marks members finished successfully (Running or
	// Starting -> Completing), then the whole group (Completing -> Completed).
	PhaseComplete PhaseEvent = "Complete"
	// PhaseFail marks the group failed (a member failed, preempted, pending
	// timeout, pods deleted while running): -> Failing, then Failing ->
	// Failed once it holds no cells and no bound pod.
	PhaseFail PhaseEvent = "Fail"
	// PhaseExpire ends a finished group after the retention time.
	PhaseExpire PhaseEvent = "Expire"
)

type phaseTransition struct {
	from []hv1.AffinityGroupPhase
	to   hv1.AffinityGroupPhase
}

// phaseTransitions is the AffinityGroup phase machine.
var phaseTransitions = []struct {
	ev PhaseEvent
	phaseTransition
}{
	{PhaseRun, phaseTransition{[]hv1.AffinityGroupPhase{hv1.AffinityGroupNew}, hv1.AffinityGroupAccepted}},
	{PhaseRun, phaseTransition{[]hv1.AffinityGroupPhase{hv1.AffinityGroupAccepted}, hv1.AffinityGroupStarting}},
	{PhaseRun, phaseTransition{[]hv1.AffinityGroupPhase{hv1.AffinityGroupStarting, hv1.AffinityGroupCompleting}, hv1.AffinityGroupRunning}},
	{PhaseReject, phaseTransition{[]hv1.AffinityGroupPhase{hv1.AffinityGroupNew}, hv1.AffinityGroupRejected}},
	{PhaseComplete, phaseTransition{[]hv1.AffinityGroupPhase{hv1.AffinityGroupStarting, hv1.AffinityGroupRunning}, hv1.AffinityGroupCompleting}},
	{PhaseComplete, phaseTransition{[]hv1.AffinityGroupPhase{hv1.AffinityGroupCompleting}, hv1.AffinityGroupCompleted}},
	{PhaseFail, phaseTransition{[]hv1.AffinityGroupPhase{hv1.AffinityGroupNew, hv1.AffinityGroupAccepted, hv1.AffinityGroupStarting,
		hv1.AffinityGroupRunning, hv1.AffinityGroupCompleting}, hv1.AffinityGroupFailing}},
	{PhaseFail, phaseTransition{[]hv1.AffinityGroupPhase{hv1.AffinityGroupFailing}, hv1.AffinityGroupFailed}},
	{PhaseExpire, phaseTransition{[]hv1.AffinityGroupPhase{hv1.AffinityGroupCompleted, hv1.AffinityGroupFailed, hv1.AffinityGroupRejected}, hv1.AffinityGroupExpired}},
}

// AllPhases lists the phases in lifecycle order.
var AllPhases = []hv1.AffinityGroupPhase{hv1.AffinityGroupNew, hv1.AffinityGroupAccepted, hv1.AffinityGroupStarting, hv1.AffinityGroupRunning,
	hv1.AffinityGroupCompleting, hv1.AffinityGroupCompleted, hv1.AffinityGroupFailing, hv1.AffinityGroupFailed, hv1.AffinityGroupRejected,
	hv1.AffinityGroupExpired}

// PhaseTransitionError is an illegal phase transition.
type PhaseTransitionError struct {
	Group string
	Phase hv1.AffinityGroupPhase
	Event PhaseEvent
}

func (e *PhaseTransitionError) Error() string {
	return fmt.Sprintf("illegal affinity group phase transition: event %s in phase %s (%s)", e.Event, e.Phase, e.Group)
}

// NextPhase returns the phase event ev leads to from phase, or an error
// (and phase unchanged).
func NextPhase(group string, phase hv1.AffinityGroupPhase, ev PhaseEvent) (hv1.AffinityGroupPhase, error) {
	for _, t := range phaseTransitions {
		if t.ev != ev {
			continue
		}
		for _, f := range t.from {
			if f == phase {
				return t.to, nil
			}
		}
	}
	return phase, &PhaseTransitionError{Group: group, Phase: phase, Event: ev}
}

// terminalPhase: the group's lifecycle ended (its pods are not scheduled
// any more; pods created later start a new lifecycle).
func terminalPhase(p hv1.AffinityGroupPhase) bool {
	switch p {
	case hv1.AffinityGroupCompleted, hv1.AffinityGroupFailed, hv1.AffinityGroupRejected, hv1.AffinityGroupExpired:
		return true
	}
	return false
}

// phaseObservation is what the status writer sees of a group: the phase it
// should be in is reached from the current one by a path of the table.
type phaseObservation struct {
	admitted  bool // the VC admitted it (the core knows it)
	rejected  bool // refused before it was admitted
	failed    bool // failure seen (member failed, preempted, timed out, deleted while running)
	total     int  // members asked for
	bound     int  // members with a node, not finished
	succeeded int  // members finished successfully
	live      int  // member pods that exist and have not finished
	holds     bool // the core holds cells for it (Allocated, Being preempted, Preempting)
	ended     bool // it ran and every pod was deleted on purpose (by its owner, a user)
}

// advancePhase moves phase along the table as far as obs allows and returns
// the events fired, in order. Every step goes through NextPhase.
func advancePhase(group string, phase hv1.AffinityGroupPhase, obs phaseObservation) (hv1.AffinityGroupPhase, []PhaseEvent, error) {
	var fired []PhaseEvent
	step := func(ev PhaseEvent) error {
		next, err := NextPhase(group, phase, ev)
		if err != nil {
			return err
		}
		phase = next
		fired = append(fired, ev)
		return nil
	}
	for range len(AllPhases) + 1 { // each step moves on: the table has no cycle longer than that without an observation change
		var ev PhaseEvent
		switch phase {
		case hv1.AffinityGroupNew:
			switch {
			case obs.failed:
				ev = PhaseFail
			case obs.rejected:
				ev = PhaseReject
			case obs.admitted || obs.bound > 0 || obs.ended:
				ev = PhaseRun
			}
		case hv1.AffinityGroupAccepted:
			switch {
			case obs.failed:
				ev = PhaseFail
			case obs.bound > 0 || obs.succeeded > 0 || obs.ended:
				ev = PhaseRun
			}
		case hv1.AffinityGroupStarting:
			switch {
			case obs.failed:
				ev = PhaseFail
			case obs.succeeded > 0 || obs.ended:
				ev = PhaseComplete
			case obs.bound >= obs.total:
				ev = PhaseRun
			}
		case hv1.AffinityGroupRunning:
			switch {
			case obs.failed:
				ev = PhaseFail
			case obs.succeeded > 0 || obs.ended:
				ev = PhaseComplete
			}
		case hv1.AffinityGroupCompleting:
			switch {
			case obs.failed:
				ev = PhaseFail
			case obs.live == 0 && !obs.holds:
				ev = PhaseComplete
			}
		case hv1.AffinityGroupFailing:
			// Pods that never bound hold nothing: they are left to their
			// owner and do not keep the group Failing.
			if obs.bound == 0 && !obs.holds {
				ev = PhaseFail
			}
		}
		if ev == "" {
			return phase, fired, nil
		}
		if err := step(ev); err != nil {
			return phase, fired, err
		}
	}
	return phase, fired, nil
}

package affinitygroups

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
)

// TestPhaseTransitions checks every (event, phase) pair against the table
// written out here with the seed's names: the legal ones lead where the
// table says, every other is a PhaseTransitionError that leaves the phase,
// and none panics.
func TestPhaseTransitions(t *testing.T) {
	const (
		New        = hv1.AffinityGroupNew
		Accepted   = hv1.AffinityGroupAccepted
		Starting   = hv1.AffinityGroupStarting
		Running    = hv1.AffinityGroupRunning
		Completing = hv1.AffinityGroupCompleting
		Completed  = hv1.AffinityGroupCompleted
		Failing    = hv1.AffinityGroupFailing
		Failed     = hv1.AffinityGroupFailed
		Rejected   = hv1.AffinityGroupRejected
		Expired    = hv1.AffinityGroupExpired
	)
	legal := map[PhaseEvent]map[hv1.AffinityGroupPhase]hv1.AffinityGroupPhase{
		PhaseRun:      {New: Accepted, Accepted: Starting, Starting: Running, Completing: Running},
		PhaseReject:   {New: Rejected},
		PhaseComplete: {Starting: Completing, Running: Completing, Completing: Completed},
		PhaseFail:     {New: Failing, Accepted: Failing, Starting: Failing, Running: Failing, Completing: Failing, Failing: Failed},
		PhaseExpire:   {Completed: Expired, Failed: Expired, Rejected: Expired},
		"Kill":        {},
		"":            {},
	}
	require.Len(t, AllPhases, 10)
	pairs := 0
	for ev, from := range legal {
		for _, ph := range append(AllPhases, "Bogus") {
			var got hv1.AffinityGroupPhase
			var err error
			require.NotPanics(t, func() { got, err = NextPhase("ns/g", ph, ev) })
			pairs++
			if to, ok := from[ph]; ok {
				require.NoError(t, err, "%s in %s", ev, ph)
				require.Equal(t, to, got, "%s in %s", ev, ph)
				continue
			}
			var te *PhaseTransitionError
			require.True(t, errors.As(err, &te), "%s in %s must be illegal: %v", ev, ph, err)
			require.Equal(t, ph, te.Phase)
			require.Equal(t, ev, te.Event)
			require.Equal(t, "ns/g", te.Group)
			require.Equal(t, ph, got, "an illegal event leaves the phase")
			require.Contains(t, err.Error(), "illegal affinity group phase transition")
		}
	}
	require.Equal(t, 7*11, pairs)
	// The table in phase.go has no other transition.
	n := 0
	for _, tr := range phaseTransitions {
		for _, f := range tr.from {
			require.Equal(t, tr.to, legal[tr.ev][f], "phaseTransitions %s from %s", tr.ev, f)
			n++
		}
	}
	total := 0
	for _, m := range legal {
		total += len(m)
	}
	require.Equal(t, total, n, "the table lists every legal transition once")
	// Final phases: Expired has no way out; Completed, Failed and Rejected
	// only expire.
	for _, ph := range []hv1.AffinityGroupPhase{Completed, Failed, Rejected, Expired} {
		require.True(t, terminalPhase(ph))
		for ev := range legal {
			if to, err := NextPhase("g", ph, ev); err == nil {
				require.Equal(t, PhaseExpire, ev, "%s leaves %s", ev, ph)
				require.Equal(t, Expired, to)
			}
		}
	}
	for _, ph := range []hv1.AffinityGroupPhase{New, Accepted, Starting, Running, Completing, Failing} {
		require.False(t, terminalPhase(ph))
	}
}

// TestAdvancePhase: the writer's observations move a group along the
// lifecycles a user sees, through the table only.
func TestAdvancePhase(t *testing.T) {
	cases := []struct {
		name  string
		from  hv1.AffinityGroupPhase
		obs   phaseObservation
		to    hv1.AffinityGroupPhase
		fired []PhaseEvent
	}{
		{"seen, not admitted yet", hv1.AffinityGroupNew, phaseObservation{total: 2, live: 2}, hv1.AffinityGroupNew, nil},
		{"admitted", hv1.AffinityGroupNew, phaseObservation{admitted: true, total: 2, live: 2}, hv1.AffinityGroupAccepted, []PhaseEvent{PhaseRun}},
		{"refused", hv1.AffinityGroupNew, phaseObservation{rejected: true, total: 2, live: 2}, hv1.AffinityGroupRejected, []PhaseEvent{PhaseReject}},
		{"refused later waits", hv1.AffinityGroupAccepted, phaseObservation{rejected: true, admitted: true, total: 2, live: 2}, hv1.AffinityGroupAccepted, nil},
		{"all bound at once", hv1.AffinityGroupNew, phaseObservation{admitted: true, holds: true, total: 2, bound: 2, live: 2}, hv1.AffinityGroupRunning,
			[]PhaseEvent{PhaseRun, PhaseRun, PhaseRun}},
		{"one of two bound", hv1.AffinityGroupAccepted, phaseObservation{admitted: true, holds: true, total: 2, bound: 1, live: 2}, hv1.AffinityGroupStarting,
			[]PhaseEvent{PhaseRun}},
		{"one finished", hv1.AffinityGroupRunning, phaseObservation{admitted: true, holds: true, total: 2, bound: 1, succeeded: 1, live: 1}, hv1.AffinityGroupCompleting,
			[]PhaseEvent{PhaseComplete}},
		{"all finished, cells free", hv1.AffinityGroupRunning, phaseObservation{admitted: true, total: 2, succeeded: 2}, hv1.AffinityGroupCompleted,
			[]PhaseEvent{PhaseComplete, PhaseComplete}},
		{"preempted, pods going", hv1.AffinityGroupRunning, phaseObservation{admitted: true, failed: true, holds: true, total: 2, bound: 2, live: 2}, hv1.AffinityGroupFailing,
			[]PhaseEvent{PhaseFail}},
		{"preempted, gone", hv1.AffinityGroupRunning, phaseObservation{admitted: true, failed: true, total: 2}, hv1.AffinityGroupFailed,
			[]PhaseEvent{PhaseFail, PhaseFail}},
		{"pending timeout, pods left to their owner", hv1.AffinityGroupAccepted, phaseObservation{admitted: true, failed: true, total: 2, live: 2}, hv1.AffinityGroupFailed,
			[]PhaseEvent{PhaseFail, PhaseFail}},
		{"terminal stays", hv1.AffinityGroupCompleted, phaseObservation{failed: true}, hv1.AffinityGroupCompleted, nil},
		// Issue 46: a job its owner or a user deleted after it ran ended,
		// even one no write saw Running (deleted within a second).
		{"deleted on purpose while running", hv1.AffinityGroupRunning, phaseObservation{admitted: true, total: 2, ended: true}, hv1.AffinityGroupCompleted,
			[]PhaseEvent{PhaseComplete, PhaseComplete}},
		{"deleted on purpose before a write saw it run", hv1.AffinityGroupAccepted, phaseObservation{admitted: true, total: 2, ended: true}, hv1.AffinityGroupCompleted,
			[]PhaseEvent{PhaseRun, PhaseComplete, PhaseComplete}},
		{"deleted on purpose, never written", hv1.AffinityGroupNew, phaseObservation{total: 2, ended: true}, hv1.AffinityGroupCompleted,
			[]PhaseEvent{PhaseRun, PhaseRun, PhaseComplete, PhaseComplete}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			to, fired, err := advancePhase("ns/g", c.from, c.obs)
			require.NoError(t, err)
			require.Equal(t, c.to, to)
			require.Equal(t, c.fired, fired)
		})
	}
}

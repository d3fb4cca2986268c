package statuswriter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
)

// Statuses that differ only in when their conditions were stamped are
// equal, and neither is changed by the comparison.
func TestEqualIgnoresConditionTimes(t *testing.T) {
	conds := func(s *hv1.VirtualClusterStatus) []metav1.Condition { return s.Conditions }
	then := metav1.NewTime(time.Unix(1, 0))
	a := hv1.VirtualClusterStatus{TotalLeafCells: 8, Conditions: []metav1.Condition{{Type: "Admitted", Status: metav1.ConditionTrue, LastTransitionTime: then}}}
	b := *a.DeepCopy()
	b.Conditions[0].LastTransitionTime = metav1.Now()
	require.True(t, Equal(&a, &b, conds))
	require.Equal(t, then, a.Conditions[0].LastTransitionTime, "the statuses compared are not changed")
	b.Conditions[0].Status = metav1.ConditionFalse
	require.False(t, Equal(&a, &b, conds))
	b = *a.DeepCopy()
	b.TotalLeafCells = 16
	require.False(t, Equal(&a, &b, conds))
}

// An announcement is written after Settle, long before the interval ends;
// two made before the pass are one; a pass comes again when the last one
// said a held-back write is due.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type call struct {
		at  time.Time
		all bool
	}
	calls := make(chan call, 16)
	kick := NewKick()
	start := time.Now()
	var again time.Time
	go Run(ctx, time.Hour, kick, func(now time.Time, all bool) time.Time {
		calls <- call{now, all}
		if again.IsZero() {
			again = now.Add(10 * time.Millisecond) // held back: due then
			return again
		}
		return time.Time{}
	})
	kick.Announce()
	kick.Announce() // one pending: the same pass
	c := <-calls
	require.False(t, c.all)
	require.GreaterOrEqual(t, c.at.Sub(start), Settle)
	c = <-calls
	require.False(t, c.all, "the held-back write")
	require.False(t, c.at.Before(again))
	select {
	case c := <-calls:
		t.Fatalf("an unexpected pass at %v", c.at.Sub(start))
	case <-time.After(3 * Settle):
	}
}

package cellcore

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The preemption search stops at the first plan that reaches its floor (one
// victim of the lowest priority, as few used leaves as the free ones allow)
// and the plan is the full scan's (TestMain cross-checks every stop, and
// mustCheck reports a difference). A lower-priority preemptor's Reserved
// leaves would be free to take, so it switches the floor off.
func TestPreemptionStopsAtFloor(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(4, 8, 0))
	_, err := k.SetVirtualCluster(vcSpec("vc", "V100-RACK", 4))
	require.NoError(t, err)
	for i := 0; i < 8; i++ { // two 4x8 gangs a rack: every leaf used
		d, err := k.Schedule(ag(fmt.Sprintf("low-%d", i), "vc", 1, 4, 8))
		require.NoError(t, err)
		require.Equal(t, Placed, d.Kind, d.Reason)
		bindAll(t, k, d)
	}
	mustCheck(t, k)

	preempt := func(name string, prio int32) Decision {
		t.Helper()
		d, err := k.Schedule(ag(name, "vc", prio, 4, 8))
		require.NoError(t, err)
		require.Equal(t, Preempt, d.Kind, d.Reason)
		require.Len(t, d.Victims, 1, "one whole low gang frees four nodes")
		mustCheck(t, k)
		return d
	}

	hits := preemptFloorHits.Load()
	preempt("high-0", 100)
	require.Equal(t, hits+1, preemptFloorHits.Load(), "the first plan with one victim ends the scan")
	// A Preempting group of the same priority: its Reserved leaves are not
	// takeable, the floor still holds.
	preempt("high-1", 100)
	require.Equal(t, hits+2, preemptFloorHits.Load())

	// A lower-priority preemptor exists: its leaves could be taken without
	// cost, so there is no floor and the scan runs in full.
	k2 := newHealthyCore(t, clusterConfig(4, 8, 0))
	_, err = k2.SetVirtualCluster(vcSpec("vc", "V100-RACK", 4))
	require.NoError(t, err)
	for i := 0; i < 8; i++ {
		d, err := k2.Schedule(ag(fmt.Sprintf("low-%d", i), "vc", 1, 4, 8))
		require.NoError(t, err)
		bindAll(t, k2, d)
	}
	d, err := k2.Schedule(ag("mid", "vc", 50, 4, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	hits = preemptFloorHits.Load()
	d, err = k2.Schedule(ag("high", "vc", 100, 4, 8))
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Equal(t, hits, preemptFloorHits.Load(), "no floor while a lower preemptor holds Reserved cells")
	mustCheck(t, k2)
}

package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/hivesched/hivesched/plugins/binding"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

// gauge is the value of the gauge name with the given labels, if reported.
func gauge(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// The cell gauges are read from a registered instance's core while it has
// recovered, and no longer once its context ends.
func TestCellGauges(t *testing.T) {
	core, err := cellcore.New(cellcore.Config{
		CellTypes:     map[string]cellcore.CellTypeSpec{"NODE": {ChildCellType: "GPU", ChildCellNumber: 4, IsNodeLevel: true}},
		PhysicalCells: []cellcore.PhysicalCellSpec{{CellType: "NODE", CellAddress: "n0"}},
	})
	require.NoError(t, err)
	recovered := false
	done := make(chan struct{})
	Register("test-scheduler", core, func() bool { return recovered }, done)
	total := map[string]string{"scheduler": "test-scheduler", "leaf_cell_type": "GPU", "state": "total"}
	_, ok := gauge(t, "hivesched_cluster_leaf_cells", total)
	require.False(t, ok, "not recovered: a standby reports nothing")
	recovered = true
	v, ok := gauge(t, "hivesched_cluster_leaf_cells", total)
	require.True(t, ok)
	require.Equal(t, 4.0, v)
	close(done)
	require.Eventually(t, func() bool {
		_, ok := gauge(t, "hivesched_cluster_leaf_cells", total)
		return !ok
	}, 5*time.Second, 10*time.Millisecond, "gone with its instance")
	// The counters take their labels as the plugin gives them.
	PlacementDecided(time.Now(), cellcore.Decision{Kind: cellcore.Placed}, nil)
	Downgraded("vc", 2)
	VictimGroup("vc")
	VictimPod("vc")
	Recovery(time.Millisecond, 1, 0, 0)
	NodeHealthChanged(cellcore.NodeBad)
	BindFailed("vc")
	BindGivenUp("vc")
	InternalError("schedule")
}

// The bind gate's gauges are read from a registered gate at scrape time,
// and no longer once its context ends.
func TestBindGateGauges(t *testing.T) {
	g := binding.NewGateWith(binding.GateConfig{Limit: 64, Adaptive: true, Floor: 8})
	done := make(chan struct{})
	RegisterBindGate("gate-scheduler", g.Stats, done)
	for bound, want := range map[string]float64{"current": 8, "floor": 8, "ceiling": 64} {
		v, ok := gauge(t, "hivesched_bind_gate_limit", map[string]string{"scheduler": "gate-scheduler", "bound": bound})
		require.True(t, ok, bound)
		require.Equal(t, want, v, bound)
	}
	require.NoError(t, g.Acquire(context.Background(), "a", false))
	v, ok := gauge(t, "hivesched_bind_gate_pods", map[string]string{"scheduler": "gate-scheduler", "state": "in_flight"})
	require.True(t, ok)
	require.Equal(t, 1.0, v)
	g.Release("a", 30*time.Millisecond)
	v, ok = gauge(t, "hivesched_bind_gate_latency_seconds", map[string]string{"scheduler": "gate-scheduler", "kind": "smoothed"})
	require.True(t, ok)
	require.InDelta(t, 0.03, v, 1e-9)
	BindingCall("gate-scheduler", 30*time.Millisecond)
	close(done)
	require.Eventually(t, func() bool {
		_, ok := gauge(t, "hivesched_bind_gate_limit", map[string]string{"scheduler": "gate-scheduler", "bound": "current"})
		return !ok
	}, 5*time.Second, 10*time.Millisecond, "gone with its instance")
}

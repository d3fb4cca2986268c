package hivesched

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
	// Registers client-go's leader election gauge, which leadingNow reads
	// (kube-scheduler's command imports it too; a binary built otherwise
	// must not lose the signal).
	_ "k8s.io/component-base/metrics/prometheus/clientgo/leaderelection"
	"k8s.io/klog/v2"
)

// awaitLeadership says that this process runs leader election: the plugin
// then recovers its state when the process starts leading, not in New
// (ensureRecovered says why). The scheduler command sets it from its
// configuration (cmd/hivesched-scheduler); a process without leader election
// (tests, a local cluster) recovers in New, as it is the only scheduler.
var awaitLeadership atomic.Bool

// AwaitLeadership makes plugins built from now on recover their state when
// the process starts leading (or first schedules, whichever comes first).
func AwaitLeadership(on bool) { awaitLeadership.Store(on) }

// leaderMetric is client-go's leader election gauge (component-base
// registers it in the legacy registry that kube-scheduler serves): 1 for a
// lease this process holds. It is set when the lease is acquired, just
// before kube-scheduler starts scheduling.
const leaderMetric = "leader_election_master_status"

// leadingNow reports whether this process holds a leader lease.
func leadingNow() bool {
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return false
	}
	for _, mf := range mfs {
		if mf.GetName() != leaderMetric {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetGauge().GetValue() == 1 {
				return true
			}
		}
	}
	return false
}

// recoverWhenLeading waits until the process leads, then recovers (the
// first scheduling cycle may have done it already).
func (p *HiveSched) recoverWhenLeading(ctx context.Context) {
	logger := klog.FromContext(ctx)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for !p.recovered.Load() {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !leadingNow() {
			continue
		}
		if err := p.ensureRecovered(ctx); err != nil {
			logger.Error(err, "recovering allocations on becoming leader; retrying")
			continue
		}
		logger.Info("leading: allocations recovered")
	}
}

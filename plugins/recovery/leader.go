package recovery

import (
	"k8s.io/component-base/metrics/legacyregistry"
	// Registers client-go's leader election gauge, which leadingNow reads
	// (kube-scheduler's command imports it too; a binary built otherwise
	// must not lose the signal).
	_ "k8s.io/component-base/metrics/prometheus/clientgo/leaderelection"
)

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

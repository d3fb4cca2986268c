package hivesched

import "sync/atomic"

// awaitLeadership says that this process runs leader election: the plugin
// then recovers its state when the process starts leading, not in New
// (ensureRecovered says why). The scheduler command sets it from its
// configuration (cmd/hivesched-scheduler); a process without leader election
// (tests, a local cluster) recovers in New, as it is the only scheduler.
var awaitLeadership atomic.Bool

// AwaitLeadership makes plugins built from now on recover their state when
// the process starts leading (or first schedules, whichever comes first).
func AwaitLeadership(on bool) { awaitLeadership.Store(on) }

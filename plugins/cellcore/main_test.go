package cellcore

import (
	"flag"
	"os"
	"testing"
)

// TestMain turns on the cross-checks: every preemption search that stops
// at its floor also runs in full, and every wait decision's reason is
// counted again leaf by leaf (waitReasonByWalk); a different plan or reason
// is an internal error that CheckInvariants reports (the model test calls
// it after every step). A run with -test.bench leaves the reasons alone:
// the benchmarks time them (and must build against older cores, which
// lack the hook).
func TestMain(m *testing.M) {
	flag.Parse()
	verifyPreemptFloor = true
	if flag.Lookup("test.bench").Value.String() == "" {
		verifyWaitReason = func(k *Core, g *AffinityGroup, reason string) {
			if walk := k.waitReasonByWalk(g); walk != reason {
				k.internalError("wait reason of %s: %q, counted leaf by leaf %q", g.Name(), reason, walk)
			}
		}
	}
	os.Exit(m.Run())
}

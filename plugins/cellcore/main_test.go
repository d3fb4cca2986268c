package cellcore

import (
	"os"
	"testing"
)

// TestMain turns on the cross-check of the preemption search's early stop:
// every search that stops at its floor also runs in full, and a different
// plan is an internal error that CheckInvariants reports (the model test
// calls it after every step).
func TestMain(m *testing.M) {
	verifyPreemptFloor = true
	os.Exit(m.Run())
}

package hivesched

import (
	v1 "k8s.io/api/core/v1"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// What a checker outside the scheduler needs to judge placements from API
// objects alone (test/chaos rebuilds a cell core from them, as a restarted
// scheduler would): the node health rules stay this package's, so the
// checker cannot drift from the scheduler.

// NodeHealthOf is the health the scheduler gives a node object.
func NodeHealthOf(n *v1.Node) cellcore.NodeHealth { return nodeHealth(n) }

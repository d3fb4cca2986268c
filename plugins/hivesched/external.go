package hivesched

import (
	v1 "k8s.io/api/core/v1"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// What a checker outside the scheduler needs to judge placements from API
// objects alone (test/chaos rebuilds a cell core from them, as a restarted
// scheduler would): the record's format and the node health rules stay this
// package's, so the checker cannot drift from the scheduler.

// RecordedPlacement decodes a bound pod's placement record as recovery reads
// it: its group's spec and the pod's cells. It does not verify the record's
// signature (PlacementSignature computes it).
func RecordedPlacement(pod *v1.Pod) (cellcore.AffinityGroupSpec, cellcore.RecoveredPod, error) {
	rec, err := decodePlacement(pod.Annotations[AnnotationPlacement])
	if err != nil {
		return cellcore.AffinityGroupSpec{}, cellcore.RecoveredPod{}, err
	}
	return rec.spec(), cellcore.RecoveredPod{PodKey: podrequest.PodKey(pod), Node: rec.Node, LeafCellIndices: rec.LeafCellIndices, Downgraded: rec.Downgraded}, nil
}

// NodeHealthOf is the health the scheduler gives a node object.
func NodeHealthOf(n *v1.Node) cellcore.NodeHealth { return nodeHealth(n) }

package hivesched

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

func TestNodeHealth(t *testing.T) {
	ready := func(s v1.ConditionStatus) *v1.Node {
		return &v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: s}}}}
	}
	require.Equal(t, cellcore.NodeHealthy, nodeHealth(ready(v1.ConditionTrue)))
	require.Equal(t, cellcore.NodeBad, nodeHealth(ready(v1.ConditionFalse)))
	require.Equal(t, cellcore.NodeBad, nodeHealth(ready(v1.ConditionUnknown)))
	require.Equal(t, cellcore.NodeUnknown, nodeHealth(&v1.Node{}))
	cordoned := ready(v1.ConditionTrue)
	cordoned.Spec.Unschedulable = true
	require.Equal(t, cellcore.NodeMaintenance, nodeHealth(cordoned))
	retired := ready(v1.ConditionTrue)
	retired.Labels = map[string]string{LabelHealth: "retired"}
	require.Equal(t, cellcore.NodeRetired, nodeHealth(retired))
}

func TestCellsSummaryNamesPinnedCells(t *testing.T) {
	spec := func(pinned ...string) hv1.VirtualClusterSpec {
		s := hv1.VirtualClusterSpec{VirtualCells: []hv1.VirtualCellSpec{{CellType: "V100-NODE", CellNumber: 2}, {CellType: "T4-NODE", CellNumber: 0}}}
		for _, id := range pinned {
			s.PinnedCells = append(s.PinnedCells, hv1.PinnedCellSpec{PinnedCellID: id})
		}
		return s
	}
	require.Equal(t, "2xV100-NODE", cellsSummary(spec()))
	require.Equal(t, "2xV100-NODE,pinned:r1-n3", cellsSummary(spec("r1-n3")))
	require.Equal(t, "2xV100-NODE,pinned:a,b,c", cellsSummary(spec("a", "b", "c")))
	require.Equal(t, "2xV100-NODE,pinned:a,b,+3", cellsSummary(spec("a", "b", "c", "d", "e")))
	require.Equal(t, "pinned:a", cellsSummary(hv1.VirtualClusterSpec{PinnedCells: []hv1.PinnedCellSpec{{PinnedCellID: "a"}}}))
}

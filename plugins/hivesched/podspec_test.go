package hivesched

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2/ktesting"

	"github.com/hivesched/hivesched/apis/config"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/internal/podtest"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

const gpu = podtest.GPU

var pod = podtest.Pod

// A request for a cell type that is not a leaf cell type is refused with its
// size in leaf cells.
func TestCheckLeafCellType(t *testing.T) {
	pc := config.PhysicalClusterSpec{CellTypes: map[string]config.CellTypeSpec{
		"V100-SWITCH": {ChildCellType: "V100", ChildCellNumber: 2},
		"V100-NODE":   {ChildCellType: "V100-SWITCH", ChildCellNumber: 4, IsNodeLevel: true},
		"T4-NODE":     {ChildCellType: "T4", ChildCellNumber: 4, IsNodeLevel: true},
	}}
	p := &HiveSched{nonLeafTypes: nonLeafCellTypes(pc)}
	require.Equal(t, map[string]leafCount{"V100-SWITCH": {"V100", 2}, "V100-NODE": {"V100", 8}, "T4-NODE": {"T4", 4}}, p.nonLeafTypes)
	for _, leaf := range []string{"", "V100", "T4", "H100"} { // unknown types are the core's to refuse
		require.NoError(t, p.checkLeafCellType(&podrequest.Request{Group: cellcore.AffinityGroupSpec{LeafCellType: leaf}}))
	}
	err := p.checkLeafCellType(&podrequest.Request{Group: cellcore.AffinityGroupSpec{LeafCellType: "V100-NODE"}})
	require.ErrorContains(t, err, `cell type "V100-NODE" is not a leaf cell type (one V100-NODE is 8 V100): ask for leaf cell type V100`)
}

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

// skuTypes (HiveD's, accepted and unused) whose name is not a leaf cell
// type are logged with the leaf cell types.
func TestWarnSkuTypes(t *testing.T) {
	pc := config.PhysicalClusterSpec{
		CellTypes: map[string]config.CellTypeSpec{"K80-NODE": {ChildCellType: "K80", ChildCellNumber: 4, IsNodeLevel: true}},
		SkuTypes:  map[string]v1.ResourceList{"K80": {"gpu": resource.MustParse("1")}, "K8O": {"gpu": resource.MustParse("1")}},
	}
	p := &HiveSched{nonLeafTypes: nonLeafCellTypes(pc)}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	p.warnSkuTypes(logger, pc)
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	require.Contains(t, logs, `skuType="K8O"`)
	require.Contains(t, logs, `leafCellTypes=["K80"]`)
	require.NotContains(t, logs, `skuType="K80"`)
}

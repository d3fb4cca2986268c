package cellspec

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2/ktesting"

	"github.com/hivesched/hivesched/apis/config"
)

// A request for a cell type that is not a leaf cell type is refused with its
// size in leaf cells.
func TestCheckLeafCellType(t *testing.T) {
	pc := config.PhysicalClusterSpec{CellTypes: map[string]config.CellTypeSpec{
		"V100-SWITCH": {ChildCellType: "V100", ChildCellNumber: 2},
		"V100-NODE":   {ChildCellType: "V100-SWITCH", ChildCellNumber: 4, IsNodeLevel: true},
		"T4-NODE":     {ChildCellType: "T4", ChildCellNumber: 4, IsNodeLevel: true},
	}}
	ct := NewCellTypes(pc)
	require.Equal(t, map[string]leafCount{"V100-SWITCH": {"V100", 2}, "V100-NODE": {"V100", 8}, "T4-NODE": {"T4", 4}}, ct.nonLeaf)
	for _, leaf := range []string{"", "V100", "T4", "H100"} { // unknown types are the core's to refuse
		require.NoError(t, ct.CheckLeafCellType(leaf))
	}
	err := ct.CheckLeafCellType("V100-NODE")
	require.ErrorContains(t, err, `cell type "V100-NODE" is not a leaf cell type (one V100-NODE is 8 V100): ask for leaf cell type V100`)
}

// skuTypes (HiveD's, accepted and unused) whose name is not a leaf cell
// type are logged with the leaf cell types.
func TestWarnSkuTypes(t *testing.T) {
	pc := config.PhysicalClusterSpec{
		CellTypes: map[string]config.CellTypeSpec{"K80-NODE": {ChildCellType: "K80", ChildCellNumber: 4, IsNodeLevel: true}},
		SkuTypes:  map[string]v1.ResourceList{"K80": {"gpu": resource.MustParse("1")}, "K8O": {"gpu": resource.MustParse("1")}},
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	NewCellTypes(pc).WarnSkuTypes(logger, pc)
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	require.Contains(t, logs, `skuType="K8O"`)
	require.Contains(t, logs, `leafCellTypes=["K80"]`)
	require.NotContains(t, logs, `skuType="K80"`)
}

// A node-level type answers to kubernetes.io/hostname unless the args name
// it otherwise; other levels answer to the key they are given, if any.
func TestConfigTopologyKeys(t *testing.T) {
	cfg := Config(config.PhysicalClusterSpec{CellTypes: map[string]config.CellTypeSpec{
		"V100-SWITCH": {ChildCellType: "V100", ChildCellNumber: 2},
		"V100-NODE":   {ChildCellType: "V100-SWITCH", ChildCellNumber: 4, IsNodeLevel: true},
		"V100-RACK":   {ChildCellType: "V100-NODE", ChildCellNumber: 2, TopologyKey: "topology.kubernetes.io/rack"},
		"T4-NODE":     {ChildCellType: "T4", ChildCellNumber: 4, IsNodeLevel: true, TopologyKey: "example.com/host"},
	}})
	keys := map[string]string{}
	for n, ct := range cfg.CellTypes {
		keys[n] = ct.TopologyKey
	}
	require.Equal(t, map[string]string{"V100-SWITCH": "", "V100-NODE": HostnameTopologyKey, "V100-RACK": "topology.kubernetes.io/rack", "T4-NODE": "example.com/host"}, keys)
}

package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// nvlinkCluster is two NVLink domains (cliques) of four 4-GPU trays,
// <prefix>-a0..a3 and <prefix>-b0..b3, the domain level keyed by the
// clique label (docs/nvlink.md).
func nvlinkCluster(prefix string) map[string]any {
	var cells []any
	for _, d := range []string{"a", "b"} {
		var trays []any
		for i := 0; i < 4; i++ {
			trays = append(trays, map[string]any{"cellAddress": fmt.Sprintf("%s-%s%d", prefix, d, i)})
		}
		cells = append(cells, map[string]any{"cellType": "GB-NVL", "cellAddress": "clique-" + d, "cellChildren": trays})
	}
	return map[string]any{
		"cellTypes": map[string]any{
			"GB-NODE": map[string]any{"childCellType": "GB200", "childCellNumber": 4, "isNodeLevel": true},
			"GB-NVL":  map[string]any{"childCellType": "GB-NODE", "childCellNumber": 4, "topologyKey": "nvidia.com/gpu.clique"},
		},
		"physicalCells": cells,
	}
}

// TestNVLinkDomainShortOfATray (issue 45): a tray the configuration names
// that does not exist (out for repair) is lost capacity, not Unknown: the
// VC whose domain is short sees it in its status (CellsLost, the tray
// named), its gang of the whole domain waits saying why, the other VC's
// gang gets a whole domain; once the tray is created, the short VC's gang
// is placed in its domain, whole.
func TestNVLinkDomainShortOfATray(t *testing.T) {
	c := startCluster(t)
	const ns = "nvl"
	for _, d := range []string{"a", "b"} {
		for i := 0; i < 4; i++ {
			if d == "b" && i == 3 {
				continue // nvl-b3 is out for repair
			}
			c.createNode(t, fmt.Sprintf("%s-%s%d", ns, d, i), "nvidia.com/gpu", 4, true)
		}
	}
	c.createNamespace(t, ns)
	c.createVC(t, "nvl-x", []string{ns}, "GB-NVL", 1)
	c.createVC(t, "nvl-y", []string{ns}, "GB-NVL", 1)
	c.startScheduler(t, nvlinkCluster(ns))

	// One of the two VCs is short of the absent tray: which one is the
	// free pool's choice.
	var short, whole string
	for _, vc := range []string{"nvl-x", "nvl-y"} {
		st := c.waitVCStatus(t, vc, func(st hv1.VirtualClusterStatus) bool { return cellsLost(st) != nil })
		if st.LostLeafCells > 0 {
			require.EqualValues(t, 4, st.LostLeafCells)
			require.Contains(t, cellsLost(st).Message, ns+"-b3")
			short = vc
		} else {
			whole = vc
		}
	}
	require.NotEmpty(t, short, "a VC sees the absent tray")
	require.NotEmpty(t, whole, "the other VC's domain is whole")

	gang := func(name, vc string) []*v1.Pod {
		ps := gangPods(ns, name, vc, 0, 4, 4)
		for _, p := range ps {
			p.Annotations[hivesched.AnnotationWithinTopology] = "nvidia.com/gpu.clique"
		}
		return ps
	}
	w := gang("w", whole)
	c.createPods(t, w)
	for _, n := range c.waitBound(t, w, 30*time.Second) {
		require.Regexp(t, "^"+ns+"-a", n, "the whole domain")
	}
	s := gang("s", short)
	c.createPods(t, s)
	c.waitEvent(t, s[0], "unhealthy hardware", 30*time.Second)
	c.requireUnbound(t, s, time.Second)

	c.createNode(t, ns+"-b3", "nvidia.com/gpu", 4, true)
	for _, n := range c.waitBound(t, s, 30*time.Second) {
		require.Regexp(t, "^"+ns+"-b", n, "its domain, whole again")
	}
	st := c.waitVCStatus(t, short, func(st hv1.VirtualClusterStatus) bool {
		return st.LostLeafCells == 0 && cellsLost(st) != nil && cellsLost(st).Status == metav1.ConditionFalse
	})
	require.EqualValues(t, 16, st.UsedLeafCells)
}

package devices

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/placement"
)

// oneNode is a core of one healthy 8-GPU node n0.
func oneNode(t *testing.T) *cellcore.Core {
	k, err := cellcore.New(cellcore.Config{
		CellTypes:     map[string]cellcore.CellTypeSpec{"V100-NODE": {ChildCellType: "V100", ChildCellNumber: 8, IsNodeLevel: true}},
		PhysicalCells: []cellcore.PhysicalCellSpec{{CellType: "V100-NODE", CellAddress: "n0"}},
	})
	require.NoError(t, err)
	require.NoError(t, k.SetNodeHealth("n0", cellcore.NodeHealthy))
	return k
}

// naming is a pod bound to n0 that requests gpus and carries annotations.
func naming(uid string, ann map[string]string, gpus int64) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid), Annotations: ann},
		Spec: v1.PodSpec{NodeName: "n0", Containers: []v1.Container{{Name: "c"}}}}
	if gpus > 0 {
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return p
}

func notHeld(*v1.Pod) bool { return false }

// TestPodsNamingDevicesAreForeign (issue 28, finding 3): a pod hivesched
// did not place that requests none of the leaf resource but names devices
// in hivesched's device annotations takes exactly those devices of its
// node: they are marked foreign (never placed on), the others stay free,
// entries that name no device of the node are ignored (a huge list costs
// nothing beyond the node's devices), and they are free again when it goes.
func TestPodsNamingDevicesAreForeign(t *testing.T) {
	k := oneNode(t)
	tr := New(k, "nvidia.com/gpu")
	logger := klog.Background()

	pod := naming("r", map[string]string{placement.AnnotationLeafCellIndices: "6, 7,x,-1", placement.AnnotationHivedIsolation: "7,99,2"}, 0)
	taken := tr.Foreign(pod, false, notHeld)
	require.Equal(t, Taken{Indices: []int32{2, 6, 7}, Via: []string{placement.AnnotationLeafCellIndices, placement.AnnotationHivedIsolation}, Ignored: 3}, taken)
	require.True(t, tr.Count(logger, pod, taken))
	d, _ := k.NodeDevicesOf("n0")
	require.Equal(t, []cellcore.DeviceRef{{LeafCellType: "V100", Index: 2}, {LeafCellType: "V100", Index: 6}, {LeafCellType: "V100", Index: 7}}, d.Claimed)
	require.Equal(t, []string{"health=foreign at 2,6,7"}, foreignLeaves(k))
	names, _ := tr.ForeignPodsOn([]string{"n0"}, 3)
	require.Equal(t, []string{"ns/r"}, names, "explained like any foreign pod")
	require.True(t, tr.Announce(pod.UID))

	// Held by the core (hivesched placed it): nothing. Requesting the
	// resource: counted by its request, as before. Gone: forgotten.
	require.True(t, tr.Foreign(pod, false, func(*v1.Pod) bool { return true }).None())
	require.Equal(t, Taken{Devices: 2}, tr.Foreign(naming("q", pod.Annotations, 2), false, notHeld))
	require.True(t, tr.Foreign(pod, true, notHeld).None())
	require.True(t, tr.Count(logger, pod, Taken{}))
	d, _ = k.NodeDevicesOf("n0")
	require.Empty(t, d.Claimed)
	require.Empty(t, foreignLeaves(k))

	// A list far longer than the node: its devices, once each.
	var b strings.Builder
	for i := 0; i < 50000; i++ {
		fmt.Fprintf(&b, "%d,", i%1000)
	}
	huge := naming("h", map[string]string{placement.AnnotationLeafCellIndices: b.String()}, 0)
	taken = tr.Foreign(huge, false, notHeld)
	require.Equal(t, []int32{0, 1, 2, 3, 4, 5, 6, 7}, taken.Indices)
	require.Equal(t, 50000-8*50, taken.Ignored)
	require.Nil(t, tr.Foreign(naming("none", nil, 0), false, notHeld).Indices, "a pod that names nothing takes nothing")
}

// Two foreign pods name one device, and a device claim (DRA) holds
// another: the node's named devices are the union; each stays taken until
// the last that names it goes.
func TestNamedDevicesBesideClaims(t *testing.T) {
	k := oneNode(t)
	tr := New(k, "nvidia.com/gpu")
	logger := klog.Background()
	a := naming("a", map[string]string{placement.AnnotationLeafCellIndices: "1,2"}, 0)
	b := naming("b", map[string]string{placement.AnnotationHivedIsolation: "2"}, 0)
	tr.Count(logger, a, tr.Foreign(a, false, notHeld))
	tr.Count(logger, b, tr.Foreign(b, false, notHeld))
	require.True(t, tr.SetClaimed(logger, "n0", []cellcore.DeviceRef{{Index: 2}, {Index: 5}}))
	require.Equal(t, []string{"health=foreign at 1,2,5"}, foreignLeaves(k))
	tr.Count(logger, a, Taken{})
	require.Equal(t, []string{"health=foreign at 2,5"}, foreignLeaves(k), "b still names 2")
	tr.Count(logger, b, Taken{})
	tr.SetClaimed(logger, "n0", nil)
	require.Empty(t, foreignLeaves(k))

	// Recovery counts afresh: the named devices are forgotten too.
	tr.Count(logger, a, tr.Foreign(a, false, notHeld))
	tr.ResetForeign(logger)
	require.Empty(t, foreignLeaves(k))
}

// foreignLeaves lists the leaves of n0 the core marks foreign.
func foreignLeaves(k *cellcore.Core) []string {
	var idx []string
	for _, r := range k.CellRecords(nil, "", "n0") {
		if r.Index() >= 0 && r.Health == "foreign" {
			idx = append(idx, fmt.Sprint(r.Index()))
		}
	}
	if len(idx) == 0 {
		return nil
	}
	return []string{"health=foreign at " + strings.Join(idx, ",")}
}

package podrequest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// checkParsed: whatever a tenant writes, a parsed request is one the core
// can take without allocating more than the bounds allow.
func checkParsed(t *testing.T, r *Request) {
	if r == nil {
		return
	}
	g := r.Group
	require.NotEmpty(t, g.Name)
	require.GreaterOrEqual(t, g.Priority, cellcore.OpportunisticPriority)
	require.LessOrEqual(t, g.Priority, cellcore.MaxPriority)
	require.GreaterOrEqual(t, r.LeafCellNumber, int32(0))
	require.GreaterOrEqual(t, r.CellLessPods, int32(0))
	require.NotEmpty(t, g.Members, "a group has members with cells (the core's)")
	pods := int64(r.CellLessPods)
	own := r.LeafCellNumber == 0 && r.CellLessPods > 0 // a member without cells
	for _, m := range g.Members {
		require.Positive(t, m.PodNumber)
		require.Positive(t, m.LeafCellNumber)
		pods += int64(m.PodNumber)
		own = own || m.LeafCellNumber == r.LeafCellNumber
	}
	require.LessOrEqual(t, pods, int64(cellcore.MaxPodsPerGroup))
	require.True(t, own, "the pod's own size is one of its group's")
}

// topologyAnnotations are the topology annotations the fuzzers write: the
// required ones (withinAnnotations) first, then the preferred ones, which
// are not read.
var topologyAnnotations = append(append([]string{}, withinAnnotations...), AnnotationKueuePreferredTopology, AnnotationKAIPreferredPlacement)

// FuzzParsePodNative: the native labels and annotations, and the GPU
// request, as a tenant may write them; within is written in the topology
// annotation topologyAnnotations[which % 5].
func FuzzParsePodNative(f *testing.F) {
	f.Add("vc1", "job", "4", "7", "true", "", uint8(0), int64(8))
	f.Add("vc1", "g", "2x8, 1x4", "-1", "false", "topology.kubernetes.io/rack", uint8(1), int64(4))
	f.Add("vc1", "", "", "", "", "nvidia.com/gpu.clique", uint8(2), int64(1))
	f.Add("vc1", "g", "2147483647", "1000", "", "topology.kubernetes.io/rack", uint8(3), int64(1))
	f.Add("vc1", "g", "2147483647x1,2147483647x1", "0", "", " ", uint8(0), int64(1))
	f.Add("", "g", "0", "99999", "maybe", "rack", uint8(4), int64(4294967300))
	f.Fuzz(func(t *testing.T, vc, group, members, prio, lazy, within string, which uint8, gpus int64) {
		labels := map[string]string{LabelVirtualCluster: vc}
		if group != "" {
			labels[LabelAffinityGroup] = group
		}
		ann := map[string]string{}
		topology := topologyAnnotations[int(which)%len(topologyAnnotations)]
		for k, v := range map[string]string{AnnotationGroupMembers: members, AnnotationPriority: prio, AnnotationLazyPreemption: lazy, topology: within} {
			if v != "" {
				ann[k] = v
			}
		}
		r, err := Parse(pod(labels, ann, gpus), gpu)
		if err != nil {
			require.Nil(t, r)
			require.NotEmpty(t, err.Error())
			return
		}
		checkParsed(t, r)
		if r != nil {
			want := ""
			if int(which)%len(topologyAnnotations) < len(withinAnnotations) {
				want = strings.TrimSpace(within)
			}
			require.Equal(t, want, r.Group.WithinTopologyKey, "a required key is the constraint, a preferred one none")
		}
	})
}

// FuzzParsePodHived: HiveD's pod-scheduling-spec (v1 and v2) as YAML.
func FuzzParsePodHived(f *testing.F) {
	f.Add("virtualCluster: vc1\npriority: -1\ngpuType: K80\ngpuNumber: 2\naffinityGroup:\n  name: g\n  members:\n  - {podNumber: 3, gpuNumber: 2}\n", int64(0))
	f.Add("virtualCluster: a\nleafCellNumber: 4", int64(4))
	f.Add("virtualCluster: a\nleafCellNumber: 4", int64(8))
	f.Add("version: v2\nvirtualCluster: a\npriority: 1\npodRootGroup:\n  name: g\n  pods:\n  - podMinNumber: 2\n    podMaxNumber: 2\n    cellsPerPod: {cellType: V100, cellNumber: 8}\n", int64(8))
	f.Add("virtualCluster: a\nleafCellNumber: 2147483647\naffinityGroup: {name: g, members: [{podNumber: 2147483647, leafCellNumber: 2147483647}]}", int64(0))
	f.Add("a: [", int64(0))
	f.Fuzz(func(t *testing.T, spec string, gpus int64) {
		r, err := Parse(pod(nil, map[string]string{HivedSpecAnnotation: spec}, gpus), v1.ResourceName(gpu))
		if err != nil {
			require.Nil(t, r)
			require.NotEmpty(t, err.Error())
			return
		}
		checkParsed(t, r)
		require.True(t, r.Hived)
	})
}

package podrequest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// lwsPod is a pod of LeaderWorkerSet ns/<set>'s replica group index as
// LWS v0.8.0 makes it: the leader StatefulSet's pod <set>-<index> (its
// group index set by LWS's pod webhook) or the worker StatefulSet
// <set>-<index>'s pod <set>-<index>-<worker>, with the set's name and size,
// and the labels of its template.
func lwsPod(set string, index, worker int, size int, gpus int64, template map[string]string) *v1.Pod {
	name := fmt.Sprintf("%s-%d", set, index)
	if worker > 0 {
		name = fmt.Sprintf("%s-%d", name, worker)
	}
	labels := map[string]string{LabelLWSName: set, LabelLWSGroupIndex: fmt.Sprint(index),
		"leaderworkerset.sigs.k8s.io/worker-index": fmt.Sprint(worker), "leaderworkerset.sigs.k8s.io/group-key": fmt.Sprintf("key-%d", index)}
	for k, v := range template {
		labels[k] = v
	}
	p := named(pod(labels, map[string]string{AnnotationLWSSize: fmt.Sprint(size)}, gpus), name)
	return p
}

// TestLeaderWorkerSet (issue 39): each replica group of a LeaderWorkerSet
// is one gang of its size, named after its leader, whose shape is read from
// its pods (a CPU leader is a member without leaf cells); never one gang
// across replicas.
func TestLeaderWorkerSet(t *testing.T) {
	vc := map[string]string{LabelVirtualCluster: "vc1"}
	var pods []*v1.Pod
	for g := 0; g < 2; g++ {
		pods = append(pods, lwsPod("serve", g, 0, 3, 0, vc), lwsPod("serve", g, 1, 3, 8, vc), lwsPod("serve", g, 2, 3, 8, vc))
	}
	r := NewResolver(gpu, Lookups{GangPods: gangPods(pods...)})
	for _, p := range pods {
		req, err := r.Read(p)
		require.NoError(t, err, p.Name)
		want := "ns/serve-0"
		if p.Labels[LabelLWSGroupIndex] == "1" {
			want = "ns/serve-1"
		}
		require.Equal(t, want, req.Group.Name, "one gang per replica group")
		require.Equal(t, "vc1", req.Group.VirtualCluster)
		require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}}, req.Group.Members, p.Name)
		require.Equal(t, int32(1), req.CellLessPods, "the CPU leader counts toward its group")
		require.Equal(t, 3, req.TotalPods())
	}

	// The leader alone (its workers not made yet): it waits, and says why.
	r = NewResolver(gpu, Lookups{GangPods: gangPods(pods[0])})
	_, err := r.Read(pods[0])
	require.True(t, IsAwaiting(err), "%v", err)
	require.ErrorContains(t, err, "LeaderWorkerSet ns/serve replica group 0 waits for its pods: 1 of its 3 exist")
	require.ErrorContains(t, err, "startupPolicy LeaderCreated")

	// Every pod with GPUs: the size is the gang.
	all := []*v1.Pod{lwsPod("llm", 0, 0, 2, 4, vc), lwsPod("llm", 0, 1, 2, 4, vc)}
	r = NewResolver(gpu, Lookups{GangPods: gangPods(all...)})
	req, err := r.Read(all[1])
	require.NoError(t, err)
	require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 4}}, req.Group.Members)
	require.Zero(t, req.CellLessPods)

	// Not hivesched's: no VC on its templates, no GPUs.
	plain := lwsPod("web", 0, 0, 2, 0, nil)
	req, err = NewResolver(gpu, Lookups{GangPods: gangPods(plain)}).Read(plain)
	require.NoError(t, err)
	require.Nil(t, req)
	_, ok := GangKeyOf(plain)
	require.False(t, ok, "an LWS pod of no VC is not counted")

	for name, tc := range map[string]struct {
		pod  *v1.Pod
		want string
	}{
		"a group label on the templates": {lwsPod("x", 0, 1, 2, 8, map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "x"}),
			`names affinity group "x" (label hivesched.io/affinity-group): its templates are every replica's`},
		"no group index": {func() *v1.Pod { p := lwsPod("x", 0, 0, 2, 8, vc); delete(p.Labels, LabelLWSGroupIndex); return p }(),
			"has no replica group index"},
		"a bad size": {func() *v1.Pod { p := lwsPod("x", 0, 0, 2, 8, vc); p.Annotations[AnnotationLWSSize] = "0"; return p }(),
			`annotation leaderworkerset.sigs.k8s.io/size="0" is not a positive number of pods`},
		"GPUs without a VC": {lwsPod("x", 0, 0, 2, 8, nil), "names no virtual cluster"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewResolver(gpu, Lookups{GangPods: gangPods(tc.pod)}).Read(tc.pod)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

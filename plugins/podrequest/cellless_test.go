package podrequest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	alphalisters "k8s.io/client-go/listers/scheduling/v1alpha3"
	schedlisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

// Gangs with members that ask for no leaf cells (issue 39): they count
// toward the gang, hold no cells, and the core's members are the others.

func TestCellLessNative(t *testing.T) {
	grp := map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "mpi"}
	shape := map[string]string{AnnotationGroupMembers: "2x8,1x0"}

	worker, err := Parse(pod(grp, shape, 8), gpu)
	require.NoError(t, err)
	launcher, err := Parse(pod(grp, shape, 0), gpu)
	require.NoError(t, err)
	for _, r := range []*Request{worker, launcher} {
		require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}}, r.Group.Members, "the core's members are those with cells")
		require.Equal(t, int32(1), r.CellLessPods)
		require.Equal(t, 3, r.TotalPods(), "the launcher counts toward the gang")
		require.Equal(t, "2x8,1x0", Shape(r))
	}
	require.Equal(t, worker.Group, launcher.Group, "every member asks for one group")
	require.True(t, launcher.CellLess())
	require.False(t, worker.CellLess())

	for name, tc := range map[string]struct {
		labels, ann map[string]string
		gpus        int64
		want        string
	}{
		"alone, no GPUs":            {map[string]string{LabelVirtualCluster: "vc1"}, nil, 0, "requests no nvidia.com/gpu"},
		"count form, no GPUs":       {grp, map[string]string{AnnotationGroupMembers: "3"}, 0, "write the gang's shape"},
		"no member with cells":      {grp, map[string]string{AnnotationGroupMembers: "3x0"}, 0, "no member that asks for leaf cells"},
		"no cell-less member":       {grp, map[string]string{AnnotationGroupMembers: "2x8"}, 0, "has no member of that size"},
		"negative size":             {grp, map[string]string{AnnotationGroupMembers: "2x8,1x-1"}, 8, "is not PODSxLEAFCELLS"},
		"too many cell-less":        {grp, map[string]string{AnnotationGroupMembers: "1x8,2147483647x0,2x0"}, 8, "more than the supported"},
		"worker of a missing shape": {grp, map[string]string{AnnotationGroupMembers: "1x0,2x4"}, 8, "has no member of that size"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(pod(tc.labels, tc.ann, tc.gpus), gpu)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestCellLessExplicit(t *testing.T) {
	ag := &hv1.AffinityGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns"}, Spec: hv1.AffinityGroupSpec{
		VirtualCluster: "vc", Members: []hv1.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}, {PodNumber: 1, LeafCellNumber: 0}}}}
	group := map[string]string{LabelAffinityGroup: "g"}
	head, err := FromAffinityGroup(explicitPod(0, group), ag, gpu)
	require.NoError(t, err)
	require.Equal(t, int32(1), head.CellLessPods)
	require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}}, head.Group.Members)
	require.Equal(t, 3, head.TotalPods())

	ag.Spec.Members = ag.Spec.Members[:1]
	_, err = FromAffinityGroup(explicitPod(0, group), ag, gpu)
	require.ErrorContains(t, err, "requests no nvidia.com/gpu")
}

// gangPods is a GangPods lookup over pods.
func gangPods(pods ...*v1.Pod) func(GangKey) []*v1.Pod {
	return func(k GangKey) []*v1.Pod {
		var out []*v1.Pod
		for _, p := range pods {
			if got, ok := GangKeyOf(p); ok && got == k {
				out = append(out, p)
			}
		}
		return out
	}
}

// named is p under another name and UID.
func named(p *v1.Pod, name string) *v1.Pod {
	p.Name, p.UID = name, types.UID(name)
	return p
}

func TestCellLessPodGroup(t *testing.T) {
	pg := &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "mpi", Namespace: "ns", Labels: map[string]string{LabelVirtualCluster: "vc1"}},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: 3}}
	lister := pglisters.NewPodGroupLister(store(t, pg))
	member := map[string]string{LabelPodGroup: "mpi"}
	launcher, w0, w1 := named(pod(member, nil, 0), "launcher"), named(pod(member, nil, 8), "worker-0"), named(pod(member, nil, 8), "worker-1")

	// As an MPIJob makes it: the workers first; they wait for the launcher.
	r := NewResolver(gpu, Lookups{PodGroups: func() pglisters.PodGroupLister { return lister }, GangPods: gangPods(w0, w1)})
	_, err := r.Read(w0)
	require.True(t, IsAwaiting(err), "%v", err)
	require.ErrorContains(t, err, "PodGroup ns/mpi waits for its pods: 2 of its 3 exist")

	r = NewResolver(gpu, Lookups{PodGroups: func() pglisters.PodGroupLister { return lister }, GangPods: gangPods(w0, w1, launcher)})
	for _, p := range []*v1.Pod{w0, w1, launcher} {
		req, err := r.Read(p)
		require.NoError(t, err, p.Name)
		require.Equal(t, "ns/mpi", req.Group.Name)
		require.Equal(t, "vc1", req.Group.VirtualCluster)
		require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}}, req.Group.Members, p.Name)
		require.Equal(t, int32(1), req.CellLessPods, p.Name)
		checkParsed(t, req)
	}

	// All with GPUs: minMember pods of each one's size, as before.
	g0, g1, g2 := named(pod(member, nil, 4), "a"), named(pod(member, nil, 4), "b"), named(pod(member, nil, 4), "c")
	r = NewResolver(gpu, Lookups{PodGroups: func() pglisters.PodGroupLister { return lister }, GangPods: gangPods(g0, g1, g2)})
	req, err := r.Read(g0)
	require.NoError(t, err)
	require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 3, LeafCellNumber: 4}}, req.Group.Members)
	require.Zero(t, req.CellLessPods)

	// More pods than the minimum, of several sizes: the launcher and the
	// oldest workers make the minimum, the pod beyond it is an extra of
	// its own size (elastic.go).
	extra := named(pod(member, nil, 4), "extra")
	extra.CreationTimestamp = metav1.NewTime(w0.CreationTimestamp.Add(time.Minute))
	r = NewResolver(gpu, Lookups{PodGroups: func() pglisters.PodGroupLister { return lister }, GangPods: gangPods(w0, w1, launcher, extra)})
	req, err = r.Read(w0)
	require.NoError(t, err)
	require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}}, req.Group.Members)
	require.Equal(t, int32(1), req.CellLessPods)
	req, err = r.Read(extra)
	require.NoError(t, err)
	require.Equal(t, "ns/mpi+extra", req.Group.Name)
	require.Equal(t, "ns/mpi", req.Group.ExtraOf)
	require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 4}}, req.Group.Members)
	require.Zero(t, req.CellLessPods)

	// No pod with GPUs.
	c0, c1, c2 := named(pod(member, nil, 0), "x"), named(pod(member, nil, 0), "y"), named(pod(member, nil, 0), "z")
	r = NewResolver(gpu, Lookups{PodGroups: func() pglisters.PodGroupLister { return lister }, GangPods: gangPods(c0, c1, c2)})
	_, err = r.Read(c0)
	require.ErrorContains(t, err, "none of the 3 pods of its minimum asks for leaf cells")
}

func TestCellLessWorkload(t *testing.T) {
	gang := &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "ray", Namespace: "ns", Labels: map[string]string{LabelVirtualCluster: "vc1"}},
		Spec: schedv1beta1.PodGroupSpec{SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: 3}}}}
	inGroup := func(p *v1.Pod, group string) *v1.Pod {
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
		return p
	}
	head := inGroup(named(pod(nil, nil, 0), "head"), "ray")
	w0, w1 := inGroup(named(pod(nil, nil, 4), "worker-0"), "ray"), inGroup(named(pod(nil, nil, 4), "worker-1"), "ray")
	wl := &Workloads{PodGroups: schedlisters.NewPodGroupLister(store(t, gang)), Workloads: schedlisters.NewWorkloadLister(store(t))}

	r := NewResolver(gpu, Lookups{Workloads: wl, GangPods: gangPods(head, w0)})
	_, err := r.Read(head)
	require.True(t, IsAwaiting(err), "%v", err)

	r = NewResolver(gpu, Lookups{Workloads: wl, GangPods: gangPods(head, w0, w1)})
	for _, p := range []*v1.Pod{head, w0, w1} {
		req, err := r.Read(p)
		require.NoError(t, err, p.Name)
		require.Equal(t, "ns/ray", req.Group.Name)
		require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 4}}, req.Group.Members)
		require.Equal(t, int32(1), req.CellLessPods)
	}

	// A composite whose initializer pod group asks for no GPU (Kubeflow
	// Trainer v2's dataset and model initializers).
	cpg := &schedv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", Labels: map[string]string{LabelVirtualCluster: "vc1"}},
		Spec: schedv1alpha3.CompositePodGroupSpec{SchedulingPolicy: schedv1alpha3.CompositePodGroupSchedulingPolicy{
			Gang: &schedv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 2}}}}
	child := func(name string, min int32) *schedv1beta1.PodGroup {
		return &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: schedv1beta1.PodGroupSpec{
			ParentCompositePodGroupName: ptr.To("train"),
			SchedulingPolicy:            schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: min}}}}
	}
	init0 := inGroup(named(pod(nil, nil, 0), "init-0"), "initializers")
	node0 := inGroup(named(pod(nil, nil, 8), "node-0"), "nodes")
	wl = &Workloads{PodGroups: schedlisters.NewPodGroupLister(store(t, child("initializers", 2), child("nodes", 2))),
		Workloads: schedlisters.NewWorkloadLister(store(t)), Composites: alphalisters.NewCompositePodGroupLister(store(t, cpg)),
		Pods: corelisters.NewPodLister(store(t, init0, node0))}
	r = NewResolver(gpu, Lookups{Workloads: wl})
	for _, p := range []*v1.Pod{init0, node0} {
		req, err := r.Read(p)
		require.NoError(t, err, p.Name)
		require.Equal(t, "ns/train", req.Group.Name)
		require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}}, req.Group.Members)
		require.Equal(t, int32(2), req.CellLessPods)
		require.Equal(t, 4, req.TotalPods())
	}
}

package podrequest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// A Ray cluster as KubeRay makes it (a CPU head, workers of two sizes, a
// PodGroup of minMember head + minReplicas), then scaled up by its
// autoscaler: the minimum is the head and the oldest workers, every pod
// added later is an extra of its own size; a pod keeps what it was placed
// as; a minimum short of a member takes the oldest extra.
func TestElasticMinimum(t *testing.T) {
	pg := &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "ray", Namespace: "ns", Labels: map[string]string{LabelVirtualCluster: "vc1"}},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: 3}}
	lister := pglisters.NewPodGroupLister(store(t, pg))
	member := map[string]string{LabelPodGroup: "ray"}
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	at := func(p *v1.Pod, minutes int) *v1.Pod {
		p.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(minutes) * time.Minute))
		return p
	}
	// The head is named after the workers and created with them: still
	// in the minimum (pods without GPUs first).
	head := at(named(pod(member, nil, 0), "z-head"), 0)
	big := at(named(pod(member, nil, 4), "gpu4-a"), 0)
	small := at(named(pod(member, nil, 1), "gpu1-a"), 0)
	big2 := at(named(pod(member, nil, 4), "gpu4-b"), 5)
	small2 := at(named(pod(member, nil, 1), "gpu1-b"), 6)
	cpu := at(named(pod(member, nil, 0), "cpu-extra"), 7)
	roles := map[string]Role{}
	lookups := func(pods ...*v1.Pod) Lookups {
		return Lookups{PodGroups: func() pglisters.PodGroupLister { return lister }, GangPods: gangPods(pods...),
			RecordedRole: func(p *v1.Pod) Role { return roles[p.Name] }}
	}
	r := NewResolver(gpu, lookups(head, big, small, big2, small2, cpu))
	for _, p := range []*v1.Pod{head, big, small} {
		req, err := r.Read(p)
		require.NoError(t, err, p.Name)
		require.Equal(t, "ns/ray", req.Group.Name, p.Name)
		require.Empty(t, req.Group.ExtraOf)
		require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 4}, {PodNumber: 1, LeafCellNumber: 1}}, req.Group.Members, p.Name)
		require.Equal(t, int32(1), req.CellLessPods)
	}
	for _, p := range []*v1.Pod{big2, small2} {
		req, err := r.Read(p)
		require.NoError(t, err, p.Name)
		require.Equal(t, "ns/ray+"+p.Name, req.Group.Name)
		require.Equal(t, "ns/ray", req.Group.ExtraOf)
		n, _ := LeafRequest(p, gpu)
		require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: int32(n)}}, req.Group.Members)
		require.Equal(t, 1, req.TotalPods())
	}
	req, err := r.Read(cpu)
	require.NoError(t, err)
	require.Nil(t, req, "an extra without GPUs is not hivesched's to place")

	// Placed as an extra, a pod stays one even when it is older than a
	// pod of the minimum; placed in the minimum, it stays there.
	bound := func(p *v1.Pod, role Role) {
		p.Spec.NodeName = "n1"
		roles[p.Name] = role
	}
	early := at(named(pod(member, nil, 4), "gpu4-early"), -10)
	bound(early, RoleExtra)
	bound(big, RoleMinimum)
	bound(small, RoleMinimum)
	bound(head, RoleMinimum)
	r = NewResolver(gpu, lookups(head, big, small, early))
	req, err = r.Read(early)
	require.NoError(t, err)
	require.Equal(t, "ns/ray", req.Group.ExtraOf)
	req, err = r.Read(big)
	require.NoError(t, err)
	require.Empty(t, req.Group.ExtraOf)

	// big is gone and early took its slot before its record said so: the
	// minimum takes the oldest extra, and the gang's shape is unchanged.
	r = NewResolver(gpu, lookups(head, small, early, big2))
	req, err = r.Read(early)
	require.NoError(t, err)
	require.Empty(t, req.Group.ExtraOf)
	require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 4}, {PodNumber: 1, LeafCellNumber: 1}}, req.Group.Members)
	req, err = r.Read(big2)
	require.NoError(t, err)
	require.Equal(t, "ns/ray", req.Group.ExtraOf)
}

func TestExtraGroupNames(t *testing.T) {
	require.Equal(t, "ns/ray+w-1", ExtraGroupName("ns/ray", "w-1"))
	require.Equal(t, "ns/ray", GangOfExtra("ns/ray+w-1"))
	require.Empty(t, GangOfExtra("ns/ray"))
}

// hivesched's own form: group-members is the minimum, max-members the most
// pods; the minimum is filled as its shape says, the rest are extras of any
// size, one too many is refused with why.
func TestNativeElastic(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	mk := func(name string, gpus int64, minutes int) *v1.Pod {
		p := named(pod(map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "job"},
			map[string]string{AnnotationGroupMembers: "2x8", AnnotationMaxMembers: "4"}, gpus), name)
		p.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(minutes) * time.Minute))
		return p
	}
	// A 4-GPU pod created first is no member of a 2x8 minimum.
	small, a, b, c, d := mk("small", 4, 0), mk("a", 8, 1), mk("b", 8, 1), mk("c", 8, 2), mk("d", 8, 3)
	r := NewResolver(gpu, Lookups{GangPods: gangPods(small, a, b, c, d)})
	for _, p := range []*v1.Pod{a, b} {
		req, err := r.Read(p)
		require.NoError(t, err, p.Name)
		require.Equal(t, "ns/job", req.Group.Name)
		require.Equal(t, []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}}, req.Group.Members)
	}
	for _, p := range []*v1.Pod{small, c} {
		req, err := r.Read(p)
		require.NoError(t, err, p.Name)
		require.Equal(t, "ns/job", req.Group.ExtraOf, p.Name)
		require.Equal(t, "ns/job+"+p.Name, req.Group.Name)
	}
	_, err := r.Read(d)
	require.ErrorContains(t, err, "has more pods than its hivesched.io/max-members=4: this pod is one too many (its minimum is 2)")

	bad := mk("bad", 8, 0)
	bad.Annotations[AnnotationMaxMembers] = "1"
	_, err = NewResolver(gpu, Lookups{GangPods: gangPods(bad)}).Read(bad)
	require.ErrorContains(t, err, "annotation hivesched.io/max-members=1 is below the gang's minimum of 2 pods")
}

// BenchmarkElasticGangRead: one pod's request read in a PodGroup of 1,000
// pods (minMember 800, 200 extras): the minimum is sorted out of the
// gang's pods at every read (each pod is read once and kept).
func BenchmarkElasticGangRead(b *testing.B) {
	pg := &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "ns", Labels: map[string]string{LabelVirtualCluster: "vc1"}},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: 800}}
	lister := pglisters.NewPodGroupLister(store(b, pg))
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	var pods []*v1.Pod
	for i := 0; i < 1000; i++ {
		p := named(pod(map[string]string{LabelPodGroup: "big"}, nil, 8), fmt.Sprintf("w-%04d", i))
		p.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(i/100) * time.Second))
		pods = append(pods, p)
	}
	r := NewResolver(gpu, Lookups{PodGroups: func() pglisters.PodGroupLister { return lister }, GangPods: gangPods(pods...),
		RecordedRole: func(*v1.Pod) Role { return RoleNone }})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.Read(pods[i%len(pods)]); err != nil {
			b.Fatal(err)
		}
	}
}

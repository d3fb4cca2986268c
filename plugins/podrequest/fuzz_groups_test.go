package podrequest

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	alphalisters "k8s.io/client-go/listers/scheduling/v1alpha3"
	schedlisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	hv1listers "github.com/hivesched/hivesched/apis/generated/listers/hivesched/v1alpha1"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
)

// The request forms read from the objects a pod's group names, fuzzed as
// the pod's Resolver reads them (the objects in listers, as in the
// scheduler's informer caches): whatever a tenant writes into the objects
// and the pod, a request is refused with a message or is one the core can
// take (checkParsed), and nothing panics.

// store is an informer store of objects, for a lister.
func store(t testing.TB, objs ...runtime.Object) cache.Indexer {
	s := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		require.NoError(t, s.Add(o))
	}
	return s
}

// readChecked reads the pod's request through r and checks what it gives.
func readChecked(t *testing.T, r *Resolver, p *v1.Pod) *Request {
	req, err := r.Read(p)
	if err != nil {
		require.Nil(t, req)
		require.NotEmpty(t, err.Error())
		return nil
	}
	checkParsed(t, req)
	return req
}

// FuzzParsePodExplicit: a user-created AffinityGroup (the explicit form)
// and the pod that names it.
func FuzzParsePodExplicit(f *testing.F) {
	f.Add("g", "vc1", true, int32(3), "V100", "", false, "", int32(2), int32(8), int32(1), int32(4), "", int64(8))
	f.Add("g", "vc1", false, int32(0), "", "pin", true, "rack", int32(1), int32(4), int32(0), int32(0), "vc1", int64(4))
	f.Add("g", "", true, int32(-1), "", "", false, "", int32(0), int32(8), int32(0), int32(0), "other", int64(8))
	f.Add("g", "vc1", true, int32(5000), "", "", false, "", int32(2147483647), int32(1), int32(2147483647), int32(1), "", int64(1))
	f.Add("", "vc1", false, int32(0), "", "", false, "", int32(1), int32(1), int32(0), int32(0), "", int64(0))
	f.Fuzz(func(t *testing.T, name, vc string, hasPrio bool, prio int32, leafType, pinned string, lazy bool, within string,
		pods1, leaves1, pods2, leaves2 int32, podVC string, gpus int64) {
		ag := &hv1.AffinityGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: hv1.AffinityGroupSpec{
			VirtualCluster: vc, LeafCellType: leafType, PinnedCell: pinned, LazyPreemption: lazy, WithinTopologyKey: within,
			Members: []hv1.AffinityGroupMember{{PodNumber: pods1, LeafCellNumber: leaves1}}}}
		if hasPrio {
			ag.Spec.Priority = ptr.To(prio)
		}
		if pods2 != 0 || leaves2 != 0 {
			ag.Spec.Members = append(ag.Spec.Members, hv1.AffinityGroupMember{PodNumber: pods2, LeafCellNumber: leaves2})
		}
		labels := map[string]string{LabelAffinityGroup: name}
		if podVC != "" {
			labels[LabelVirtualCluster] = podVC
		}
		r := NewResolver(gpu, Lookups{AffinityGroups: hv1listers.NewAffinityGroupLister(store(t, ag))})
		if req := readChecked(t, r, pod(labels, nil, gpus)); req != nil && name != "" && vc != "" {
			require.Equal(t, "ns/"+name, req.Group.Name)
			require.Equal(t, vc, req.Group.VirtualCluster)
			require.Equal(t, within, req.Group.WithinTopologyKey)
		}
	})
}

// FuzzParsePodPodGroup: a scheduler-plugins PodGroup and the pod that names
// it (label scheduling.x-k8s.io/pod-group), with the pod's own annotations.
func FuzzParsePodPodGroup(f *testing.F) {
	f.Add("pg", int32(4), "vc1", "", "", "", int64(8))
	f.Add("pg", int32(2), "", "vc1", "7", "true", int64(4))
	f.Add("pg", int32(0), "vc1", "", "", "", int64(8))
	f.Add("pg", int32(2147483647), "vc1", "", "-1", "", int64(1))
	f.Add("pg", int32(3), "", "", "", "", int64(2))
	f.Add("", int32(1), "vc1", "", "x", "maybe", int64(0))
	f.Fuzz(func(t *testing.T, name string, minMember int32, pgVC, podVC, prio, lazy string, gpus int64) {
		pg := &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: pgv1alpha1.PodGroupSpec{MinMember: minMember}}
		if pgVC != "" {
			pg.Labels = map[string]string{LabelVirtualCluster: pgVC}
		}
		labels := map[string]string{LabelPodGroup: name}
		if podVC != "" {
			labels[LabelVirtualCluster] = podVC
		}
		ann := map[string]string{}
		for k, v := range map[string]string{AnnotationPriority: prio, AnnotationLazyPreemption: lazy} {
			if v != "" {
				ann[k] = v
			}
		}
		lister := pglisters.NewPodGroupLister(store(t, pg))
		r := NewResolver(gpu, Lookups{PodGroups: func() pglisters.PodGroupLister { return lister }})
		if req := readChecked(t, r, pod(labels, ann, gpus)); req != nil && name != "" && (pgVC != "" || podVC != "") {
			require.Equal(t, "ns/"+name, req.Group.Name)
			require.Equal(t, int(minMember), req.TotalPods())
		}
	})
}

// FuzzParsePodWorkload: a Workload API pod group (gang or basic), its
// Workload, and optionally the composite pod group it belongs to with a
// sibling pod group and its pod; the pod names its pod group
// (spec.schedulingGroup.podGroupName).
func FuzzParsePodWorkload(f *testing.F) {
	f.Add(true, int32(4), false, int32(0), "vc1", "", "", "", "", "", false, int32(0), int32(0), int64(0), "", int64(8))
	f.Add(false, int32(0), true, int32(50), "", "vc1", "", "3", "true", "", false, int32(0), int32(0), int64(0), "", int64(4))
	f.Add(true, int32(2), false, int32(0), "", "", "vc1", "", "", "rack", true, int32(2), int32(1), int64(4), "", int64(8))
	f.Add(true, int32(2), true, int32(-5), "vc1", "", "", "", "", "", true, int32(3), int32(2), int64(8), "", int64(8))
	f.Add(true, int32(0), false, int32(0), "vc1", "", "", "", "", "", false, int32(0), int32(0), int64(0), "", int64(8))
	f.Add(true, int32(2147483647), false, int32(0), "vc1", "", "", "", "", "", true, int32(2), int32(2147483647), int64(2147483647), "", int64(1))
	f.Add(true, int32(2), false, int32(0), "vc1", "", "", "", "", "", false, int32(0), int32(0), int64(0), "mine", int64(8))
	f.Fuzz(func(t *testing.T, gang bool, minCount int32, hasPrio bool, prio int32, pgVC, wlVC, podVC, prioAnn, lazyAnn, topology string,
		composite bool, minGroupCount, siblingMin int32, siblingGPUs int64, ownGroup string, gpus int64) {
		pg := &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "ns", Labels: map[string]string{}, Annotations: map[string]string{}},
			Spec: schedv1beta1.PodGroupSpec{WorkloadRef: &schedv1beta1.WorkloadReference{WorkloadName: "wl"}}}
		if gang {
			pg.Spec.SchedulingPolicy.Gang = &schedv1beta1.GangSchedulingPolicy{MinCount: minCount}
		} else {
			pg.Spec.SchedulingPolicy.Basic = &schedv1beta1.BasicSchedulingPolicy{}
		}
		if hasPrio {
			pg.Spec.Priority = ptr.To(prio)
		}
		if pgVC != "" {
			pg.Labels[LabelVirtualCluster] = pgVC
		}
		for k, v := range map[string]string{AnnotationPriority: prioAnn, AnnotationLazyPreemption: lazyAnn} {
			if v != "" {
				pg.Annotations[k] = v
			}
		}
		if topology != "" {
			pg.Spec.SchedulingConstraints = &schedv1beta1.PodGroupSchedulingConstraints{Topology: []schedv1beta1.TopologyConstraint{{Key: topology}}}
		}
		wl := &schedv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "wl", Namespace: "ns", Labels: map[string]string{LabelVirtualCluster: wlVC}}}

		labels := map[string]string{}
		if podVC != "" {
			labels[LabelVirtualCluster] = podVC
		}
		if ownGroup != "" {
			labels[LabelAffinityGroup] = ownGroup
		}
		p := pod(labels, nil, gpus)
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("pg")}
		pgs, pods, composites := []runtime.Object{pg}, []runtime.Object{p}, []runtime.Object{}
		if composite {
			pg.Spec.ParentCompositePodGroupName = ptr.To("cpg")
			cpg := &schedv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Name: "cpg", Namespace: "ns"},
				Spec: schedv1alpha3.CompositePodGroupSpec{SchedulingPolicy: schedv1alpha3.CompositePodGroupSchedulingPolicy{
					Gang: &schedv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: minGroupCount}}}}
			if topology != "" {
				cpg.Spec.SchedulingConstraints = &schedv1alpha3.CompositePodGroupSchedulingConstraints{Topology: []schedv1alpha3.TopologyConstraint{{Key: topology}}}
			}
			sibling := &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "sibling", Namespace: "ns"},
				Spec: schedv1beta1.PodGroupSpec{ParentCompositePodGroupName: ptr.To("cpg"),
					SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: siblingMin}}}}
			sp := pod(nil, nil, siblingGPUs)
			sp.Name, sp.UID = "sibling-0", "sibling-0"
			sp.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("sibling")}
			pgs, pods, composites = append(pgs, sibling), append(pods, sp), append(composites, cpg)
		}
		r := NewResolver(gpu, Lookups{Workloads: &Workloads{
			PodGroups:  schedlisters.NewPodGroupLister(store(t, pgs...)),
			Workloads:  schedlisters.NewWorkloadLister(store(t, wl)),
			Composites: alphalisters.NewCompositePodGroupLister(store(t, composites...)),
			Pods:       corelisters.NewPodLister(store(t, pods...)),
		}})
		req := readChecked(t, r, p)
		if req != nil && ownGroup == "" && gang && !composite {
			require.Equal(t, "ns/pg", req.Group.Name)
			require.Equal(t, int(minCount), req.TotalPods())
			require.Equal(t, topology, req.Group.WithinTopologyKey)
		}
	})
}

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
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	hv1listers "github.com/hivesched/hivesched/apis/generated/listers/hivesched/v1alpha1"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
)

// Topology constraints written as pod annotations (within.go): hivesched's
// own, Kueue's and KAI-Scheduler's required ones are the group's
// WithinTopologyKey in every form that reads the pod's annotations; the
// preferred ones constrain nothing; keys that disagree are refused with
// both named.

const (
	rack   = "topology.kubernetes.io/rack"
	clique = "nvidia.com/gpu.clique"
)

// gangOf2 is the labels and annotations of a native gang of two pods of
// vc1, with the annotations given added.
func gangOf2(ann map[string]string) (map[string]string, map[string]string) {
	a := map[string]string{AnnotationGroupMembers: "2"}
	for k, v := range ann {
		a[k] = v
	}
	return map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "g"}, a
}

func TestWithinAnnotationsNative(t *testing.T) {
	for name, c := range map[string]struct {
		ann  map[string]string
		want string
	}{
		"hivesched":                      {map[string]string{AnnotationWithinTopology: rack}, rack},
		"Kueue required":                 {map[string]string{AnnotationKueueRequiredTopology: rack}, rack},
		"KAI required":                   {map[string]string{AnnotationKAIRequiredPlacement: clique}, clique},
		"KAI required, its Topology CR":  {map[string]string{AnnotationKAIRequiredPlacement: clique, AnnotationKAITopology: "cluster-topology"}, clique},
		"Kueue preferred: no constraint": {map[string]string{AnnotationKueuePreferredTopology: rack}, ""},
		"KAI preferred: no constraint":   {map[string]string{AnnotationKAIPreferredPlacement: rack, AnnotationKAITopology: "cluster-topology"}, ""},
		"KAI required block, preferred rack: the required one": {map[string]string{
			AnnotationKAIRequiredPlacement: clique, AnnotationKAIPreferredPlacement: rack, AnnotationKAITopology: "t"}, clique},
		"a preferred key other than the required one is no conflict": {map[string]string{
			AnnotationWithinTopology: rack, AnnotationKueuePreferredTopology: clique}, rack},
		"all three, one key":   {map[string]string{AnnotationWithinTopology: rack, AnnotationKueueRequiredTopology: rack, AnnotationKAIRequiredPlacement: rack}, rack},
		"spaces around a key":  {map[string]string{AnnotationWithinTopology: " " + rack + " "}, rack},
		"no topology, no key":  {nil, ""},
		"other Kueue keys":     {map[string]string{"kueue.x-k8s.io/podset-unconstrained-topology": "true"}, ""},
		"unknown keys are ok":  {map[string]string{AnnotationWithinTopology: "example.com/zone"}, "example.com/zone"},
		"the node level's key": {map[string]string{AnnotationKueueRequiredTopology: "kubernetes.io/hostname"}, "kubernetes.io/hostname"},
	} {
		t.Run(name, func(t *testing.T) {
			labels, ann := gangOf2(c.ann)
			r, err := Parse(pod(labels, ann, 8), gpu)
			require.NoError(t, err)
			require.Equal(t, c.want, r.Group.WithinTopologyKey)
			checkParsed(t, r)
		})
	}

	// A pod alone is held alone: its own leaf cells inside one cell of the
	// level (meaningful below the node: one NVLink switch).
	r, err := Parse(pod(map[string]string{LabelVirtualCluster: "vc1"}, map[string]string{AnnotationWithinTopology: "example.com/switch"}, 4), gpu)
	require.NoError(t, err)
	require.Equal(t, "ns/p0", r.Group.Name)
	require.Equal(t, "example.com/switch", r.Group.WithinTopologyKey)

	// A plain pod with Kueue's annotation is not hivesched's: no error.
	r, err = Parse(pod(nil, map[string]string{AnnotationKueueRequiredTopology: rack}, 0), gpu)
	require.NoError(t, err)
	require.Nil(t, r)

	// HiveD's form is read as HiveD wrote it: the annotations are not read.
	r, err = Parse(pod(nil, map[string]string{HivedSpecAnnotation: "virtualCluster: vc1\nleafCellNumber: 8", AnnotationWithinTopology: rack,
		AnnotationKueueRequiredTopology: clique}, 0), gpu)
	require.NoError(t, err)
	require.True(t, r.Hived)
	require.Empty(t, r.Group.WithinTopologyKey)
}

func TestWithinAnnotationsNativeRefused(t *testing.T) {
	for name, c := range map[string]struct {
		ann  map[string]string
		want string
	}{
		"hivesched and Kueue disagree": {map[string]string{AnnotationWithinTopology: rack, AnnotationKueueRequiredTopology: clique},
			`annotations hivesched.io/within-topology="topology.kubernetes.io/rack" and kueue.x-k8s.io/podset-required-topology="nvidia.com/gpu.clique" name different topology levels: a gang stays inside one cell of one level; make them name the same node label key, or drop one`},
		"Kueue and KAI disagree": {map[string]string{AnnotationKueueRequiredTopology: rack, AnnotationKAIRequiredPlacement: clique},
			`annotations kueue.x-k8s.io/podset-required-topology="topology.kubernetes.io/rack" and kai.scheduler/topology-required-placement="nvidia.com/gpu.clique" name different topology levels`},
		"hivesched and KAI disagree, Kueue agrees with the first": {map[string]string{AnnotationWithinTopology: rack, AnnotationKueueRequiredTopology: rack, AnnotationKAIRequiredPlacement: clique},
			`annotations hivesched.io/within-topology="topology.kubernetes.io/rack" and kai.scheduler/topology-required-placement="nvidia.com/gpu.clique"`},
		"empty hivesched": {map[string]string{AnnotationWithinTopology: ""},
			"annotation hivesched.io/within-topology is empty: name the node label key of the topology level the gang must stay inside (one the scheduler's cell types declare as topologyKey, for example topology.kubernetes.io/rack), or drop it"},
		"blank Kueue": {map[string]string{AnnotationKueueRequiredTopology: "  "}, "annotation kueue.x-k8s.io/podset-required-topology is empty"},
		"empty KAI":   {map[string]string{AnnotationKAIRequiredPlacement: ""}, "annotation kai.scheduler/topology-required-placement is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			labels, ann := gangOf2(c.ann)
			r, err := Parse(pod(labels, ann, 8), gpu)
			require.Nil(t, r)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// A scheduler-plugins PodGroup's pods and a LeaderWorkerSet's are read
// through Parse: they inherit the annotations, and their refusals.
func TestWithinAnnotationsFrameworkGangs(t *testing.T) {
	pg := &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "ns", Labels: map[string]string{LabelVirtualCluster: "vc1"}},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: 2}}
	lister := pglisters.NewPodGroupLister(store(t, pg))
	r := NewResolver(gpu, Lookups{PodGroups: func() pglisters.PodGroupLister { return lister }})
	member := map[string]string{LabelPodGroup: "pg"}

	req, err := r.Read(pod(member, map[string]string{AnnotationKueueRequiredTopology: rack}, 8))
	require.NoError(t, err)
	require.Equal(t, "ns/pg", req.Group.Name)
	require.Equal(t, rack, req.Group.WithinTopologyKey)
	req, err = r.Read(pod(member, map[string]string{AnnotationKAIPreferredPlacement: rack}, 8))
	require.NoError(t, err)
	require.Empty(t, req.Group.WithinTopologyKey, "preferred: no constraint")
	_, err = r.Read(pod(member, map[string]string{AnnotationWithinTopology: rack, AnnotationKAIRequiredPlacement: clique}, 8))
	require.ErrorContains(t, err, `annotations hivesched.io/within-topology="topology.kubernetes.io/rack" and kai.scheduler/topology-required-placement="nvidia.com/gpu.clique" name different topology levels`)

	// With its pods' shape read from the gang (GangPods), the same.
	p0 := named(pod(member, map[string]string{AnnotationWithinTopology: clique}, 8), "a")
	p1 := named(pod(member, map[string]string{AnnotationWithinTopology: clique}, 8), "b")
	r = NewResolver(gpu, Lookups{PodGroups: func() pglisters.PodGroupLister { return lister }, GangPods: gangPods(p0, p1)})
	req, err = r.Read(p1)
	require.NoError(t, err)
	require.Equal(t, clique, req.Group.WithinTopologyKey)

	// A LeaderWorkerSet replica group: the annotation on its templates.
	vc := map[string]string{LabelVirtualCluster: "vc1"}
	leader, worker := lwsPod("serve", 0, 0, 2, 8, vc), lwsPod("serve", 0, 1, 2, 8, vc)
	for _, p := range []*v1.Pod{leader, worker} {
		p.Annotations[AnnotationKueueRequiredTopology] = clique
	}
	r = NewResolver(gpu, Lookups{GangPods: gangPods(leader, worker)})
	req, err = r.Read(worker)
	require.NoError(t, err)
	require.Equal(t, "ns/serve-0", req.Group.Name)
	require.Equal(t, clique, req.Group.WithinTopologyKey)

	// A native elastic gang's extra pod keeps the gang's constraint (the
	// core places it inside the gang's cell).
	el := func(name string) *v1.Pod {
		return named(pod(map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "el"},
			map[string]string{AnnotationGroupMembers: "1", AnnotationMaxMembers: "2", AnnotationWithinTopology: rack}, 8), name)
	}
	e0, e1 := el("e0"), el("e1")
	e1.CreationTimestamp = metav1.NewTime(e0.CreationTimestamp.Add(1e9))
	r = NewResolver(gpu, Lookups{GangPods: gangPods(e0, e1)})
	req, err = r.Read(e1)
	require.NoError(t, err)
	require.Equal(t, "ns/el", req.Group.ExtraOf)
	require.Equal(t, rack, req.Group.WithinTopologyKey)
}

// The explicit form: the AffinityGroup's spec is the request; an
// annotation must agree with it.
func TestWithinAnnotationsExplicit(t *testing.T) {
	ag := func(key string) *hv1.AffinityGroup {
		return &hv1.AffinityGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns"}, Spec: hv1.AffinityGroupSpec{
			VirtualCluster: "vc", WithinTopologyKey: key, Members: []hv1.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}}}}
	}
	withAnn := func(ann map[string]string) *v1.Pod {
		p := explicitPod(8, map[string]string{LabelAffinityGroup: "g"})
		for k, v := range ann {
			p.Annotations[k] = v
		}
		return p
	}
	for name, c := range map[string]struct {
		spec string
		ann  map[string]string
		want string
	}{
		"spec alone":                            {rack, nil, rack},
		"an annotation that agrees":             {rack, map[string]string{AnnotationKueueRequiredTopology: rack}, rack},
		"none anywhere":                         {"", nil, ""},
		"a preferred key other than the spec's": {rack, map[string]string{AnnotationKueuePreferredTopology: clique, AnnotationKAIPreferredPlacement: clique}, rack},
		"a preferred key, no spec key":          {"", map[string]string{AnnotationKAIPreferredPlacement: clique}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			req, err := FromAffinityGroup(withAnn(c.ann), ag(c.spec), gpu)
			require.NoError(t, err)
			require.Equal(t, c.want, req.Group.WithinTopologyKey)
		})
	}
	for name, c := range map[string]struct {
		spec string
		ann  map[string]string
		want string
	}{
		"another key": {rack, map[string]string{AnnotationKAIRequiredPlacement: clique},
			`pod's annotation kai.scheduler/topology-required-placement="nvidia.com/gpu.clique" disagrees with its AffinityGroup ns/g (withinTopologyKey "topology.kubernetes.io/rack"), whose spec is the group's request: drop the annotation or make them agree`},
		"a key the spec does not have": {"", map[string]string{AnnotationWithinTopology: rack},
			`pod's annotation hivesched.io/within-topology="topology.kubernetes.io/rack" asks to keep the gang inside one topology.kubernetes.io/rack cell, but its AffinityGroup ns/g has no spec.withinTopologyKey, and its spec is the group's request: set spec.withinTopologyKey: "topology.kubernetes.io/rack" on the AffinityGroup, or drop the annotation`},
		"annotations that disagree": {rack, map[string]string{AnnotationWithinTopology: rack, AnnotationKueueRequiredTopology: clique},
			"name different topology levels"},
	} {
		t.Run(name, func(t *testing.T) {
			req, err := FromAffinityGroup(withAnn(c.ann), ag(c.spec), gpu)
			require.Nil(t, req)
			require.ErrorContains(t, err, c.want)
		})
	}

	// Through the Resolver, as the plugin reads it.
	r := NewResolver(gpu, Lookups{AffinityGroups: hv1listers.NewAffinityGroupLister(store(t, ag(rack)))})
	_, err := r.Read(withAnn(map[string]string{AnnotationKueueRequiredTopology: clique}))
	require.ErrorContains(t, err, "disagrees with its AffinityGroup ns/g")
}

// The Workload API form: a gang's PodGroup (or composite) constraint and
// its pods' annotation; one may be left out, two must agree. A basic pod
// group's pod is a group alone, held alone by its annotation.
func TestWithinAnnotationsWorkload(t *testing.T) {
	pgOf := func(name, key string, gang bool, parent string) *schedv1beta1.PodGroup {
		pg := &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{LabelVirtualCluster: "vc1"}}}
		if gang {
			pg.Spec.SchedulingPolicy.Gang = &schedv1beta1.GangSchedulingPolicy{MinCount: 2}
		} else {
			pg.Spec.SchedulingPolicy.Basic = &schedv1beta1.BasicSchedulingPolicy{}
		}
		if key != "" {
			pg.Spec.SchedulingConstraints = &schedv1beta1.PodGroupSchedulingConstraints{Topology: []schedv1beta1.TopologyConstraint{{Key: key}}}
		}
		if parent != "" {
			pg.Spec.ParentCompositePodGroupName = ptr.To(parent)
		}
		return pg
	}
	podIn := func(group string, ann map[string]string) *v1.Pod {
		p := pod(nil, ann, 8)
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
		return p
	}
	read := func(p *v1.Pod, pgs ...runtime.Object) (*Request, error) {
		return NewResolver(gpu, Lookups{Workloads: &Workloads{
			PodGroups: schedlisters.NewPodGroupLister(store(t, pgs...)),
			Workloads: schedlisters.NewWorkloadLister(store(t)),
		}}).Read(p)
	}

	for name, c := range map[string]struct {
		pgKey string
		gang  bool
		ann   map[string]string
		want  string
	}{
		"the PodGroup's constraint alone":         {rack, true, nil, rack},
		"the pod's annotation alone":              {"", true, map[string]string{AnnotationKueueRequiredTopology: rack}, rack},
		"both, the same key":                      {rack, true, map[string]string{AnnotationKAIRequiredPlacement: rack}, rack},
		"a preferred key: the PodGroup's stands":  {rack, true, map[string]string{AnnotationKueuePreferredTopology: clique}, rack},
		"a preferred key alone: none":             {"", true, map[string]string{AnnotationKAIPreferredPlacement: clique}, ""},
		"a basic pod group's pod: held alone":     {"", false, map[string]string{AnnotationWithinTopology: clique}, clique},
		"a basic pod group's constraint: ignored": {rack, false, nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			req, err := read(podIn("pg", c.ann), pgOf("pg", c.pgKey, c.gang, ""))
			require.NoError(t, err)
			require.Equal(t, c.want, req.Group.WithinTopologyKey)
			checkParsed(t, req)
		})
	}

	_, err := read(podIn("pg", map[string]string{AnnotationKueueRequiredTopology: clique}), pgOf("pg", rack, true, ""))
	require.ErrorContains(t, err, `pod group ns/pg asks for topology "topology.kubernetes.io/rack" (schedulingConstraints.topology), but the pod's annotation kueue.x-k8s.io/podset-required-topology asks for "nvidia.com/gpu.clique": a gang stays inside one cell of one level; make them name the same key, or drop the annotation`)
	_, err = read(podIn("pg", map[string]string{AnnotationWithinTopology: rack, AnnotationKAIRequiredPlacement: clique}), pgOf("pg", "", true, ""))
	require.ErrorContains(t, err, "pod group ns/pg: annotations hivesched.io/within-topology=")
	require.ErrorContains(t, err, "name different topology levels")

	// A composite: its constraint holds the whole group; a pod's
	// annotation must agree with it.
	cpg := &schedv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", Labels: map[string]string{LabelVirtualCluster: "vc1"}},
		Spec: schedv1alpha3.CompositePodGroupSpec{
			SchedulingPolicy:      schedv1alpha3.CompositePodGroupSchedulingPolicy{Gang: &schedv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 1}},
			SchedulingConstraints: &schedv1alpha3.CompositePodGroupSchedulingConstraints{Topology: []schedv1alpha3.TopologyConstraint{{Key: rack}}}}}
	composite := func(ann map[string]string) (*Request, error) {
		p := podIn("nodes", ann)
		return NewResolver(gpu, Lookups{Workloads: &Workloads{
			PodGroups:  schedlisters.NewPodGroupLister(store(t, pgOf("nodes", "", true, "train"))),
			Workloads:  schedlisters.NewWorkloadLister(store(t)),
			Composites: alphalisters.NewCompositePodGroupLister(store(t, cpg)),
			Pods:       corelisters.NewPodLister(store(t, p)),
		}}).Read(p)
	}
	req, err := composite(map[string]string{AnnotationKueueRequiredTopology: rack})
	require.NoError(t, err)
	require.Equal(t, "ns/train", req.Group.Name)
	require.Equal(t, rack, req.Group.WithinTopologyKey)
	_, err = composite(map[string]string{AnnotationKueueRequiredTopology: clique})
	require.ErrorContains(t, err, `composite pod group ns/train asks for topology "topology.kubernetes.io/rack" (schedulingConstraints.topology), but the pod's annotation kueue.x-k8s.io/podset-required-topology asks for "nvidia.com/gpu.clique"`)
}

// The annotations a request is read from are in the pod's fingerprint
// (a changed one is read again); the ones not read are not.
func TestWithinAnnotationsFingerprint(t *testing.T) {
	labels, ann := gangOf2(nil)
	base := Fingerprint(pod(labels, ann, 8))
	for _, a := range withinAnnotations {
		_, with := gangOf2(map[string]string{a: rack})
		require.NotEqual(t, base, Fingerprint(pod(labels, with, 8)), a)
	}
	for _, a := range []string{AnnotationKueuePreferredTopology, AnnotationKAIPreferredPlacement, AnnotationKAITopology} {
		_, with := gangOf2(map[string]string{a: rack})
		require.Equal(t, base, Fingerprint(pod(labels, with, 8)), a)
	}
}

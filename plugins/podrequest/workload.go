package podrequest

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/labels"
)

// Kubernetes' Workload API gangs (scheduling.k8s.io/v1beta1, feature gate
// GenericWorkload; docs/affinitygroups.md "Workload API"). A pod joins a
// PodGroup through spec.schedulingGroup.podGroupName:
//
//   - a gang policy (minCount m) is one affinity group of m pods, each of
//     the pod's own size, named after the PodGroup;
//   - a basic policy schedules its pods one by one: each is an affinity
//     group alone, as a pod without a group label is.
//
// The VC comes from label hivesched.io/virtual-cluster on the PodGroup, else
// on its Workload, else on the pod; hivesched.io/ annotations on the
// PodGroup (priority, leaf cell type, pinned cell, lazy preemption) apply
// to all its pods; otherwise the priority is the PodGroup's (which the
// scheduler holds equal to its pods'), bounded to 0..1000 as a pod's is.
// A gang's topology constraint is its PodGroup's (or composite's)
// schedulingConstraints.topology, else its pods' topology annotation
// (within.go); if both name a key, they must agree. A basic pod group's
// pod is a group alone: its annotation holds the pod alone, as Parse reads
// it.

// annotationsFromPodGroup are the hivesched annotations a PodGroup may carry
// for all its pods.
var annotationsFromPodGroup = []string{AnnotationPriority, AnnotationLeafCellType, AnnotationPinnedCell, AnnotationLazyPreemption, AnnotationExtrasBeyondVC}

// PodGroupName is the Workload API pod group a pod names ("" if none).
func PodGroupName(pod *v1.Pod) string {
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		return *sg.PodGroupName
	}
	return ""
}

// awaitingError is a request that cannot be read until other objects exist
// (a composite pod group's other pods, whose sizes make its members).
type awaitingError struct{ msg string }

func (e *awaitingError) Error() string { return e.msg }

// Awaiting is an error that says the request waits for other objects to
// exist (msg says which), not for a fix of the pod: IsAwaiting is true.
func Awaiting(msg string) error { return &awaitingError{msg} }

// MissingPodGroupError: the pod names (spec.schedulingGroup.podGroupName)
// a Workload API PodGroup that does not exist in its namespace. The
// scheduler's queue keeps such a pod aside, so no scheduling cycle (and no
// FailedScheduling event) ever says why it waits: the plugin tells the pod
// once (IsMissingPodGroup).
type MissingPodGroupError struct {
	PodGroup string // its name, in the pod's namespace
	msg      string
}

func (e *MissingPodGroupError) Error() string { return e.msg }

// IsMissingPodGroup reports whether err says the pod's Workload API
// PodGroup does not exist, and returns its name.
func IsMissingPodGroup(err error) (string, bool) {
	var m *MissingPodGroupError
	if errors.As(err, &m) {
		return m.PodGroup, true
	}
	return "", false
}

// objectWaitError is a request that waits for one object (a
// scheduler-plugins PodGroup not created yet, or not served), whose arrival
// re-reads the pod through its release keys (ReleaseKeys): unlike an
// awaitingError, the read is kept until then, so that a pod's status
// updates do not read it again (issue 28).
type objectWaitError struct{ msg string }

func (e *objectWaitError) Error() string { return e.msg }

// WaitsForObject is an error that says the request waits for an object
// whose arrival re-reads the pod (msg says which): IsWaiting is true,
// IsAwaiting false.
func WaitsForObject(msg string) error { return &objectWaitError{msg} }

// IsWaiting reports whether err says the request waits for other objects
// (IsAwaiting, or WaitsForObject's), not for a fix of the pod: the pod is
// told it waits, never that its spec is invalid.
func IsWaiting(err error) bool {
	var o *objectWaitError
	return IsAwaiting(err) || errors.As(err, &o)
}

// IsAwaiting reports whether err says the request waits for other objects
// to exist, not for a fix of the pod: a read that is not to be kept, so
// that the next one sees them.
func IsAwaiting(err error) bool {
	var a *awaitingError
	return errors.As(err, &a)
}

// fromWorkload is the request of a pod that names a Workload API pod
// group; handled is false for a pod that names none, or whose group asks
// for no leaf cells and names no VC (a plain pod group, left to the other
// plugins).
func (r *Resolver) fromWorkload(pod *v1.Pod) (*Request, error, bool) {
	res, w := r.resource, r.lookups.Workloads
	name := PodGroupName(pod)
	if name == "" {
		return nil, nil, false
	}
	leaves, _ := LeafRequest(pod, res)
	own := ownGroupForm(pod)
	if w == nil {
		if own == "" && (leaves > 0 || pod.Labels[LabelVirtualCluster] != "") {
			return nil, fmt.Errorf("pod names pod group %q (spec.schedulingGroup.podGroupName) but the scheduler runs without feature gate GenericWorkload: enable it on the scheduler (README, \"Kubernetes versions\") or drop the field", name), true
		}
		return nil, nil, false
	}
	pg, err := w.PodGroups.PodGroups(pod.Namespace).Get(name)
	if own != "" {
		// The pod names its gang in hivesched's own way. A basic pod
		// group (what 1.37's Job controller makes of every Job that asks
		// for no gang) says nothing against it; a gang is a second gang.
		if err == nil && (pg.Spec.SchedulingPolicy.Gang != nil || pg.Spec.ParentCompositePodGroupName != nil) {
			return nil, fmt.Errorf("pod names gang pod group %q (spec.schedulingGroup.podGroupName) and %s: a pod belongs to one gang, drop one (a basic pod group may stay)", name, own), true
		}
		return nil, nil, false
	}
	if err != nil {
		if leaves > 0 {
			return nil, &MissingPodGroupError{PodGroup: name, msg: fmt.Sprintf(
				"pod names pod group %q (spec.schedulingGroup.podGroupName, a PodGroup of the pod's own namespace), which does not exist in namespace %q yet: it waits for it and is scheduled once the PodGroup is created",
				name, pod.Namespace)}, true
		}
		return nil, nil, false
	}
	var composite *compositeRequest
	if parent := pg.Spec.ParentCompositePodGroupName; parent != nil && *parent != "" {
		if composite, err = w.composite(pod, pg, *parent, res, r.PodLeaves); err != nil {
			return nil, err, true
		}
	}
	vc := ""
	if composite != nil {
		vc = composite.vc
	}
	if vc == "" {
		vc = w.virtualCluster(pg)
	}
	if vc == "" {
		vc = pod.Labels[LabelVirtualCluster]
	}
	if vc == "" {
		if leaves > 0 {
			return nil, fmt.Errorf("pod group %s/%s names no virtual cluster: label the PodGroup, its Workload or the pod %s", pod.Namespace, name, LabelVirtualCluster), true
		}
		return nil, nil, false // not a GPU gang hivesched schedules
	}
	// The pod's own form, as its PodGroup makes it.
	q := pod.DeepCopy()
	if q.Labels == nil {
		q.Labels = map[string]string{}
	}
	if q.Annotations == nil {
		q.Annotations = map[string]string{}
	}
	q.Labels[LabelVirtualCluster] = vc
	for _, k := range annotationsFromPodGroup {
		if v, ok := pg.Annotations[k]; ok {
			q.Annotations[k] = v
		}
	}
	if pg.Spec.Priority != nil {
		q.Spec.Priority = pg.Spec.Priority
	}
	extra := false
	switch pol := pg.Spec.SchedulingPolicy; {
	case composite != nil:
		// One affinity group of the composite's pod groups.
		q.Labels[LabelAffinityGroup] = composite.name
		q.Annotations[AnnotationGroupMembers] = composite.members
		if composite.priority != nil {
			q.Spec.Priority = composite.priority
		}
	case pol.Gang != nil:
		if pol.Gang.MinCount <= 0 {
			return nil, fmt.Errorf("pod group %s/%s: gang minCount must be positive, got %d", pod.Namespace, name, pol.Gang.MinCount), true
		}
		shape, isExtra, err := r.gangShape(pod, fmt.Sprintf("pod group %s/%s", pod.Namespace, name), pol.Gang.MinCount)
		if err != nil {
			return nil, err, true
		}
		if isExtra {
			if leaves, _ := r.PodLeaves(pod); leaves == 0 {
				return nil, nil, true // an extra without leaf cells: not hivesched's to place
			}
			shape, extra = extraShape, true
		}
		q.Labels[LabelAffinityGroup] = name
		q.Annotations[AnnotationGroupMembers] = shape
	default:
		// Basic: one by one, each pod a group alone.
		delete(q.Labels, LabelAffinityGroup)
		delete(q.Annotations, AnnotationGroupMembers)
	}
	req, err := Parse(q, res)
	if err != nil {
		return nil, fmt.Errorf("pod group %s/%s: %w", pod.Namespace, name, err), true
	}

	if pg.Spec.SchedulingPolicy.Gang != nil || composite != nil {
		// A topology constraint holds the whole gang to one domain; a
		// basic group's pods are placed one by one, each its own group, so
		// there is nothing to hold together.
		key := topologyKey(pg.Spec.SchedulingConstraints)
		where := fmt.Sprintf("pod group %s/%s", pod.Namespace, name)
		if composite != nil {
			if key != "" && key != composite.topologyKey {
				return nil, fmt.Errorf("pod group %s/%s asks for topology %q inside composite pod group %q, which asks for %q: hivesched places a composite as one affinity group under one constraint; put the constraint on the composite pod group", pod.Namespace, name, key, composite.name, composite.topologyKey), true
			}
			key = composite.topologyKey
			where = fmt.Sprintf("composite pod group %s/%s", pod.Namespace, composite.name)
		}
		// The pod's topology annotation (Parse read it: within.go) and the
		// group's constraint: one may be left out, two must agree.
		if own := req.Group.WithinTopologyKey; own != "" && key != "" && own != key {
			_, from, _ := withinTopology(pod)
			return nil, fmt.Errorf("%s asks for topology %q (schedulingConstraints.topology), but the pod's annotation %s asks for %q: a gang stays inside one cell of one level; make them name the same key, or drop the annotation",
				where, key, from, own), true
		}
		if key != "" {
			req.Group.WithinTopologyKey = key
		}
	}
	if extra {
		req = asExtra(req, pod)
	}
	return req, nil, true
}

// topologyKey is the node label key a pod group's scheduling constraints
// hold its pods to ("" for none). The API allows one constraint.
func topologyKey(c *schedv1beta1.PodGroupSchedulingConstraints) string {
	if c == nil || len(c.Topology) == 0 {
		return ""
	}
	return c.Topology[0].Key
}

// ownGroupForm names the hivesched form in which a pod names its gang
// itself ("" if none): the affinity-group label (native or explicit),
// scheduler-plugins' PodGroup label, HiveD's spec.
func ownGroupForm(pod *v1.Pod) string {
	if g, ok := pod.Labels[LabelAffinityGroup]; ok {
		return fmt.Sprintf("affinity group %q (label %s)", g, LabelAffinityGroup)
	}
	if g, ok := pod.Labels[LabelPodGroup]; ok {
		return fmt.Sprintf("PodGroup %q (label %s)", g, LabelPodGroup)
	}
	if _, ok := pod.Annotations[HivedSpecAnnotation]; ok {
		return "HiveD's " + HivedSpecAnnotation
	}
	return ""
}

// virtualCluster is the VC a PodGroup's label names, else its Workload's.
func (w *Workloads) virtualCluster(pg *schedv1beta1.PodGroup) string {
	return w.vcOf(pg.Namespace, pg.Labels, pg.Spec.WorkloadRef)
}

// vcOf is the VC an object's labels name, else its Workload's.
func (w *Workloads) vcOf(namespace string, labels map[string]string, ref *schedv1beta1.WorkloadReference) string {
	if vc := labels[LabelVirtualCluster]; vc != "" {
		return vc
	}
	if ref != nil && ref.WorkloadName != "" {
		if wl, err := w.Workloads.Workloads(namespace).Get(ref.WorkloadName); err == nil {
			return wl.Labels[LabelVirtualCluster]
		}
	}
	return ""
}

// compositeRequest is what a composite pod group makes of its pods' group:
// one affinity group of every child pod group's minCount pods, each child
// with its pods' size.
type compositeRequest struct {
	name     string // the composite's name
	members  string // hivesched.io/group-members form: "2x8,1x4"
	vc       string
	priority *int32
	// topologyKey is the composite's topology constraint: the whole
	// group in one domain of this node label key ("" for none).
	topologyKey string
}

// composite reads the composite pod group parent of pg. hivesched places a
// composite whole, as one affinity group (several member shapes): its gang
// policy must require every child pod group, each child a gang. Anything
// else is refused with what to write instead.
func (w *Workloads) composite(pod *v1.Pod, pg *schedv1beta1.PodGroup, parent string, res v1.ResourceName, podLeaves func(*v1.Pod) (int64, error)) (*compositeRequest, error) {
	ns := pod.Namespace
	if w.Composites == nil {
		return nil, fmt.Errorf("pod group %s/%s belongs to composite pod group %q, but the scheduler runs without feature gate CompositePodGroup: enable it, or drop parentCompositePodGroupName", ns, pg.Name, parent)
	}
	cpg, err := w.Composites.CompositePodGroups(ns).Get(parent)
	if err != nil {
		return nil, &awaitingError{fmt.Sprintf("pod group %s/%s names composite pod group %q, which does not exist yet: it waits for it", ns, pg.Name, parent)}
	}
	if cpg.Spec.ParentCompositePodGroupName != nil && *cpg.Spec.ParentCompositePodGroupName != "" {
		return nil, fmt.Errorf("composite pod group %s/%s is nested in %q: hivesched places one composite of pod groups as one affinity group; make the pod groups children of one top-level composite", ns, parent, *cpg.Spec.ParentCompositePodGroupName)
	}
	all, err := w.PodGroups.PodGroups(ns).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var children []*schedv1beta1.PodGroup
	for _, c := range all {
		if c.Spec.ParentCompositePodGroupName != nil && *c.Spec.ParentCompositePodGroupName == parent {
			children = append(children, c)
		}
	}
	sort.Slice(children, func(i, j int) bool { return children[i].Name < children[j].Name })
	if g := cpg.Spec.SchedulingPolicy.Gang; g == nil || int(g.MinGroupCount) != len(children) {
		got := "a basic policy"
		if g != nil {
			got = fmt.Sprintf("minGroupCount %d", g.MinGroupCount)
		}
		return nil, fmt.Errorf("composite pod group %s/%s has %s: hivesched places a composite whole, as one affinity group; give it a gang policy with minGroupCount %d (its number of pod groups)", ns, parent, got, len(children))
	}
	pods, err := PodsOfNamespace(w.Pods, ns)
	if err != nil {
		return nil, err
	}
	var members []string
	for _, c := range children {
		if c.Spec.SchedulingPolicy.Gang == nil {
			return nil, fmt.Errorf("pod group %s/%s of composite pod group %q has a basic policy: give it a gang policy (minCount), as hivesched places the composite whole", ns, c.Name, parent)
		}
		size := int64(-1)
		for _, p := range pods {
			if PodGroupName(p) == c.Name {
				if size, err = podLeaves(p); err != nil { // its request of res, or its GPU claims
					return nil, err
				}
				break
			}
		}
		if size < 0 {
			return nil, &awaitingError{fmt.Sprintf("composite pod group %s/%s: waiting for a pod of its pod group %q, whose size makes a member of the group", ns, parent, c.Name)}
		}
		// A pod group of pods without leaf cells (a trainer's
		// initializers) makes members without cells: "2x0".
		members = append(members, fmt.Sprintf("%dx%d", c.Spec.SchedulingPolicy.Gang.MinCount, size))
	}
	return &compositeRequest{
		name:        parent,
		members:     strings.Join(members, ","),
		vc:          w.vcOf(ns, cpg.Labels, (*schedv1beta1.WorkloadReference)(cpg.Spec.WorkloadRef)),
		priority:    cpg.Spec.Priority,
		topologyKey: compositeTopologyKey(cpg.Spec.SchedulingConstraints),
	}, nil
}

// compositeTopologyKey is topologyKey for a composite pod group.
func compositeTopologyKey(c *schedv1alpha3.CompositePodGroupSchedulingConstraints) string {
	if c == nil || len(c.Topology) == 0 {
		return ""
	}
	return c.Topology[0].Key
}

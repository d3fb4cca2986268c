package podrequest

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// PodGroup interop (docs/affinitygroups.md): pods that carry
// scheduler-plugins' label scheduling.x-k8s.io/pod-group form one affinity
// group of the PodGroup's minMember pods, each of the pod's own size, so
// that operators that create PodGroups (Kubeflow, Spark, Volcano-style
// jobs) work unchanged. The VC comes from label hivesched.io/virtual-cluster
// on the PodGroup, else on the pod. The PodGroup CRD is optional: while it
// is not served (or PodGroups cannot be listed) a GPU pod that names a
// PodGroup is told so.

// LabelPodGroup is scheduler-plugins' pod group label.
const LabelPodGroup = pgv1alpha1.PodGroupLabel

// fromPodGroup is the request of a pod of a PodGroup: the pod's own form
// with the group named after the PodGroup, minMember pods of its size, and
// the VC from the PodGroup's label (else the pod's). handled is false when
// the pod names no PodGroup or the interop is off.
func (r *Resolver) fromPodGroup(pod *v1.Pod) (*Request, error, bool) {
	res := r.resource
	name, ok := pod.Labels[LabelPodGroup]
	if !ok || name == "" || r.lookups.PodGroups == nil {
		return nil, nil, false
	}
	lister := r.lookups.PodGroups()
	if lister == nil {
		if leaves, _ := LeafRequest(pod, res); leaves > 0 {
			return nil, WaitsForObject(fmt.Sprintf("pod names PodGroup %q (label %s), but PodGroups (scheduling.x-k8s.io/v1alpha1) are not served: install scheduler-plugins' PodGroup CRD; hivesched reads it as soon as it is", name, LabelPodGroup)), true
		}
		return nil, nil, false
	}
	pg, err := lister.PodGroups(pod.Namespace).Get(name)
	if err != nil {
		if leaves, _ := LeafRequest(pod, res); leaves > 0 {
			return nil, WaitsForObject(fmt.Sprintf("pod names PodGroup %q (label %s), which does not exist in namespace %q yet: it waits for it", name, LabelPodGroup, pod.Namespace)), true
		}
		return nil, nil, false
	}
	vc := pg.Labels[LabelVirtualCluster]
	if vc == "" {
		vc = pod.Labels[LabelVirtualCluster]
	}
	if vc == "" {
		if leaves, _ := LeafRequest(pod, res); leaves > 0 {
			return nil, fmt.Errorf("PodGroup %s/%s names no virtual cluster: label the PodGroup (or the pod) %s", pod.Namespace, name, LabelVirtualCluster), true
		}
		return nil, nil, false // not a GPU gang hivesched schedules
	}
	if pg.Spec.MinMember <= 0 {
		return nil, fmt.Errorf("PodGroup %s/%s: minMember must be positive, got %d", pod.Namespace, name, pg.Spec.MinMember), true
	}
	shape, extra, err := r.gangShape(pod, fmt.Sprintf("PodGroup %s/%s", pod.Namespace, name), pg.Spec.MinMember)
	if err != nil {
		return nil, err, true
	}
	if extra {
		if leaves, _ := r.PodLeaves(pod); leaves == 0 {
			return nil, nil, true // an extra without leaf cells: not hivesched's to place
		}
		shape = extraShape
	}
	// The pod's own form, named after its PodGroup.
	q := pod.DeepCopy()
	q.Labels[LabelVirtualCluster] = vc
	q.Labels[LabelAffinityGroup] = name
	if q.Annotations == nil {
		q.Annotations = map[string]string{}
	}
	q.Annotations[AnnotationGroupMembers] = shape
	req, err := Parse(q, res)
	if err == nil && extra {
		req = asExtra(req, pod)
	}
	return req, err, true
}

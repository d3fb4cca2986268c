package podrequest

import (
	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	alphalisters "k8s.io/client-go/listers/scheduling/v1alpha3"
	schedlisters "k8s.io/client-go/listers/scheduling/v1beta1"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	hv1listers "github.com/hivesched/hivesched/apis/generated/listers/hivesched/v1alpha1"
)

// Resolver reads a pod's request, from the objects that describe its group
// where one does (a Workload API pod group, an explicit AffinityGroup, a
// scheduler-plugins PodGroup), else from the pod itself (Parse). Its
// lookups read the scheduler's informer caches, never the API server: it
// runs where a pod's request is read (PreEnqueue, QueueSort, PreFilter).
type Resolver struct {
	resource v1.ResourceName
	lookups  Lookups
}

// Lookups are where a Resolver finds the objects pods' groups name.
type Lookups struct {
	// AffinityGroups are the AffinityGroup objects (the explicit form);
	// nil reads none.
	AffinityGroups hv1listers.AffinityGroupLister
	// PodGroups returns scheduler-plugins' PodGroup lister, nil while
	// their CRD is not served; nil reads none.
	PodGroups func() pglisters.PodGroupLister
	// Workloads are Kubernetes' Workload API objects, nil when the
	// scheduler runs without feature gate GenericWorkload (pods that name
	// a pod group are then told so).
	Workloads *Workloads
}

// Workloads are the Workload API's listers.
type Workloads struct {
	PodGroups schedlisters.PodGroupLister
	Workloads schedlisters.WorkloadLister
	// Composites is nil without feature gate CompositePodGroup.
	Composites alphalisters.CompositePodGroupLister
	// Pods: a composite's members are sized from its pod groups' pods.
	Pods corelisters.PodLister
}

// NewResolver reads requests of leaf cell resource resource through lookups.
func NewResolver(resource v1.ResourceName, lookups Lookups) *Resolver {
	return &Resolver{resource: resource, lookups: lookups}
}

// Read returns the pod's request: nil if it does not ask for cells, or an
// error that says what to fix (IsAwaiting: what it waits for).
func (r *Resolver) Read(pod *v1.Pod) (*Request, error) {
	if req, err, ok := r.resolve(pod); ok {
		return req, err
	}
	return Parse(pod, r.resource)
}

// resolve returns a pod's request from an object that describes its group,
// or handled false when none does and the pod's own labels and annotations
// are its request.
func (r *Resolver) resolve(pod *v1.Pod) (*Request, error, bool) {
	if req, err, ok := r.fromWorkload(pod); ok {
		return req, err, true
	}
	if _, hived := pod.Annotations[HivedSpecAnnotation]; hived {
		return nil, nil, false
	}
	if ag := r.explicitAG(pod); ag != nil {
		req, err := FromAffinityGroup(pod, ag, r.resource)
		return req, err, true
	}
	return r.fromPodGroup(pod)
}

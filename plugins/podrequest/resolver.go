package podrequest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	// Claims, if set, reads the leaf cells a pod asks for through device
	// claims (DRA ResourceClaims of a GPU DeviceClass): has is false for a
	// pod without any. A pod that has some is read as if it requested that
	// many of the leaf cell resource (WithLeafRequest); an error says what
	// it waits for (IsAwaiting) or what to fix.
	Claims func(pod *v1.Pod) (leaves int64, has bool, err error)
	// GangPods, if set, are the live pods (not terminating) of the gang a
	// framework's object counts (GangKeyOf): a PodGroup's or a Workload
	// API pod group's. Their sizes make the gang's shape, members without
	// leaf cells included; without it a gang is minMember pods of each
	// pod's own size, as before.
	GangPods func(GangKey) []*v1.Pod
	// RecordedRole, if set, says which part of its gang a bound pod was
	// placed as, from its placement record: RoleMinimum, RoleExtra, or
	// RoleNone (no record). The minimum of an elastic gang is first the
	// pods placed in it (elastic.go).
	RecordedRole func(pod *v1.Pod) Role
}

// GangKey names the pods a framework's gang counts: those of one
// scheduler-plugins PodGroup (label scheduling.x-k8s.io/pod-group), one
// Workload API pod group (spec.schedulingGroup.podGroupName) or one
// LeaderWorkerSet replica group of a namespace.
type GangKey struct {
	Namespace, Name string
	Kind            GangKind
}

// GangKind is the kind of framework gang a GangKey names.
type GangKind uint8

const (
	PodGroupGang        GangKind = iota // a scheduler-plugins PodGroup
	WorkloadGang                        // a Workload API pod group
	LeaderWorkerSetGang                 // a LeaderWorkerSet replica group (Name: <set>-<index>)
	NativeElasticGang                   // a native-form gang with annotation hivesched.io/max-members
)

// GangKeyOf is the gang a pod is counted by (ok false: none).
func GangKeyOf(pod *v1.Pod) (GangKey, bool) {
	if name := PodGroupName(pod); name != "" {
		return GangKey{Namespace: pod.Namespace, Name: name, Kind: WorkloadGang}, true
	}
	if name := pod.Labels[LabelPodGroup]; name != "" {
		return GangKey{Namespace: pod.Namespace, Name: name, Kind: PodGroupGang}, true
	}
	if set, index, ok := lwsGroup(pod); ok {
		return GangKey{Namespace: pod.Namespace, Name: set + "-" + index, Kind: LeaderWorkerSetGang}, true
	}
	if name := pod.Labels[LabelAffinityGroup]; name != "" && pod.Annotations[AnnotationMaxMembers] != "" {
		return GangKey{Namespace: pod.Namespace, Name: name, Kind: NativeElasticGang}, true
	}
	return GangKey{}, false
}

// gangShape is the shape (annotation hivesched.io/group-members' form) of
// the gang of minCount pods that what (a PodGroup's or pod group's
// description) counts, and whether pod is one of the gang's extra pods
// (elastic.go): the gang's minimum is read from its pods (minimumOf), which
// must all exist first (until they do the request waits: IsAwaiting), the
// pods beyond it are extras; without GangPods, minCount pods of the pod's
// own size, as gangs were read before elastic gangs and members without
// leaf cells were.
func (r *Resolver) gangShape(pod *v1.Pod, what string, minCount int32) (string, bool, error) {
	key, _ := GangKeyOf(pod)
	if r.lookups.GangPods == nil {
		return strconv.Itoa(int(minCount)), false, nil
	}
	pods := r.lookups.GangPods(key)
	if int32(len(pods)) < minCount {
		return "", false, Awaiting(fmt.Sprintf("%s waits for its pods: %d of its %d exist (a gang is placed with all its members, those without GPUs included)", what, len(pods), minCount))
	}
	leaves, err := r.gangLeaves(pods, what)
	if err != nil {
		return "", false, err
	}
	minimum, extra := minimumOf(pods, minCount, leaves, pod, r.lookups.RecordedRole)
	sizes := map[int64]int32{}
	var cellLess int32
	for _, p := range minimum {
		if n := leaves[p]; n == 0 {
			cellLess++
		} else {
			sizes[n]++
		}
	}
	if len(sizes) == 0 {
		return "", false, fmt.Errorf("%s: none of the %d pods of its minimum asks for leaf cells (%s): hivesched places gangs with GPUs; drop its %s label", what, minCount, r.resource, LabelVirtualCluster)
	}
	keys := make([]int64, 0, len(sizes))
	for k := range sizes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] > keys[j] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%dx%d", sizes[k], k))
	}
	if cellLess > 0 {
		parts = append(parts, fmt.Sprintf("%dx0", cellLess))
	}
	return strings.Join(parts, ","), extra, nil
}

// gangLeaves is the leaf cells of each of a gang's pods (what describes the
// gang in an error); an error of a pod that waits is returned as it is
// (IsAwaiting).
func (r *Resolver) gangLeaves(pods []*v1.Pod, what string) (map[*v1.Pod]int64, error) {
	leaves := make(map[*v1.Pod]int64, len(pods))
	for _, p := range pods {
		n, err := r.PodLeaves(p)
		if err != nil {
			if IsAwaiting(err) {
				return nil, err
			}
			return nil, fmt.Errorf("%s: its pod %s: %w", what, p.Name, err)
		}
		leaves[p] = n
	}
	return leaves, nil
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
	view, err := r.claimView(pod)
	if err != nil {
		return nil, err
	}
	req, err, ok := r.resolve(view)
	if !ok {
		req, err = Parse(view, r.resource)
	}
	if err != nil && view != pod {
		// The pod asks through its claims, not as the resource the view
		// shows: say so (a message naming nvidia.com/gpu misleads).
		n, _ := LeafRequest(view, r.resource)
		err = rephrased(err, fmt.Sprintf("requests %d %s", n, r.resource), fmt.Sprintf("asks for %d GPUs through its device claims (DRA)", n))
	}
	return req, err
}

// rephrasedError is an error with one phrase of its message replaced; it
// unwraps to the original (IsAwaiting and errors.As still see it).
type rephrasedError struct {
	err error
	msg string
}

func (e *rephrasedError) Error() string { return e.msg }
func (e *rephrasedError) Unwrap() error { return e.err }

func rephrased(err error, from, to string) error {
	msg := err.Error()
	if !strings.Contains(msg, from) {
		return err
	}
	return &rephrasedError{err: err, msg: strings.Replace(msg, from, to, 1)}
}

// resolve returns a pod's request from an object that describes its group,
// or handled false when none does and the pod's own labels and annotations
// are its request.
func (r *Resolver) resolve(pod *v1.Pod) (*Request, error, bool) {
	if req, err, ok := r.fromWorkload(pod); ok {
		return req, err, true
	}
	if req, err, ok := r.fromLeaderWorkerSet(pod); ok {
		return req, err, true
	}
	if _, hived := pod.Annotations[HivedSpecAnnotation]; hived {
		return nil, nil, false
	}
	if ag := r.explicitAG(pod); ag != nil {
		req, err := FromAffinityGroup(pod, ag, r.resource)
		return req, err, true
	}
	if req, err, ok := r.fromNativeElastic(pod); ok {
		return req, err, true
	}
	return r.fromPodGroup(pod)
}

// claimView is the pod as its request is read: one that asks for leaf cells
// through device claims as if it requested them as the leaf cell resource.
func (r *Resolver) claimView(pod *v1.Pod) (*v1.Pod, error) {
	if r.lookups.Claims == nil {
		return pod, nil
	}
	n, has, err := r.lookups.Claims(pod)
	if err != nil || !has {
		return pod, err
	}
	return WithLeafRequest(pod, r.resource, n), nil
}

// PodLeaves is a pod's leaf cell count as its request reads it: through its
// device claims, or its request of the leaf cell resource.
func (r *Resolver) PodLeaves(pod *v1.Pod) (int64, error) {
	pod, err := r.claimView(pod)
	if err != nil {
		return 0, err
	}
	return LeafRequest(pod, r.resource)
}

// WithLeafRequest is a copy of the pod whose first container requests n of
// the leaf cell resource (its own requests of it, if any, dropped): the
// pod as read for a request of n leaf cells made some other way.
func WithLeafRequest(pod *v1.Pod, name v1.ResourceName, n int64) *v1.Pod {
	view := *pod
	view.Spec = *pod.Spec.DeepCopy()
	for _, cs := range [][]v1.Container{view.Spec.InitContainers, view.Spec.Containers} {
		for i := range cs {
			delete(cs[i].Resources.Requests, name)
			delete(cs[i].Resources.Limits, name)
		}
	}
	if len(view.Spec.Containers) > 0 {
		c := &view.Spec.Containers[0]
		if c.Resources.Requests == nil {
			c.Resources.Requests = v1.ResourceList{}
		}
		c.Resources.Requests[name] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return &view
}

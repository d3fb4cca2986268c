// Package podrequest reads what a pod asks the cell core for, in every form
// hivesched accepts: its own labels and annotations (the native form and
// HiveD's v1 and v2 specs), an explicit AffinityGroup, scheduler-plugins'
// PodGroup, and Kubernetes' Workload API pod groups (gang, basic and
// composite). Parsing is pure: a pod (and the objects its group names) in,
// a Request or an error that says what to fix out. The objects a form
// names are looked up through the listers a Resolver is given (the
// scheduler's informer caches), never the API server.
package podrequest

import (
	"fmt"
	"hash/maphash"
	"math"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// How pods ask for cells. Two forms are read from the pod itself: HiveD's
// annotation, so that HiveD jobs move over unchanged, and a native form that
// is pleasant to write by hand (labels for the VC and the group, the GPU
// count from the pod's resource request).
const (
	// HivedSpecAnnotation is HiveD's pod scheduling spec (YAML).
	HivedSpecAnnotation = "hivedscheduler.microsoft.com/pod-scheduling-spec"

	// HivedSchedulingEnableResource is the extended resource HiveD's pods
	// carry in their limits (1), so that only a scheduler that knows it places
	// them. No node advertises it: the scheduler profile's NodeResourcesFit
	// must ignore it (ignoredResources, as manifests/scheduler does).
	HivedSchedulingEnableResource = "hivedscheduler.microsoft.com/pod-scheduling-enable"

	// LabelVirtualCluster names the pod's virtual cluster (native form).
	LabelVirtualCluster = "hivesched.io/virtual-cluster"
	// LabelAffinityGroup names the pod's gang; pods of one namespace with the
	// same value form one affinity group. Without it the pod is a group alone.
	LabelAffinityGroup = "hivesched.io/affinity-group"
	// AnnotationGroupMembers is the gang's shape: "4" (four pods, each with
	// this pod's leaf cell count) or "2x8,1x4" (two pods of 8 and one of 4).
	AnnotationGroupMembers = "hivesched.io/group-members"
	// AnnotationMaxMembers makes a native-form gang elastic: the most pods
	// it may have, its minimum (AnnotationGroupMembers) included. Pods
	// beyond the minimum are extra pods, placed one by one once the
	// minimum runs (docs/elastic.md).
	AnnotationMaxMembers = "hivesched.io/max-members"
	// AnnotationExtrasBeyondVC ("opportunistic") lets an elastic gang's
	// extra pods that find no room in its VC run beyond it as
	// opportunistic pods, the first taken back (docs/elastic.md).
	AnnotationExtrasBeyondVC = "hivesched.io/extras-beyond-vc"
	// AnnotationPriority is the HiveD priority: -1 (opportunistic) to 1000.
	AnnotationPriority = "hivesched.io/priority"
	// AnnotationLeafCellType restricts the pod to a leaf cell type (GPU model).
	AnnotationLeafCellType = "hivesched.io/leaf-cell-type"
	// AnnotationPinnedCell places the gang in one pinned cell of its VC.
	AnnotationPinnedCell = "hivesched.io/pinned-cell"
	// AnnotationLazyPreemption ("true") lets the gang be downgraded to
	// opportunistic instead of being killed when preempted.
	AnnotationLazyPreemption = "hivesched.io/lazy-preemption"
	// AnnotationWithinTopology holds the gang inside one cell of the
	// topology level whose node label key it names (a
	// cellTypes.<type>.topologyKey of the scheduler's args, for example
	// topology.kubernetes.io/rack or nvidia.com/gpu.clique): the group's
	// WithinTopologyKey. Kueue's and KAI-Scheduler's required-topology
	// annotations say the same (within.go).
	AnnotationWithinTopology = "hivesched.io/within-topology"
	// LabelSpreadKey: in a VC whose selector is Spread, groups of one
	// namespace with the same value go to different nodes (then racks) as far as the VC's cells
	// allow, like a group's own pods (inference replicas that must not
	// share a failure domain).
	LabelSpreadKey = "hivesched.io/spread-key"
)

// Request is what a pod asks the cell core for.
type Request struct {
	Group          cellcore.AffinityGroupSpec // Name is namespace/group; Members are those with leaf cells
	LeafCellNumber int32                      // this pod's leaf cells (0: a cell-less member)
	Hived          bool                       // asked in HiveD's form
	// CellLessPods is how many of the gang's pods ask for no leaf cells (an
	// MPI launcher, a Ray head, a trainer's initializers): they count toward
	// the gang's size, are placed and bound with it, all or nothing, and
	// hold no cells, so the cell core never sees them (Group.Members are
	// the members with cells). docs/affinitygroups.md, "Members without
	// GPUs".
	CellLessPods int32
}

// TotalPods is how many pods the request's group has, cell-less ones
// included.
func (r *Request) TotalPods() int {
	n := int(r.CellLessPods)
	for _, m := range r.Group.Members {
		n += int(m.PodNumber)
	}
	return n
}

// CellLess: the pod is a member of its gang that asks for no leaf cells.
func (r *Request) CellLess() bool { return r.LeafCellNumber == 0 }

// PodKey is the key the cell core knows a pod by: its UID, so that a pod
// replaced under the same name is another pod.
func PodKey(pod *v1.Pod) string { return string(pod.UID) }

// Fingerprint is a hash of what the request is read from in a pod's
// metadata (its spec changes show in its generation): a pod whose
// fingerprint changed may ask for something else now. A hash, so that
// comparing costs the same whatever size a tenant gives the annotations.
func Fingerprint(pod *v1.Pod) uint64 {
	var h maphash.Hash
	h.SetSeed(fingerprintSeed)
	for _, k := range []string{LabelVirtualCluster, LabelAffinityGroup, LabelPodGroup, LabelSpreadKey} {
		h.WriteString(pod.Labels[k])
		h.WriteByte(0)
	}
	for _, k := range []string{AnnotationGroupMembers, AnnotationMaxMembers, AnnotationExtrasBeyondVC, AnnotationPriority, AnnotationLeafCellType, AnnotationPinnedCell, AnnotationLazyPreemption, HivedSpecAnnotation,
		AnnotationWithinTopology, AnnotationKueueRequiredTopology, AnnotationKAIRequiredPlacement} {
		h.WriteString(pod.Annotations[k])
		h.WriteByte(0)
	}
	return h.Sum64()
}

var fingerprintSeed = maphash.MakeSeed()

// priorityFromClass maps a pod's Kubernetes priority (spec.priority, from
// its PriorityClass, which cluster admins gate with ResourceQuota scopes)
// into hivesched's guaranteed range: values from 0 to 1000 as they are,
// higher ones 1000, lower ones 0. Opportunistic (-1) is always asked for
// explicitly: a PriorityClass below zero (often used for batch work that
// should yield) is still guaranteed within its VC.
func priorityFromClass(p int32) int32 {
	return min(max(p, 0), cellcore.MaxPriority)
}

// checkRequest bounds what a pod asks for before anything is allocated for
// it (a group's slots are allocated per pod): the priority is in range (an
// out-of-range one also sorted first in the queue), the group has at most
// cellcore.MaxPodsPerGroup pods (a group-members of 2^31 would allocate
// 2^31 slots), and the pod's own size is one of its group's.
func checkRequest(r *Request) error {
	g := &r.Group
	if g.Priority < cellcore.OpportunisticPriority || g.Priority > cellcore.MaxPriority {
		return fmt.Errorf("priority %d is out of range: -1 for opportunistic, 0..%d for guaranteed", g.Priority, cellcore.MaxPriority)
	}
	pods := int64(r.CellLessPods)
	for _, m := range g.Members {
		pods += int64(m.PodNumber)
	}
	if pods > cellcore.MaxPodsPerGroup {
		return fmt.Errorf("affinity group %q has %d pods (members %s), more than the supported %d", g.Name, pods, r.membersString(), cellcore.MaxPodsPerGroup)
	}
	if len(g.Members) == 0 {
		return fmt.Errorf("affinity group %q has no member that asks for leaf cells (members %s): hivesched places gangs with GPUs; a gang of pods without any is not a VC's to place, drop its %s label", g.Name, r.membersString(), LabelVirtualCluster)
	}
	return checkOwnSize(r)
}

// checkOwnSize: the pod's own leaf cell count must be one of its group's.
func checkOwnSize(r *Request) error {
	if r.LeafCellNumber == 0 && r.CellLessPods > 0 {
		return nil
	}
	for _, m := range r.Group.Members {
		if m.LeafCellNumber == r.LeafCellNumber {
			return nil
		}
	}
	return fmt.Errorf("pod asks for %d leaf cells, but its affinity group %q has no member of that size (members: %s)", r.LeafCellNumber, r.Group.Name, r.membersString())
}

// Shape is the request's group shape as annotation hivesched.io/group-members
// writes it: "2x8,1x0" (members without leaf cells last).
func Shape(r *Request) string { return r.membersString() }

// membersString is the group's shape as annotation hivesched.io/group-members
// writes it: "2x8,1x0".
func (r *Request) membersString() string {
	s := membersString(r.Group.Members)
	if r.CellLessPods > 0 {
		if s != "" {
			s += ","
		}
		s += fmt.Sprintf("%dx0", r.CellLessPods)
	}
	return s
}

func membersString(ms []cellcore.AffinityGroupMember) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%dx%d", m.PodNumber, m.LeafCellNumber)
	}
	return strings.Join(parts, ",")
}

// LeafRequest is the pod's effective request of the leaf cell resource, as
// the scheduler computes it (component-helpers' PodRequests: the containers'
// sum plus sidecars, or the largest init container if larger, plus
// overhead), in int64. What is booked in the cell core must be exactly what
// the node's NodeResourcesFit counts: a sidecar's GPUs were not booked
// before, and a request above 2^31 was truncated into another number.
// A container that gives only a limit (the API server copies it into the
// request; objects that did not pass through it may not have it) counts
// its limit.
func LeafRequest(pod *v1.Pod, name v1.ResourceName) (int64, error) {
	if limitOnly(pod, name) {
		pod = pod.DeepCopy()
		fill := func(cs []v1.Container) {
			for i := range cs {
				r := &cs[i].Resources
				if _, ok := r.Requests[name]; !ok {
					if q, ok := r.Limits[name]; ok {
						if r.Requests == nil {
							r.Requests = v1.ResourceList{}
						}
						r.Requests[name] = q
					}
				}
			}
		}
		fill(pod.Spec.Containers)
		fill(pod.Spec.InitContainers)
	}
	q, ok := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[name]
	if !ok {
		return 0, nil
	}
	n, exact := q.AsInt64()
	if !exact || n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("pod requests %s %s in all (containers, sidecars and init containers as the scheduler counts them): a leaf cell count must be a whole number from 0 to %d", q.String(), name, math.MaxInt32)
	}
	return n, nil
}

func limitOnly(pod *v1.Pod, name v1.ResourceName) bool {
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			_, req := cs[i].Resources.Requests[name]
			_, lim := cs[i].Resources.Limits[name]
			if lim && !req {
				return true
			}
		}
	}
	return false
}

// MayAsk is a cheap test of whether the pod may ask hivesched for cells: it
// names a VC, a group or a pod group in any form hivesched reads, carries
// HiveD's spec or a hivesched annotation, requests the leaf cell resource,
// or has device claims (DRA: they may be GPU claims). It parses nothing: the scheduling queue's callbacks, which run
// under the queue's lock, let a pod for which it is false pass untouched.
func MayAsk(pod *v1.Pod, resource v1.ResourceName) bool {
	if PodGroupName(pod) != "" || len(pod.Spec.ResourceClaims) > 0 {
		return true
	}
	for k := range pod.Labels {
		if strings.HasPrefix(k, keyPrefix) || k == LabelPodGroup {
			return true
		}
	}
	for k := range pod.Annotations {
		if strings.HasPrefix(k, keyPrefix) || k == HivedSpecAnnotation {
			return true
		}
	}
	has := func(cs []v1.Container) bool {
		for i := range cs {
			r := &cs[i].Resources
			if _, ok := r.Requests[resource]; ok {
				return true
			}
			if _, ok := r.Limits[resource]; ok {
				return true
			}
		}
		return false
	}
	return has(pod.Spec.Containers) || has(pod.Spec.InitContainers)
}

// keyPrefix is the prefix of every hivesched label and annotation.
const keyPrefix = "hivesched.io/"

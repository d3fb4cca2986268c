package hivesched

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/yaml"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// How pods ask for cells. Two forms are accepted: HiveD's annotation, so that
// HiveD jobs move over unchanged, and a native form that is pleasant to write
// by hand (labels for the VC and the group, the GPU count from the pod's
// resource request).
const (
	// HivedSpecAnnotation is HiveD's pod scheduling spec (YAML).
	HivedSpecAnnotation = "hivedscheduler.microsoft.com/pod-scheduling-spec"
	// HivedIsolationAnnotation is written at bind: the pod's leaf cell
	// (device) indices, comma separated, as HiveD writes it.
	HivedIsolationAnnotation = "hivedscheduler.microsoft.com/pod-leaf-cell-isolation"

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
	// AnnotationPriority is the HiveD priority: -1 (opportunistic) to 1000.
	AnnotationPriority = "hivesched.io/priority"
	// AnnotationLeafCellType restricts the pod to a leaf cell type (GPU model).
	AnnotationLeafCellType = "hivesched.io/leaf-cell-type"
	// AnnotationPinnedCell places the gang in one pinned cell of its VC.
	AnnotationPinnedCell = "hivesched.io/pinned-cell"
	// AnnotationLazyPreemption ("true") lets the gang be downgraded to
	// opportunistic instead of being killed when preempted.
	AnnotationLazyPreemption = "hivesched.io/lazy-preemption"
	// LabelSpreadKey: in a VC whose selector is Spread, groups with the same
	// value go to different nodes (then racks) as far as the VC's cells
	// allow, like a group's own pods (inference replicas that must not
	// share a failure domain).
	LabelSpreadKey = "hivesched.io/spread-key"

	// AnnotationPlacement is written at bind: the group and this pod's cells,
	// which a restarted scheduler recovers its state from.
	AnnotationPlacement = "hivesched.io/placement"
	// AnnotationLeafCellIndices is written at bind: the pod's device indices.
	AnnotationLeafCellIndices = "hivesched.io/leaf-cell-indices"
)

// podRequest is what a pod asks the cell core for.
type podRequest struct {
	group          cellcore.AffinityGroupSpec // Name is namespace/group
	leafCellNumber int32                      // this pod's leaf cells
	hived          bool                       // asked in HiveD's form
}

func (r *podRequest) totalPods() int {
	n := 0
	for _, m := range r.group.Members {
		n += int(m.PodNumber)
	}
	return n
}

// hivedSpec is HiveD's pod-scheduling-spec, both versions. Version v1 (the
// default) names leafCellType/leafCellNumber and an affinityGroup of members;
// gpuType/gpuNumber are its older names of leafCellType/leafCellNumber.
// Version v2 names cellType/cellNumber and a podRootGroup tree of pod groups.
// Fields HiveD has and hivesched does not use (gangReleaseEnable,
// ignoreK8sSuggestedNodes) are read and ignored, as unknown fields are.
type hivedSpec struct {
	Version              string `json:"version"`
	VirtualCluster       string `json:"virtualCluster"`
	Priority             int32  `json:"priority"` // HiveD's default is 0
	PinnedCellID         string `json:"pinnedCellId"`
	LazyPreemptionEnable bool   `json:"lazyPreemptionEnable"`

	// v1
	LeafCellType   string `json:"leafCellType"`
	LeafCellNumber int32  `json:"leafCellNumber"`
	GpuType        string `json:"gpuType"`
	GpuNumber      int32  `json:"gpuNumber"`
	AffinityGroup  *struct {
		Name    string `json:"name"`
		Members []struct {
			PodNumber      int32 `json:"podNumber"`
			LeafCellNumber int32 `json:"leafCellNumber"`
			GpuNumber      int32 `json:"gpuNumber"`
		} `json:"members"`
	} `json:"affinityGroup"`

	// v2
	CellType     string         `json:"cellType"`
	CellNumber   int32          `json:"cellNumber"`
	PodRootGroup *hivedPodGroup `json:"podRootGroup"`
}

// hivedPodGroup is a node of HiveD v2's podRootGroup tree: pods and child
// groups that are all one gang. HiveD's v2 releases differ in how a group
// lists its pods, "pods" (a list, the first v2) or "pod" (one entry, the
// latest); both are read.
type hivedPodGroup struct {
	Name          string                `json:"name"`
	WithinOneCell string                `json:"withinOneCell"`
	Pod           *hivedPodGroupMember  `json:"pod"`
	Pods          []hivedPodGroupMember `json:"pods"`
	ChildGroups   []*hivedPodGroup      `json:"childGroups"`
}

type hivedPodGroupMember struct {
	PodMinNumber int32 `json:"podMinNumber"`
	PodMaxNumber int32 `json:"podMaxNumber"`
	CellsPerPod  struct {
		CellType   string `json:"cellType"`
		CellNumber int32  `json:"cellNumber"`
	} `json:"cellsPerPod"`
	ContainsCurrentPod bool `json:"containsCurrentPod"`
}

func (s *hivedSpec) hasV1Fields() bool {
	return s.LeafCellType != "" || s.LeafCellNumber != 0 || s.GpuType != "" || s.GpuNumber != 0 || s.AffinityGroup != nil
}

func (s *hivedSpec) hasV2Fields() bool {
	return s.CellType != "" || s.CellNumber != 0 || s.PodRootGroup != nil
}

// parsePod returns the pod's request, nil if the pod does not ask for cells
// (a plain pod, left to the other plugins), or an error that says what to fix.
func parsePod(pod *v1.Pod, resourceName v1.ResourceName) (*podRequest, error) {
	if raw, ok := pod.Annotations[HivedSpecAnnotation]; ok {
		return parseHived(pod, raw, resourceName)
	}
	vc, hasVC := pod.Labels[LabelVirtualCluster]
	leaves64, err := leafRequest(pod, resourceName)
	if err != nil {
		return nil, err
	}
	leaves := int32(leaves64) // bounded by leafRequest
	if !hasVC {
		if leaves > 0 {
			if g, ok := pod.Labels[LabelAffinityGroup]; ok && g != "" {
				return nil, fmt.Errorf("pod requests %d %s but names no virtual cluster: create AffinityGroup %q in namespace %q (the explicit form: its spec names the VC and the members), or set label %s and annotation %s",
					leaves, resourceName, g, pod.Namespace, LabelVirtualCluster, AnnotationGroupMembers)
			}
			return nil, fmt.Errorf("pod requests %d %s but names no virtual cluster: set label %s (or HiveD's annotation %s)", leaves, resourceName, LabelVirtualCluster, HivedSpecAnnotation)
		}
		return nil, nil
	}
	if vc == "" {
		return nil, fmt.Errorf("label %s is empty", LabelVirtualCluster)
	}
	if leaves <= 0 {
		return nil, fmt.Errorf("pod names virtual cluster %q but requests no %s: request the leaf cells (GPUs) it needs", vc, resourceName)
	}
	r := &podRequest{leafCellNumber: leaves}
	g := &r.group
	g.VirtualCluster = vc
	if s, ok := pod.Annotations[AnnotationPriority]; ok {
		p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("annotation %s=%q is not an integer (-1 for opportunistic, 0..%d)", AnnotationPriority, s, cellcore.MaxPriority)
		}
		g.Priority = int32(p)
	} else if pod.Spec.Priority != nil {
		g.Priority = priorityFromClass(*pod.Spec.Priority)
	}
	g.LeafCellType = pod.Annotations[AnnotationLeafCellType]
	g.PinnedCellID = pod.Annotations[AnnotationPinnedCell]
	if s, ok := pod.Annotations[AnnotationLazyPreemption]; ok {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("annotation %s=%q is not true or false", AnnotationLazyPreemption, s)
		}
		g.LazyPreemptionEnable = b
	}
	name, grouped := pod.Labels[LabelAffinityGroup]
	members := pod.Annotations[AnnotationGroupMembers]
	switch {
	case !grouped && members != "":
		return nil, fmt.Errorf("annotation %s is set but label %s is not: name the group", AnnotationGroupMembers, LabelAffinityGroup)
	case !grouped:
		name = pod.Name
		g.Members = []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: leaves}}
	case members == "":
		return nil, fmt.Errorf("label %s=%q needs annotation %s: the number of pods (\"4\") or the shape (\"2x8,1x4\")", LabelAffinityGroup, name, AnnotationGroupMembers)
	default:
		ms, err := parseMembers(members, leaves)
		if err != nil {
			return nil, err
		}
		g.Members = ms
	}
	if name == "" {
		return nil, fmt.Errorf("label %s is empty", LabelAffinityGroup)
	}
	g.Name = pod.Namespace + "/" + name
	g.Namespace = pod.Namespace
	g.SpreadKey = pod.Labels[LabelSpreadKey]
	if err := checkRequest(r); err != nil {
		return nil, err
	}
	return r, nil
}

// priorityFromClass maps a pod's Kubernetes priority (spec.priority, from
// its PriorityClass, which cluster admins gate with ResourceQuota scopes)
// into hivesched's guaranteed range: values from 0 to 1000 as they are,
// higher ones 1000, lower ones 0. Opportunistic (-1) is always asked for
// explicitly: a PriorityClass below zero (often used for batch work that
// should yield) is still guaranteed within its VC.
func priorityFromClass(p int32) int32 {
	return min(max(p, 0), cellcore.MaxPriority)
}

func parseMembers(s string, own int32) ([]cellcore.AffinityGroupMember, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 32); err == nil {
		if n <= 0 {
			return nil, fmt.Errorf("annotation %s=%q: the number of pods must be positive", AnnotationGroupMembers, s)
		}
		return []cellcore.AffinityGroupMember{{PodNumber: int32(n), LeafCellNumber: own}}, nil
	}
	var out []cellcore.AffinityGroupMember
	for _, part := range strings.Split(s, ",") {
		pods, leaves, ok := strings.Cut(strings.TrimSpace(part), "x")
		p, err1 := strconv.ParseInt(pods, 10, 32)
		l, err2 := strconv.ParseInt(leaves, 10, 32)
		if !ok || err1 != nil || err2 != nil || p <= 0 || l <= 0 {
			return nil, fmt.Errorf("annotation %s=%q: %q is not PODSxLEAFCELLS (for example 2x8)", AnnotationGroupMembers, s, part)
		}
		out = append(out, cellcore.AffinityGroupMember{PodNumber: int32(p), LeafCellNumber: int32(l)})
	}
	return out, nil
}

func parseHived(pod *v1.Pod, raw string, resourceName v1.ResourceName) (*podRequest, error) {
	var s hivedSpec
	if err := yaml.Unmarshal([]byte(raw), &s); err != nil {
		return nil, fmt.Errorf("annotation %s is not valid YAML: %v", HivedSpecAnnotation, err)
	}
	if s.VirtualCluster == "" {
		return nil, fmt.Errorf("annotation %s: virtualCluster is empty", HivedSpecAnnotation)
	}
	var r *podRequest
	var err error
	switch s.Version {
	case "", "v1":
		r, err = parseHivedV1(pod, &s, resourceName)
	case "v2":
		r, err = parseHivedV2(pod, &s, resourceName)
	default:
		return nil, fmt.Errorf("annotation %s: version %q is not supported: write v1 (the default: leafCellType, leafCellNumber, affinityGroup) or v2 (cellType, cellNumber, podRootGroup)", HivedSpecAnnotation, s.Version)
	}
	if err != nil {
		return nil, err
	}
	g := &r.group
	g.VirtualCluster = s.VirtualCluster
	g.Priority = s.Priority
	g.PinnedCellID = s.PinnedCellID
	g.LazyPreemptionEnable = s.LazyPreemptionEnable
	g.Name = pod.Namespace + "/" + g.Name
	g.Namespace = pod.Namespace
	g.SpreadKey = pod.Labels[LabelSpreadKey]
	if err := checkRequest(r); err != nil {
		return nil, err
	}
	return r, nil
}

// parseHivedV1 reads HiveD's first spec: leafCellType, leafCellNumber and an
// optional affinityGroup (without one, the pod is a group alone).
func parseHivedV1(pod *v1.Pod, s *hivedSpec, resourceName v1.ResourceName) (*podRequest, error) {
	if s.LeafCellType == "" {
		s.LeafCellType = s.GpuType
	}
	if s.LeafCellNumber == 0 {
		s.LeafCellNumber = s.GpuNumber
	}
	if s.LeafCellNumber == 0 && s.hasV2Fields() {
		return nil, fmt.Errorf("annotation %s: cellType, cellNumber and podRootGroup are fields of HiveD's version v2: add version: v2", HivedSpecAnnotation)
	}
	if s.LeafCellNumber <= 0 {
		return nil, fmt.Errorf("annotation %s: leafCellNumber must be positive, got %d", HivedSpecAnnotation, s.LeafCellNumber)
	}
	if err := checkLeafRequest(pod, resourceName, "leafCellNumber", s.LeafCellNumber); err != nil {
		return nil, err
	}
	r := &podRequest{leafCellNumber: s.LeafCellNumber, hived: true}
	g := &r.group
	g.LeafCellType = s.LeafCellType
	g.Name = pod.Name
	if s.AffinityGroup == nil {
		g.Members = []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: s.LeafCellNumber}}
		return r, nil
	}
	if s.AffinityGroup.Name == "" {
		return nil, fmt.Errorf("annotation %s: affinityGroup.name is empty", HivedSpecAnnotation)
	}
	g.Name = s.AffinityGroup.Name
	if len(s.AffinityGroup.Members) == 0 {
		return nil, fmt.Errorf("annotation %s: affinityGroup.members is empty", HivedSpecAnnotation)
	}
	for i, m := range s.AffinityGroup.Members {
		if m.LeafCellNumber == 0 {
			m.LeafCellNumber = m.GpuNumber
		}
		if m.PodNumber <= 0 || m.LeafCellNumber <= 0 {
			return nil, fmt.Errorf("annotation %s: affinityGroup.members[%d] needs positive podNumber and leafCellNumber", HivedSpecAnnotation, i)
		}
		g.Members = append(g.Members, cellcore.AffinityGroupMember{PodNumber: m.PodNumber, LeafCellNumber: m.LeafCellNumber})
	}
	return r, nil
}

// parseHivedV2 reads HiveD's version v2: cellType and cellNumber for this
// pod, and a podRootGroup tree whose pods and child groups all form one gang
// (without one, the pod is a group alone). The tree is flattened into the
// group's members, which is what HiveD does with a tree that asks for no
// withinOneCell. What hivesched cannot honour is refused with a message that
// says what to write instead: withinOneCell (a group held inside one cell of
// a given type), elastic groups (podMinNumber < podMaxNumber, which HiveD
// does not support either) and members of other cell types than the pod's.
func parseHivedV2(pod *v1.Pod, s *hivedSpec, resourceName v1.ResourceName) (*podRequest, error) {
	if s.hasV1Fields() {
		return nil, fmt.Errorf("annotation %s: leafCellType, leafCellNumber, gpuType, gpuNumber and affinityGroup are fields of version v1: version v2 names cellType, cellNumber and podRootGroup", HivedSpecAnnotation)
	}
	if s.CellNumber <= 0 {
		return nil, fmt.Errorf("annotation %s: cellNumber must be positive, got %d", HivedSpecAnnotation, s.CellNumber)
	}
	if err := checkLeafRequest(pod, resourceName, "cellNumber", s.CellNumber); err != nil {
		return nil, err
	}
	r := &podRequest{leafCellNumber: s.CellNumber, hived: true}
	g := &r.group
	g.LeafCellType = s.CellType
	if s.PodRootGroup == nil {
		g.Name = pod.Name
		g.Members = []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: s.CellNumber}}
		return r, nil
	}
	root := s.PodRootGroup
	if root.Name == "" {
		return nil, fmt.Errorf("annotation %s: podRootGroup.name is empty", HivedSpecAnnotation)
	}
	g.Name = root.Name
	type node struct {
		path  string
		group *hivedPodGroup
	}
	current := ""
	// Breadth first, as HiveD walks the tree.
	for queue := []node{{"podRootGroup", root}}; len(queue) > 0; queue = queue[1:] {
		n := queue[0]
		if n.group == nil {
			continue
		}
		if n.group.WithinOneCell != "" {
			return nil, fmt.Errorf("annotation %s: %s.withinOneCell %q is not supported: hivesched packs a group into the smallest cell that holds it but does not hold it to a cell type; remove withinOneCell, or pin the group to a cell of its VC with pinnedCellId",
				HivedSpecAnnotation, n.path, n.group.WithinOneCell)
		}
		type member struct {
			path string
			m    hivedPodGroupMember
		}
		var members []member
		if n.group.Pod != nil {
			members = append(members, member{n.path + ".pod", *n.group.Pod})
		}
		for i, m := range n.group.Pods {
			members = append(members, member{fmt.Sprintf("%s.pods[%d]", n.path, i), m})
		}
		for _, mm := range members {
			m, path := mm.m, mm.path
			if m.PodMinNumber <= 0 {
				return nil, fmt.Errorf("annotation %s: %s.podMinNumber must be positive, got %d", HivedSpecAnnotation, path, m.PodMinNumber)
			}
			if m.PodMaxNumber != 0 && m.PodMaxNumber != m.PodMinNumber {
				return nil, fmt.Errorf("annotation %s: %s: podMinNumber %d and podMaxNumber %d differ, and elastic groups are not supported (nor by HiveD): set both to the number of pods",
					HivedSpecAnnotation, path, m.PodMinNumber, m.PodMaxNumber)
			}
			if m.CellsPerPod.CellNumber <= 0 {
				return nil, fmt.Errorf("annotation %s: %s.cellsPerPod.cellNumber must be positive, got %d", HivedSpecAnnotation, path, m.CellsPerPod.CellNumber)
			}
			switch t := m.CellsPerPod.CellType; {
			case t == "" || t == g.LeafCellType:
			case g.LeafCellType == "":
				g.LeafCellType = t // the pod names none: its group's
			default:
				return nil, fmt.Errorf("annotation %s: %s.cellsPerPod.cellType %q differs from cell type %q (the pod's cellType or another member's): the pods of a group use one leaf cell type here; count every member's cells in %q",
					HivedSpecAnnotation, path, t, g.LeafCellType, g.LeafCellType)
			}
			if m.ContainsCurrentPod {
				if current != "" {
					return nil, fmt.Errorf("annotation %s: %s and %s both have containsCurrentPod: mark only the member this pod belongs to", HivedSpecAnnotation, current, path)
				}
				current = path
				if m.CellsPerPod.CellNumber != s.CellNumber {
					return nil, fmt.Errorf("annotation %s: %s has containsCurrentPod but cellsPerPod.cellNumber %d, not the pod's cellNumber %d",
						HivedSpecAnnotation, path, m.CellsPerPod.CellNumber, s.CellNumber)
				}
			}
			g.Members = append(g.Members, cellcore.AffinityGroupMember{PodNumber: m.PodMinNumber, LeafCellNumber: m.CellsPerPod.CellNumber})
		}
		for i, ch := range n.group.ChildGroups {
			queue = append(queue, node{fmt.Sprintf("%s.childGroups[%d]", n.path, i), ch})
		}
	}
	if len(g.Members) == 0 {
		return nil, fmt.Errorf("annotation %s: podRootGroup has no pods (pod or pods, in it or its childGroups)", HivedSpecAnnotation)
	}
	if current == "" {
		return nil, fmt.Errorf("annotation %s: no member of podRootGroup has containsCurrentPod: true: mark the member this pod belongs to", HivedSpecAnnotation)
	}
	return r, nil
}

// checkLeafRequest: a HiveD pod need not request the leaf cell resource
// (HiveD's pods request only HivedSchedulingEnableResource), but if it does,
// the request must be the leaf cell count of its spec. Otherwise the pod is
// placed on cells whose node then refuses it (or gets devices other than the
// ones it was given).
func checkLeafRequest(pod *v1.Pod, resourceName v1.ResourceName, field string, want int32) error {
	got, err := leafRequest(pod, resourceName)
	if err != nil {
		return err
	}
	if got != 0 && got != int64(want) {
		return fmt.Errorf("pod requests %d %s but its annotation %s asks for %s %d: request %d %s, or none as HiveD's pods do",
			got, resourceName, HivedSpecAnnotation, field, want, want, resourceName)
	}
	return nil
}

// checkRequest bounds what a pod asks for before anything is allocated for
// it (a group's slots are allocated per pod): the priority is in range (an
// out-of-range one also sorted first in the queue), the group has at most
// cellcore.MaxPodsPerGroup pods (a group-members of 2^31 would allocate
// 2^31 slots), and the pod's own size is one of its group's.
func checkRequest(r *podRequest) error {
	g := &r.group
	if g.Priority < cellcore.OpportunisticPriority || g.Priority > cellcore.MaxPriority {
		return fmt.Errorf("priority %d is out of range: -1 for opportunistic, 0..%d for guaranteed", g.Priority, cellcore.MaxPriority)
	}
	var pods int64
	for _, m := range g.Members {
		pods += int64(m.PodNumber)
	}
	if pods > cellcore.MaxPodsPerGroup {
		return fmt.Errorf("affinity group %q has %d pods (members %s), more than the supported %d", g.Name, pods, membersString(g.Members), cellcore.MaxPodsPerGroup)
	}
	return checkOwnSize(r)
}

// checkOwnSize: the pod's own leaf cell count must be one of its group's.
func checkOwnSize(r *podRequest) error {
	for _, m := range r.group.Members {
		if m.LeafCellNumber == r.leafCellNumber {
			return nil
		}
	}
	return fmt.Errorf("pod asks for %d leaf cells, but its affinity group %q has no member of that size (members: %s)", r.leafCellNumber, r.group.Name, membersString(r.group.Members))
}

func membersString(ms []cellcore.AffinityGroupMember) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%dx%d", m.PodNumber, m.LeafCellNumber)
	}
	return strings.Join(parts, ",")
}

// leafRequest is the pod's effective request of the leaf cell resource, as
// the scheduler computes it (component-helpers' PodRequests: the containers'
// sum plus sidecars, or the largest init container if larger, plus
// overhead), in int64. What is booked in the cell core must be exactly what
// the node's NodeResourcesFit counts: a sidecar's GPUs were not booked
// before, and a request above 2^31 was truncated into another number.
// A container that gives only a limit (the API server copies it into the
// request; objects that did not pass through it may not have it) counts
// its limit.
func leafRequest(pod *v1.Pod, name v1.ResourceName) (int64, error) {
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

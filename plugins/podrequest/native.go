package podrequest

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// Parse returns the request a pod writes itself, in HiveD's annotation or
// the native labels and annotations: nil if the pod does not ask for cells
// (a plain pod, left to the other plugins), or an error that says what to
// fix. The native form's topology constraint is read from
// hivesched.io/within-topology or Kueue's or KAI-Scheduler's required
// topology annotation (within.go); a pod alone (no group label) is held
// alone: its own cells inside one cell of that level.
func Parse(pod *v1.Pod, resourceName v1.ResourceName) (*Request, error) {
	if raw, ok := pod.Annotations[HivedSpecAnnotation]; ok {
		return parseHived(pod, raw, resourceName)
	}
	vc, hasVC := pod.Labels[LabelVirtualCluster]
	leaves64, err := LeafRequest(pod, resourceName)
	if err != nil {
		return nil, err
	}
	leaves := int32(leaves64) // bounded by LeafRequest
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
	name, grouped := pod.Labels[LabelAffinityGroup]
	if leaves <= 0 && !grouped {
		// Alone, it would ask the VC for nothing: most likely a GPU request
		// forgotten, which must not run without GPUs unnoticed. A member of
		// a gang may ask for none (the gang's shape says so).
		return nil, fmt.Errorf("pod names virtual cluster %q but requests no %s: request the leaf cells (GPUs) it needs, or make it a member of a gang whose shape (annotation %s) counts members without them (\"2x8,1x0\")", vc, resourceName, AnnotationGroupMembers)
	}
	r := &Request{LeafCellNumber: leaves}
	g := &r.Group
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
	if g.WithinTopologyKey, _, err = withinTopology(pod); err != nil {
		return nil, err
	}
	if s, ok := pod.Annotations[AnnotationLazyPreemption]; ok {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("annotation %s=%q is not true or false", AnnotationLazyPreemption, s)
		}
		g.LazyPreemptionEnable = b
	}
	switch v := pod.Annotations[AnnotationExtrasBeyondVC]; v {
	case "":
	case "opportunistic":
		g.ExtraOverflow = true
	default:
		return nil, fmt.Errorf("annotation %s=%q: the only value is \"opportunistic\" (extra pods that find no room in the VC run beyond it as opportunistic pods)", AnnotationExtrasBeyondVC, v)
	}
	members := pod.Annotations[AnnotationGroupMembers]
	switch {
	case !grouped && members != "":
		return nil, fmt.Errorf("annotation %s is set but label %s is not: name the group", AnnotationGroupMembers, LabelAffinityGroup)
	case !grouped:
		name = pod.Name
		g.Members = []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: leaves}}
	case members == "":
		return nil, fmt.Errorf("label %s=%q needs annotation %s: the number of pods (\"4\") or the shape (\"2x8,1x4\", \"2x8,1x0\" with a member that needs no GPU)", LabelAffinityGroup, name, AnnotationGroupMembers)
	default:
		ms, cellLess, err := parseMembers(members, leaves)
		if err != nil {
			return nil, err
		}
		g.Members, r.CellLessPods = ms, cellLess
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

// parseMembers reads a gang's shape: "4" (four pods of own leaf cells each)
// or "2x8,1x4,1x0"; members of 0 leaf cells (cell-less) are counted apart.
func parseMembers(s string, own int32) ([]cellcore.AffinityGroupMember, int32, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 32); err == nil {
		if n <= 0 {
			return nil, 0, fmt.Errorf("annotation %s=%q: the number of pods must be positive", AnnotationGroupMembers, s)
		}
		if own == 0 {
			return nil, 0, fmt.Errorf("annotation %s=%q says every pod of the gang has this pod's size, which asks for no leaf cells: write the gang's shape, the members without GPUs as Nx0 (\"2x8,1x0\")", AnnotationGroupMembers, s)
		}
		return []cellcore.AffinityGroupMember{{PodNumber: int32(n), LeafCellNumber: own}}, 0, nil
	}
	var out []cellcore.AffinityGroupMember
	var cellLess int64
	for _, part := range strings.Split(s, ",") {
		pods, leaves, ok := strings.Cut(strings.TrimSpace(part), "x")
		p, err1 := strconv.ParseInt(pods, 10, 32)
		l, err2 := strconv.ParseInt(leaves, 10, 32)
		if !ok || err1 != nil || err2 != nil || p <= 0 || l < 0 {
			return nil, 0, fmt.Errorf("annotation %s=%q: %q is not PODSxLEAFCELLS (for example 2x8, or 1x0 for a member without GPUs)", AnnotationGroupMembers, s, part)
		}
		if l == 0 {
			if cellLess += p; cellLess > cellcore.MaxPodsPerGroup {
				return nil, 0, fmt.Errorf("annotation %s=%q has %d members without leaf cells, more than the supported %d pods of a group", AnnotationGroupMembers, s, cellLess, cellcore.MaxPodsPerGroup)
			}
			continue
		}
		out = append(out, cellcore.AffinityGroupMember{PodNumber: int32(p), LeafCellNumber: int32(l)})
	}
	return out, int32(cellLess), nil
}

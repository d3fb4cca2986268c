package podrequest

import (
	"bytes"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// hivedSpec is HiveD's pod-scheduling-spec, both versions. Version v1 (the
// default) names leafCellType/leafCellNumber and an affinityGroup of members;
// gpuType/gpuNumber are its older names of leafCellType/leafCellNumber.
// Version v2 names cellType/cellNumber and a podRootGroup tree of pod groups.
// Fields HiveD has and hivesched does not use (gangReleaseEnable,
// ignoreK8sSuggestedNodes) are read and ignored. Any other field is refused:
// decoding is strict, so that a tenant cannot pad the annotation with keys
// that cost the scheduler time to read and mean nothing (docs/security.md).
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

	// HiveD's, not used by hivesched.
	GangReleaseEnable       bool `json:"gangReleaseEnable"`
	IgnoreK8sSuggestedNodes bool `json:"ignoreK8sSuggestedNodes"`
}

// MaxSpecBytes bounds HiveD's annotation: a spec takes a few hundred bytes
// (a deep v2 tree a few KiB), so a larger one is refused before it is
// decoded, whatever it holds.
const MaxSpecBytes = 16 << 10

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

func parseHived(pod *v1.Pod, raw string, resourceName v1.ResourceName) (*Request, error) {
	if len(raw) > MaxSpecBytes {
		return nil, fmt.Errorf("annotation %s is %d bytes, more than the %d a scheduling spec may take", HivedSpecAnnotation, len(raw), MaxSpecBytes)
	}
	js, err := yaml.YAMLToJSONStrict([]byte(raw)) // refuses duplicate keys too
	if err != nil {
		return nil, fmt.Errorf("annotation %s is not valid YAML: %v", HivedSpecAnnotation, err)
	}
	var s hivedSpec
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("annotation %s is not a HiveD scheduling spec (its fields: version, virtualCluster, priority, pinnedCellId, lazyPreemptionEnable, leafCellType, leafCellNumber, affinityGroup, cellType, cellNumber, podRootGroup, gangReleaseEnable, ignoreK8sSuggestedNodes): %v", HivedSpecAnnotation, err)
	}
	if s.VirtualCluster == "" {
		return nil, fmt.Errorf("annotation %s: virtualCluster is empty", HivedSpecAnnotation)
	}
	var r *Request
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
	g := &r.Group
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
func parseHivedV1(pod *v1.Pod, s *hivedSpec, resourceName v1.ResourceName) (*Request, error) {
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
	r := &Request{LeafCellNumber: s.LeafCellNumber, Hived: true}
	g := &r.Group
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
func parseHivedV2(pod *v1.Pod, s *hivedSpec, resourceName v1.ResourceName) (*Request, error) {
	if s.hasV1Fields() {
		return nil, fmt.Errorf("annotation %s: leafCellType, leafCellNumber, gpuType, gpuNumber and affinityGroup are fields of version v1: version v2 names cellType, cellNumber and podRootGroup", HivedSpecAnnotation)
	}
	if s.CellNumber <= 0 {
		return nil, fmt.Errorf("annotation %s: cellNumber must be positive, got %d", HivedSpecAnnotation, s.CellNumber)
	}
	if err := checkLeafRequest(pod, resourceName, "cellNumber", s.CellNumber); err != nil {
		return nil, err
	}
	r := &Request{LeafCellNumber: s.CellNumber, Hived: true}
	g := &r.Group
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
	got, err := LeafRequest(pod, resourceName)
	if err != nil {
		return err
	}
	if got != 0 && got != int64(want) {
		return fmt.Errorf("pod requests %d %s but its annotation %s asks for %s %d: request %d %s, or none as HiveD's pods do",
			got, resourceName, HivedSpecAnnotation, field, want, want, resourceName)
	}
	return nil
}

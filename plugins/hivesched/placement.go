package hivesched

import (
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// placementRecord is persisted on each bound pod (AnnotationPlacement): the
// group's spec and this pod's cells. A restarted scheduler rebuilds every
// Allocated group from its pods' records (the seed's ec).
//
// Downgraded says the group was lazily preempted (or its VC shrank or was
// deleted) and runs as opportunistic: it is written at bind for a group
// downgraded before, and patched onto running pods in the background when a
// downgrade happens (recordWriter). Recovery keeps such a group opportunistic
// instead of giving it back VC cells its preemptor was promised.
type placementRecord struct {
	Group                string                         `json:"group"`
	VirtualCluster       string                         `json:"virtualCluster"`
	Priority             int32                          `json:"priority"`
	LeafCellType         string                         `json:"leafCellType,omitempty"`
	PinnedCellID         string                         `json:"pinnedCellId,omitempty"`
	LazyPreemptionEnable bool                           `json:"lazyPreemptionEnable,omitempty"`
	Members              []cellcore.AffinityGroupMember `json:"members"`
	Node                 string                         `json:"node"`
	PodLeafCellType      string                         `json:"podLeafCellType,omitempty"`
	LeafCellIndices      []int32                        `json:"leafCellIndices"`
	Downgraded           bool                           `json:"downgraded,omitempty"`
	SpreadKey            string                         `json:"spreadKey,omitempty"`
}

func newPlacementRecord(g cellcore.AffinityGroupSpec, pp cellcore.PodPlacement, downgraded bool) placementRecord {
	return placementRecord{
		Group: g.Name, VirtualCluster: g.VirtualCluster, Priority: g.Priority, LeafCellType: g.LeafCellType,
		PinnedCellID: g.PinnedCellID, LazyPreemptionEnable: g.LazyPreemptionEnable, Members: g.Members,
		Node: pp.Node, PodLeafCellType: pp.LeafCellType, LeafCellIndices: pp.LeafCellIndices, Downgraded: downgraded,
		SpreadKey: g.SpreadKey,
	}
}

func (r placementRecord) spec() cellcore.AffinityGroupSpec {
	ns, _, _ := strings.Cut(r.Group, "/") // recovery trusts a record only for a group of its pod's namespace
	return cellcore.AffinityGroupSpec{Name: r.Group, VirtualCluster: r.VirtualCluster, Namespace: ns, Priority: r.Priority,
		LeafCellType: r.LeafCellType, PinnedCellID: r.PinnedCellID, LazyPreemptionEnable: r.LazyPreemptionEnable,
		Members: r.Members, SpreadKey: r.SpreadKey}
}

func (r placementRecord) encode() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// Bounds of a placement record, checked before and after decoding it. A
// record is written by this scheduler for one pod, but the decoder also
// reads records nobody vouched for yet (the downgrade writer's, tests,
// fuzzing): a record of 2^31 members or indices must not be allocated.
const (
	// maxPlacementBytes: the API server's limit on all of a pod's
	// annotations together is 256 KiB.
	maxPlacementBytes = 256 << 10
	// maxRecordMembers: a group has at most MaxPodsPerGroup pods, hence at
	// most that many distinct member shapes.
	maxRecordMembers = cellcore.MaxPodsPerGroup
)

func decodePlacement(s string) (placementRecord, error) {
	var r placementRecord
	if len(s) > maxPlacementBytes {
		return r, fmt.Errorf("annotation %s is %d bytes, more than a placement record can be (%d)", AnnotationPlacement, len(s), maxPlacementBytes)
	}
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return r, fmt.Errorf("annotation %s is not valid: %v", AnnotationPlacement, err)
	}
	if r.Group == "" || r.Node == "" || len(r.Members) == 0 || len(r.LeafCellIndices) == 0 {
		return r, fmt.Errorf("annotation %s lacks group, node, members or leaf cells", AnnotationPlacement)
	}
	if len(r.Members) > maxRecordMembers {
		return r, fmt.Errorf("annotation %s has %d members, more than a group can have (%d)", AnnotationPlacement, len(r.Members), maxRecordMembers)
	}
	// The counts themselves (podNumber, leafCellNumber, priority) are
	// bounded by the core before it allocates anything for the group
	// (RecoverAffinityGroup's validateRecovered).
	return r, nil
}

func indicesString(idx []int32) string {
	b := make([]byte, 0, len(idx)*3)
	for i, x := range idx {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%d", x)
	}
	return string(b)
}

// trustedPlacement returns a bound pod's placement record if this scheduler
// wrote it for this pod: the signature verifies (sign.go), the record's node
// is the pod's node and its group is in the pod's namespace. Anything else is
// not hivesched's allocation: it never takes or blocks cells.
func (p *HiveSched) trustedPlacement(pod *v1.Pod) (placementRecord, error) {
	raw, ok := pod.Annotations[AnnotationPlacement]
	if !ok {
		return placementRecord{}, fmt.Errorf("pod has no annotation %s", AnnotationPlacement)
	}
	if !p.signer.verify(pod) {
		return placementRecord{}, fmt.Errorf("annotation %s is not signed by this scheduler for this pod (%s missing or wrong): hivesched did not bind it", AnnotationPlacement, AnnotationPlacementSignature)
	}
	rec, err := decodePlacement(raw)
	if err != nil {
		return rec, err
	}
	if rec.Node != pod.Spec.NodeName {
		return rec, fmt.Errorf("annotation %s names node %q, but the pod is on node %q", AnnotationPlacement, rec.Node, pod.Spec.NodeName)
	}
	if ns, _, ok := strings.Cut(rec.Group, "/"); !ok || ns != pod.Namespace {
		return rec, fmt.Errorf("annotation %s names affinity group %q, which is not in the pod's namespace %q", AnnotationPlacement, rec.Group, pod.Namespace)
	}
	return rec, nil
}

// request is the pod request a trusted record stands for: the group as it
// was placed, whatever the pod's labels say now.
func (r placementRecord) request() *podrequest.Request {
	return &podrequest.Request{Group: r.spec(), LeafCellNumber: int32(len(r.LeafCellIndices))}
}

// signedAnnotations adds the signature of the record to ann.
func (p *HiveSched) signedAnnotations(pod *v1.Pod, ann map[string]string) map[string]string {
	ann[AnnotationPlacementSignature] = p.signer.sign(pod, ann[AnnotationPlacement])
	return ann
}

// Package placement is the placement record hivesched writes on every pod
// it binds (the group's spec and the pod's cells: what a restarted
// scheduler rebuilds its allocations from), its signature (an HMAC with a
// key kept in a Secret, so that only records hivesched wrote for that very
// pod count), and the background rewrite of records whose group was
// downgraded after they were written.
package placement

import (
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

const (
	// Annotation is written at bind: the group and this pod's cells, which
	// a restarted scheduler recovers its state from.
	Annotation = "hivesched.io/placement"
	// AnnotationLeafCellIndices is written at bind: the pod's device indices.
	AnnotationLeafCellIndices = "hivesched.io/leaf-cell-indices"
	// AnnotationHivedIsolation is written at bind on pods that asked in
	// HiveD's form: the pod's leaf cell (device) indices, comma separated,
	// as HiveD writes it.
	AnnotationHivedIsolation = "hivedscheduler.microsoft.com/pod-leaf-cell-isolation"
)

// Record is persisted on each bound pod (Annotation): the group's spec and
// this pod's cells. A restarted scheduler rebuilds every Allocated group
// from its pods' records (the seed's ec).
//
// Downgraded says the group was lazily preempted (or its VC shrank or was
// deleted) and runs as opportunistic: it is written at bind for a group
// downgraded before, and patched onto running pods in the background when a
// downgrade happens (RecordWriter). Recovery keeps such a group opportunistic
// instead of giving it back VC cells its preemptor was promised.
type Record struct {
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
	WithinTopologyKey    string                         `json:"withinTopologyKey,omitempty"`
	// ExtraOf: the pod was placed as an extra pod of this elastic gang
	// (Group is the extra's own group).
	ExtraOf string `json:"extraOf,omitempty"`
	// ExtraOverflow: the extra may run beyond its VC as opportunistic.
	ExtraOverflow bool `json:"extraOverflow,omitempty"`
	// CellLessPods is how many members of the group ask for no leaf cells
	// (podrequest.Request.CellLessPods). Such a member's own record has
	// no leaf cell indices: it holds no cells, and recovery takes it back
	// as a member of its gang only.
	CellLessPods int32 `json:"cellLessPods,omitempty"`
	// Claims are the pod's GPU claims (DRA) and the devices hivesched
	// allocated in them, written before the pod was bound: a restarted
	// scheduler takes the pod's cells as hivesched's only if its claims
	// still hold exactly these devices.
	Claims []ClaimRecord `json:"claims,omitempty"`
}

// ClaimRecord is one GPU claim of a pod, as hivesched allocated it.
type ClaimRecord struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
	// Devices are "driver/pool/device", sorted.
	Devices []string `json:"devices"`
}

// NewRecord is the record of a pod placed at pp in group g.
func NewRecord(g cellcore.AffinityGroupSpec, pp cellcore.PodPlacement, downgraded bool) Record {
	return Record{
		Group: g.Name, VirtualCluster: g.VirtualCluster, Priority: g.Priority, LeafCellType: g.LeafCellType,
		PinnedCellID: g.PinnedCellID, LazyPreemptionEnable: g.LazyPreemptionEnable, Members: g.Members,
		Node: pp.Node, PodLeafCellType: pp.LeafCellType, LeafCellIndices: pp.LeafCellIndices, Downgraded: downgraded,
		SpreadKey: g.SpreadKey, WithinTopologyKey: g.WithinTopologyKey, ExtraOf: g.ExtraOf,
		ExtraOverflow: g.ExtraOverflow,
	}
}

// Spec is the group's spec as its pods asked for it.
func (r Record) Spec() cellcore.AffinityGroupSpec {
	ns, _, _ := strings.Cut(r.Group, "/") // recovery trusts a record only for a group of its pod's namespace
	return cellcore.AffinityGroupSpec{Name: r.Group, VirtualCluster: r.VirtualCluster, Namespace: ns, Priority: r.Priority,
		LeafCellType: r.LeafCellType, PinnedCellID: r.PinnedCellID, LazyPreemptionEnable: r.LazyPreemptionEnable,
		Members: r.Members, SpreadKey: r.SpreadKey, WithinTopologyKey: r.WithinTopologyKey, ExtraOf: r.ExtraOf,
		ExtraOverflow: r.ExtraOverflow}
}

// Request is the pod request a trusted record stands for: the group as it
// was placed, whatever the pod's labels say now.
func (r Record) Request() *podrequest.Request {
	return &podrequest.Request{Group: r.Spec(), LeafCellNumber: int32(len(r.LeafCellIndices)), CellLessPods: r.CellLessPods}
}

// CellLess: the record is of a member that holds no cells.
func (r Record) CellLess() bool { return len(r.LeafCellIndices) == 0 }

// Recovered is the pod's cells as the core's recovery takes them.
func (r Record) Recovered(pod *v1.Pod) cellcore.RecoveredPod {
	return cellcore.RecoveredPod{PodKey: podrequest.PodKey(pod), Node: r.Node, LeafCellIndices: r.LeafCellIndices, Downgraded: r.Downgraded}
}

// Encode is the record as the annotation's value.
func (r Record) Encode() string {
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
	// maxRecordClaims: a pod lists at most 128 resource claims.
	maxRecordClaims = 128
)

// Decode reads an annotation's value, refusing records that lack what
// recovery needs or exceed the bounds.
func Decode(s string) (Record, error) {
	var r Record
	if len(s) > maxPlacementBytes {
		return r, fmt.Errorf("annotation %s is %d bytes, more than a placement record can be (%d)", Annotation, len(s), maxPlacementBytes)
	}
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return r, fmt.Errorf("annotation %s is not valid: %v", Annotation, err)
	}
	if r.Group == "" || r.Node == "" || len(r.Members) == 0 || (len(r.LeafCellIndices) == 0 && r.CellLessPods <= 0) {
		return r, fmt.Errorf("annotation %s lacks group, node, members or leaf cells", Annotation)
	}
	if r.CellLessPods < 0 || r.CellLessPods > cellcore.MaxPodsPerGroup {
		return r, fmt.Errorf("annotation %s has %d members without leaf cells, more than a group can have (%d)", Annotation, r.CellLessPods, cellcore.MaxPodsPerGroup)
	}
	if len(r.Claims) > maxRecordClaims {
		return r, fmt.Errorf("annotation %s has %d claims, more than a pod can have (%d)", Annotation, len(r.Claims), maxRecordClaims)
	}
	if len(r.Members) > maxRecordMembers {
		return r, fmt.Errorf("annotation %s has %d members, more than a group can have (%d)", Annotation, len(r.Members), maxRecordMembers)
	}
	// The counts themselves (podNumber, leafCellNumber, priority) are
	// bounded by the core before it allocates anything for the group
	// (RecoverAffinityGroup's validateRecovered).
	return r, nil
}

// Recorded decodes a bound pod's placement record as recovery reads it:
// its group's spec and the pod's cells. It does not verify the record's
// signature (Signature computes it). A checker outside the scheduler
// (test/chaos rebuilds a cell core from API objects alone, as a restarted
// scheduler would) reads records with it, so that it cannot drift from the
// scheduler.
func Recorded(pod *v1.Pod) (cellcore.AffinityGroupSpec, cellcore.RecoveredPod, error) {
	rec, err := Decode(pod.Annotations[Annotation])
	if err != nil {
		return cellcore.AffinityGroupSpec{}, cellcore.RecoveredPod{}, err
	}
	return rec.Spec(), rec.Recovered(pod), nil
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

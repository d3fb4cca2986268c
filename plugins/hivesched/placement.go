package hivesched

import (
	"encoding/json"
	"fmt"

	"github.com/hivesched/hivesched/plugins/cellcore"
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
}

func newPlacementRecord(g cellcore.AffinityGroupSpec, pp cellcore.PodPlacement, downgraded bool) placementRecord {
	return placementRecord{
		Group: g.Name, VirtualCluster: g.VirtualCluster, Priority: g.Priority, LeafCellType: g.LeafCellType,
		PinnedCellID: g.PinnedCellID, LazyPreemptionEnable: g.LazyPreemptionEnable, Members: g.Members,
		Node: pp.Node, PodLeafCellType: pp.LeafCellType, LeafCellIndices: pp.LeafCellIndices, Downgraded: downgraded,
	}
}

func (r placementRecord) spec() cellcore.AffinityGroupSpec {
	return cellcore.AffinityGroupSpec{Name: r.Group, VirtualCluster: r.VirtualCluster, Priority: r.Priority,
		LeafCellType: r.LeafCellType, PinnedCellID: r.PinnedCellID, LazyPreemptionEnable: r.LazyPreemptionEnable,
		Members: r.Members}
}

func (r placementRecord) encode() string {
	b, _ := json.Marshal(r)
	return string(b)
}

func decodePlacement(s string) (placementRecord, error) {
	var r placementRecord
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return r, fmt.Errorf("annotation %s is not valid: %v", AnnotationPlacement, err)
	}
	if r.Group == "" || r.Node == "" || len(r.Members) == 0 || len(r.LeafCellIndices) == 0 {
		return r, fmt.Errorf("annotation %s lacks group, node, members or leaf cells", AnnotationPlacement)
	}
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

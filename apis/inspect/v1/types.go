// Package v1 is the read-only inspect API the HiveSched scheduler serves
// (plugins/inspect) and `kubectl hivesched` reads: the cell
// state cache as JSON. It is plain data, versioned by its URL prefix
// (/v1/inspect/...), and carries no Kubernetes machinery so that a client
// needs nothing but an HTTP GET.
//
// Endpoints (all GET, JSON):
//
//	/v1/inspect/cells[?vc=NAME][&node=NAME]  ClusterCells: the physical cell tree
//	/v1/inspect/virtualclusters              []VirtualCluster
//	/v1/inspect/virtualclusters/NAME         VirtualCluster
//	/v1/inspect/affinitygroups               []AffinityGroup
//	/v1/inspect/affinitygroups/NS/NAME       AffinityGroup
//	/v1/inspect/pods/NS/NAME                 PodExplanation (kubectl hivesched why)
//
// Errors are HTTP status codes with an Error body.
package v1

import "time"

// PathPrefix is the URL prefix of every endpoint.
const PathPrefix = "/v1/inspect/"

// ClusterCells is the physical cell tree with each cell's state.
type ClusterCells struct {
	GeneratedAt time.Time `json:"generatedAt"`
	// Chains are the trees of one leaf cell type each (HiveD's chains).
	Chains []Chain `json:"chains"`
	// Filter is what the tree was narrowed to (empty: whole cluster).
	Filter Filter `json:"filter,omitempty"`
}

// Filter narrows a cell tree: cells bound to a VC (and their ancestors),
// or one node's cells (and its ancestors).
type Filter struct {
	VirtualCluster string `json:"virtualCluster,omitempty"`
	Node           string `json:"node,omitempty"`
}

// Chain is one leaf cell type's cell hierarchy.
type Chain struct {
	Name         string `json:"name"`
	LeafCellType string `json:"leafCellType"`
	// Levels names the cell type of each level, leaf first.
	Levels []string `json:"levels"`
	Cells  []Cell   `json:"cells"` // top-level cells
}

// Cell is one physical cell and its subtree.
type Cell struct {
	ID       string `json:"id"`
	CellType string `json:"cellType"`
	Level    int    `json:"level"` // 1 for leaf cells
	Address  string `json:"address"`
	Node     string `json:"node,omitempty"` // for cells at or below node level
	// Index is the device index of a leaf cell.
	Index *int32 `json:"index,omitempty"`
	// Health: "good", or why the cell cannot be scheduled ("bad",
	// "maintenance", "retired", "unknown", "doomed" for a cell a VC keeps
	// bound to lost hardware).
	Health string `json:"health"`
	// VirtualCluster is the VC the cell is bound to (itself or an
	// ancestor), and PinnedCellID its pinned cell, if any.
	VirtualCluster string `json:"virtualCluster,omitempty"`
	PinnedCellID   string `json:"pinnedCellId,omitempty"`
	// Leaf cells only: the seed's cell state and the groups on it.
	State          string `json:"state,omitempty"` // Free, Used, Reserving, Reserved
	Group          string `json:"group,omitempty"`
	Priority       *int32 `json:"priority,omitempty"` // of Group (-1: opportunistic)
	ReservingGroup string `json:"reservingGroup,omitempty"`
	// Counts of the leaves below (itself for a leaf).
	Leaves     int32 `json:"leaves"`
	UsedLeaves int32 `json:"usedLeaves"`
	FreeLeaves int32 `json:"freeLeaves"`
	BadLeaves  int32 `json:"badLeaves"`

	Children []Cell `json:"children,omitempty"`
}

// VirtualCluster is a VC's virtual cells and their physical bindings.
type VirtualCluster struct {
	Name  string `json:"name"`
	State string `json:"state,omitempty"` // Active, Draining, Stopped, Rejected
	// Cells per chain and level: how many the VC owns, how many are bound
	// to physical cells, and those physical cells.
	Cells []VirtualCells `json:"cells"`
	// PinnedCells are the VC's pinned physical cells.
	PinnedCells []PinnedCell `json:"pinnedCells,omitempty"`
	// AffinityGroups counts its groups by state (seed 000 names).
	AffinityGroups map[string]int `json:"affinityGroups"`
	LeafCells      LeafCounts     `json:"leafCells"`
}

// VirtualCells is one level of a VC's cells in a chain.
type VirtualCells struct {
	Chain    string   `json:"chain"`
	CellType string   `json:"cellType"`
	Level    int      `json:"level"`
	Total    int32    `json:"total"`
	Bound    int32    `json:"bound"`
	Physical []string `json:"physical,omitempty"` // IDs of the bound physical cells
}

// PinnedCell is a pinned cell of a VC.
type PinnedCell struct {
	ID       string `json:"id"`
	CellType string `json:"cellType"`
	Physical string `json:"physical"`
}

// LeafCounts counts a VC's leaf cells.
type LeafCounts struct {
	Total         int32 `json:"total"`
	Used          int32 `json:"used"`
	Free          int32 `json:"free"`
	Opportunistic int32 `json:"opportunistic"` // used by its opportunistic groups, anywhere
}

// AffinityGroup is a group's placement, state and, when it waits, why.
type AffinityGroup struct {
	Name           string `json:"name"` // namespace/name
	VirtualCluster string `json:"virtualCluster"`
	State          string `json:"state"`    // Pending, Preempting, Allocated, Being preempted
	Priority       int32  `json:"priority"` // effective: -1 once downgraded
	Downgraded     bool   `json:"downgraded,omitempty"`
	// Reason says in one sentence what a Pending or Preempting group waits
	// for: which VC, which level, which groups hold the cells, what would
	// free them.
	Reason string `json:"reason,omitempty"`
	// Victims: the groups a Preempting group waits to see deleted.
	Victims []string `json:"victims,omitempty"`
	Pods    []Pod    `json:"pods,omitempty"`
}

// Pod is one member's placement.
type Pod struct {
	Name            string  `json:"name,omitempty"` // namespace/name, when known
	Node            string  `json:"node,omitempty"`
	LeafCellType    string  `json:"leafCellType,omitempty"`
	LeafCellNumber  int32   `json:"leafCellNumber"`
	LeafCellIndices []int32 `json:"leafCellIndices,omitempty"`
}

// PodExplanation answers "why is this pod (not) running".
type PodExplanation struct {
	Pod string `json:"pod"` // namespace/name
	// Group is the pod's affinity group, nil if the scheduler does not
	// know the pod as one of its groups' members.
	Group *AffinityGroup `json:"group,omitempty"`
	// Summary is one plain sentence for a person.
	Summary string `json:"summary"`
	// Holders are the groups using cells of the pod's VC, highest priority
	// first (what would free them: deleting them, or a higher priority).
	Holders []Holder `json:"holders,omitempty"`
}

// Holder is a group holding cells a waiting group could use.
type Holder struct {
	Group       string `json:"group"`
	Priority    int32  `json:"priority"`
	LeafCells   int32  `json:"leafCells"`
	Preemptible bool   `json:"preemptible"` // lower priority than the waiting group, or opportunistic
}

// Error is the body of a non-200 answer.
type Error struct {
	Error string `json:"error"`
}

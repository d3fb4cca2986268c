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
//	/v1/inspect/cellmap                      CellMap: the tree down to nodes, leaves as codes (the dashboard)
//	/v1/inspect/history                      History: each VC's leaf counts over the last hour
//	/v1/inspect/events                       []Event: recent preemptions and lazy downgrades
//
// The dashboard (plugins/inspect/dashboard) is served beside them under
// /dashboard/. Every request is authenticated (a bearer token, in
// Authorization or, through the API server's service proxy, which keeps
// Authorization for itself, in X-Hivesched-Authorization) and authorized
// by the API server (docs/inspect.md, "Who may read it").
//
// Errors are HTTP status codes with an Error body.
package v1

import "time"

// PathPrefix is the URL prefix of every endpoint.
const PathPrefix = "/v1/inspect/"

// DashboardPath is where the dashboard's page is served.
const DashboardPath = "/dashboard/"

// AuthorizationHeader carries the caller's bearer token ("Bearer TOKEN")
// when Authorization cannot: the API server's service proxy authenticates
// the caller with Authorization and removes it before proxying.
const AuthorizationHeader = "X-Hivesched-Authorization"

// The virtual resource the inspect API authorizes against (no object of
// it exists): get to read the API at all, list to see every namespace's
// groups and pods (without it, a caller sees the groups and pods of the
// namespaces where it may list pods).
const (
	AuthorizationGroup    = "hivesched.io"
	AuthorizationResource = "inspect"
)

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

// LeafCounts counts a VC's leaf cells. Total = Used + Free + Lent +
// Unavailable, as the VirtualCluster's status and `kubectl get vc` count
// them.
type LeafCounts struct {
	Total int32 `json:"total"`
	Used  int32 `json:"used"` // by its guaranteed groups, or reserved for them
	Free  int32 `json:"free"` // healthy and free, and virtual cells not bound yet
	// Lent: healthy cells of the VC that opportunistic groups use (another
	// VC's, or its own outside its guarantee); the VC takes them back by
	// preemption when it needs them.
	Lent int32 `json:"lent,omitempty"`
	// Unavailable: cells of the VC neither used by it, free nor lent: lost
	// hardware, devices held by pods hivesched did not place, hardware of
	// unknown health.
	Unavailable int32 `json:"unavailable,omitempty"`
	// Reserved: of Used, the cells reserved for its preempting groups.
	Reserved int32 `json:"reserved,omitempty"`
	// Lost: the VC's cells on lost hardware or held by foreign pods, used
	// or not (the status' lostLeafCells; may overlap Used).
	Lost int32 `json:"lost,omitempty"`
	// Opportunistic: used by its opportunistic groups, anywhere (outside
	// Total).
	Opportunistic int32 `json:"opportunistic"`
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

	// The group's lifecycle, as its AffinityGroup object shows it (set by
	// the list endpoint and the single-group one): phase, the number of
	// member pods the group asks for and how many exist and are bound, and
	// when its first pod (or its AffinityGroup object) was created.
	Phase       string     `json:"phase,omitempty"`
	MemberPods  int32      `json:"memberPods,omitempty"`
	CreatedPods int32      `json:"createdPods,omitempty"`
	BoundPods   int32      `json:"boundPods,omitempty"`
	Created     *time.Time `json:"created,omitempty"`

	// Elastic gangs (docs/elastic.md): an extra pod's group names its gang
	// (ExtraOf); a gang counts its extra pods that hold cells, and how
	// many of those are bound.
	ExtraOf        string `json:"extraOf,omitempty"`
	ExtraPods      int32  `json:"extraPods,omitempty"`
	BoundExtraPods int32  `json:"boundExtraPods,omitempty"`
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

// CellMap is the physical tree down to nodes, with each node's leaf cells
// as one code per leaf: what the dashboard draws, about a hundredth of the
// size of ClusterCells (10,000 nodes: under 2 MB of JSON). It names no
// group: a node's groups are in ClusterCells (?node=NAME).
type CellMap struct {
	GeneratedAt time.Time `json:"generatedAt"`
	// VirtualClusters names the VCs the Owners of nodes refer to by index.
	VirtualClusters []string   `json:"virtualClusters"`
	Chains          []MapChain `json:"chains"`
}

// MapChain is one chain: its cells above node level (racks), then its nodes.
type MapChain struct {
	Name         string   `json:"name"`
	LeafCellType string   `json:"leafCellType"`
	Levels       []string `json:"levels"` // cell type per level, leaf first
	// Cells are the cells above node level, each after its parent.
	Cells []MapCell `json:"cells"`
	Nodes []MapNode `json:"nodes"`
}

// MapCell is a cell above node level.
type MapCell struct {
	ID      string `json:"id"`
	Level   int    `json:"level"`
	Address string `json:"address"`
	Parent  int    `json:"parent"` // index in Cells, -1 for a top cell
	// VC is the index of the VC it is bound to as a whole, -1 if none.
	VC int `json:"vc"`
}

// MapNode is a node-level cell and its leaves.
type MapNode struct {
	Name   string `json:"name"`
	ID     string `json:"id"`
	Parent int    `json:"parent"` // index in the chain's Cells, -1 for a top cell
	Health string `json:"health"`
	// VC is the index of the VC the node is bound to (itself or an
	// ancestor), -1 if none; Pinned its pinned cell.
	VC     int    `json:"vc"`
	Pinned string `json:"pinned,omitempty"`
	// Leaves: one code per leaf cell, in tree order, a space where a
	// switch (or another level between leaf and node) ends:
	//   U used by a guaranteed group   o used by an opportunistic group
	//   R reserved for a preempting group   . free, bound to a VC
	//   _ free, not bound   X bad hardware   F held by a pod hivesched did
	//   not place   ? not schedulable now (unknown health)
	Leaves string `json:"leaves"`
	// Owners: per leaf (spaces skipped), the index of the VC whose colour
	// it has: the group's VC when used or reserved, else the VC it is bound
	// to; -1 none.
	Owners []int `json:"owners"`
	// Indices: per leaf, its device index.
	Indices []int32 `json:"indices"`
}

// History is each VC's leaf counts sampled over the last hour (the
// scheduler keeps a fixed number of samples in memory).
type History struct {
	// Interval between samples; samples are oldest first, and the last
	// is the counts at the time of the answer.
	IntervalSeconds int         `json:"intervalSeconds"`
	Times           []time.Time `json:"times"`
	// VirtualClusters: per VC, one LeafCounts per time (zero before the VC
	// existed).
	VirtualClusters map[string][]LeafCounts `json:"virtualClusters"`
}

// Event is one of the scheduler's recent decisions an operator looks for:
// a preemption, a lazy downgrade, a placement given up, a pending timeout.
type Event struct {
	Time     time.Time `json:"time"`     // first seen
	LastTime time.Time `json:"lastTime"` // last seen (Count > 1)
	// Reason: Preempted, LazilyPreempted, Downgraded (a VC shrank),
	// PlacementGivenUp, PendingTimeout.
	Reason string `json:"reason"`
	Type   string `json:"type"` // Normal or Warning
	// Object is the pod (namespace/name) or VC the event is about; Count
	// how many objects the same event was about (a gang's pods).
	Object  string `json:"object"`
	Count   int32  `json:"count"`
	Message string `json:"message"`
}

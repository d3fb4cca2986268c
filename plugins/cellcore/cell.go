package cellcore

import (
	"strconv"
	"strings"
)

// CellState is the state of a leaf (lowest-level physical) cell, as the seed's
// cell state machine names it. Only leaf cells have states.
type CellState uint8

const (
	CellFree CellState = iota
	CellUsed
	CellReserving
	CellReserved
)

func (s CellState) String() string {
	switch s {
	case CellFree:
		return "Free"
	case CellUsed:
		return "Used"
	case CellReserving:
		return "Reserving"
	case CellReserved:
		return "Reserved"
	}
	return "CellState(" + strconv.Itoa(int(s)) + ")"
}

// membership kinds: a cell can be in up to three bucket indexes at once.
const (
	idxRoot = iota // its pool's root index (free pool roots, VC bound cells, a pinned cell)
	idxTop         // its chain's top-cell index (every top cell, for opportunistic search)
	idxFree        // its chain's buddy free list at its level
	numIdx
)

// Cell is a physical cell. Counters describe the leaves below it (itself, for
// a leaf) and are kept exact on every change; maxFree and index positions are
// refreshed in a batched flush at the end of each Core operation.
type Cell struct {
	chain    *chain
	parent   *Cell
	children []*Cell
	nodeCell *Cell   // the node-level ancestor (self at node level); nil above node level
	node     *node   // the node, for cells at or below node level
	pool     *pool   // set on pool roots only: free-list cells, bound cells, pinned cells
	maxFree  []int32 // maxFree[j-1]: most free leaves in one level-j descendant, j < level
	address  string

	level     int8
	state     CellState    // leaves only
	doomed    bool         // a bound root bound to lost hardware to keep the safety invariant
	device    DeviceHealth // leaves only: the device's own health (seed 003)
	mark      leafMark     // leaves only: counted as taken by a node's unnamed unhealthy devices or foreign pods
	claimed   bool         // leaves only: a device claim (DRA) names the device (claimed.go)
	index     int32        // leaves: device index in the node
	leafCount int32

	freeLeaves        int32 // schedulable leaves in state Free
	unschedLeaves     int32 // leaves that may not receive new placements
	lostLeaves        int32 // leaves whose capacity is lost (bad, maintenance, retired)
	oppLeaves         int32 // leaves used by opportunistic AGs
	guarLeaves        int32 // leaves used by guaranteed AGs or reserved by preemptors
	idleUnschedLeaves int32 // leaves no AG holds that may not receive new placements
	// splitFree: on a cell above the pool roots (split), the free leaves of
	// the free-pool roots below it (freePoolFree).
	splitFree int32

	pos [numIdx]int32
	key [numIdx]int32

	markEpoch uint32 // search scratch: leaf taken / cell counted in the current search
	markCount int32  // search scratch at and below node level: leaves taken below

	dirty bool

	// leaves only
	using     *AffinityGroup // the Allocated or Being preempted AG on the cell
	reserving *AffinityGroup // the Preempting AG on the cell
}

// Level is the cell's level in its chain: 1 for leaf cells.
func (c *Cell) Level() int { return int(c.level) }

func (c *Cell) isLeaf() bool { return c.level == 1 }

// contribution of one leaf to its ancestors' counters.
type leafCounts struct{ free, unsched, lost, opp, guar, idleUnsched int32 }

func (c *Cell) leafContribution() leafCounts {
	return c.contribution(c.schedulable(), c.lost())
}

// contribution is leafContribution for a leaf whose schedulable() and
// lost() are sched and lost (setLeaf changes a leaf's state, never these).
func (c *Cell) contribution(sched, lost bool) leafCounts {
	var lc leafCounts
	if !sched {
		lc.unsched = 1
	}
	if lost {
		lc.lost = 1
	}
	if sched && c.state == CellFree {
		lc.free = 1
	}
	if c.using != nil {
		if c.using.opportunistic() {
			lc.opp = 1
		} else {
			lc.guar = 1
		}
	}
	if c.reserving != nil && lc.guar == 0 {
		lc.guar = 1
	}
	if !sched && c.using == nil && c.reserving == nil {
		lc.idleUnsched = 1
	}
	return lc
}

// schedulable: a new placement may land on the leaf (seed 003: only GOOD
// hardware is considered; unknown hardware is not, until first seen healthy;
// nor is a device another scheduler's pod holds).
func (c *Cell) schedulable() bool {
	return c.device == DeviceGood && c.mark == markNone && c.node != nil && c.node.health == NodeHealthy
}

// lost: the leaf's capacity is gone for the safety invariant. Unknown and
// Looping hardware is not lost: it is expected back, and dooming VCs' cells
// for every health check would churn their bindings.
func (c *Cell) lost() bool {
	if c.mark != markNone || c.device.lost() {
		return true
	}
	switch c.node.health {
	case NodeBad, NodeMaintenance, NodeRetired:
		return true
	}
	return false
}

// ID is a readable, unique path of the cell: chain/address/.../address.
func (c *Cell) ID() string {
	parts := make([]string, 0, c.level+1)
	for x := c; x != nil; x = x.parent {
		parts = append(parts, x.address)
	}
	parts = append(parts, c.chain.name)
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, "/")
}

// NodeName is the Kubernetes node of a cell at or below node level.
func (c *Cell) NodeName() string {
	if c.node == nil {
		return ""
	}
	return c.node.name
}

// freePoolFree is how many free leaves below c lie in its chain's free
// pool: what an opportunistic group's first search may take there.
func (c *Cell) freePoolFree() int32 {
	if r := c.rootAncestor(); r != nil {
		if r.pool.isFree() {
			return c.freeLeaves
		}
		return 0
	}
	return c.splitFree
}

// rootAncestor returns the pool root above or at c, or nil if c is above every
// root (a split cell).
func (c *Cell) rootAncestor() *Cell {
	for x := c; x != nil; x = x.parent {
		if x.pool != nil {
			return x
		}
	}
	return nil
}

// forEachLeaf calls fn for every leaf below c.
func (c *Cell) forEachLeaf(fn func(*Cell)) {
	if c.isLeaf() {
		fn(c)
		return
	}
	for _, ch := range c.children {
		ch.forEachLeaf(fn)
	}
}

// NodeHealth is the health of a node's hardware, after LAVA's device health
// (seed 003): only Healthy hardware receives new placements.
type NodeHealth uint8

const (
	// NodeUnknown: not yet seen. Not schedulable, but not counted as lost
	// capacity either: a starting scheduler has seen no node yet.
	NodeUnknown NodeHealth = iota
	NodeHealthy
	// NodeBad: not ready (LAVA BAD).
	NodeBad
	// NodeMaintenance: cordoned by an operator (LAVA MAINTENANCE).
	NodeMaintenance
	// NodeRetired: taken out of service for good (LAVA RETIRED).
	NodeRetired
	// NodeLooping: being health-checked (LAVA LOOPING). Not schedulable,
	// not lost: like Unknown, it is expected back.
	NodeLooping
)

func (h NodeHealth) String() string {
	switch h {
	case NodeUnknown:
		return "Unknown"
	case NodeHealthy:
		return "Healthy"
	case NodeBad:
		return "Bad"
	case NodeMaintenance:
		return "Maintenance"
	case NodeRetired:
		return "Retired"
	case NodeLooping:
		return "Looping"
	}
	return "NodeHealth(" + strconv.Itoa(int(h)) + ")"
}

type node struct {
	name   string
	health NodeHealth
	cells  []*Cell // node-level cells of this node, one per chain it is in

	// Devices the node reports as taken without naming them: unhealthy ones
	// (allocatable below capacity) and those foreign pods use. The core
	// marks that many of the node's leaves (markNodeLeaves) and moves the
	// marks to idle leaves as groups come and go.
	wantMarks [numMarks]int32
	remark    bool // queued for markNodeLeaves at the end of the operation
	// claimed: how many of its leaves device claims name (claimed.go); a
	// claimed leaf no group holds carries the foreign mark.
	claimed int32
}

package cellcore

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// DeviceHealth is one device's (leaf cell's) health, after LAVA's device
// health (seed 003). Only Good devices receive new placements; Bad,
// Maintenance and Retired ones are lost capacity (the VCs' cells bound to
// them are doomed where the free pool falls short); Unknown and Looping ones
// are held back but expected back, so no VC loses a cell for them.
type DeviceHealth uint8

const (
	DeviceGood DeviceHealth = iota
	DeviceUnknown
	DeviceLooping
	DeviceBad
	DeviceMaintenance
	DeviceRetired
)

var deviceHealthNames = [...]string{"good", "unknown", "looping", "bad", "maintenance", "retired"}

func (h DeviceHealth) String() string {
	if int(h) < len(deviceHealthNames) {
		return deviceHealthNames[h]
	}
	return "DeviceHealth(" + strconv.Itoa(int(h)) + ")"
}

// ParseDeviceHealth reads a LAVA health name (lower case).
func ParseDeviceHealth(s string) (DeviceHealth, bool) {
	for i, n := range deviceHealthNames {
		if n == s {
			return DeviceHealth(i), true
		}
	}
	return DeviceGood, false
}

func (h DeviceHealth) lost() bool { return h >= DeviceBad && h <= DeviceRetired }

// leafMark says why an otherwise good leaf is counted as taken although no
// group of the core uses it.
type leafMark uint8

const (
	markNone leafMark = iota
	// markUnhealthy: the node reports fewer allocatable devices than it has,
	// without naming which (the NVIDIA device plugin does this for a failed
	// GPU).
	markUnhealthy
	// markForeign: a pod hivesched did not place (another scheduler's, or
	// one created with spec.nodeName) holds a device of the node.
	markForeign
	numMarks
)

// DeviceStatus is the health of one named device.
type DeviceStatus struct {
	// LeafCellType may be empty: the device of that index in any chain of
	// the node.
	LeafCellType string
	Index        int32
	Health       DeviceHealth
}

// NodeDevices is what a node reports about its devices beyond its own health.
type NodeDevices struct {
	// Devices are the named devices that are not Good; every other device
	// of the node is Good.
	Devices []DeviceStatus
	// Unhealthy devices are known but not named (capacity minus
	// allocatable, beyond the named ones).
	Unhealthy int32
	// Foreign devices are held by pods hivesched did not place.
	Foreign int32
	// Claimed devices are named in device claims (DRA ResourceClaims): a
	// claimed leaf that no group uses or reserves is taken (claimed.go).
	Claimed []DeviceRef
}

// SetNodeDevices records a node's device health and the devices taken
// without a name (unhealthy or held by foreign pods). Named devices that do
// not exist are reported in the error; the rest is applied all the same, so
// that one typo in an operator's list does not hide the other bad devices.
// Counts beyond the node's leaves mark every leaf.
func (k *Core) SetNodeDevices(name string, d NodeDevices) error {
	if d.Unhealthy < 0 || d.Foreign < 0 {
		return fmt.Errorf("node %q: negative device counts (unhealthy %d, foreign %d)", name, d.Unhealthy, d.Foreign)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.finish()
	n := k.nodes[name]
	if n == nil {
		return fmt.Errorf("node %q is not in the physical cluster", name)
	}
	want := make(map[*Cell]DeviceHealth, len(d.Devices))
	var errs []error
	for _, dv := range d.Devices {
		if int(dv.Health) >= len(deviceHealthNames) {
			errs = append(errs, fmt.Errorf("device %d: invalid health %d", dv.Index, dv.Health))
			continue
		}
		found := false
		for _, nc := range n.cells {
			if dv.LeafCellType != "" && nc.chain.leafType != dv.LeafCellType {
				continue
			}
			nc.forEachLeaf(func(l *Cell) {
				if l.index == dv.Index {
					want[l] = dv.Health
					found = true
				}
			})
		}
		if !found {
			errs = append(errs, fmt.Errorf("node %q has no device %d of leaf cell type %q", name, dv.Index, dv.LeafCellType))
		}
	}
	for _, nc := range n.cells {
		nc.forEachLeaf(func(l *Cell) {
			if h := want[l]; h != l.device {
				old := l.leafContribution()
				l.device = h
				k.updateLeaf(l, old)
			}
		})
	}
	n.wantMarks[markUnhealthy], n.wantMarks[markForeign] = d.Unhealthy, d.Foreign
	errs = append(errs, k.setClaimed(n, d.Claimed)...)
	k.queueRemark(n)
	return errors.Join(errs...)
}

// NodeDevicesOf returns what SetNodeDevices last recorded for a node (named
// devices in leaf order), and whether the node is known.
func (k *Core) NodeDevicesOf(name string) (NodeDevices, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := k.nodes[name]
	if n == nil {
		return NodeDevices{}, false
	}
	d := NodeDevices{Unhealthy: n.wantMarks[markUnhealthy], Foreign: n.wantMarks[markForeign], Claimed: n.claimedRefs()}
	for _, nc := range n.cells {
		nc.forEachLeaf(func(l *Cell) {
			if l.device != DeviceGood {
				d.Devices = append(d.Devices, DeviceStatus{LeafCellType: nc.chain.leafType, Index: l.index, Health: l.device})
			}
		})
	}
	return d, true
}

func (k *Core) queueRemark(n *node) {
	if !n.remark {
		n.remark = true
		k.remarkNodes = append(k.remarkNodes, n)
	}
}

// remarkQueued places the marks of every node queued in this operation.
func (k *Core) remarkQueued() {
	for len(k.remarkNodes) > 0 {
		list := k.remarkNodes
		k.remarkNodes = nil
		for _, n := range list {
			n.remark = false
			k.markNodeLeaves(n)
		}
	}
}

// markNodeLeaves puts the node's wanted marks on its leaves. Which devices
// an unnamed unhealthy device or a foreign pod holds is not known; only how
// many. So the marks go where they cost least: on idle good leaves first,
// packed into the sub-cells that are already the busiest (the buddy cells
// that stay whole are what large groups need), and only when idle leaves
// run out on leaves the core's groups use (the node is over-committed: the
// count stays right, and the marks move to leaves that go idle). A mark on an
// idle leaf stays where it is, so marks do not wander as groups come and go.
func (k *Core) markNodeLeaves(n *node) {
	k.marking = true
	defer func() { k.marking = false }()
	type cand struct {
		l     *Cell
		busy  bool    // used or reserved by a group
		fill  [8]int8 // per level above the leaf, busy leaves in that ancestor (more first)
		stay  leafMark
		order int
	}
	var cands []cand
	total := int32(0)
	for _, nc := range n.cells {
		nc.forEachLeaf(func(l *Cell) {
			if l.device != DeviceGood || l.claimed {
				// Not Good: no mark. Claimed: the claim's mark on exactly
				// this leaf (claimedMark), never one of the unnamed ones.
				m := markNone
				if l.claimed {
					m = l.claimedMark()
				}
				if l.mark != m {
					old := l.leafContribution()
					l.mark = m
					k.updateLeaf(l, old)
				}
				return
			}
			c := cand{l: l, busy: !l.idle(), stay: l.mark, order: len(cands)}
			i := 0
			for x := l.parent; x != nil && i < len(c.fill); x = x.parent {
				if x.level > nc.level {
					break
				}
				c.fill[i] = int8(min(x.leafCount-x.idleGoodLeaves(), 127))
				i++
			}
			cands = append(cands, c)
			total++
		})
	}
	want := n.wantMarks
	if want[markUnhealthy]+want[markForeign] == 0 {
		for _, c := range cands {
			if c.l.mark != markNone {
				old := c.l.leafContribution()
				c.l.mark = markNone
				k.updateLeaf(c.l, old)
			}
		}
		return
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := &cands[i], &cands[j]
		if a.busy != b.busy {
			return !a.busy
		}
		if (a.stay != markNone) != (b.stay != markNone) {
			return a.stay != markNone
		}
		for x := range a.fill {
			if a.fill[x] != b.fill[x] {
				return a.fill[x] > b.fill[x]
			}
		}
		return a.order < b.order
	})
	// Assign kinds to the chosen leaves, keeping each leaf's kind where it
	// can: first the leaves already of a kind still wanted.
	// When the node has fewer good leaves than wanted marks, unhealthy
	// devices (hardware truth) come before foreign pods.
	chosen := min(total, want[markUnhealthy]+want[markForeign])
	kinds := make([]leafMark, len(cands))
	var left [numMarks]int32
	left[markUnhealthy] = min(want[markUnhealthy], chosen)
	left[markForeign] = chosen - left[markUnhealthy]
	for i := int32(0); i < chosen; i++ {
		if s := cands[i].stay; s != markNone && left[s] > 0 {
			kinds[i] = s
			left[s]--
		}
	}
	for i := int32(0); i < chosen; i++ {
		if kinds[i] != markNone {
			continue
		}
		for m := markUnhealthy; m < numMarks; m++ {
			if left[m] > 0 {
				kinds[i] = m
				left[m]--
				break
			}
		}
	}
	for i, c := range cands {
		if c.l.mark != kinds[i] {
			old := c.l.leafContribution()
			c.l.mark = kinds[i]
			k.updateLeaf(c.l, old)
		}
	}
}

// idle: no group uses or reserves the leaf.
func (c *Cell) idle() bool {
	return c.state == CellFree && c.using == nil && c.reserving == nil
}

// idleGoodLeaves counts the leaves below c that are idle and Good (marks
// aside: they are what markNodeLeaves is placing).
func (c *Cell) idleGoodLeaves() int32 {
	var n int32
	c.forEachLeaf(func(l *Cell) {
		if l.device == DeviceGood && l.idle() {
			n++
		}
	})
	return n
}

// markedLeaves counts the leaves below c with mark m.
func (c *Cell) markedLeaves(m leafMark) int32 {
	var n int32
	c.forEachLeaf(func(l *Cell) {
		if l.mark == m {
			n++
		}
	})
	return n
}

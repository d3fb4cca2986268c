package cellcore

import (
	"fmt"
	"slices"
)

// Claimed devices (DRA). A device allocated in a ResourceClaim is named:
// the claim's allocation lists the driver, pool and device, which the
// plugin maps to a node's leaf cell. A claimed leaf that a group of the core
// uses or reserves is that group's own device (hivesched allocated the
// claim for its pod); a claimed leaf no group holds is taken by someone
// else (another scheduler's claim, a claim not released yet after its pod
// went, an allocation hivesched refused): it carries the foreign mark, so
// it is never placed on, counts as lost capacity (dooming virtual cells
// where the free pool falls short, as any foreign device does) and is
// reported as foreign in the VCs' status. Unlike the unnamed foreign count,
// the mark sits on exactly that leaf, and moves nowhere: it goes when the
// claim releases the device, or when a group comes to use the leaf (which
// only a group the core already held there can).

// DeviceRef names one device (leaf cell) of a node.
type DeviceRef struct {
	// LeafCellType may be empty: the device of that index in any chain of
	// the node.
	LeafCellType string
	Index        int32
}

// setClaimed records the node's claimed leaves (SetNodeDevices' Claimed):
// exactly those in refs, every other leaf of the node unclaimed. Refs that
// name no leaf of the node are returned as errors; the rest is applied.
func (k *Core) setClaimed(n *node, refs []DeviceRef) []error {
	var errs []error
	want := make(map[*Cell]bool, len(refs))
	for _, r := range refs {
		found := false
		for _, nc := range n.cells {
			if r.LeafCellType != "" && nc.chain.leafType != r.LeafCellType {
				continue
			}
			nc.forEachLeaf(func(l *Cell) {
				if l.index == r.Index {
					want[l] = true
					found = true
				}
			})
		}
		if !found {
			errs = append(errs, fmt.Errorf("node %q has no claimed device %d of leaf cell type %q", n.name, r.Index, r.LeafCellType))
		}
	}
	n.claimed = 0
	for _, nc := range n.cells {
		nc.forEachLeaf(func(l *Cell) {
			l.claimed = want[l]
			if l.claimed {
				n.claimed++
			}
		})
	}
	k.queueRemark(n)
	return errs
}

// claimedMark is the mark a claimed leaf carries: the foreign mark while no
// group uses or reserves it, none while one does (its own device) or while
// the device is not Good (its health says more).
func (c *Cell) claimedMark() leafMark {
	if c.device == DeviceGood && c.idle() {
		return markForeign
	}
	return markNone
}

// claimedRefs lists the node's claimed leaves, in leaf order.
func (n *node) claimedRefs() []DeviceRef {
	if n.claimed == 0 {
		return nil
	}
	var out []DeviceRef
	for _, nc := range n.cells {
		nc.forEachLeaf(func(l *Cell) {
			if l.claimed {
				out = append(out, DeviceRef{LeafCellType: nc.chain.leafType, Index: l.index})
			}
		})
	}
	return out
}

// NodeDeviceIndices lists the device indices of a node's leaf cells, sorted
// and each once (a node in several chains may repeat one); nil for a node
// not in the physical cluster. They change only when ReplacePhysicalCluster
// changes the node's cells: callers ask again rather than keep them.
func (k *Core) NodeDeviceIndices(name string) []int32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := k.nodes[name]
	if n == nil {
		return nil
	}
	var out []int32
	for _, nc := range n.cells {
		nc.forEachLeaf(func(l *Cell) { out = append(out, l.index) })
	}
	slices.Sort(out)
	return slices.Compact(out)
}

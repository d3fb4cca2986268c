package cellcore

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

var unhealthy = []NodeHealth{NodeUnknown, NodeBad, NodeMaintenance, NodeRetired}

// fillOpportunistic schedules 1-leaf opportunistic groups until one waits,
// and returns the node/index of every placed leaf.
func fillOpportunistic(t *testing.T, k *Core, vc, prefix string) []string {
	t.Helper()
	var out []string
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		d, err := k.Schedule(ag(name, vc, -1, 1, 1))
		require.NoError(t, err)
		if d.Kind == Wait {
			_, err := k.DeleteAffinityGroup(name)
			require.NoError(t, err)
			return out
		}
		require.Equal(t, Placed, d.Kind)
		bindAll(t, k, d)
		for _, p := range d.Pods {
			for _, x := range p.LeafCellIndices {
				out = append(out, fmt.Sprintf("%s/%d", p.Node, x))
			}
		}
	}
}

func vcStatusCell(t *testing.T, k *Core, vc string, i int) CellLevelStatus {
	t.Helper()
	cells := statusCells(t, k, vc)
	require.Greater(t, len(cells), i)
	return cells[i]
}

func TestHealthNoPlacementOnUnhealthyNodes(t *testing.T) {
	for _, h := range unhealthy {
		t.Run(h.String(), func(t *testing.T) {
			k := newHealthyCore(t, clusterConfig(1, 4, 1))
			_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
			require.NoError(t, err)
			for _, n := range []string{"r0-n0", "r0-n1", "r0-n3", "t4-0"} {
				require.NoError(t, k.SetNodeHealth(n, h))
				got, ok := k.NodeHealthOf(n)
				require.True(t, ok)
				require.Equal(t, h, got)
			}
			mustCheck(t, k)
			// Guaranteed: the VC's node is bound on the healthy node.
			d := vcPlace(t, k, ag("g", "a", 0, 2, 2))
			for _, p := range d.Pods {
				require.Equal(t, "r0-n2", p.Node)
			}
			// A guaranteed group can't be made to fit elsewhere.
			d, err = k.Schedule(ag("g2", "a", 0, 1, 8))
			require.NoError(t, err)
			require.Equal(t, Wait, d.Kind)
			// Opportunistic groups fill the healthy node only.
			leaves := fillOpportunistic(t, k, "a", "opp")
			require.Len(t, leaves, 4)
			for _, l := range leaves {
				require.Regexp(t, `^r0-n2/`, l)
			}
			for _, l := range k.Snapshot().LeafCells {
				require.Equal(t, l.Node == "r0-n2", l.Healthy, l.ID)
				if l.Node != "r0-n2" {
					require.Equal(t, CellFree, l.State, l.ID)
				}
			}
			mustCheck(t, k)
			// Healthy again: schedulable again.
			require.NoError(t, k.SetNodeHealth("t4-0", NodeHealthy))
			leaves = fillOpportunistic(t, k, "a", "opp2-")
			require.Len(t, leaves, 4)
			for _, l := range leaves {
				require.Regexp(t, `^t4-0/`, l)
			}
			mustCheck(t, k)
		})
	}
}

func TestHealthFreshCoreIsUnschedulable(t *testing.T) {
	k, err := New(clusterConfig(1, 2, 0))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	d, err := k.Schedule(ag("g", "a", 0, 1, 1))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	d, err = k.Schedule(ag("o", "a", -1, 1, 1))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	mustCheck(t, k)
	require.NoError(t, k.SetNodeHealth("r0-n1", NodeHealthy))
	d, err = k.Schedule(ag("g", "a", 0, 1, 1))
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind, d.Reason)
	require.Equal(t, "r0-n1", d.Pods[0].Node)
	// Errors: unknown node, invalid health.
	require.Error(t, k.SetNodeHealth("nope", NodeHealthy))
	require.Error(t, k.SetNodeHealth("r0-n0", NodeHealth(99)))
	_, ok := k.NodeHealthOf("nope")
	require.False(t, ok)
	mustCheck(t, k)
}

func TestHealthNoPlacementOnBadDevice(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 1, 0))
	require.NoError(t, k.SetLeafCellHealth("r0-n0", "V100", 3, true))
	mustCheck(t, k)
	for _, l := range k.Snapshot().LeafCells {
		require.Equal(t, l.Index != 3, l.Healthy, l.ID)
	}
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-SOCKET", 1))
	require.NoError(t, err)
	// The socket without the bad device is bound.
	d := vcPlace(t, k, ag("g", "a", 0, 1, 4))
	require.Equal(t, []int32{4, 5, 6, 7}, d.Pods[0].LeafCellIndices)
	_, err = k.DeleteAffinityGroup("g")
	require.NoError(t, err)
	// A whole-node gang waits.
	d, err = k.Schedule(ag("whole", "a", -1, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	_, err = k.DeleteAffinityGroup("whole")
	require.NoError(t, err)

	leaves := fillOpportunistic(t, k, "a", "opp")
	require.Len(t, leaves, 7)
	require.NotContains(t, leaves, "r0-n0/3")
	mustCheck(t, k)

	// Good again.
	require.NoError(t, k.SetLeafCellHealth("r0-n0", "V100", 3, false))
	leaves = fillOpportunistic(t, k, "a", "opp2-")
	require.Equal(t, []string{"r0-n0/3"}, leaves)
	mustCheck(t, k)

	// Errors.
	require.Error(t, k.SetLeafCellHealth("r0-n0", "V100", 8, true))
	require.Error(t, k.SetLeafCellHealth("r0-n0", "T4", 0, true))
	require.Error(t, k.SetLeafCellHealth("nope", "V100", 0, true))
	mustCheck(t, k)
}

// A bad device under a running group: the group runs on, the device is not
// given out again once the group is gone.
func TestHealthBadDeviceUnderRunningGroup(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 2, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	d := vcPlace(t, k, ag("g", "a", 0, 1, 8))
	node := d.Pods[0].Node
	require.NoError(t, k.SetLeafCellHealth(node, "V100", 0, true))
	require.NoError(t, k.SetNodeHealth(node, NodeMaintenance))
	mustCheck(t, k)
	st, _ := k.AffinityGroupStatus("g")
	require.Equal(t, AGAllocated, st.State)
	require.Equal(t, d.Pods[0].LeafCellIndices, st.Pods[0].LeafCellIndices)
	deleteAllPods(t, k, "g")
	mustCheck(t, k)
	require.NoError(t, k.SetNodeHealth(node, NodeHealthy))
	d = vcPlace(t, k, ag("g2", "a", 0, 1, 8))
	require.NotEqual(t, node, d.Pods[0].Node, "the node with a bad device cannot hold 8")
	leaves := fillOpportunistic(t, k, "a", "opp")
	require.Len(t, leaves, 7)
	require.NotContains(t, leaves, node+"/0")
	mustCheck(t, k)
}

// Health propagates up the tree: a rack with an unhealthy node is not chosen
// for a gang that needs a whole rack.
func TestHealthPropagatesToRacks(t *testing.T) {
	for _, h := range unhealthy {
		for _, badRack := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s/rack%d", h, badRack), func(t *testing.T) {
				k := newHealthyCore(t, clusterConfig(2, 4, 0))
				_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1))
				require.NoError(t, err)
				require.NoError(t, k.SetNodeHealth(fmt.Sprintf("r%d-n2", badRack), h))
				mustCheck(t, k)
				d := vcPlace(t, k, ag("gang", "a", 0, 4, 8))
				for _, p := range d.Pods {
					require.Equal(t, fmt.Sprintf("r%d", 1-badRack), p.Node[:2], "pods land in the healthy rack")
				}
				mustCheck(t, k)
				// Both racks bad: the gang of another VC-sized request waits.
				deleteAllPods(t, k, "gang")
				require.NoError(t, k.SetLeafCellHealth(fmt.Sprintf("r%d-n0", 1-badRack), "V100", 7, true))
				d, err = k.Schedule(ag("gang2", "a", 0, 4, 8))
				require.NoError(t, err)
				require.Equal(t, Wait, d.Kind)
				// Smaller groups still fit.
				vcPlace(t, k, ag("small", "a", 0, 3, 8))
				mustCheck(t, k)
			})
		}
	}
}

// Doomed bad cells: VC a owns every rack; a bad node leaves the free pool
// unable to supply a whole healthy rack, so a rack is bound to a as a doomed
// cell and a's status shows it.
func TestHealthDoomedBadCells(t *testing.T) {
	for _, h := range []NodeHealth{NodeBad, NodeMaintenance, NodeRetired} {
		t.Run(h.String(), func(t *testing.T) {
			k := newHealthyCore(t, clusterConfig(2, 4, 0))
			_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 2))
			require.NoError(t, err)
			require.Equal(t, CellLevelStatus{Chain: "V100-RACK", LeafCellType: "V100", CellType: "V100-RACK", Level: 5, Total: 2,
				LeafCells: 64, FreeLeafCells: 64}, vcStatusCell(t, k, "a", 0))

			require.NoError(t, k.SetNodeHealth("r0-n1", h))
			mustCheck(t, k)
			c := vcStatusCell(t, k, "a", 0)
			require.Equal(t, int32(1), c.Bad, "%+v", c)
			require.Equal(t, int32(1), c.Bound, "%+v", c)
			require.Equal(t, int32(8), c.BadLeafCells, "%+v", c)
			require.Equal(t, int32(64-8), c.FreeLeafCells, "%+v", c)
			for _, l := range k.Snapshot().LeafCells {
				if l.Node[:2] == "r0" {
					require.Equal(t, "a", l.VirtualCluster, "the doomed rack is a's: %s", l.ID)
				} else {
					require.Empty(t, l.VirtualCluster, l.ID)
				}
			}

			// The healthy rack serves a gang; the doomed one smaller groups.
			d := vcPlace(t, k, ag("gang", "a", 0, 4, 8))
			require.Equal(t, "r1", d.Pods[0].Node[:2])
			d = vcPlace(t, k, ag("three", "a", 0, 3, 8))
			for _, p := range d.Pods {
				require.Equal(t, "r0", p.Node[:2])
				require.NotEqual(t, "r0-n1", p.Node)
			}
			mustCheck(t, k)
			c = vcStatusCell(t, k, "a", 0)
			require.Equal(t, int32(2), c.Bound)
			require.Equal(t, int32(1), c.Bad, "still bound to lost hardware")
			deleteAllPods(t, k, "three")
			deleteAllPods(t, k, "gang")
			mustCheck(t, k)
			c = vcStatusCell(t, k, "a", 0)
			require.Equal(t, int32(1), c.Bad)
			require.Equal(t, int32(1), c.Bound)

			// Healthy again: no more doomed cells, nothing bound.
			require.NoError(t, k.SetNodeHealth("r0-n1", NodeHealthy))
			mustCheck(t, k)
			require.Equal(t, CellLevelStatus{Chain: "V100-RACK", LeafCellType: "V100", CellType: "V100-RACK", Level: 5, Total: 2,
				LeafCells: 64, FreeLeafCells: 64}, vcStatusCell(t, k, "a", 0))
			for _, l := range k.Snapshot().LeafCells {
				require.Empty(t, l.VirtualCluster, l.ID)
			}
		})
	}
}

// A bad device dooms like a bad node.
func TestHealthDoomedByBadDevice(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(2, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 2))
	require.NoError(t, err)
	require.NoError(t, k.SetLeafCellHealth("r1-n3", "V100", 5, true))
	mustCheck(t, k)
	c := vcStatusCell(t, k, "a", 0)
	require.Equal(t, int32(1), c.Bad)
	require.Equal(t, int32(1), c.BadLeafCells)
	require.NoError(t, k.SetLeafCellHealth("r1-n3", "V100", 5, false))
	mustCheck(t, k)
	c = vcStatusCell(t, k, "a", 0)
	require.Equal(t, int32(0), c.Bad)
	require.Equal(t, int32(0), c.Bound)
}

// Only as many cells are doomed as needed: with spare capacity, a bad node
// dooms nothing.
func TestHealthNoDoomWhenCapacitySuffices(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(2, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 2))
	require.NoError(t, err)
	require.NoError(t, k.SetNodeHealth("r0-n0", NodeBad))
	mustCheck(t, k)
	require.Equal(t, int32(0), vcStatusCell(t, k, "a", 0).Bad)
	require.Equal(t, int32(0), vcStatusCell(t, k, "b", 0).Bad)
	// Two bad nodes in different racks: no whole healthy rack is left
	// for a, and b still has 6 healthy nodes: a gets a doomed rack.
	require.NoError(t, k.SetNodeHealth("r1-n0", NodeBad))
	mustCheck(t, k)
	require.Equal(t, int32(1), vcStatusCell(t, k, "a", 0).Bad)
	require.Equal(t, int32(0), vcStatusCell(t, k, "b", 0).Bad)
	require.NoError(t, k.SetNodeHealth("r1-n0", NodeHealthy))
	require.NoError(t, k.SetNodeHealth("r0-n0", NodeHealthy))
	mustCheck(t, k)
	require.Equal(t, int32(0), vcStatusCell(t, k, "a", 0).Bad)
	require.Equal(t, int32(0), vcStatusCell(t, k, "a", 0).Bound)
}

// Unknown nodes are not lost capacity: nothing is doomed while nodes are
// merely Unknown (a starting scheduler has seen no node yet).
func TestHealthUnknownIsNotLost(t *testing.T) {
	k, err := New(clusterConfig(2, 4, 0))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-RACK", 2))
	require.NoError(t, err)
	mustCheck(t, k)
	require.Equal(t, CellLevelStatus{Chain: "V100-RACK", LeafCellType: "V100", CellType: "V100-RACK", Level: 5, Total: 2,
		LeafCells: 64, FreeLeafCells: 64}, vcStatusCell(t, k, "a", 0))

	k = newHealthyCore(t, clusterConfig(2, 4, 0))
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-RACK", 2))
	require.NoError(t, err)
	for _, n := range []string{"r0-n0", "r1-n3"} {
		require.NoError(t, k.SetNodeHealth(n, NodeUnknown))
	}
	mustCheck(t, k)
	c := vcStatusCell(t, k, "a", 0)
	require.Equal(t, int32(0), c.Bad)
	require.Equal(t, int32(0), c.Bound)
	require.Equal(t, int32(0), c.BadLeafCells)
	// Unknown -> Bad dooms, Bad -> Unknown undooms.
	require.NoError(t, k.SetNodeHealth("r0-n0", NodeBad))
	mustCheck(t, k)
	require.Equal(t, int32(1), vcStatusCell(t, k, "a", 0).Bad)
	require.NoError(t, k.SetNodeHealth("r0-n0", NodeUnknown))
	mustCheck(t, k)
	require.Equal(t, int32(0), vcStatusCell(t, k, "a", 0).Bad)
	require.Equal(t, int32(0), vcStatusCell(t, k, "a", 0).Bound)
}

// A VC change is checked against the structural capacity (lost hardware
// included), and dooms what health requires.
func TestHealthVCChangeWithLostCapacity(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(2, 4, 0))
	require.NoError(t, k.SetNodeHealth("r0-n0", NodeRetired))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 2))
	require.NoError(t, err)
	mustCheck(t, k)
	require.Equal(t, int32(1), vcStatusCell(t, k, "a", 0).Bad)
	// Shrinking releases the doomed cell.
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1))
	require.NoError(t, err)
	mustCheck(t, k)
	c := vcStatusCell(t, k, "a", 0)
	require.Equal(t, int32(0), c.Bad)
	require.Equal(t, int32(0), c.Bound)
	// Another VC taking nodes may doom a's rack again, or take the bad rack's nodes.
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 4))
	require.NoError(t, err)
	mustCheck(t, k)
	c = vcStatusCell(t, k, "a", 0)
	cb := vcStatusCell(t, k, "b", 0)
	require.Equal(t, int32(1), c.Bad+cb.Bad, "exactly one VC sees the lost node: a %+v b %+v", c, cb)
	// The gang of a whole rack is still placed for a if a's cell is healthy.
	if c.Bad == 0 {
		vcPlace(t, k, ag("gang", "a", 0, 4, 8))
	}
	_, err = k.RemoveVirtualCluster("b")
	require.NoError(t, err)
	_, err = k.RemoveVirtualCluster("a")
	require.NoError(t, err)
	mustCheck(t, k)
}

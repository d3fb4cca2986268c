package cellcore

import (
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// marked lists a node's marked leaves by kind, as "index" strings.
func marked(k *Core, node string) (unhealthy, foreign []int32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, nc := range k.nodes[node].cells {
		nc.forEachLeaf(func(l *Cell) {
			switch l.mark {
			case markUnhealthy:
				unhealthy = append(unhealthy, l.index)
			case markForeign:
				foreign = append(foreign, l.index)
			}
		})
	}
	return unhealthy, foreign
}

func nodeLeaves(d Decision) map[string][]int32 {
	out := map[string][]int32{}
	for _, p := range d.Pods {
		out[p.Node] = append(out[p.Node], p.LeafCellIndices...)
	}
	return out
}

// A foreign pod's GPUs are never handed out: the core marks that many idle
// leaves of its node, in the busiest sub-cell, and places around them.
func TestForeignDevicesAreNotPlacedOn(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 1, 0)) // one 8-GPU node r0-n0
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-SWITCH", 2))
	require.NoError(t, err)
	// Two GPUs of the node's first switch are used by the VC.
	d := vcPlace(t, k, ag("g1", "a", 0, 1, 2))
	require.Equal(t, []int32{0, 1}, nodeLeaves(d)["r0-n0"])
	// A foreign pod holds 3 GPUs: they go where the fewest whole buddy
	// cells break: the other switch of the busy socket first (2, 3), then
	// one of the other socket (4).
	require.NoError(t, k.SetNodeDevices("r0-n0", NodeDevices{Foreign: 3}))
	mustCheck(t, k)
	_, foreign := marked(k, "r0-n0")
	require.Equal(t, []int32{2, 3, 4}, foreign)
	// Opportunistic groups get the 4 free GPUs that remain, not one more.
	got := fillOpportunistic(t, k, "a", "opp")
	sort.Strings(got)
	require.Equal(t, []string{"r0-n0/5", "r0-n0/6", "r0-n0/7"}, got)
	mustCheck(t, k)
	// The foreign pod goes: its GPUs are free again.
	require.NoError(t, k.SetNodeDevices("r0-n0", NodeDevices{}))
	_, foreign = marked(k, "r0-n0")
	require.Empty(t, foreign)
	d = vcPlace(t, k, ag("g2", "a", 0, 1, 2))
	require.Equal(t, []int32{2, 3}, nodeLeaves(d)["r0-n0"])
	mustCheck(t, k)
}

// A node over-committed by a foreign pod (its GPUs were in use by the core's
// groups when it came) keeps the count right: the marks sit on used leaves
// and move to leaves that go idle, so those are not handed out again.
func TestForeignMarksMoveToIdleLeaves(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 1, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	vcPlace(t, k, ag("full", "a", 0, 1, 8))
	require.NoError(t, k.SetNodeDevices("r0-n0", NodeDevices{Foreign: 2}))
	_, foreign := marked(k, "r0-n0")
	require.Len(t, foreign, 2)
	mustCheck(t, k)
	deleteAllPods(t, k, "full")
	mustCheck(t, k)
	// Every leaf is idle now; 2 of them stay taken.
	st, ok := k.VirtualClusterStatus("a")
	require.True(t, ok)
	require.EqualValues(t, 2, st.ForeignLeafCells)
	require.Equal(t, []string{"r0-n0"}, st.ForeignNodes)
	require.EqualValues(t, 2, st.LostLeafCells)
	d, err := k.Schedule(ag("big", "a", 0, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind, "8 GPUs asked, 6 are free")
	_, err = k.DeleteAffinityGroup("big")
	require.NoError(t, err)
	d = vcPlace(t, k, ag("six", "a", 0, 1, 4, 1, 2))
	for _, x := range nodeLeaves(d)["r0-n0"] {
		require.NotContains(t, foreign, x)
	}
	mustCheck(t, k)
}

// Foreign use is lost capacity for the safety invariant: when it leaves the
// free pool short of what VCs may claim, VCs' virtual cells are doomed
// (bound to the taken hardware) and their status says so.
func TestForeignDevicesDoomVCCells(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 2, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 1))
	require.NoError(t, err)
	require.NoError(t, k.SetNodeDevices("r0-n1", NodeDevices{Foreign: 1}))
	mustCheck(t, k)
	var lost int32
	var nodes []string
	for _, vc := range []string{"a", "b"} {
		st, _ := k.VirtualClusterStatus(vc)
		lost += st.ForeignLeafCells
		nodes = append(nodes, st.ForeignNodes...)
	}
	require.EqualValues(t, 1, lost, "one VC's node cell is bound to the node a foreign pod uses")
	require.Equal(t, []string{"r0-n1"}, nodes)
	require.NoError(t, k.SetNodeDevices("r0-n1", NodeDevices{}))
	mustCheck(t, k)
	for _, vc := range []string{"a", "b"} {
		st, _ := k.VirtualClusterStatus(vc)
		require.Zero(t, st.LostLeafCells, vc)
	}
}

// Seed 003's device states: each maps onto what the core may do with the
// device. Good: placed on. Unknown and Looping (being checked): not placed
// on, not lost (no VC cell is doomed for a check). Bad, Maintenance,
// Retired: not placed on, lost.
func TestDeviceHealthStates(t *testing.T) {
	for h := DeviceGood; h <= DeviceRetired; h++ {
		t.Run(h.String(), func(t *testing.T) {
			k := newHealthyCore(t, clusterConfig(1, 1, 0))
			_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
			require.NoError(t, err)
			require.NoError(t, k.SetNodeDevices("r0-n0", NodeDevices{Devices: []DeviceStatus{{Index: 5, Health: h}}}))
			mustCheck(t, k)
			got, ok := k.NodeDevicesOf("r0-n0")
			require.True(t, ok)
			if h == DeviceGood {
				require.Empty(t, got.Devices)
			} else {
				require.Equal(t, []DeviceStatus{{LeafCellType: "V100", Index: 5, Health: h}}, got.Devices)
			}
			st, _ := k.VirtualClusterStatus("a")
			require.Equal(t, h.lost(), st.LostLeafCells == 1, "lost")
			require.Zero(t, st.ForeignLeafCells)
			d, err := k.Schedule(ag("all", "a", 0, 1, 8))
			require.NoError(t, err)
			if h == DeviceGood {
				require.Equal(t, Placed, d.Kind)
				return
			}
			require.Equal(t, Wait, d.Kind)
			_, err = k.DeleteAffinityGroup("all")
			require.NoError(t, err)
			d = vcPlace(t, k, ag("seven", "a", 0, 1, 4, 1, 2, 1, 1))
			require.NotContains(t, nodeLeaves(d)["r0-n0"], int32(5))
			name, ok := ParseDeviceHealth(h.String())
			require.True(t, ok)
			require.Equal(t, h, name)
		})
	}
	_, ok := ParseDeviceHealth("broken")
	require.False(t, ok)
}

// A node whose allocatable count drops below its capacity without naming the
// device (the NVIDIA device plugin for a failed GPU) loses that many leaves,
// beside named ones; marks of both kinds never share a leaf.
func TestUnnamedUnhealthyDevices(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 1, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	require.NoError(t, k.SetNodeDevices("r0-n0", NodeDevices{Devices: []DeviceStatus{{Index: 0, Health: DeviceBad}}, Unhealthy: 2, Foreign: 1}))
	mustCheck(t, k)
	unh, foreign := marked(k, "r0-n0")
	require.Len(t, unh, 2)
	require.Len(t, foreign, 1)
	require.NotContains(t, append(unh, foreign...), int32(0), "a named bad device carries no mark")
	st, _ := k.VirtualClusterStatus("a")
	require.EqualValues(t, 4, st.LostLeafCells)
	require.EqualValues(t, 1, st.ForeignLeafCells)
	got := fillOpportunistic(t, k, "a", "opp")
	require.Len(t, got, 4)
	// Counts beyond the node mark every good leaf and no more.
	require.NoError(t, k.SetNodeDevices("r0-n0", NodeDevices{Unhealthy: 6, Foreign: 6}))
	mustCheck(t, k)
	unh, foreign = marked(k, "r0-n0")
	require.Len(t, unh, 6)
	require.Len(t, foreign, 2)
}

func TestSetNodeDevicesErrors(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 1, 1))
	require.Error(t, k.SetNodeDevices("nope", NodeDevices{}))
	require.Error(t, k.SetNodeDevices("r0-n0", NodeDevices{Foreign: -1}))
	// One unknown device is reported; the others are applied all the same.
	err := k.SetNodeDevices("r0-n0", NodeDevices{Devices: []DeviceStatus{{Index: 9, Health: DeviceBad}, {Index: 2, Health: DeviceRetired}, {Index: 1, Health: 99}}})
	require.ErrorContains(t, err, `node "r0-n0" has no device 9`)
	require.ErrorContains(t, err, "invalid health 99")
	got, _ := k.NodeDevicesOf("r0-n0")
	require.Equal(t, []DeviceStatus{{LeafCellType: "V100", Index: 2, Health: DeviceRetired}}, got.Devices)
	require.ErrorContains(t, k.SetNodeDevices("t4-0", NodeDevices{Devices: []DeviceStatus{{LeafCellType: "V100", Index: 0, Health: DeviceBad}}}), "no device 0")
	require.NoError(t, k.SetNodeDevices("t4-0", NodeDevices{Devices: []DeviceStatus{{LeafCellType: "T4", Index: 3, Health: DeviceLooping}}}))
	mustCheck(t, k)
	require.NoError(t, k.SetNodeHealth("r0-n0", NodeLooping))
	require.Equal(t, "Looping", NodeLooping.String())
	mustCheck(t, k)
	st := leafOwners(k)
	require.False(t, st[fmt.Sprintf("%s/%d", "r0-n0", 0)].Healthy)
}

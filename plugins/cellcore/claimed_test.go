package cellcore

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

func refs(idx ...int32) []DeviceRef {
	out := make([]DeviceRef, len(idx))
	for i, x := range idx {
		out[i] = DeviceRef{Index: x}
	}
	return out
}

// A device named in another party's claim is never handed out: exactly that
// leaf carries the foreign mark (no other), the VC's status counts it, and it
// is free again when the claim releases it.
func TestClaimedDevicesAreNotPlacedOn(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 1, 0)) // one 8-GPU node r0-n0
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	require.NoError(t, k.SetNodeDevices("r0-n0", NodeDevices{Claimed: refs(0, 5)}))
	mustCheck(t, k)
	_, foreign := marked(k, "r0-n0")
	require.Equal(t, []int32{0, 5}, foreign)
	st, _ := k.VirtualClusterStatus("a")
	require.EqualValues(t, 2, st.ForeignLeafCells)
	require.Equal(t, []string{"r0-n0"}, st.ForeignNodes)
	got := fillOpportunistic(t, k, "a", "opp")
	sort.Strings(got)
	require.Equal(t, []string{"r0-n0/1", "r0-n0/2", "r0-n0/3", "r0-n0/4", "r0-n0/6", "r0-n0/7"}, got)
	mustCheck(t, k)
	d, _ := k.NodeDevicesOf("r0-n0")
	require.Equal(t, []DeviceRef{{LeafCellType: "V100", Index: 0}, {LeafCellType: "V100", Index: 5}}, d.Claimed)
	// The claims release their devices.
	require.NoError(t, k.SetNodeDevices("r0-n0", NodeDevices{}))
	mustCheck(t, k)
	_, foreign = marked(k, "r0-n0")
	require.Empty(t, foreign)
	st, _ = k.VirtualClusterStatus("a")
	require.Zero(t, st.LostLeafCells)
}

// The devices of the core's own groups are claimed too (hivesched wrote
// their claims): no mark while the group holds them. When the group goes
// and its claims are not released yet, the leaves are taken until they are.
func TestClaimedDevicesOfAGroupOutliveIt(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 1, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	d := vcPlace(t, k, ag("g", "a", 0, 1, 4))
	own := nodeLeaves(d)["r0-n0"]
	require.NoError(t, k.SetNodeDevices("r0-n0", NodeDevices{Claimed: refs(own...)}))
	mustCheck(t, k)
	_, foreign := marked(k, "r0-n0")
	require.Empty(t, foreign, "a group's own claims mark nothing")
	deleteAllPods(t, k, "g")
	mustCheck(t, k)
	_, foreign = marked(k, "r0-n0")
	require.Equal(t, own, foreign, "claims not released yet: their devices stay taken")
	d2, err := k.Schedule(ag("big", "a", 0, 1, 8))
	require.NoError(t, err)
	require.Equal(t, Wait, d2.Kind)
	_, err = k.DeleteAffinityGroup("big")
	require.NoError(t, err)
	require.NoError(t, k.SetNodeDevices("r0-n0", NodeDevices{}))
	mustCheck(t, k)
	vcPlace(t, k, ag("big", "a", 0, 1, 8))
	mustCheck(t, k)
}

// Unnamed marks (a foreign pod's count, unhealthy devices) never land on a
// claimed leaf and count as many as before; a claimed leaf that is not Good
// carries no mark; a name that is no leaf of the node is reported while the
// rest applies.
func TestClaimedDevicesBesideUnnamedMarks(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 1, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1))
	require.NoError(t, err)
	err = k.SetNodeDevices("r0-n0", NodeDevices{Foreign: 2, Unhealthy: 1, Claimed: refs(2, 3, 9),
		Devices: []DeviceStatus{{Index: 3, Health: DeviceBad}}})
	require.ErrorContains(t, err, "no claimed device 9")
	mustCheck(t, k)
	unhealthy, foreign := marked(k, "r0-n0")
	require.Len(t, unhealthy, 1)
	require.Len(t, foreign, 3, "2 unnamed, and claimed leaf 2 (3 is bad)")
	require.Contains(t, foreign, int32(2))
	require.NotContains(t, append(unhealthy, foreign...), int32(3))
	got := fillOpportunistic(t, k, "a", "opp")
	require.Len(t, got, 3, "8 - 1 bad - 1 unhealthy - 2 foreign - 1 claimed")
	mustCheck(t, k)
}

// The device indices of a node, for callers that name devices by index.
func TestNodeDeviceIndices(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 1, 0)) // one 8-GPU node r0-n0
	require.Equal(t, []int32{0, 1, 2, 3, 4, 5, 6, 7}, k.NodeDeviceIndices("r0-n0"))
	require.Nil(t, k.NodeDeviceIndices("elsewhere"))
}

package cellcore

import (
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// allocatedBy returns how many bytes fn allocated (all goroutines: the tests
// that use it run nothing else meanwhile).
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A recovered spec comes from a placement record on a pod, which the pod's
// owner can write. Every count in it is bounded before the core allocates a
// slot per pod: a forged podNumber of 2^22 took 746 MiB, 2^30 would take
// tens of GiB, 2^31 crash-looped the scheduler.
func TestRecoverRefusesHugeSpecsBeforeAllocating(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", 2))
	require.NoError(t, err)
	before := fingerprint(k)
	one := []RecoveredPod{rpod("p0", "r0-n0", 0)}
	members := func(m ...AffinityGroupMember) AffinityGroupSpec {
		return AffinityGroupSpec{Name: "g", VirtualCluster: "a", Members: m}
	}
	withPrio := func(p int32) AffinityGroupSpec { s := members(AffinityGroupMember{1, 1}); s.Priority = p; return s }
	for _, tc := range []struct {
		name string
		spec AffinityGroupSpec
		pods []RecoveredPod
		want string
	}{
		{"podNumber 2^30", members(AffinityGroupMember{PodNumber: 1 << 30, LeafCellNumber: 1}), one,
			`affinity group "g": 1073741824 pods, more than the supported 10000`},
		{"podNumber 2^20", members(AffinityGroupMember{PodNumber: 1 << 20, LeafCellNumber: 1}), one,
			"1048576 pods, more than the supported 10000"},
		{"podNumber max int32", members(AffinityGroupMember{PodNumber: math.MaxInt32, LeafCellNumber: 1}), one,
			"2147483647 pods, more than the supported 10000"},
		{"pods that wrap around in int32", members(AffinityGroupMember{math.MaxInt32, 1}, AffinityGroupMember{math.MaxInt32, 1}, AffinityGroupMember{2, 1}), one,
			"pods, more than the supported 10000"},
		{"more leaf cells than the cluster", members(AffinityGroupMember{PodNumber: 2, LeafCellNumber: math.MaxInt32}), one,
			`affinity group "g": asks for 4294967294 leaf cells in total, more than the 32 of the whole cluster`},
		{"negative podNumber", members(AffinityGroupMember{PodNumber: -1, LeafCellNumber: 1}), one,
			"members[0].podNumber must be positive, got -1"},
		{"zero leafCellNumber", members(AffinityGroupMember{PodNumber: 1, LeafCellNumber: 0}), one,
			"members[0].leafCellNumber must be positive, got 0"},
		{"priority above the range", withPrio(5000), one, "priority 5000 is out of range [-1, 1000]"},
		{"priority below the range", withPrio(-2), one, "priority -2 is out of range [-1, 1000]"},
		{"more pods than members", members(AffinityGroupMember{1, 1}), []RecoveredPod{rpod("p0", "r0-n0", 0), rpod("p1", "r0-n0", 1)},
			"2 recovered pods for 1 members"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			start := time.Now()
			bytes := allocatedBy(func() { _, err = k.RecoverAffinityGroup(tc.spec, tc.pods) })
			require.ErrorContains(t, err, tc.want)
			require.Less(t, bytes, uint64(64<<10), "a refused recovery allocates (next to) nothing")
			require.Less(t, time.Since(start), time.Second)
			require.Equal(t, before, fingerprint(k), "a refused recovery changes nothing")
			mustCheck(t, k)
		})
	}
}

// validateSpec sums in int64: 8192 pods of 2^18 leaf cells are 2^31 leaf
// cells, which wrapped around to -2^31 in int32 and passed the VC capacity
// check (and the opportunistic one had no total check at all).
func TestValidateSpecTotalDoesNotWrap(t *testing.T) {
	const perNode = 1 << 18
	cfg := Config{
		CellTypes:     map[string]CellTypeSpec{"BIG-NODE": {ChildCellType: "BIG", ChildCellNumber: perNode, IsNodeLevel: true}},
		PhysicalCells: []PhysicalCellSpec{{CellType: "BIG-NODE", CellAddress: "n0"}},
	}
	k := newHealthyCore(t, cfg)
	_, err := k.SetVirtualCluster(vcSpec("a", "BIG-NODE", 1))
	require.NoError(t, err)
	before := fingerprint(k)

	_, err = k.Schedule(ag("g", "a", 0, 8192, perNode))
	require.ErrorContains(t, err, `affinity group "g": asks for 2147483648 leaf cells in total, but virtual cluster "a" has at most 262144 in one chain`)
	_, err = k.Schedule(ag("o", "a", -1, 8192, perNode))
	require.ErrorContains(t, err, `affinity group "o": asks for 2147483648 leaf cells in total, more than the 262144 of the whole cluster`)
	_, err = k.Schedule(ag("o2", "a", -1, 2, perNode))
	require.ErrorContains(t, err, "asks for 524288 leaf cells in total, more than the 262144 of the whole cluster",
		"an opportunistic group larger than the cluster can never run: refused, not left waiting")
	require.Equal(t, before, fingerprint(k))
	mustCheck(t, k)
}

// A VC's cellNumbers of one type add up in int64: two entries of 2^31-1
// wrapped around into a negative quota that every capacity check accepted.
func TestVCCellNumberSumIsBounded(t *testing.T) {
	k := newHealthyCore(t, clusterConfig(1, 4, 0))
	before := fingerprint(k)
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-NODE", math.MaxInt32, "V100-NODE", math.MaxInt32))
	require.ErrorContains(t, err, `virtual cluster "a": virtualCells[1]: the cellNumbers of cell type V100-NODE in chain V100-RACK add up to 4294967294, more than the supported 2147483647`)
	require.Equal(t, before, fingerprint(k), "a refused VC changes nothing")

	// Large but in range: refused by the capacity check, as before.
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-NODE", math.MaxInt32-1, "V100-NODE", 1))
	require.ErrorContains(t, err, `virtual cluster "a" does not fit`)
	require.Equal(t, before, fingerprint(k))

	// Entries of one type still add up.
	_, err = k.SetVirtualCluster(vcSpec("a", "V100-NODE", 1, "V100-RACK.V100-NODE", 2))
	require.NoError(t, err)
	st, ok := k.VirtualClusterStatus("a")
	require.True(t, ok)
	require.Len(t, st.Cells, 1)
	require.Equal(t, int32(3), st.Cells[0].Total)
	mustCheck(t, k)
}

// Device indices are int32: a leaf cell address that does not fit is
// refused, never truncated into another device's index (4294967296 became
// device 0), and no implicit index follows 2^31-1.
func TestConfigLeafAddressMustFitInt32(t *testing.T) {
	node := func(addrs ...string) Config {
		cfg := clusterConfig(0, 2, 0)
		cfg.PhysicalCells = []PhysicalCellSpec{t4Node("t0", addrs...)}
		return cfg
	}
	for _, tc := range []struct {
		name  string
		addrs []string
		want  string
	}{
		{"2^32 (was device 0)", []string{"4294967296", "1", "2", "3"},
			`physicalCells[0].cellChildren[0]: leaf cell address "4294967296" must be a device index (an integer from 0 to 2147483647)`},
		{"2^31", []string{"0", "2147483648", "2", "3"}, `leaf cell address "2147483648" must be a device index`},
		{"huge", []string{"0", "1", "2", "99999999999999999999"}, `leaf cell address "99999999999999999999" must be a device index`},
		{"negative", []string{"-1", "1", "2", "3"}, `leaf cell address "-1" must be a device index`},
		{"implicit after 2^31-1", []string{"0", "2147483647", "", "3"},
			"physicalCells[0].cellChildren[2]: leaf cell without cellAddress would get device index 2147483648 (the one after its sibling's), more than 2147483647"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := New(node(tc.addrs...))
			require.Nil(t, k)
			require.ErrorContains(t, err, tc.want)
		})
	}
	k := newHealthyCore(t, node("2147483647", "0", "", "7"))
	mustCheck(t, k)
	var got []int32
	for _, l := range k.Snapshot().LeafCells {
		got = append(got, l.Index)
	}
	require.Equal(t, []int32{math.MaxInt32, 0, 1, 7}, got)
}

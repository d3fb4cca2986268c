package cellcore

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzMaxCells bounds the clusters FuzzConfig builds, to keep each run fast
// (the core itself accepts up to MaxLeafCellsPerCell leaves per top cell).
const fuzzMaxCells = 4096

// fuzzCellEstimate is how many cells New would build for cfg, or -1 if that
// exceeds fuzzMaxCells. Types New rejects (cycles, bad numbers) count as one
// cell: New fails on them before building anything.
func fuzzCellEstimate(cfg Config) int {
	memo := map[string]int{}
	var below func(t string, depth int) int
	below = func(t string, depth int) int {
		if n, ok := memo[t]; ok {
			return n
		}
		s, ok := cfg.CellTypes[t]
		if !ok || depth > len(cfg.CellTypes) || s.ChildCellNumber <= 0 {
			return 1
		}
		memo[t] = 1 // cycle guard
		c := below(s.ChildCellType, depth+1)
		n := 1 + int(s.ChildCellNumber)*c
		if c < 0 || n > fuzzMaxCells || int(s.ChildCellNumber) > fuzzMaxCells {
			n = -1
		}
		memo[t] = n
		return n
	}
	total := 0
	for _, pc := range cfg.PhysicalCells {
		n := below(pc.CellType, 0)
		if n < 0 {
			return -1
		}
		total += n
		if total > fuzzMaxCells {
			return -1
		}
	}
	return total
}

func fuzzConfigSeeds() [][]byte {
	var out [][]byte
	add := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	add(clusterConfig(1, 2, 1))
	add(clusterConfig(2, 2, 0))
	add(pinnedConfig())
	add(twoRackChainsConfig())
	mixed := clusterConfig(0, 2, 0)
	mixed.PhysicalCells = []PhysicalCellSpec{rackSpec("rack0", []string{"mixed-0", "v-1"}), t4Node("mixed-0", "3", "2", "1", "0")}
	add(mixed)
	cyc := clusterConfig(1, 2, 0)
	cyc.CellTypes["V100"] = CellTypeSpec{ChildCellType: "V100-RACK", ChildCellNumber: 1}
	add(cyc)
	dupDev := clusterConfig(0, 2, 0)
	dupDev.PhysicalCells = []PhysicalCellSpec{t4Node("t0", "0", "0", "1", "2")}
	add(dupDev)
	nested := clusterConfig(1, 2, 0)
	nested.PhysicalCells[0].PinnedCellID = "outer"
	nested.PhysicalCells[0].CellChildren[0].PinnedCellID = "inner"
	add(nested)
	out = append(out,
		[]byte(`{"cellTypes":{"N":{"childCellType":"G","childCellNumber":2,"isNodeLevel":true}},"physicalCells":[{"cellType":"N","cellAddress":"n0"},{"cellType":"N","cellAddress":"n1","pinnedCellId":"p"}]}`),
		[]byte(`{"cellTypes":{"N":{"childCellType":"G","childCellNumber":2}},"physicalCells":[{"cellType":"G","cellAddress":"0"}]}`),
		[]byte(`{"cellTypes":{},"physicalCells":[]}`),
		[]byte(`{"cellTypes":{"R":{"childCellType":"N","childCellNumber":2},"N":{"childCellType":"G","childCellNumber":1,"isNodeLevel":true}},"physicalCells":[{"cellType":"R","cellChildren":[{"cellAddress":"a","cellChildren":[{"cellAddress":"7"}]},{"cellAddress":"b","pinnedCellId":"x"}]}]}`),
		[]byte(`null`),
		[]byte(`{`),
	)
	return out
}

// FuzzConfig: New either refuses a configuration or builds a core whose
// invariants hold, and which survives health changes, a VC per chain and a
// few groups. It never panics.
func FuzzConfig(f *testing.F) {
	for _, s := range fuzzConfigSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cfg Config
		if err := json.Unmarshal(data, &cfg); err != nil {
			return
		}
		if fuzzCellEstimate(cfg) < 0 {
			t.Skip("too large for a fast fuzz run")
		}
		k, err := New(cfg)
		if err != nil {
			require.Nil(t, k)
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotNil(t, k)
		mustCheck(t, k)
		nodes := make([]string, 0, len(k.nodes))
		for n := range k.nodes {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		for _, n := range nodes {
			require.NoError(t, k.SetNodeHealth(n, NodeHealthy))
		}
		mustCheck(t, k)
		snap := k.Snapshot()
		require.Len(t, snap.LeafCells, func() int {
			n := 0
			for _, ch := range k.chainOrder {
				n += len(ch.tops) * int(ch.leafCount[ch.top])
			}
			return n
		}())
		// One VC owning one top cell of every chain (refusals are fine when
		// pinned cells or duplicate names leave too little), a guaranteed
		// and an opportunistic group.
		spec := VirtualClusterSpec{Name: "vc"}
		for _, ch := range k.chainOrder {
			spec.VirtualCells = append(spec.VirtualCells, VirtualCellSpec{CellType: ch.name, CellNumber: 1})
		}
		if _, err := k.SetVirtualCluster(spec); err != nil {
			// Pinned cells may hold whole top cells: ask for one leaf of
			// every chain that has a free cell.
			spec.VirtualCells = spec.VirtualCells[:0]
			for _, ch := range k.chainOrder {
				if ch.freePool.roots.size > 0 {
					spec.VirtualCells = append(spec.VirtualCells, VirtualCellSpec{CellType: ch.name + "." + ch.levelType[1], CellNumber: 1})
				}
			}
			_, err = k.SetVirtualCluster(spec)
			require.NoError(t, err, "every chain with a free cell has a free leaf cell")
		}
		mustCheck(t, k)
		for _, s := range []AffinityGroupSpec{ag("g", "vc", 0, 1, 1), ag("o", "vc", -1, 2, 1)} {
			before := fingerprint(k)
			d, err := k.Schedule(s)
			if err != nil {
				require.Equal(t, before, fingerprint(k), "a refused request changes nothing: %v", err)
			} else if d.Kind == Placed {
				bindAll(t, k, d)
			}
			mustCheck(t, k)
		}
		// Health churn: lost hardware dooms cells, healthy undooms.
		if len(nodes) > 0 {
			require.NoError(t, k.SetNodeHealth(nodes[0], NodeBad))
			mustCheck(t, k)
			require.NoError(t, k.SetNodeHealth(nodes[len(nodes)-1], NodeUnknown))
			mustCheck(t, k)
			require.NoError(t, k.SetNodeHealth(nodes[0], NodeHealthy))
			mustCheck(t, k)
		}
		_, err = k.RemoveVirtualCluster("vc")
		require.NoError(t, err)
		mustCheck(t, k)
	})
}

// fuzzAGCore is a small healthy cluster with two VCs and a few running groups:
// one rack of 4 V100 nodes (r0-n3 is pinned cell "pin") and one T4 node.
// VC a: 1 V100 node and the pinned cell; VC b: the T4 node and 1 V100 socket.
func fuzzAGCore(t *testing.T) *Core {
	cfg := withinConfig(1, 4, 1)
	cfg.PhysicalCells[0].CellChildren[3].PinnedCellID = "pin"
	k := newHealthyCore(t, cfg)
	a := vcSpec("a", "V100-NODE", 1)
	a.PinnedCells = []PinnedCellSpec{{PinnedCellID: "pin"}}
	_, err := k.SetVirtualCluster(a)
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "T4-NODE", 1, "V100-SOCKET", 1))
	require.NoError(t, err)
	pinned := ag("base-pin", "a", 3, 1, 4)
	pinned.PinnedCellID = "pin"
	for _, s := range []AffinityGroupSpec{ag("base", "a", 5, 1, 4), ag("base-b", "b", 0, 1, 2), ag("base-opp", "b", -1, 2, 2), pinned} {
		d, err := k.Schedule(s)
		require.NoError(t, err)
		require.Equal(t, Placed, d.Kind, d.Reason)
		bindAll(t, k, d)
	}
	return k
}

// fuzzWithinKeys are the topology constraints FuzzAffinityGroupRequest
// draws: none, the keys of withinConfig, and one no cell type declares.
var fuzzWithinKeys = []string{"", rackKey, hostKey, socketKey, zoneKey}

// FuzzAffinityGroupRequest: Schedule either refuses a request and changes
// nothing, or decides; the invariants hold either way. It never panics.
func FuzzAffinityGroupRequest(f *testing.F) {
	type seed struct {
		name, vc     string
		prio         int32
		leaf, pin    string
		members      uint8
		p1, l1       int32
		p2, l2       int32
		lazy, follow bool
	}
	for _, s := range []seed{
		{"g", "a", 0, "", "", 1, 1, 4, 0, 0, false, true},
		{"g", "a", 10, "V100", "", 1, 1, 8, 0, 0, true, true},
		{"g", "a", 6, "", "pin", 1, 1, 8, 0, 0, false, true},
		{"g", "b", 0, "T4", "", 2, 1, 2, 1, 1, false, true},
		{"g", "b", -1, "", "", 2, 3, 2, 2, 1, false, true},
		{"g", "b", 1000, "", "", 1, 2, 4, 0, 0, true, true},
		{"g", "a", -1, "", "pin", 1, 1, 1, 0, 0, false, false},
		{"g", "c", 0, "", "", 1, 1, 1, 0, 0, false, false},
		{"", "a", 0, "", "", 1, 1, 1, 0, 0, false, false},
		{"g", "a", 1001, "", "", 1, 1, 1, 0, 0, false, false},
		{"g", "a", -2, "", "", 1, 1, 1, 0, 0, false, false},
		{"g", "a", 0, "A100", "", 1, 1, 1, 0, 0, false, false},
		{"g", "a", 0, "", "nope", 1, 1, 1, 0, 0, false, false},
		{"g", "a", 0, "", "", 0, 0, 0, 0, 0, false, false},
		{"g", "a", 0, "", "", 1, 0, 1, 0, 0, false, false},
		{"g", "a", 0, "", "", 1, 1, 9, 0, 0, false, false},
		{"g", "a", 0, "", "", 2, 10000, 1, 1, 1, false, false},
		{"g", "a", 0, "", "", 2, 2147483647, 1, 2147483647, 1, false, false},
		{"base", "a", 5, "", "", 1, 1, 4, 0, 0, false, true},
		{"base", "a", 6, "", "", 1, 1, 4, 0, 0, false, true},
		{"base-opp", "b", -1, "", "", 1, 2, 2, 0, 0, false, true},
		// members/3 picks a topology constraint (fuzzWithinKeys).
		{"g", "a", 0, "", "", 4, 2, 4, 0, 0, false, true},
		{"g", "b", 0, "", "", 7, 1, 2, 1, 2, false, true},
		{"g", "b", -1, "", "", 10, 2, 2, 0, 0, false, true},
		{"g", "a", 6, "", "pin", 7, 2, 4, 0, 0, false, true},
		{"g", "a", 0, "", "", 13, 1, 1, 0, 0, false, false},
	} {
		f.Add(s.name, s.vc, s.prio, s.leaf, s.pin, s.members, s.p1, s.l1, s.p2, s.l2, s.lazy, s.follow)
	}
	f.Fuzz(func(t *testing.T, name, vc string, prio int32, leaf, pin string, members uint8, p1, l1, p2, l2 int32, lazy, follow bool) {
		k := fuzzAGCore(t)
		spec := AffinityGroupSpec{Name: name, VirtualCluster: vc, Priority: prio, LeafCellType: leaf, PinnedCellID: pin, LazyPreemptionEnable: lazy,
			WithinTopologyKey: fuzzWithinKeys[int(members/3)%len(fuzzWithinKeys)]}
		if members%3 >= 1 {
			spec.Members = append(spec.Members, AffinityGroupMember{PodNumber: p1, LeafCellNumber: l1})
		}
		if members%3 == 2 {
			spec.Members = append(spec.Members, AffinityGroupMember{PodNumber: p2, LeafCellNumber: l2})
		}
		before := fingerprint(k)
		d, err := k.Schedule(spec)
		if err != nil {
			require.Equal(t, before, fingerprint(k), "a refused request changes nothing: %v", err)
			mustCheck(t, k)
			return
		}
		mustCheck(t, k)
		require.Equal(t, name, d.Group)
		st, ok := k.AffinityGroupStatus(name)
		require.True(t, ok)
		require.Equal(t, st.State, d.State)
		switch d.Kind {
		case Placed:
			require.Equal(t, AGAllocated, d.State)
			i := 0
			for _, m := range spec.Members {
				for j := int32(0); j < m.PodNumber; j++ {
					p := d.Pods[i]
					require.Equal(t, m.LeafCellNumber, p.LeafCellNumber)
					require.Len(t, p.LeafCellIndices, int(m.LeafCellNumber), "%+v", p)
					require.NotEmpty(t, p.Node)
					if leaf != "" {
						require.Equal(t, leaf, p.LeafCellType)
					}
					if pin != "" {
						require.Equal(t, "r0-n3", p.Node)
					}
					i++
				}
			}
			require.Len(t, d.Pods, i)
		case Preempt:
			require.Equal(t, AGPreempting, d.State)
			require.NotEmpty(t, d.Victims)
		case Wait:
			require.Contains(t, []AGState{AGPending, AGPreempting}, d.State)
			require.NotEmpty(t, d.Reason)
		default:
			t.Fatalf("unknown decision kind %v", d.Kind)
		}
		if !follow {
			return
		}
		// Carry on: victims go, the group is scheduled again, its pods are
		// bound, and it is deleted.
		for _, v := range d.Victims {
			if v == name {
				continue
			}
			_, err := k.DeleteAffinityGroup(v)
			require.NoError(t, err)
			mustCheck(t, k)
		}
		d, err = k.Schedule(spec)
		require.NoError(t, err, "the same spec again")
		mustCheck(t, k)
		if d.Kind == Placed {
			for i, p := range d.Pods {
				_, err := k.AssignPod(name, fmt.Sprintf("%s-%d", name, i), p.LeafCellNumber)
				require.NoError(t, err)
			}
		}
		_, err = k.DeleteAffinityGroup(name)
		require.NoError(t, err)
		_, ok = k.AffinityGroupStatus(name)
		require.False(t, ok)
		mustCheck(t, k)
	})
}

// fuzzRecoverCore is a 2-rack cluster with VCs a (one rack) and b (one
// node), where some groups already run: recovery of a forged or damaged
// record must not disturb them.
func fuzzRecoverCore(t *testing.T) *Core {
	k := newHealthyCore(t, clusterConfig(2, 2, 0))
	_, err := k.SetVirtualCluster(vcSpec("a", "V100-RACK", 1))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("b", "V100-NODE", 1))
	require.NoError(t, err)
	return k
}

// FuzzRecoverAffinityGroup: a placement record is input a pod's owner can
// write (signatures stop forged ones in the plugin, but the core must not
// rely on that). Whatever the spec and pods say, recovery either refuses
// and changes nothing, or recovers a group the core's own check accepts;
// it never panics, and a forged count is refused before it is allocated.
func FuzzRecoverAffinityGroup(f *testing.F) {
	f.Add("ns/g", "a", int32(0), int32(2), int32(4), "V100", "rack0-node0", []byte{0, 1, 2, 3}, false)
	f.Add("ns/g", "a", int32(5), int32(1), int32(8), "", "rack0-node1", []byte{0, 1, 2, 3, 4, 5, 6, 7}, true)
	f.Add("ns/g", "b", int32(-1), int32(1<<30), int32(1<<30), "V100", "rack1-node0", []byte{0}, false)
	f.Add("", "nope", int32(2000), int32(-3), int32(0), "K80", "nowhere", []byte{9, 9}, false)
	f.Add("ns/big", "a", int32(0), int32(2147483647), int32(1), "V100", "rack0-node0", []byte{1}, false)
	f.Fuzz(func(t *testing.T, name, vc string, prio, pods, leaves int32, leafType, node string, idx []byte, down bool) {
		k := fuzzRecoverCore(t)
		before := fingerprint(k)
		spec := AffinityGroupSpec{Name: name, VirtualCluster: vc, Priority: prio, LeafCellType: leafType,
			Members: []AffinityGroupMember{{PodNumber: pods, LeafCellNumber: leaves}}}
		indices := make([]int32, len(idx))
		for i, b := range idx {
			indices[i] = int32(b % 16) // mostly valid device indices, some not
		}
		rp := []RecoveredPod{{PodKey: "p0", Node: node, LeafCellIndices: indices, Downgraded: down}}
		if _, err := k.RecoverAffinityGroup(spec, rp); err != nil {
			require.NotEmpty(t, err.Error())
			require.Equal(t, before, fingerprint(k), "a refused recovery changes nothing")
		}
		mustCheck(t, k)
		// Whatever was recovered, new work still schedules and checks out.
		_, _ = k.Schedule(ag("after", "a", 1, 1, 4))
		mustCheck(t, k)
	})
}

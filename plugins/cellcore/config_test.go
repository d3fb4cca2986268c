package cellcore

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// t4Node is a T4 node (4 T4 devices) with optional explicit leaf addresses.
func t4Node(name string, leafAddrs ...string) PhysicalCellSpec {
	s := PhysicalCellSpec{CellType: "T4-NODE", CellAddress: name}
	for _, a := range leafAddrs {
		s.CellChildren = append(s.CellChildren, PhysicalCellSpec{CellAddress: a})
	}
	return s
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  func() Config
		want []string // substrings the error must contain
	}{
		{
			name: "cycle in cell types",
			cfg: func() Config {
				return Config{
					CellTypes: map[string]CellTypeSpec{
						"A": {ChildCellType: "B", ChildCellNumber: 2, IsNodeLevel: true},
						"B": {ChildCellType: "C", ChildCellNumber: 2},
						"C": {ChildCellType: "A", ChildCellNumber: 2},
					},
					PhysicalCells: []PhysicalCellSpec{{CellType: "A", CellAddress: "n0"}},
				}
			},
			want: []string{"cycle", "A -> B -> C -> A"},
		},
		{
			name: "self cycle",
			cfg: func() Config {
				return Config{
					CellTypes:     map[string]CellTypeSpec{"X": {ChildCellType: "X", ChildCellNumber: 1, IsNodeLevel: true}},
					PhysicalCells: []PhysicalCellSpec{{CellType: "X", CellAddress: "n0"}},
				}
			},
			want: []string{"cycle", `"X"`},
		},
		{
			name: "unknown cell type in physicalCells",
			cfg: func() Config {
				c := clusterConfig(1, 2, 1)
				c.PhysicalCells = append(c.PhysicalCells, PhysicalCellSpec{CellType: "A100-NODE", CellAddress: "a0"})
				return c
			},
			want: []string{"physicalCells[2]", "unknown cell type", `"A100-NODE"`},
		},
		{
			name: "leaf (undefined child) type used as top cell type",
			cfg: func() Config {
				c := clusterConfig(1, 2, 0)
				c.PhysicalCells = append(c.PhysicalCells, PhysicalCellSpec{CellType: "V100", CellAddress: "0"})
				return c
			},
			want: []string{"physicalCells[1]", `"V100"`, "below node level"},
		},
		{
			name: "chain with no node level",
			cfg: func() Config {
				return Config{
					CellTypes: map[string]CellTypeSpec{
						"K80-NODE": {ChildCellType: "K80", ChildCellNumber: 4},
					},
					PhysicalCells: []PhysicalCellSpec{{CellType: "K80-NODE", CellAddress: "k0"}},
				}
			},
			want: []string{"physicalCells[0]", `"K80-NODE"`, "no node level"},
		},
		{
			name: "node level marked twice in one chain",
			cfg: func() Config {
				types := gpuTypes(2)
				r := types["V100-RACK"]
				r.IsNodeLevel = true
				types["V100-RACK"] = r
				return Config{CellTypes: types, PhysicalCells: []PhysicalCellSpec{rackSpec("rack0", []string{"n0", "n1"})}}
			},
			want: []string{`"V100-RACK"`, "node level"},
		},
		{
			name: "duplicate node with the same leaf type",
			cfg: func() Config {
				c := clusterConfig(1, 2, 0)
				c.PhysicalCells = append(c.PhysicalCells, rackSpec("rack1", []string{"n2", "r0-n1"}))
				return c
			},
			want: []string{"physicalCells[1].cellChildren[1]", `"r0-n1"`, `"V100"`, "listed twice", "physicalCells[0].cellChildren[1]"},
		},
		{
			name: "duplicate node in the same top cell",
			cfg: func() Config {
				c := clusterConfig(0, 2, 0)
				c.PhysicalCells = []PhysicalCellSpec{rackSpec("rack0", []string{"n0", "n0"})}
				return c
			},
			want: []string{`"n0"`, "listed twice"},
		},
		{
			name: "duplicate T4 node",
			cfg: func() Config {
				c := clusterConfig(0, 2, 0)
				c.PhysicalCells = []PhysicalCellSpec{t4Node("t"), t4Node("t")}
				return c
			},
			want: []string{"physicalCells[1]", `"t"`, `"T4"`, "listed twice"},
		},
		{
			name: "pinnedCellId used twice in two top cells",
			cfg: func() Config {
				c := clusterConfig(0, 2, 0)
				a, b := t4Node("t0"), t4Node("t1")
				a.PinnedCellID, b.PinnedCellID = "pin", "pin"
				c.PhysicalCells = []PhysicalCellSpec{a, b}
				return c
			},
			want: []string{"physicalCells[1]", `"pin"`, "used twice"},
		},
		{
			name: "pinnedCellId used twice in one top cell",
			cfg: func() Config {
				c := clusterConfig(1, 2, 0)
				c.PhysicalCells[0].CellChildren[0].PinnedCellID = "pin"
				c.PhysicalCells[0].CellChildren[1].PinnedCellID = "pin"
				return c
			},
			want: []string{"physicalCells[0].cellChildren[1]", `"pin"`, "used twice"},
		},
		{
			name: "pinned cell inside a pinned cell",
			cfg: func() Config {
				c := clusterConfig(1, 2, 0)
				c.PhysicalCells[0].PinnedCellID = "outer"
				c.PhysicalCells[0].CellChildren[1].PinnedCellID = "inner"
				return c
			},
			want: []string{`"inner"`, `"outer"`, "inside"},
		},
		{
			name: "pinned cell inside a pinned cell (inner id sorts first)",
			cfg: func() Config {
				c := clusterConfig(1, 2, 0)
				c.PhysicalCells[0].PinnedCellID = "z-outer"
				c.PhysicalCells[0].CellChildren[1].PinnedCellID = "a-inner"
				return c
			},
			want: []string{`"a-inner"`, `"z-outer"`, "inside"},
		},
		{
			name: "top cell below node level",
			cfg: func() Config {
				c := clusterConfig(1, 2, 0)
				c.PhysicalCells = append(c.PhysicalCells, PhysicalCellSpec{CellType: "V100-SWITCH", CellAddress: "sw"})
				return c
			},
			want: []string{"physicalCells[1]", `"V100-SWITCH"`, "below node level", `"V100-NODE"`},
		},
		{
			name: "too few explicit children",
			cfg: func() Config {
				c := clusterConfig(0, 4, 0)
				c.PhysicalCells = []PhysicalCellSpec{rackSpec("rack0", []string{"n0", "n1", "n2"})}
				return c
			},
			want: []string{"physicalCells[0]", `"V100-RACK"`, "lists 3 children", "has 4"},
		},
		{
			name: "too many explicit leaf children",
			cfg: func() Config {
				c := clusterConfig(0, 2, 0)
				c.PhysicalCells = []PhysicalCellSpec{t4Node("t0", "0", "1", "2", "3", "4")}
				return c
			},
			want: []string{"physicalCells[0]", `"T4-NODE"`, "lists 5 children", "has 4"},
		},
		{
			name: "cell above node level without children",
			cfg: func() Config {
				c := clusterConfig(0, 2, 0)
				c.PhysicalCells = []PhysicalCellSpec{{CellType: "V100-RACK", CellAddress: "rack0"}}
				return c
			},
			want: []string{"physicalCells[0]", `"V100-RACK"`, "must list its 2 children"},
		},
		{
			name: "missing node address",
			cfg: func() Config {
				c := clusterConfig(1, 2, 0)
				c.PhysicalCells[0].CellChildren[1].CellAddress = ""
				return c
			},
			want: []string{"physicalCells[0].cellChildren[1]", `"V100-NODE"`, "needs cellAddress"},
		},
		{
			name: "missing top node address",
			cfg: func() Config {
				c := clusterConfig(0, 2, 0)
				c.PhysicalCells = []PhysicalCellSpec{t4Node("")}
				return c
			},
			want: []string{"physicalCells[0]", `"T4-NODE"`, "needs cellAddress"},
		},
		{
			name: "non-integer leaf address",
			cfg: func() Config {
				c := clusterConfig(0, 2, 0)
				c.PhysicalCells = []PhysicalCellSpec{t4Node("t0", "0", "1", "gpu2", "3")}
				return c
			},
			want: []string{"physicalCells[0].cellChildren[2]", `"gpu2"`, "device index"},
		},
		{
			name: "negative leaf address",
			cfg: func() Config {
				c := clusterConfig(0, 2, 0)
				c.PhysicalCells = []PhysicalCellSpec{t4Node("t0", "0", "1", "-2", "3")}
				return c
			},
			want: []string{"physicalCells[0].cellChildren[2]", `"-2"`, "device index"},
		},
		{
			name: "non-integer address below node level",
			cfg: func() Config {
				c := clusterConfig(0, 2, 0)
				c.PhysicalCells = []PhysicalCellSpec{{CellType: "V100-NODE", CellAddress: "n0", CellChildren: []PhysicalCellSpec{
					{CellAddress: "socket-a"}, {CellAddress: "1"},
				}}}
				return c
			},
			want: []string{"physicalCells[0].cellChildren[0]", `"socket-a"`, "must be an index"},
		},
		{
			name: "duplicate device index in a node",
			cfg: func() Config {
				c := clusterConfig(0, 2, 0)
				c.PhysicalCells = []PhysicalCellSpec{t4Node("t0", "0", "2", "1", "2")}
				return c
			},
			want: []string{"physicalCells[0].cellChildren[3]", "device index 2", "used twice", `"t0"`},
		},
		{
			name: "implicit index collides with an explicit one",
			cfg: func() Config {
				c := clusterConfig(0, 2, 0)
				// The third leaf has no address: it takes 1+1 = 2, already used.
				c.PhysicalCells = []PhysicalCellSpec{t4Node("t0", "2", "1", "", "3")}
				return c
			},
			want: []string{"physicalCells[0].cellChildren[2]", "device index 2", "used twice"},
		},
		{
			name: "childCellNumber zero",
			cfg: func() Config {
				c := clusterConfig(1, 2, 0)
				s := c.CellTypes["V100-SWITCH"]
				s.ChildCellNumber = 0
				c.CellTypes["V100-SWITCH"] = s
				return c
			},
			want: []string{`"V100-SWITCH"`, "childCellNumber must be positive", "got 0"},
		},
		{
			name: "childCellNumber negative",
			cfg: func() Config {
				c := clusterConfig(1, 2, 0)
				s := c.CellTypes["V100-RACK"]
				s.ChildCellNumber = -3
				c.CellTypes["V100-RACK"] = s
				return c
			},
			want: []string{`"V100-RACK"`, "childCellNumber must be positive", "got -3"},
		},
		{
			name: "empty physicalCells",
			cfg: func() Config {
				c := clusterConfig(0, 2, 0)
				c.PhysicalCells = nil
				return c
			},
			want: []string{"physicalCells is empty"},
		},
		{
			name: "empty childCellType",
			cfg: func() Config {
				c := clusterConfig(0, 2, 1)
				c.CellTypes["T4-NODE"] = CellTypeSpec{ChildCellNumber: 4, IsNodeLevel: true}
				return c
			},
			want: []string{`"T4-NODE"`, "childCellType is empty"},
		},
		{
			name: "dot in a type name",
			cfg: func() Config {
				c := clusterConfig(0, 2, 1)
				c.CellTypes["T4.NODE"] = CellTypeSpec{ChildCellType: "T4", ChildCellNumber: 4, IsNodeLevel: true}
				return c
			},
			want: []string{`"T4.NODE"`, "must not contain '.'"},
		},
		{
			name: "child type mismatch",
			cfg: func() Config {
				c := clusterConfig(1, 2, 0)
				c.PhysicalCells[0].CellChildren[0].CellType = "T4-NODE"
				return c
			},
			want: []string{"physicalCells[0].cellChildren[0]", `"T4-NODE"`, `"V100-NODE"`},
		},
		{
			name: "cell too large",
			cfg: func() Config {
				return Config{
					CellTypes: map[string]CellTypeSpec{
						"HUGE": {ChildCellType: "BIG", ChildCellNumber: 1 << 11},
						"BIG":  {ChildCellType: "G", ChildCellNumber: 1 << 10, IsNodeLevel: true},
					},
					PhysicalCells: []PhysicalCellSpec{{CellType: "BIG", CellAddress: "b"}},
				}
			},
			want: []string{`"HUGE"`, "more than the supported"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := New(tc.cfg())
			require.Error(t, err)
			require.Nil(t, k)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

// leafStatuses returns the snapshot's leaf cells by node.
func leafStatuses(k *Core) map[string][]LeafCellStatus {
	out := map[string][]LeafCellStatus{}
	for _, l := range k.Snapshot().LeafCells {
		out[l.Node] = append(out[l.Node], l)
	}
	return out
}

func TestConfigSeveralChainsAndLeafTypes(t *testing.T) {
	cfg := clusterConfig(2, 4, 2)
	cfg.CellTypes["A100-NODE"] = CellTypeSpec{ChildCellType: "A100", ChildCellNumber: 8, IsNodeLevel: true}
	cfg.CellTypes["A100-POD"] = CellTypeSpec{ChildCellType: "A100-NODE", ChildCellNumber: 2}
	cfg.PhysicalCells = append(cfg.PhysicalCells, PhysicalCellSpec{CellType: "A100-POD", CellAddress: "pod0", CellChildren: []PhysicalCellSpec{
		{CellAddress: "a0"}, {CellAddress: "a1"},
	}})
	k := newHealthyCore(t, cfg)
	mustCheck(t, k)

	require.Equal(t, []string{"A100", "T4", "V100"}, k.sortedLeafTypes())
	var chains []string
	for _, ch := range k.chainOrder {
		chains = append(chains, ch.name)
	}
	require.Equal(t, []string{"A100-POD", "T4-NODE", "V100-RACK"}, chains)
	require.Len(t, k.nodes, 2*4+2+2)

	byNode := leafStatuses(k)
	require.Len(t, byNode, 12)
	for n, leaves := range byNode {
		switch {
		case strings.HasPrefix(n, "t4-"):
			require.Len(t, leaves, 4, n)
			require.True(t, strings.HasPrefix(leaves[0].ID, "T4-NODE/"+n+"/"), leaves[0].ID)
		case strings.HasPrefix(n, "a"):
			require.Len(t, leaves, 8, n)
			require.True(t, strings.HasPrefix(leaves[0].ID, "A100-POD/pod0/"+n+"/"), leaves[0].ID)
		default:
			require.Len(t, leaves, 8, n)
		}
		for _, l := range leaves {
			require.True(t, l.Healthy)
			require.Equal(t, CellFree, l.State)
		}
	}
	// Cell count: racks (1 + 4 nodes * 15 cells), T4 nodes (1+4), A100 pod (1 + 2*9).
	require.Equal(t, 2*(1+4*15)+2*5+(1+2*9), k.CellCount())

	// Each leaf type is schedulable on its own chain.
	_, err := k.SetVirtualCluster(vcSpec("vc", "V100-NODE", 1, "T4-NODE", 1, "A100-NODE", 1))
	require.NoError(t, err)
	for _, lt := range []string{"V100", "T4", "A100"} {
		s := ag("g-"+lt, "vc", 0, 1, 4)
		s.LeafCellType = lt
		d, err := k.Schedule(s)
		require.NoError(t, err)
		require.Equal(t, Placed, d.Kind, d.Reason)
		require.Equal(t, lt, d.Pods[0].LeafCellType)
		mustCheck(t, k)
	}
	mustCheck(t, k)
}

func TestConfigNodeInTwoChains(t *testing.T) {
	cfg := clusterConfig(0, 2, 0)
	cfg.PhysicalCells = []PhysicalCellSpec{
		rackSpec("rack0", []string{"mixed-0", "v-1"}),
		t4Node("mixed-0"),
		t4Node("t4-1"),
	}
	k, err := New(cfg)
	require.NoError(t, err)
	mustCheck(t, k)
	require.Len(t, k.nodes, 3)
	require.Len(t, k.nodes["mixed-0"].cells, 2)

	// One health report covers both chains of the node.
	require.NoError(t, k.SetNodeHealth("mixed-0", NodeHealthy))
	byNode := leafStatuses(k)
	require.Len(t, byNode["mixed-0"], 8+4)
	types := map[string]int{}
	for _, l := range byNode["mixed-0"] {
		require.True(t, l.Healthy, l.ID)
		types[strings.SplitN(l.ID, "/", 2)[0]]++
	}
	require.Equal(t, map[string]int{"V100-RACK": 8, "T4-NODE": 4}, types)
	mustCheck(t, k)

	_, err = k.SetVirtualCluster(vcSpec("vc", "V100-NODE", 1, "T4-NODE", 1))
	require.NoError(t, err)
	for _, lt := range []string{"V100", "T4"} {
		s := ag("g-"+lt, "vc", 0, 1, 4)
		s.LeafCellType = lt
		d, err := k.Schedule(s)
		require.NoError(t, err)
		require.Equal(t, Placed, d.Kind, d.Reason)
		require.Equal(t, "mixed-0", d.Pods[0].Node, "only mixed-0 is healthy")
		require.Equal(t, lt, d.Pods[0].LeafCellType)
		bindAll(t, k, d)
	}
	// Device 0 of each leaf type of the node is a different leaf.
	require.NoError(t, k.SetLeafCellHealth("mixed-0", "T4", 0, true))
	for _, l := range leafStatuses(k)["mixed-0"] {
		isT4 := strings.HasPrefix(l.ID, "T4-NODE/")
		require.Equal(t, !(isT4 && l.Index == 0), l.Healthy, l.ID)
	}
	require.NoError(t, k.SetNodeHealth("mixed-0", NodeBad))
	for _, l := range leafStatuses(k)["mixed-0"] {
		require.False(t, l.Healthy, l.ID)
	}
	mustCheck(t, k)
}

func TestConfigExplicitLeafAddresses(t *testing.T) {
	cfg := clusterConfig(0, 2, 0)
	cfg.PhysicalCells = []PhysicalCellSpec{
		t4Node("t0", "7", "5", "3", "1"),
		t4Node("t1", "4", "", "", "0"), // implicit ones follow the previous: 5, 6
		{CellType: "V100-NODE", CellAddress: "v0", CellChildren: []PhysicalCellSpec{
			{CellAddress: "0"}, // socket 0, leaves generated: 0..3
			{CellAddress: "1", CellChildren: []PhysicalCellSpec{ // socket 1
				{CellChildren: []PhysicalCellSpec{{CellAddress: "10"}, {CellAddress: "11"}}},
				{CellChildren: []PhysicalCellSpec{{CellAddress: "12"}, {CellAddress: "13"}}},
			}},
		}},
	}
	k := newHealthyCore(t, cfg)
	mustCheck(t, k)
	byNode := leafStatuses(k)
	indices := func(node string) []int32 {
		var out []int32
		for _, l := range byNode[node] {
			out = append(out, l.Index)
		}
		return out
	}
	require.Equal(t, []int32{7, 5, 3, 1}, indices("t0"))
	require.Equal(t, []int32{4, 5, 6, 0}, indices("t1"))
	require.Equal(t, []int32{0, 1, 2, 3, 10, 11, 12, 13}, indices("v0"))
	require.Equal(t, "T4-NODE/t0/7", byNode["t0"][0].ID)
	require.Equal(t, "V100-NODE/v0/0/1/3", byNode["v0"][3].ID)
	require.Equal(t, "V100-NODE/v0/1/0/11", byNode["v0"][5].ID)

	// Device health and placements speak device indices.
	require.NoError(t, k.SetLeafCellHealth("t0", "T4", 5, true))
	require.Error(t, k.SetLeafCellHealth("t0", "T4", 0, true), "t0 has no device 0")
	_, err := k.SetVirtualCluster(vcSpec("vc", "T4-NODE", 1, "V100-NODE", 1))
	require.NoError(t, err)
	s := ag("g", "vc", 0, 1, 4)
	s.LeafCellType = "T4"
	d, err := k.Schedule(s)
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind, d.Reason)
	require.Equal(t, "t1", d.Pods[0].Node, "t0 has a bad device")
	require.Equal(t, []int32{0, 4, 5, 6}, d.Pods[0].LeafCellIndices)
	s = ag("g2", "vc", 0, 1, 8)
	s.LeafCellType = "V100"
	d, err = k.Schedule(s)
	require.NoError(t, err)
	require.Equal(t, Placed, d.Kind, d.Reason)
	require.Equal(t, []int32{0, 1, 2, 3, 10, 11, 12, 13}, d.Pods[0].LeafCellIndices)
	mustCheck(t, k)
}

func TestConfigCellAddressAboveNodeLevel(t *testing.T) {
	types := gpuTypes(2)
	types["V100-ROW"] = CellTypeSpec{ChildCellType: "V100-RACK", ChildCellNumber: 2}
	cfg := Config{CellTypes: types, PhysicalCells: []PhysicalCellSpec{
		{CellType: "V100-ROW", CellAddress: "row-A", CellChildren: []PhysicalCellSpec{
			rackSpec("rack-east", []string{"e0", "e1"}),
			{CellChildren: rackSpec("", []string{"w0", "w1"}).CellChildren}, // no address: its index
		}},
	}}
	k := newHealthyCore(t, cfg)
	mustCheck(t, k)
	byNode := leafStatuses(k)
	require.Equal(t, "V100-ROW/row-A/rack-east/e0/0/0/0", byNode["e0"][0].ID)
	require.Equal(t, "V100-ROW/row-A/1/w1/1/1/7", byNode["w1"][7].ID)
	ids := map[string]bool{}
	for _, l := range k.Snapshot().LeafCells {
		require.False(t, ids[l.ID], "duplicate id %s", l.ID)
		ids[l.ID] = true
	}
	require.Len(t, ids, 32)
}

func TestConfigErrorMessagesAreStable(t *testing.T) {
	// The same invalid config always reports the same first error, whatever
	// the map order of its cell types.
	cfg := func() Config {
		c := clusterConfig(1, 2, 1)
		c.CellTypes["BAD1"] = CellTypeSpec{ChildCellType: "V100", ChildCellNumber: 0}
		c.CellTypes["BAD2"] = CellTypeSpec{ChildCellType: "BAD2", ChildCellNumber: 1}
		return c
	}
	var msgs []string
	for i := 0; i < 20; i++ {
		_, err := New(cfg())
		require.Error(t, err)
		msgs = append(msgs, err.Error())
	}
	sort.Strings(msgs)
	require.Equal(t, msgs[0], msgs[len(msgs)-1], fmt.Sprint(msgs))
	require.Contains(t, msgs[0], `"BAD1"`)
}

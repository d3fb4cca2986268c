package cellcore

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The model test on a mixed 4-GPU/8-GPU cluster with an NVLink domain level
// (issue 45): the model's 4-GPU chain (its leaf type keeps the model's name,
// T4) stands for GB200 trays, three to a domain keyed by the clique label,
// two domains, beside four racks of 8-GPU nodes. VCs own a whole domain,
// trays and racks side by side; two groups in three are constrained, one in
// three of those to one domain. Safety (CheckInvariants, and each placement
// checked against its key from the node names alone: checkWithinPods) and
// the VC guarantee run after every step, as in the other model runs. It runs
// an eighth of -model.ops (make soak: 125,000), in two seeds.
func TestModelRandomizedNVLink(t *testing.T) {
	if !*modelWithin {
		t.Skip("-model.within=false")
	}
	const runs = 2
	per := *modelOps / 8 / runs
	for r := 0; r < runs; r++ {
		seed := *modelSeed + 200 + int64(r)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			m := newNVLinkModelRun(t, seed)
			m.mild = r == 1
			for i := 0; i < per; i++ {
				m.step(i)
			}
			t.Logf("%d operations (mild hardware faults: %v): %v", per, m.mild, m.stats)
			require.Positive(t, m.stats["within-placed-checked"], "constrained groups were placed and checked")
		})
	}
}

// modelClique is the domain of a model node: t4-<i> is in domain i/3; any
// other node is its own.
func modelClique(node string) string {
	if i, err := strconv.Atoi(strings.TrimPrefix(node, "t4-")); err == nil && strings.HasPrefix(node, "t4-") {
		return "clique-" + strconv.Itoa(i/3)
	}
	return node
}

func newNVLinkModelRun(t *testing.T, seed int64) *modelRun {
	cfg := withinConfig(4, 4, 0)
	cfg.CellTypes["T4-CLIQUE"] = CellTypeSpec{ChildCellType: "T4-NODE", ChildCellNumber: 3, TopologyKey: cliqueKey}
	for d := 0; d < 2; d++ {
		dom := PhysicalCellSpec{CellType: "T4-CLIQUE", CellAddress: fmt.Sprintf("clique-%d", d)}
		for i := 0; i < 3; i++ {
			dom.CellChildren = append(dom.CellChildren, PhysicalCellSpec{CellAddress: fmt.Sprintf("t4-%d", d*3+i)})
		}
		cfg.PhysicalCells = append(cfg.PhysicalCells, dom)
	}
	m := &modelRun{t: t, r: rand.New(rand.NewSource(seed)), cfg: cfg,
		vcs: map[string]VirtualClusterSpec{}, groups: map[string]AffinityGroupSpec{},
		health: map[string]NodeHealth{}, devices: map[string]NodeDevices{}, stats: map[string]int{}}
	withinShare.Store(m, 2)
	withinKeys.Store(m, []string{cliqueKey, cliqueKey, rackKey, hostKey, socketKey, zoneKey})
	t.Cleanup(func() { withinShare.Delete(m); withinKeys.Delete(m) })
	m.cfg.PhysicalCells[3].CellChildren[3].PinnedCellID = "pin-1" // randomSpec pins vc3's groups there
	m.k = newHealthyCore(t, m.cfg)
	for n := range m.k.nodes {
		m.health[n] = NodeHealthy
	}
	for _, s := range []VirtualClusterSpec{
		vcSpec("vc1", "T4-CLIQUE", 1, "V100-RACK", 1),
		vcSpec("vc2", "T4-CLIQUE.T4-NODE", 2, "V100-NODE", 4, "V100-SOCKET", 2),
		{Name: "vc3", VirtualCells: []VirtualCellSpec{{CellType: "V100-RACK", CellNumber: 1}, {CellType: "T4-NODE", CellNumber: 1}}, PinnedCells: []PinnedCellSpec{{PinnedCellID: "pin-1"}}},
	} {
		_, err := m.k.SetVirtualCluster(s)
		require.NoError(t, err)
		m.vcs[s.Name] = s
	}
	return m
}

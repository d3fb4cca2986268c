package cellcore

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The model test's topology constraints (within.go): the cell types carry
// keys at three levels (rack, node in both chains, socket), and about one
// new group in three asks for one of them or for a key no type declares.
// Sizes are the generator's own (up to 48 leaf cells), so many groups are
// larger than a node, a socket or what their VC could hold in one rack, and
// are refused. Safety is CheckInvariants' (every placed group under one
// keyed cell), checked here again from each decision's node names and
// device indices alone; the guarantee is guaranteeFits' (keyedFits).
//
// -model.within=false (or MODEL_WITHIN=0 in the environment, which reaches
// the test through make) draws no constrained group and no random number
// for them: the operations are then those of a core without the feature,
// which is how make core-decisions-compare compares decisions with one
// (MODEL_WITHIN=0 make core-decisions-compare BASE=fd459d7).
var modelWithin = flag.Bool("model.within", os.Getenv("MODEL_WITHIN") != "0", "draw groups with a topology constraint in the model test")

const (
	rackKey   = "topology.kubernetes.io/rack"
	hostKey   = "kubernetes.io/hostname"
	socketKey = "hivesched.io/socket"
	zoneKey   = "topology.kubernetes.io/zone" // declared by no cell type
)

func init() {
	modelReportHook = func(t *testing.T) { reportKeyedOracle(t, [5]int64{}) }
	modelConfigHook = func(cfg *Config) {
		for name, key := range map[string]string{"V100-RACK": rackKey, "V100-NODE": hostKey, "T4-NODE": hostKey, "V100-SOCKET": socketKey} {
			t := cfg.CellTypes[name]
			t.TopologyKey = key
			cfg.CellTypes[name] = t
		}
	}
	modelSpecHook = func(m *modelRun, s *AffinityGroupSpec) {
		share := 1 // of three groups
		if v, ok := withinShare.Load(m); ok {
			share = v.(int)
		}
		if !*modelWithin || m.r.Intn(3) >= share {
			return
		}
		keys := []string{rackKey, rackKey, rackKey, hostKey, hostKey, socketKey, zoneKey}
		if v, ok := withinKeys.Load(m); ok {
			keys = v.([]string)
		}
		s.WithinTopologyKey = m.pick(keys)
	}
	modelOutcomeHook = func(m *modelRun, s AffinityGroupSpec, d Decision, err error) {
		key := s.WithinTopologyKey
		if key == "" {
			return
		}
		if err != nil {
			msg := err.Error()
			switch {
			case strings.Contains(msg, "names no cell level"):
				m.stats["within-refused-no-level"]++
			case strings.Contains(msg, "does not fit in one"):
				m.stats["within-refused-larger-than-cell"]++
			case strings.Contains(msg, "could hold at most"):
				m.stats["within-refused-vc"]++
			default:
				m.stats["within-refused-other"]++
			}
			require.True(m.t, IsSpecError(err), "a refused constraint is the user's: %v", err)
			return
		}
		require.NotEqual(m.t, zoneKey, key, "a key no cell type declares is refused")
		m.stats["within-"+d.Kind.String()]++
		if d.Kind == Placed {
			checkWithinPods(m, key, d.Pods)
		}
	}
}

// checkWithinPods checks a placement against its key from the decision
// alone: the model's nodes are r<rack>-n<node> (V100, 8 devices, sockets
// of 4) and t4-<i>.
func checkWithinPods(m *modelRun, key string, pods []PodPlacement) {
	first := pods[0]
	for _, p := range pods {
		if p.Node == "" {
			continue // a slot without cells (recovered groups only)
		}
		switch key {
		case rackKey:
			require.Equal(m.t, strings.SplitN(first.Node, "-", 2)[0], strings.SplitN(p.Node, "-", 2)[0], "pods of a group within one rack: %+v", pods)
		case hostKey:
			require.Equal(m.t, first.Node, p.Node, "pods of a group within one node: %+v", pods)
		case cliqueKey:
			require.Equal(m.t, modelClique(first.Node), modelClique(p.Node), "pods of a group within one NVLink domain: %+v", pods)
		case socketKey:
			require.Equal(m.t, first.Node, p.Node, "pods of a group within one socket: %+v", pods)
			for _, idx := range p.LeafCellIndices {
				require.Equal(m.t, first.LeafCellIndices[0]/4, idx/4, "pods of a group within one socket: %+v", pods)
			}
		}
	}
	m.stats["within-placed-checked"]++
}

// keyedOracleCounts reads keyedOracle's counters.
func keyedOracleCounts() [5]int64 {
	o := &keyedOracle
	return [5]int64{o.checked.Load(), o.bound.Load(), o.boundNodes.Load(), o.unbound.Load(), o.uncertain.Load()}
}

// reportKeyedOracle logs keyedOracle's counts since since.
func reportKeyedOracle(t *testing.T, since [5]int64) {
	c := keyedOracleCounts()
	for i := range c {
		c[i] -= since[i]
	}
	t.Logf("topology constraints: %d checks of constrained groups by the oracle (keyedFits): %d fitted in the VC's bound cells of one keyed cell (%d over several nodes of one), %d in a whole keyed cell of an unbound virtual cell, %d such not counted (damaged free cells); every one that fitted was placed or preempted",
		c[0], c[1], c[2], c[3], c[4])
}

// withinShare: runs (*modelRun) that draw more constrained groups than one
// in three (TestModelRandomizedWithin).
var withinShare sync.Map

// withinKeys: runs (*modelRun) that draw their constraints' keys from
// another list (model_nvlink_test.go).
var withinKeys sync.Map

// TestModelRandomizedWithin is the model test on a cluster and VCs made
// for topology constraints: four racks, VCs that reserve racks and nodes
// side by side (so unbound racks, bound racks and nodes scattered over
// racks all occur), and two groups in three constrained. It runs a quarter
// of -model.ops (make soak: 250,000), in two seeds (harsh and mild
// hardware faults). make core-decisions-compare does not run it.
func TestModelRandomizedWithin(t *testing.T) {
	if !*modelWithin {
		t.Skip("-model.within=false")
	}
	const runs = 2
	per := *modelOps / 4 / runs
	since := keyedOracleCounts()
	t.Cleanup(func() { reportKeyedOracle(t, since) })
	for r := 0; r < runs; r++ {
		seed := *modelSeed + 100 + int64(r)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			m := newWithinModelRun(t, seed)
			m.mild = r == 1
			for i := 0; i < per; i++ {
				m.step(i)
			}
			t.Logf("%d operations (mild hardware faults: %v): %v", per, m.mild, m.stats)
		})
	}
}

func newWithinModelRun(t *testing.T, seed int64) *modelRun {
	m := &modelRun{t: t, r: rand.New(rand.NewSource(seed)), cfg: withinConfig(4, 4, 2),
		vcs: map[string]VirtualClusterSpec{}, groups: map[string]AffinityGroupSpec{},
		health: map[string]NodeHealth{}, devices: map[string]NodeDevices{}, stats: map[string]int{}}
	withinShare.Store(m, 2)
	t.Cleanup(func() { withinShare.Delete(m) })
	m.cfg.PhysicalCells[3].CellChildren[3].PinnedCellID = "pin-1" // randomSpec pins vc3's groups there
	m.k = newHealthyCore(t, m.cfg)
	for n := range m.k.nodes {
		m.health[n] = NodeHealthy
	}
	for _, s := range []VirtualClusterSpec{
		vcSpec("vc1", "V100-RACK", 1, "V100-NODE", 2),
		vcSpec("vc2", "V100-NODE", 4, "V100-SOCKET", 2, "T4-NODE", 1),
		{Name: "vc3", VirtualCells: []VirtualCellSpec{{CellType: "V100-RACK", CellNumber: 1}, {CellType: "T4-NODE", CellNumber: 1}}, PinnedCells: []PinnedCellSpec{{PinnedCellID: "pin-1"}}},
	} {
		_, err := m.k.SetVirtualCluster(s)
		require.NoError(t, err)
		m.vcs[s.Name] = s
	}
	return m
}

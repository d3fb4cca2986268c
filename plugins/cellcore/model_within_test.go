package cellcore

import (
	"flag"
	"os"
	"strings"
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
	modelReportHook = func(t *testing.T) {
		t.Logf("topology constraints: %d pending constrained groups checked by the oracle (keyedFits): %d fitted in the VC's bound cells of one keyed cell (%d over several nodes of one), %d in a whole keyed cell of an unbound virtual cell, %d such not counted (damaged free cells)",
			keyedOracle.checked.Load(), keyedOracle.bound.Load(), keyedOracle.boundNodes.Load(), keyedOracle.unbound.Load(), keyedOracle.uncertain.Load())
	}
	modelConfigHook = func(cfg *Config) {
		for name, key := range map[string]string{"V100-RACK": rackKey, "V100-NODE": hostKey, "T4-NODE": hostKey, "V100-SOCKET": socketKey} {
			t := cfg.CellTypes[name]
			t.TopologyKey = key
			cfg.CellTypes[name] = t
		}
	}
	modelSpecHook = func(m *modelRun, s *AffinityGroupSpec) {
		if !*modelWithin || m.r.Intn(3) != 0 {
			return
		}
		s.WithinTopologyKey = m.pick([]string{rackKey, rackKey, rackKey, hostKey, hostKey, socketKey, zoneKey})
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
		case socketKey:
			require.Equal(m.t, first.Node, p.Node, "pods of a group within one socket: %+v", pods)
			for _, idx := range p.LeafCellIndices {
				require.Equal(m.t, first.LeafCellIndices[0]/4, idx/4, "pods of a group within one socket: %+v", pods)
			}
		}
	}
	m.stats["within-placed-checked"]++
}

package sim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
)

// FailureModel takes nodes down and brings them back: each node fails
// independently, its time to the next failure exponential with mean
// MTBFHours, each outage exponential with mean RepairHours. The runs on a
// failed node are stopped and start over when placed again (a job that
// lost a node fails and is resubmitted, as in Philly's and Helios' logs);
// the node's health goes to the cell core through its health API
// (SetNodeHealth Bad, then Healthy), so hivesched places around it and
// dooms cells as it would for a real failure. Every policy sees the same
// outages (each node's draw depends only on the seed and its name); the
// private references have none, so what failures cost is counted apart
// (docs/simulator.md, "Anomalies and their causes").
type FailureModel struct {
	Seed        uint64  `json:"seed"`
	MTBFHours   float64 `json:"mtbfHours"`
	RepairHours float64 `json:"repairHours"`
}

// outage is one node down from from to to (seconds).
type outage struct {
	node     string
	from, to float64
}

// outages draws every node's outages up to horizon.
func (f FailureModel) outages(nodes []string, horizon float64) ([]outage, error) {
	if f.MTBFHours == 0 {
		return nil, nil
	}
	if f.MTBFHours < 0 || f.RepairHours <= 0 {
		return nil, fmt.Errorf("failures: mtbfHours and repairHours must be positive")
	}
	names := slices.Sorted(slices.Values(nodes))
	var out []outage
	for _, n := range names {
		h := fnv.New64a()
		h.Write([]byte(n))
		r := rand.New(rand.NewPCG(f.Seed, h.Sum64()))
		for at := r.ExpFloat64() * f.MTBFHours * 3600; at < horizon; {
			to := at + r.ExpFloat64()*f.RepairHours*3600
			out = append(out, outage{node: n, from: at, to: to})
			at = to + r.ExpFloat64()*f.MTBFHours*3600
		}
	}
	return out, nil
}

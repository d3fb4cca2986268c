package sim

import (
	"fmt"
	"time"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// Policies the simulator runs by default, in report order.
var Policies = []string{"hivesched", "quota-first-fit", "quota-best-fit", "quota-spread"}

// AllPolicies are the policies the simulator knows: the default ones and
// quota-one-clique, which a trace gets by default when some job must stay
// inside one domain (PoliciesFor).
var AllPolicies = append(append([]string(nil), Policies...), "quota-one-clique")

// PoliciesFor is the default policies for jobs: Policies, and
// quota-one-clique too if some job must stay inside one domain.
func PoliciesFor(jobs []Job) []string {
	if hasWithin(jobs) {
		return AllPolicies
	}
	return Policies
}

// Input is what a simulation runs on.
type Input struct {
	Cluster cellcore.Config
	VCs     []cellcore.VirtualClusterSpec
	Jobs    []Job
	// Policies to compare (of Policies); each VC on a private cluster of
	// its cells always runs too, as the reference.
	Policies []string
	// Tolerance: a job is a sharing anomaly when it waits more than this
	// many seconds longer than on its VC's private cluster.
	Tolerance   float64
	SampleEvery float64
	// LateAfter: the report counts jobs that waited longer than this many
	// seconds (the tail), beside its percentiles.
	LateAfter float64
	// Failures takes nodes of the shared cluster down and up (not the
	// private references'); zero: none.
	Failures FailureModel
	// Source says where the jobs come from, on every result: "real: ..."
	// for an imported trace, "calibrated, not real: ..." for a generated
	// one. Notes are what the importer or generator had to change.
	Source string
	Notes  []string
}

// Report is every policy's result and the private reference.
type Report struct {
	In      *Input
	Results []*Result
	Private map[string]*Result // per VC
	Elapsed map[string]time.Duration
	Outages []outage

	priv map[string]float64 // private delay by job ID, computed once
}

// Run simulates the trace under each policy and under private clusters.
func Run(in *Input) (*Report, error) {
	rep := &Report{In: in, Private: map[string]*Result{}, Elapsed: map[string]time.Duration{}}
	horizon := 0.0
	if n := len(in.Jobs); n > 0 {
		horizon = in.Jobs[n-1].Submit
	}
	var err error
	if rep.Outages, err = in.Failures.outages(nodeOrder(in.Cluster), horizon); err != nil {
		return nil, err
	}
	for _, pol := range in.Policies {
		var p placer
		var err error
		switch pol {
		case "hivesched":
			p, err = newCellPlacer(in.Cluster, in.VCs)
		case "quota-first-fit", "quota-best-fit", "quota-spread", "quota-one-clique":
			p, err = newQuotaPlacer(in.Cluster, in.VCs, pol[len("quota-"):])
		default:
			return nil, fmt.Errorf("unknown policy %q (known: %v)", pol, AllPolicies)
		}
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", pol, err)
		}
		start := time.Now()
		res, err := simulate(pol, p, in.Jobs, in.SampleEvery, rep.Outages)
		if err != nil {
			return nil, err
		}
		rep.Elapsed[pol] = time.Since(start)
		rep.Results = append(rep.Results, res)
	}
	start := time.Now()
	for _, vc := range in.VCs {
		var jobs []Job
		for _, j := range in.Jobs {
			if j.VC == vc.Name {
				jobs = append(jobs, j)
			}
		}
		cfg, own := privateConfig(in.Cluster, vc)
		if len(cfg.PhysicalCells) == 0 {
			continue // a VC of pinned cells only: no private reference
		}
		p, err := newCellPlacer(cfg, []cellcore.VirtualClusterSpec{own})
		if err != nil {
			return nil, fmt.Errorf("private cluster of %s: %w", vc.Name, err)
		}
		res, err := simulate("private", p, jobs, in.SampleEvery, nil)
		if err != nil {
			return nil, err
		}
		rep.Private[vc.Name] = res
	}
	rep.Elapsed["private"] = time.Since(start)
	return rep, nil
}

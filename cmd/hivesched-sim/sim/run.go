package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// Policies the simulator knows, in report order.
var Policies = []string{"hivesched", "quota-first-fit", "quota-best-fit", "quota-spread"}

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
}

// Report is every policy's result and the private reference.
type Report struct {
	In      *Input
	Results []*Result
	Private map[string]*Result // per VC
	Elapsed map[string]time.Duration
}

// Run simulates the trace under each policy and under private clusters.
func Run(in *Input) (*Report, error) {
	rep := &Report{In: in, Private: map[string]*Result{}, Elapsed: map[string]time.Duration{}}
	for _, pol := range in.Policies {
		var p placer
		var err error
		switch pol {
		case "hivesched":
			p, err = newCellPlacer(in.Cluster, in.VCs)
		case "quota-first-fit", "quota-best-fit", "quota-spread":
			p, err = newQuotaPlacer(in.Cluster, in.VCs, pol[len("quota-"):])
		default:
			return nil, fmt.Errorf("unknown policy %q (known: %v)", pol, Policies)
		}
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", pol, err)
		}
		start := time.Now()
		res, err := simulate(pol, p, in.Jobs, in.SampleEvery)
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
		res, err := simulate("private", p, jobs, in.SampleEvery)
		if err != nil {
			return nil, err
		}
		rep.Private[vc.Name] = res
	}
	rep.Elapsed["private"] = time.Since(start)
	return rep, nil
}

// delays are the queuing delays of the started jobs of vc ("" all), in
// seconds, sorted.
func delays(res *Result, vc string) []float64 {
	var out []float64
	for _, r := range res.Runs {
		if r.started && (vc == "" || r.job.VC == vc) {
			out = append(out, r.start-r.job.Submit)
		}
	}
	slices.Sort(out)
	return out
}

// privateDelay is a job's delay on its VC's private cluster, by job ID.
func (rep *Report) privateDelays() map[string]float64 {
	m := map[string]float64{}
	for _, res := range rep.Private {
		for _, r := range res.Runs {
			if r.started {
				m[r.job.ID] = r.start - r.job.Submit
			}
		}
	}
	return m
}

// anomalies counts vc's jobs ("" all) that waited more than the tolerance
// longer than on their VC's private cluster (or never started, where they
// did there). Opportunistic jobs have no private reference and no promise.
func (rep *Report) anomalies(res *Result, vc string) int {
	priv := rep.privateDelays()
	n := 0
	for _, r := range res.Runs {
		if r.job.Priority < 0 || (vc != "" && r.job.VC != vc) {
			continue
		}
		pd, ok := priv[r.job.ID]
		if !ok {
			continue
		}
		if !r.started || r.start-r.job.Submit > pd+rep.In.Tolerance {
			n++
		}
	}
	return n
}

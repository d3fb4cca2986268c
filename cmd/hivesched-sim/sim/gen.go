package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Generator makes a synthetic trace with a seed: per VC, Poisson arrivals
// and a mix of job shapes, each with a log-normal duration.
type Generator struct {
	Seed    uint64       `json:"seed"`
	Days    float64      `json:"days"`
	Tenants []TenantLoad `json:"tenants"`
}

// TenantLoad is one VC's jobs.
type TenantLoad struct {
	VC           string  `json:"virtualCluster"`
	JobsPerHour  float64 `json:"jobsPerHour"`
	Priority     int32   `json:"priority"`
	LeafCellType string  `json:"leafCellType,omitempty"`
	Shapes       []Shape `json:"shapes"`
}

// Shape is a job size with its weight in the mix and its duration
// distribution: log-normal with the given median (minutes) and sigma.
type Shape struct {
	Pods          int32   `json:"pods"`
	LeavesPerPod  int32   `json:"leafCellsPerPod"`
	Weight        float64 `json:"weight"`
	MedianMinutes float64 `json:"medianMinutes"`
	Sigma         float64 `json:"sigma"`
}

// Generate returns the trace, ordered by submission. The same generator
// (seed included) gives the same trace.
func (g Generator) Generate() ([]Job, error) {
	r := rand.New(rand.NewPCG(g.Seed, g.Seed^0x9e3779b97f4a7c15))
	horizon := g.Days * 86400
	var jobs []Job
	seq := map[string]int{} // job IDs count per VC, across its tenants
	for ti, t := range g.Tenants {
		if t.JobsPerHour <= 0 || len(t.Shapes) == 0 {
			return nil, fmt.Errorf("tenant %d (%s): jobsPerHour must be positive and shapes non-empty", ti, t.VC)
		}
		var total float64
		for _, s := range t.Shapes {
			if s.Weight <= 0 || s.Pods <= 0 || s.LeavesPerPod <= 0 || s.MedianMinutes <= 0 || s.Sigma < 0 {
				return nil, fmt.Errorf("tenant %s: a shape needs positive pods, leafCellsPerPod, weight, medianMinutes and sigma >= 0", t.VC)
			}
			total += s.Weight
		}
		rate := t.JobsPerHour / 3600
		for at := r.ExpFloat64() / rate; at < horizon; at += r.ExpFloat64() / rate {
			x := r.Float64() * total
			s := t.Shapes[len(t.Shapes)-1]
			for _, c := range t.Shapes {
				if x < c.Weight {
					s = c
					break
				}
				x -= c.Weight
			}
			dur := s.MedianMinutes * 60 * math.Exp(s.Sigma*r.NormFloat64())
			jobs = append(jobs, Job{ID: fmt.Sprintf("%s-%d", t.VC, seq[t.VC]), Submit: math.Round(at), Duration: math.Max(60, math.Round(dur)),
				VC: t.VC, Priority: t.Priority, Pods: s.Pods, Leaves: s.LeavesPerPod, LeafType: t.LeafCellType})
			seq[t.VC]++
		}
	}
	sort.SliceStable(jobs, func(a, b int) bool {
		if jobs[a].Submit != jobs[b].Submit {
			return jobs[a].Submit < jobs[b].Submit
		}
		return jobs[a].ID < jobs[b].ID
	})
	return jobs, nil
}

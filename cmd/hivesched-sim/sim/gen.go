package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Generator makes a synthetic trace with a seed: per VC, Poisson arrivals
// (optionally following a daily pattern) and a mix of job shapes, each
// with a log-normal duration or one drawn from a published distribution.
// What it makes is never a real trace: every report says so (Source).
type Generator struct {
	Seed    uint64       `json:"seed"`
	Days    float64      `json:"days"`
	Tenants []TenantLoad `json:"tenants"`
	// Calibration names the published figures the settings come from; a
	// generator without it is a hand-chosen mix.
	Calibration string `json:"calibration,omitempty"`
	// Assumptions are what the settings had to choose where no figure was
	// found: they go into every report.
	Assumptions []string `json:"assumptions,omitempty"`
	// Diurnal: 24 relative arrival rates, hour 0 to 23 of each day: the
	// arrivals are a Poisson process whose rate follows them (jobsPerHour
	// stays the daily mean). Empty: constant rate.
	Diurnal []float64 `json:"diurnal,omitempty"`
	// DurationCDF: a run-time distribution as points of its CDF (seconds,
	// fraction of jobs at or under it), for shapes with meanMinutes or no
	// duration of their own: drawn by inverse CDF, log-linear between
	// points.
	DurationCDF []CDFPoint `json:"durationCDF,omitempty"`
	// Failures, if set, takes nodes down and up (FailureModel).
	Failures FailureModel `json:"failures,omitempty"`
}

// CDFPoint is one point of a distribution: Fraction of jobs at or under
// Seconds.
type CDFPoint struct {
	Seconds  float64 `json:"seconds"`
	Fraction float64 `json:"fraction"`
}

// TenantLoad is one VC's jobs.
type TenantLoad struct {
	VC           string  `json:"virtualCluster"`
	JobsPerHour  float64 `json:"jobsPerHour"`
	Priority     int32   `json:"priority"`
	LeafCellType string  `json:"leafCellType,omitempty"`
	// LazyPreemption: the tenant's jobs, when preempted, run on as
	// opportunistic instead (hivesched.io/lazy-preemption).
	LazyPreemption bool    `json:"lazyPreemption,omitempty"`
	Shapes         []Shape `json:"shapes"`
}

// Shape is a job size with its weight in the mix and its duration:
// log-normal with the given median (minutes) and sigma, or a CDF (the
// shape's own DurationCDF, else the generator's) scaled to MeanMinutes (or
// as it is, with neither).
type Shape struct {
	Pods          int32   `json:"pods"`
	LeavesPerPod  int32   `json:"leafCellsPerPod"`
	Weight        float64 `json:"weight"`
	MedianMinutes float64 `json:"medianMinutes,omitempty"`
	Sigma         float64 `json:"sigma,omitempty"`
	MeanMinutes   float64 `json:"meanMinutes,omitempty"`
	// DurationCDF, if set, is this size's own run-time distribution (same
	// form as the generator's): published run times differ by job size in
	// shape, not only in mean (Philly's 2-GPU jobs have a shorter median
	// and a longer mean than its 1-GPU ones).
	DurationCDF []CDFPoint `json:"durationCDF,omitempty"`
	// WithinTopologyKey: the shape's jobs must stay inside one domain of
	// this node label key (Job.Within), e.g. nvidia.com/gpu.clique.
	WithinTopologyKey string `json:"withinTopologyKey,omitempty"`
}

// Source is the label every result of this generator carries.
func (g Generator) Source(path string) string {
	if g.Calibration != "" {
		return fmt.Sprintf("calibrated, not real: generated (%s, seed %d) from %s", path, g.Seed, g.Calibration)
	}
	return fmt.Sprintf("synthetic, not real: generated (%s, seed %d) from a hand-chosen mix", path, g.Seed)
}

// Notes are the generator's assumptions, for the report.
func (g Generator) Notes() []string { return append([]string(nil), g.Assumptions...) }

// cdfMean is the mean of the DurationCDF as drawn (log-linear between
// points: over a segment from a to b the mean is (b-a)/ln(b/a)).
func cdfMean(pts []CDFPoint) float64 {
	m := pts[0].Fraction * pts[0].Seconds
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		seg := a.Seconds
		if b.Seconds != a.Seconds {
			seg = (b.Seconds - a.Seconds) / math.Log(b.Seconds/a.Seconds)
		}
		m += (b.Fraction - a.Fraction) * seg
	}
	return m
}

// cdfDraw maps u in [0,1) to a duration through the CDF.
func cdfDraw(pts []CDFPoint, u float64) float64 {
	if u <= pts[0].Fraction {
		return pts[0].Seconds
	}
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		if u <= b.Fraction {
			if b.Fraction == a.Fraction {
				return b.Seconds
			}
			x := (u - a.Fraction) / (b.Fraction - a.Fraction)
			return a.Seconds * math.Pow(b.Seconds/a.Seconds, x)
		}
	}
	return pts[len(pts)-1].Seconds
}

func (g Generator) validate() error {
	if err := validateCDF("durationCDF", g.DurationCDF); err != nil {
		return err
	}
	for _, t := range g.Tenants {
		for i, s := range t.Shapes {
			if err := validateCDF(fmt.Sprintf("tenant %s: shape %d: durationCDF", t.VC, i), s.DurationCDF); err != nil {
				return err
			}
		}
	}
	if len(g.Diurnal) != 0 && len(g.Diurnal) != 24 {
		return fmt.Errorf("diurnal: 24 hourly rates, got %d", len(g.Diurnal))
	}
	for _, w := range g.Diurnal {
		if w < 0 {
			return fmt.Errorf("diurnal: rates must not be negative")
		}
	}
	return nil
}

// validateCDF checks a run-time CDF (empty is valid: none given).
func validateCDF(what string, pts []CDFPoint) error {
	for i, p := range pts {
		if p.Seconds <= 0 || p.Fraction < 0 || p.Fraction > 1 || (i > 0 && (p.Seconds < pts[i-1].Seconds || p.Fraction < pts[i-1].Fraction)) {
			return fmt.Errorf("%s: point %d: seconds must be positive and both columns non-decreasing, fractions within 0..1", what, i)
		}
	}
	if n := len(pts); n > 0 && pts[n-1].Fraction != 1 {
		return fmt.Errorf("%s: the last point's fraction must be 1", what)
	}
	return nil
}

// Generate returns the trace, ordered by submission. The same generator
// (seed included) gives the same trace.
func (g Generator) Generate() ([]Job, error) {
	if err := g.validate(); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(g.Seed, g.Seed^0x9e3779b97f4a7c15))
	horizon := g.Days * 86400
	// The diurnal rates, normalised to a mean of 1, and their peak: the
	// arrivals are drawn at the peak rate and thinned.
	var hourly []float64
	peak := 1.0
	if len(g.Diurnal) == 24 {
		var s float64
		for _, w := range g.Diurnal {
			s += w
		}
		if s <= 0 {
			return nil, fmt.Errorf("diurnal: rates must not all be 0")
		}
		for _, w := range g.Diurnal {
			hourly = append(hourly, w*24/s)
		}
		peak = slices.Max(hourly)
	}
	var jobs []Job
	seq := map[string]int{} // job IDs count per VC, across its tenants
	for ti, t := range g.Tenants {
		if t.JobsPerHour <= 0 || len(t.Shapes) == 0 {
			return nil, fmt.Errorf("tenant %d (%s): jobsPerHour must be positive and shapes non-empty", ti, t.VC)
		}
		var total float64
		for _, s := range t.Shapes {
			own := s.MedianMinutes > 0
			if s.Weight <= 0 || s.Pods <= 0 || s.LeavesPerPod <= 0 || s.Sigma < 0 || s.MeanMinutes < 0 || (!own && len(g.DurationCDF) == 0 && len(s.DurationCDF) == 0) || (own && (s.MeanMinutes > 0 || len(s.DurationCDF) > 0)) {
				return nil, fmt.Errorf("tenant %s: a shape needs positive pods, leafCellsPerPod and weight, and either medianMinutes (with sigma >= 0) or a durationCDF, its own or the generator's (with meanMinutes or none)", t.VC)
			}
			total += s.Weight
		}
		rate := t.JobsPerHour / 3600 * peak
		for at := r.ExpFloat64() / rate; at < horizon; at += r.ExpFloat64() / rate {
			if hourly != nil && r.Float64()*peak >= hourly[int(math.Mod(at, 86400)/3600)] {
				continue // thinned: this hour's rate is below the peak
			}
			x := r.Float64() * total
			s := t.Shapes[len(t.Shapes)-1]
			for _, c := range t.Shapes {
				if x < c.Weight {
					s = c
					break
				}
				x -= c.Weight
			}
			var dur float64
			if s.MedianMinutes > 0 {
				dur = math.Max(60, math.Round(s.MedianMinutes*60*math.Exp(s.Sigma*r.NormFloat64())))
			} else {
				cdf := g.DurationCDF
				if len(s.DurationCDF) > 0 {
					cdf = s.DurationCDF
				}
				dur = cdfDraw(cdf, r.Float64())
				if s.MeanMinutes > 0 {
					dur *= s.MeanMinutes * 60 / cdfMean(cdf)
				}
				dur = math.Max(1, math.Round(dur))
			}
			jobs = append(jobs, Job{ID: fmt.Sprintf("%s-%d", t.VC, seq[t.VC]), Submit: math.Round(at), Duration: dur,
				VC: t.VC, Priority: t.Priority, Pods: s.Pods, Leaves: s.LeavesPerPod, LeafType: t.LeafCellType, Lazy: t.LazyPreemption, Within: s.WithinTopologyKey})
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

package sim

import (
	"math"
	"slices"
)

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

// privateDelays is each job's delay on its VC's private cluster, by job ID.
func (rep *Report) privateDelays() map[string]float64 {
	if rep.priv != nil {
		return rep.priv
	}
	m := map[string]float64{}
	for _, res := range rep.Private {
		for _, r := range res.Runs {
			if r.started {
				m[r.job.ID] = r.start - r.job.Submit
			}
		}
	}
	rep.priv = m
	return m
}

// Causes of a sharing anomaly (docs/simulator.md). Over the job's excess
// wait, from when it would have started on its private cluster (plus the
// tolerance) to when it started:
//   - causeFailure: a node failure stopped it, or it was refused while its
//     VC had the headroom for its GPUs and some node was down;
//   - causeAffinity (lost affinity): it was refused while its VC had the
//     headroom for its GPUs by count, all nodes up: the GPUs were there,
//     not in the shape it needs (fragmentation across VCs);
//   - causeQueue (queue order): every refusal came while its VC's own
//     guaranteed jobs held its quota or cells: it waited for its own VC's
//     jobs, which ran in another order or arrangement than on its private
//     cluster.
const (
	causeAffinity = iota
	causeQueue
	causeFailure
	nCauses
)

var causeNames = [nCauses]string{"lost affinity", "queue order", "node failure"}

// compared is one policy's jobs against the private reference, for one VC
// ("" all): guaranteed jobs with a private reference only.
type compared struct {
	jobs      int
	anomalies int
	byCause   [nCauses]int
	faster    int     // started more than the tolerance earlier than privately
	lostH     float64 // job-hours waited more than privately (all slower jobs)
	gainedH   float64 // job-hours waited less
	shared    float64 // mean delay, minutes
	private   float64 // mean delay on the private clusters, minutes
}

func (rep *Report) compare(res *Result, vc string) compared {
	priv := rep.privateDelays()
	end := 0.0
	if n := len(res.Used); n > 0 {
		end = float64(n) * res.SampleEvery
	}
	var c compared
	var sd, pd float64
	for _, r := range res.Runs {
		if r.job.Priority < 0 || (vc != "" && r.job.VC != vc) {
			continue
		}
		p, ok := priv[r.job.ID]
		if !ok {
			continue
		}
		c.jobs++
		started := r.start
		if !r.started {
			started = math.Max(end, r.job.Submit)
		}
		d := started - r.job.Submit
		sd += d
		pd += p
		switch diff := d - p; {
		case diff > 0:
			c.lostH += diff / 3600
		case diff < 0:
			c.gainedH += -diff / 3600
		}
		if d < p-rep.In.Tolerance {
			c.faster++
		}
		if r.started && d <= p+rep.In.Tolerance {
			continue
		}
		c.anomalies++
		c.byCause[cause(r, r.job.Submit+p+rep.In.Tolerance, started)]++
	}
	if c.jobs > 0 {
		c.shared, c.private = sd/float64(c.jobs)/60, pd/float64(c.jobs)/60
	}
	return c
}

// cause is why r waited over [from, to): its refusals then (blocks).
func cause(r *run, from, to float64) int {
	if r.interrupted > 0 {
		return causeFailure
	}
	c := causeQueue
	for _, b := range r.blocks {
		if b.from >= to || b.to < from || !b.fits {
			continue
		}
		if b.down {
			return causeFailure
		}
		c = causeAffinity
	}
	return c
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// vcStats is one policy's figures for one VC ("" all).
type vcStats struct {
	jobs, started, preempted, interrupted, late int
	mean, p50, p95, p99, p999, max, jct         float64
	lostGPUh                                    float64 // GPU-hours of runs stopped before they finished
}

func (rep *Report) stats(res *Result, vc string) vcStats {
	d := delays(res, vc)
	s := vcStats{started: len(d), mean: mean(d), p50: percentile(d, 50), p95: percentile(d, 95), p99: percentile(d, 99),
		p999: percentile(d, 99.9), max: percentile(d, 100)}
	for _, x := range d {
		if x > rep.In.LateAfter {
			s.late++
		}
	}
	var jct []float64
	for _, r := range res.Runs {
		if vc != "" && r.job.VC != vc {
			continue
		}
		s.jobs++
		s.preempted += r.preempts
		s.interrupted += r.interrupted
		s.lostGPUh += r.lostWork / 3600
		if r.started {
			jct = append(jct, r.start+r.job.Duration-r.job.Submit)
		}
	}
	s.jct = mean(jct)
	return s
}

// utilStats is a policy's GPU utilization, several ways.
type utilStats struct {
	toLastSubmit float64 // samples from 0 to the last submission (the old figure)
	whole        float64 // every sample, to the last job's end
	busy         float64 // samples where demand (in use + asked by waiting jobs) reached the cluster's size
	busyShare    float64 // share of samples that were busy
	weekMin      float64 // per week of the submission period
	weekMedian   float64
	weekMax      float64
	fragmented   float64 // to the last submission
	down         float64 // share of GPUs on failed nodes, to the last submission
}

func utilization(res *Result) utilStats {
	nan := math.NaN()
	u := utilStats{toLastSubmit: nan, whole: nan, busy: nan, weekMin: nan, weekMedian: nan, weekMax: nan, fragmented: nan, down: nan}
	if len(res.Used) == 0 || res.TotalGPUs == 0 {
		return u
	}
	tot := float64(res.TotalGPUs)
	frac := func(xs []int64, from, to int) float64 {
		if to <= from {
			return nan
		}
		var s float64
		for _, x := range xs[from:to] {
			s += float64(x)
		}
		return s / float64(to-from) / tot
	}
	n := max(res.SubmitSamples, 1)
	u.toLastSubmit = frac(res.Used, 0, n)
	u.fragmented = frac(res.Fragmented, 0, n)
	u.down = frac(res.Down, 0, n)
	u.whole = frac(res.Used, 0, len(res.Used))
	var busy float64
	nb := 0
	for i, d := range res.Demand {
		if d >= res.TotalGPUs {
			busy += float64(res.Used[i])
			nb++
		}
	}
	if nb > 0 {
		u.busy = busy / float64(nb) / tot
	}
	u.busyShare = float64(nb) / float64(len(res.Demand))
	week := int(math.Round(7 * 86400 / res.SampleEvery))
	var weeks []float64
	for i := 0; i+week <= n || (i == 0 && n > 0); i += week {
		weeks = append(weeks, frac(res.Used, i, min(i+week, n)))
	}
	if len(weeks) > 0 {
		slices.Sort(weeks)
		u.weekMin, u.weekMedian, u.weekMax = weeks[0], weeks[len(weeks)/2], weeks[len(weeks)-1]
	}
	return u
}

// withinCompared is one policy's guaranteed multi-node jobs that must stay
// inside one domain of a key, against the private reference (for one VC,
// "" all): the anomalies of issue 45's definition, a tenant within its
// quota whose multi-node job cannot get one domain.
type withinCompared struct {
	jobs int // guaranteed, more than one pod, with a private reference
	// anomalies = split + waited: split ran (some run of it) across
	// domains; waited (not split) started more than the tolerance later
	// than privately, or never, and was refused in that time while its VC
	// had the headroom for its GPUs by count, all nodes up (a lost-affinity
	// anomaly).
	anomalies, split, waited int
	never                    int // never started (privately it did)
	shared, private          float64
}

func (rep *Report) compareWithin(res *Result, key, vc string) withinCompared {
	priv := rep.privateDelays()
	end := float64(len(res.Used)) * res.SampleEvery
	var c withinCompared
	var sd, pd float64
	for _, r := range res.Runs {
		j := r.job
		if j.Within != key || j.Priority < 0 || j.Pods < 2 || (vc != "" && j.VC != vc) {
			continue
		}
		p, ok := priv[j.ID]
		if !ok {
			continue
		}
		c.jobs++
		started := r.start
		if !r.started {
			started = math.Max(end, j.Submit)
			c.never++
		}
		sd += started - j.Submit
		pd += p
		switch {
		case r.split:
			c.split++
		case (!r.started || started-j.Submit > p+rep.In.Tolerance) && cause(r, j.Submit+p+rep.In.Tolerance, started) == causeAffinity:
			c.waited++
		}
	}
	c.anomalies = c.split + c.waited
	if c.jobs > 0 {
		c.shared, c.private = sd/float64(c.jobs)/60, pd/float64(c.jobs)/60
	}
	return c
}

// domainIdleMeans are a key's DomainSamples averaged to the last
// submission: GPUs idle inside fragmented domains and free GPUs in partly
// used domains (GPUs, and shares of the domains' GPUs).
func domainIdleMeans(res *Result, key string) (frag, partial, fragShare, partialShare float64) {
	ds := res.Domains[key]
	nan := math.NaN()
	if ds == nil || len(ds.Fragmented) == 0 || ds.GPUs == 0 {
		return nan, nan, nan, nan
	}
	n := min(max(res.SubmitSamples, 1), len(ds.Fragmented))
	var f, p float64
	for i := 0; i < n; i++ {
		f += float64(ds.Fragmented[i])
		p += float64(ds.Partial[i])
	}
	f, p = f/float64(n), p/float64(n)
	return f, p, f / float64(ds.GPUs), p / float64(ds.GPUs)
}

// withinKeys are the keys some job of the trace must stay within, sorted.
func (rep *Report) withinKeys() []string {
	var keys []string
	for i := range rep.In.Jobs {
		if k := rep.In.Jobs[i].Within; k != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

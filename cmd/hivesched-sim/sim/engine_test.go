package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func result(t *testing.T, rep *Report, policy string) *Result {
	t.Helper()
	for _, r := range rep.Results {
		if r.Policy == policy {
			return r
		}
	}
	t.Fatalf("no result for %s", policy)
	return nil
}

func runOf(res *Result, id string) *run {
	for _, r := range res.Runs {
		if r.job.ID == id {
			return r
		}
	}
	return nil
}

// Causes, by hand: under a spread quota b's two 4-GPU jobs take half of
// each node, so a's 8-GPU job waits with a's whole quota free (lost
// affinity); a's 1-GPU job, submitted once a1 finally runs, then waits for
// a1, its own VC's job, which on a's private node had finished long before
// (queue order).
func TestAnomalyCauses(t *testing.T) {
	cfg, vcs := oneRack()
	jobs := []Job{
		job("b1", "b", 0, 100, 0, 1, 4),
		job("b2", "b", 0, 200, 0, 1, 4),
		job("a1", "a", 1, 50, 0, 1, 8),
		job("a2", "a", 101, 10, 0, 1, 1),
	}
	rep, err := Run(&Input{Cluster: cfg, VCs: vcs, Jobs: jobs, Policies: Policies, Tolerance: 10, SampleEvery: 10, LateAfter: 30})
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"b1": 0, "b2": 0, "a1": 100, "a2": 150}, starts(t, rep, "quota-spread"))
	c := rep.compare(result(t, rep, "quota-spread"), "a")
	require.Equal(t, 2, c.anomalies)
	require.Equal(t, [nCauses]int{causeAffinity: 1, causeQueue: 1}, c.byCause)
	require.InDelta(t, (99.0+49.0)/3600, c.lostH, 1e-9, "a1 waited 99 s more than privately, a2 49 s")
	for _, p := range []string{"hivesched", "quota-first-fit"} {
		require.Zero(t, rep.compare(result(t, rep, p), "").anomalies, p)
	}
	s := rep.stats(result(t, rep, "quota-spread"), "a")
	require.Equal(t, 2, s.late, "both of a's jobs waited more than 30 s")
	require.Equal(t, float64(99), s.max)
}

// Gains are counted as plainly as losses: a job that started earlier than
// on its private cluster (beyond the tolerance) is faster, and the waiting
// it saved is summed.
func TestCompareCountsGains(t *testing.T) {
	j := job("a1", "a", 0, 10, 0, 1, 8)
	shared := &Result{Policy: "p", Runs: []*run{{job: &j, started: true, start: 5}}, SampleEvery: 10, Used: []int64{0}}
	priv := &Result{Policy: "private", Runs: []*run{{job: &j, started: true, start: 3605}}}
	rep := &Report{In: &Input{Tolerance: 60}, Results: []*Result{shared}, Private: map[string]*Result{"a": priv}}
	c := rep.compare(shared, "a")
	require.Equal(t, 1, c.faster)
	require.Zero(t, c.anomalies)
	require.InDelta(t, 1.0, c.gainedH, 1e-9)
	require.InDelta(t, 5.0/60, c.shared, 1e-9)
	require.InDelta(t, 3605.0/60, c.private, 1e-9)
}

// A node failure stops the runs on it; they start over. Under a quota the
// stopped job restarts on the other node as soon as it is free; under
// hivesched its VC's cell is doomed to the failed node (the other node
// belongs to b, whose guarantee stands), so it waits for the repair: the
// VC bears the loss of its hardware, as HiveD intends.
func TestNodeFailureStopsAndRequeues(t *testing.T) {
	cfg, vcs := oneRack()
	jobs := []Job{job("a1", "a", 0, 100, 0, 1, 8), job("b1", "b", 0, 100, 0, 1, 8)}
	outages := []outage{{node: "n0", from: 50, to: 500}}
	for _, pol := range []string{"hivesched", "quota-first-fit"} {
		var p placer
		var err error
		if pol == "hivesched" {
			p, err = newCellPlacer(cfg, vcs)
		} else {
			p, err = newQuotaPlacer(cfg, vcs, "first-fit")
		}
		require.NoError(t, err)
		res, err := simulate(pol, p, jobs, 10, outages)
		require.NoError(t, err, pol)
		require.Equal(t, 1, res.NodeFailures, pol)
		require.Equal(t, 1, res.Interruptions, pol)
		var victim *run
		for _, r := range res.Runs {
			if r.interrupted > 0 {
				require.Nil(t, victim, "one job was on n0")
				victim = r
			} else {
				require.Equal(t, float64(0), r.start, "the job on n1 is untouched")
			}
		}
		require.NotNil(t, victim, pol)
		require.Equal(t, 1, victim.interrupted, pol)
		require.Equal(t, float64(50*8), victim.lostWork, pol)
		require.True(t, victim.started, pol)
		want := 100.0 // the other node frees at 100
		if pol == "hivesched" {
			want = 500
		}
		require.Equal(t, want, victim.start, pol)
		require.Equal(t, causeFailure, cause(victim, 10, victim.start), pol)
		require.Contains(t, res.Down, int64(8), "the failed node's GPUs are sampled as down")
	}
}

// Outages are drawn per node from the seed and its name alone: the same
// for every policy, and a node's draw does not change when others are
// added.
func TestFailureModelDeterministic(t *testing.T) {
	f := FailureModel{Seed: 7, MTBFHours: 24, RepairHours: 2}
	a, err := f.outages([]string{"n0", "n1"}, 30*86400)
	require.NoError(t, err)
	b, err := f.outages([]string{"n1", "n0", "n2"}, 30*86400)
	require.NoError(t, err)
	require.NotEmpty(t, a)
	var bn []outage
	for _, o := range b {
		if o.node != "n2" {
			bn = append(bn, o)
		}
	}
	require.Equal(t, a, bn)
	for _, o := range a {
		require.Greater(t, o.to, o.from)
	}
	// About 30 failures a node in 30 days at a 24 h MTBF (less the repairs).
	require.InDelta(t, 2*30*24/26.0, float64(len(a)), 20)
	_, err = FailureModel{MTBFHours: 1}.outages([]string{"n0"}, 10)
	require.ErrorContains(t, err, "must be positive")
}

// Lazy preemption: b's high-priority job needs b's node, which b's lazy
// job holds; the lazy job is downgraded to opportunistic instead of being
// stopped, and runs to its end on a's idle node... or wherever the core
// leaves it; it is not preempted and loses no work.
func TestLazyPreemptionDowngrades(t *testing.T) {
	cfg, vcs := oneRack()
	lazy := job("b1", "b", 0, 1000, 0, 1, 8)
	lazy.Lazy = true
	jobs := []Job{lazy, job("b2", "b", 5, 10, 10, 1, 8)}
	rep, err := Run(&Input{Cluster: cfg, VCs: vcs, Jobs: jobs, Policies: []string{"hivesched"}, Tolerance: 10, SampleEvery: 10})
	require.NoError(t, err)
	res := rep.Results[0]
	require.Equal(t, 1, res.Downgrades)
	require.Zero(t, res.Preemptions)
	s := starts(t, rep, "hivesched")
	require.Equal(t, map[string]float64{"b1": 0, "b2": 5}, s)
	require.Zero(t, runOf(res, "b1").lostWork)
	// Without the annotation b1 is preempted and starts over after b2.
	jobs[0].Lazy = false
	rep, err = Run(&Input{Cluster: cfg, VCs: vcs, Jobs: jobs, Policies: []string{"hivesched"}, Tolerance: 10, SampleEvery: 10})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Results[0].Preemptions)
	require.Equal(t, map[string]float64{"b1": 15, "b2": 5}, starts(t, rep, "hivesched"))
}

// Utilization when busy counts only the samples whose demand (GPUs in use
// plus those waiting jobs ask) reached the cluster's size.
func TestUtilizationBusy(t *testing.T) {
	res := &Result{SampleEvery: 86400, TotalGPUs: 10, Used: []int64{8, 10, 0, 0}, Demand: []int64{12, 10, 9, 0},
		Fragmented: make([]int64, 4), Down: make([]int64, 4), SubmitSamples: 4}
	u := utilization(res)
	require.InDelta(t, 0.45, u.toLastSubmit, 1e-9)
	require.InDelta(t, 0.9, u.busy, 1e-9, "the two samples whose demand reached the 10 GPUs")
	require.InDelta(t, 0.5, u.busyShare, 1e-9)
	require.InDelta(t, 0.45, u.weekMedian, 1e-9, "a trace shorter than a week is one week")
}

// Command hivesched-sim replays a job trace on the real cell core and on
// GPU-count quota baselines, against each VC alone on a private cluster of
// its cells, and reports queuing delays and their tail, utilization,
// fragmentation, preemptions and sharing anomalies by cause
// (docs/simulator.md).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hivesched/hivesched/cmd/hivesched-sim/sim"
)

type options struct {
	cluster, vcs, trace, format, taskTable, generate, vcMap, policies, out, source string
	tolerance, sample, late                                                        time.Duration
	failures                                                                       sim.FailureModel
}

func main() {
	var o options
	var philly, phillyVCs string
	flag.StringVar(&o.cluster, "config", "manifests/sim/scheduler-config.yaml", "scheduler configuration with the HiveSched physicalCluster (the file the scheduler reads)")
	flag.StringVar(&o.vcs, "vcs", "manifests/sim/virtualclusters.yaml", "VirtualCluster objects (YAML)")
	flag.StringVar(&o.trace, "trace", "", "job trace in -format (docs/simulator.md)")
	flag.StringVar(&o.format, "format", "csv", "trace format: "+strings.Join(sim.Formats, ", "))
	flag.StringVar(&o.taskTable, "task-table", "", "alibaba2020: pai_task_table.csv (-trace is pai_job_table.csv)")
	flag.StringVar(&o.generate, "generate", "", "generator settings (YAML): make a synthetic trace with a seed instead of -trace")
	flag.StringVar(&o.vcMap, "vc-map", "", "the trace's VC names to VirtualCluster names: from=to,from=to (a VC not listed keeps its name)")
	flag.StringVar(&o.source, "source", "", "what the jobs are, for the report's label (default: \"real: FILE, FORMAT format\" for -trace); say \"not real\" for hand-made files")
	flag.StringVar(&philly, "philly", "", "same as -trace FILE -format philly (kept for older scripts)")
	flag.StringVar(&phillyVCs, "philly-vcs", "", "same as -vc-map")
	flag.StringVar(&o.policies, "policies", "", "policies to compare, of "+strings.Join(sim.AllPolicies, ",")+" (default "+strings.Join(sim.Policies, ",")+", and quota-one-clique if some job must stay inside one domain)")
	flag.StringVar(&o.out, "out", "_output/sim", "directory for report.md, the plots and the trace simulated (trace.csv)")
	flag.DurationVar(&o.tolerance, "tolerance", 10*time.Minute, "a job waiting this much longer than on its VC's private cluster is a sharing anomaly")
	flag.DurationVar(&o.sample, "sample", 10*time.Minute, "utilization and fragmentation sample interval")
	flag.DurationVar(&o.late, "late", time.Hour, "the report counts jobs that waited longer than this (the tail)")
	flag.Float64Var(&o.failures.MTBFHours, "mtbf-hours", 0, "node failures: mean hours between a node's failures (0: none; overrides the generator's)")
	flag.Float64Var(&o.failures.RepairHours, "repair-hours", 0, "node failures: mean hours a failed node stays down")
	flag.Uint64Var(&o.failures.Seed, "failure-seed", 1, "node failures: seed")
	flag.Parse()
	if philly != "" {
		o.trace, o.format = philly, "philly"
	}
	if phillyVCs != "" && o.vcMap == "" {
		o.vcMap = phillyVCs
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "hivesched-sim:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	cluster, err := sim.LoadCluster(o.cluster)
	if err != nil {
		return err
	}
	vcs, err := sim.LoadVirtualClusters(o.vcs)
	if err != nil {
		return err
	}
	in := &sim.Input{Cluster: cluster, VCs: vcs,
		Tolerance: o.tolerance.Seconds(), SampleEvery: o.sample.Seconds(), LateAfter: o.late.Seconds()}
	switch {
	case o.generate != "":
		g, err := sim.LoadGenerator(o.generate)
		if err != nil {
			return err
		}
		if in.Jobs, err = g.Generate(); err != nil {
			return err
		}
		in.Source, in.Notes, in.Failures = g.Source(o.generate), g.Notes(), g.Failures
	case o.trace != "":
		m := map[string]string{}
		for _, kv := range strings.Split(o.vcMap, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				m[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
		files := []string{o.trace}
		if o.taskTable != "" {
			files = append(files, o.taskTable)
		}
		jobs, st, err := sim.Import(o.format, files, m)
		if err != nil {
			return err
		}
		in.Jobs = jobs
		in.Source = fmt.Sprintf("real: %s, %s format", filepath.Base(o.trace), o.format)
		in.Notes = st.Notes()
		for _, n := range in.Notes {
			fmt.Fprintln(os.Stderr, o.format+":", n)
		}
	default:
		return fmt.Errorf("give a trace: -trace FILE [-format F] or -generate SETTINGS.yaml")
	}
	if o.source != "" {
		in.Source = o.source
	}
	if o.failures.MTBFHours > 0 {
		in.Failures = o.failures
	}
	in.Policies = sim.PoliciesFor(in.Jobs)
	if o.policies != "" {
		in.Policies = strings.Split(o.policies, ",")
	}
	rep, err := sim.Run(in)
	if err != nil {
		return err
	}
	if err := rep.WriteReport(o.out); err != nil {
		return err
	}
	tf, err := os.Create(filepath.Join(o.out, "trace.csv"))
	if err != nil {
		return err
	}
	defer tf.Close()
	if err := sim.WriteCSV(tf, in.Jobs); err != nil {
		return err
	}
	rep.Summary(os.Stdout)
	fmt.Printf("report: %s\n", filepath.Join(o.out, "report.md"))
	return nil
}

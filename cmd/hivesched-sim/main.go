// Command hivesched-sim replays a job trace on the real cell core and on
// GPU-count quota baselines, against each VC alone on a private cluster of
// its cells, and reports queuing delays, utilization, fragmentation,
// preemptions and sharing anomalies (docs/simulator.md).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hivesched/hivesched/cmd/hivesched-sim/sim"
)

func main() {
	var (
		cluster   = flag.String("config", "manifests/sim/scheduler-config.yaml", "scheduler configuration with the HiveSched physicalCluster (the file the scheduler reads)")
		vcs       = flag.String("vcs", "manifests/sim/virtualclusters.yaml", "VirtualCluster objects (YAML)")
		trace     = flag.String("trace", "", "job trace, CSV (docs/simulator.md)")
		generate  = flag.String("generate", "", "generator settings (YAML): make a synthetic trace with a seed instead of -trace")
		philly    = flag.String("philly", "", "Microsoft Philly trace (cluster_job_log JSON) instead of -trace")
		phillyVCs = flag.String("philly-vcs", "", "Philly VC ids to VirtualCluster names: id=name,id=name")
		policies  = flag.String("policies", strings.Join(sim.Policies, ","), "policies to compare")
		out       = flag.String("out", "_output/sim", "directory for report.md, the plots and the trace simulated (trace.csv)")
		tolerance = flag.Duration("tolerance", 0, "a job waiting this much longer than on its VC's private cluster is a sharing anomaly (default 10m)")
		sample    = flag.Duration("sample", 0, "utilization and fragmentation sample interval (default 10m)")
	)
	flag.Parse()
	if err := run(*cluster, *vcs, *trace, *generate, *philly, *phillyVCs, *policies, *out, tolerance.Seconds(), sample.Seconds()); err != nil {
		fmt.Fprintln(os.Stderr, "hivesched-sim:", err)
		os.Exit(1)
	}
}

func run(clusterPath, vcsPath, tracePath, genPath, phillyPath, phillyVCs, policies, out string, tol, sample float64) error {
	if tol == 0 {
		tol = 600
	}
	if sample == 0 {
		sample = 600
	}
	cluster, err := sim.LoadCluster(clusterPath)
	if err != nil {
		return err
	}
	vcs, err := sim.LoadVirtualClusters(vcsPath)
	if err != nil {
		return err
	}
	var jobs []sim.Job
	switch {
	case genPath != "":
		g, err := sim.LoadGenerator(genPath)
		if err != nil {
			return err
		}
		if jobs, err = g.Generate(); err != nil {
			return err
		}
	case tracePath != "":
		f, err := os.Open(tracePath)
		if err != nil {
			return err
		}
		defer f.Close()
		if jobs, err = sim.ReadCSV(f); err != nil {
			return err
		}
	case phillyPath != "":
		m := map[string]string{}
		for _, kv := range strings.Split(phillyVCs, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				m[k] = v
			}
		}
		f, err := os.Open(phillyPath)
		if err != nil {
			return err
		}
		defer f.Close()
		var skipped int
		if jobs, skipped, err = sim.ReadPhilly(f, m, 0); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "philly: %d jobs imported, %d skipped (never started or unfinished)\n", len(jobs), skipped)
	default:
		return fmt.Errorf("give a trace: -trace FILE.csv, -generate SETTINGS.yaml or -philly FILE.json")
	}
	in := &sim.Input{Cluster: cluster, VCs: vcs, Jobs: jobs, Policies: strings.Split(policies, ","), Tolerance: tol, SampleEvery: sample}
	rep, err := sim.Run(in)
	if err != nil {
		return err
	}
	if err := rep.WriteReport(out); err != nil {
		return err
	}
	tf, err := os.Create(filepath.Join(out, "trace.csv"))
	if err != nil {
		return err
	}
	defer tf.Close()
	if err := sim.WriteCSV(tf, jobs); err != nil {
		return err
	}
	rep.Summary(os.Stdout)
	fmt.Printf("report: %s\n", filepath.Join(out, "report.md"))
	return nil
}

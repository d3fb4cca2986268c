package perf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestReport turns the JSON files that BenchmarkPerfScheduling wrote
// (-data-items-dir) into a markdown table. It runs only when
// HIVESCHED_PERF_DATA names that directory; HIVESCHED_PERF_REPORT is the
// output file (default: stdout). `make bench` runs it after the benchmarks.
func TestReport(t *testing.T) {
	dir := os.Getenv("HIVESCHED_PERF_DATA")
	if dir == "" {
		t.Skip("HIVESCHED_PERF_DATA is not set")
	}
	files, err := filepath.Glob(filepath.Join(dir, "BenchmarkPerfScheduling_benchmark_*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no BenchmarkPerfScheduling_benchmark_*.json in %s (%v)", dir, err)
	}
	sort.Strings(files) // by time stamp: a later run of a case wins
	results := map[string]*result{}
	for _, f := range files {
		if err := readDataItems(f, results); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	md := renderReport(results)
	if out := os.Getenv("HIVESCHED_PERF_REPORT"); out != "" {
		if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", out)
	} else {
		fmt.Print(md)
	}
}

type dataItems struct {
	DataItems []struct {
		Data   map[string]float64 `json:"data"`
		Unit   string             `json:"unit"`
		Labels map[string]string  `json:"labels"`
	} `json:"dataItems"`
}

// result is one contender on one workload.
type result struct {
	workload, contender string
	throughput          map[string]float64 // pods/s
	attempt             map[string]float64 // ms, scheduling attempts that scheduled (algorithm + binding)
}

// readDataItems reads one JSON file; names look like
// BenchmarkPerfScheduling/<Workload>_<n>Nodes_<Contender>/<n>Nodes/<namespace>.
func readDataItems(file string, results map[string]*result) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var d dataItems
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	fresh := map[string]bool{}
	for _, it := range d.DataItems {
		parts := strings.Split(it.Labels["Name"], "/")
		if len(parts) < 2 {
			continue
		}
		tc := parts[1]
		i := strings.LastIndex(tc, "_")
		if i < 0 {
			continue
		}
		r := results[tc]
		if r == nil || !fresh[tc] {
			r = &result{workload: tc[:i], contender: tc[i+1:]}
			results[tc] = r
			fresh[tc] = true
		}
		switch it.Labels["Metric"] {
		case "SchedulingThroughput":
			r.throughput = it.Data
		case "scheduler_scheduling_attempt_duration_seconds":
			if it.Labels["result"] == "scheduled" {
				r.attempt = it.Data
			}
		}
	}
	return nil
}

func renderReport(results map[string]*result) string {
	byWorkload := map[string][]*result{}
	var workloads []string
	for _, r := range results {
		if byWorkload[r.workload] == nil {
			workloads = append(workloads, r.workload)
		}
		byWorkload[r.workload] = append(byWorkload[r.workload], r)
	}
	sort.Strings(workloads)
	f := func(m map[string]float64, k string) string {
		if m == nil {
			return "-"
		}
		v, ok := m[k]
		if !ok {
			return "-"
		}
		return fmt.Sprintf("%.1f", v)
	}
	var b strings.Builder
	b.WriteString("| workload | contender | throughput avg (pods/s) | p50 | p90 | p99 | ours / contender (avg) | attempt latency p50 / p90 / p99 (ms) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---|\n")
	for _, w := range workloads {
		rs := byWorkload[w]
		sort.Slice(rs, func(i, j int) bool {
			if (rs[i].contender == "HiveSched") != (rs[j].contender == "HiveSched") {
				return rs[i].contender == "HiveSched"
			}
			return rs[i].contender < rs[j].contender
		})
		var ours float64
		for _, r := range rs {
			if r.contender == "HiveSched" && r.throughput != nil {
				ours = r.throughput["Average"]
			}
		}
		for _, r := range rs {
			ratio := "-"
			if r.contender != "HiveSched" && ours > 0 && r.throughput != nil && r.throughput["Average"] > 0 {
				ratio = fmt.Sprintf("%.2f", ours/r.throughput["Average"])
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s / %s / %s |\n",
				w, r.contender,
				f(r.throughput, "Average"), f(r.throughput, "Perc50"), f(r.throughput, "Perc90"), f(r.throughput, "Perc99"),
				ratio,
				f(r.attempt, "Perc50"), f(r.attempt, "Perc90"), f(r.attempt, "Perc99"))
		}
	}
	return b.String()
}

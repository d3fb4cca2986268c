package perf

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	gangs, err := readGangReports(dir)
	if err != nil {
		t.Fatal(err)
	}
	md := renderReport(results, gangs)
	if claims := renderClaimsReport(results, gangs); claims != "" {
		md += "\n" + claims
	}
	batches, err := readBatchReports(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) > 0 {
		md += "\n" + renderBatchReport(batches)
	}
	if f := os.Getenv("HIVESCHED_CORE_BENCH"); f != "" {
		core, err := renderCoreBench(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		md += "\n" + core
	}
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

// result is one contender on one workload, over its runs (-count).
type result struct {
	workload, contender string
	runs                []*run
}

// run is one run of a contender on a workload.
type run struct {
	throughput map[string]float64 // pods/s
	attempt    map[string]float64 // ms, scheduling attempts that scheduled (algorithm + binding)
	latency    map[string]float64 // ms, queue entry to bound over all attempts (SLI)
}

// median is the run whose average throughput is the median over the runs
// that recorded one (the last run if none did), and how many runs there are.
func (r *result) median() *run {
	var with []*run
	for _, x := range r.runs {
		if x.throughput != nil {
			with = append(with, x)
		}
	}
	if len(with) == 0 {
		return r.runs[len(r.runs)-1]
	}
	sort.SliceStable(with, func(i, j int) bool { return with[i].throughput["Average"] < with[j].throughput["Average"] })
	return with[(len(with)-1)/2]
}

// spread is "min-max" of the runs' average throughputs when there are several.
func (r *result) spread() string {
	var vs []float64
	for _, x := range r.runs {
		if x.throughput != nil {
			vs = append(vs, x.throughput["Average"])
		}
	}
	if len(vs) < 2 {
		return ""
	}
	sort.Float64s(vs)
	return fmt.Sprintf(" (%.0f-%.0f)", vs[0], vs[len(vs)-1])
}

// readDataItems reads one JSON file; names look like
// BenchmarkPerfScheduling/<Workload>_<n>Nodes_<Contender>/<n>Nodes/<namespace>.
// With -count, a case's runs follow one another in the file: a metric seen
// again starts the next run. A case found in a later file replaces what
// earlier files had.
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
	seen := map[string]map[string]bool{} // case -> metrics of its current run
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
		metric := it.Labels["Metric"] + "/" + it.Labels["result"] + "/" + it.Labels["extension_point"] + "/" + it.Labels["plugin"] + "/" + it.Labels["event"]
		if len(r.runs) == 0 || seen[tc][metric] {
			r.runs = append(r.runs, &run{})
			seen[tc] = map[string]bool{}
		}
		seen[tc][metric] = true
		cur := r.runs[len(r.runs)-1]
		switch it.Labels["Metric"] {
		case "SchedulingThroughput":
			cur.throughput = it.Data
		case "scheduler_scheduling_attempt_duration_seconds":
			if it.Labels["result"] == "scheduled" {
				cur.attempt = it.Data
			}
		case "scheduler_pod_scheduling_sli_duration_seconds":
			cur.latency = it.Data
		}
	}
	return nil
}

// readGangReports reads the gangs-*.json files watchGangs wrote (one per
// run), keyed by test case name (<Workload>_<n>Nodes_<Contender>), in the
// order the runs ended.
func readGangReports(dir string) (map[string][]gangReport, error) {
	files, err := filepath.Glob(filepath.Join(dir, "gangs-*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files) // a case's files differ only in their time stamp
	out := map[string][]gangReport{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r gangReport
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		if parts := strings.Split(r.Workload, "/"); len(parts) >= 2 {
			out[parts[1]] = append(out[parts[1]], r)
		}
	}
	return out, nil
}

// readBatchReports reads the batch-*.json files watchGangs wrote (one per
// run), keyed by test case name, in the order the runs ended.
func readBatchReports(dir string) (map[string][]batchReport, error) {
	files, err := filepath.Glob(filepath.Join(dir, "batch-*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	out := map[string][]batchReport{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r batchReport
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		if parts := strings.Split(r.Workload, "/"); len(parts) >= 2 {
			out[parts[1]] = append(out[parts[1]], r)
		}
	}
	return out, nil
}

// renderBatchReport is the opportunistic batching table: per test case,
// the last run's counters (the runs of a case count alike), and why the
// kept node list was dropped, most frequent first.
func renderBatchReport(batches map[string][]batchReport) string {
	var cases []string
	for c := range batches {
		cases = append(cases, c)
	}
	sort.Strings(cases)
	var b strings.Builder
	b.WriteString("Opportunistic batching (`scheduler_batch_attempts_total` and `scheduler_batch_cache_flushed_total` over the whole workload, last run):\n\n")
	b.WriteString("| test case | runs | hint used | hint not used | no hint | node list dropped (reason: count) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|\n")
	for _, c := range cases {
		runs := batches[c]
		last := runs[len(runs)-1]
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %.0f | %s |\n", c, len(runs),
			last.Attempts["hint_used"], last.Attempts["hint_not_used"], last.Attempts["no_hint"], flushReasons(last.Flushes))
	}
	return b.String()
}

// flushReasons renders counts by reason, largest first ("-" for none).
func flushReasons(m map[string]float64) string {
	type kv struct {
		k string
		v float64
	}
	var kvs []kv
	for k, v := range m {
		if v > 0 {
			kvs = append(kvs, kv{k, v})
		}
	}
	if len(kvs) == 0 {
		return "-"
	}
	slices.SortFunc(kvs, func(a, b kv) int {
		if c := cmp.Compare(b.v, a.v); c != 0 {
			return c
		}
		return cmp.Compare(a.k, b.k)
	})
	parts := make([]string, len(kvs))
	for i, x := range kvs {
		parts[i] = fmt.Sprintf("%s: %.0f", x.k, x.v)
	}
	return strings.Join(parts, ", ")
}

// gangColumns renders the gang check of a case's runs: the counts of the
// last run (every run was checked, and a partly bound gang fails it), and
// the bind spread's p50 and p99 of the median run by p99, with the lowest
// and highest p99 of the runs in brackets when there are several.
func gangColumns(runs []gangReport) string {
	if len(runs) == 0 {
		return "- | -"
	}
	last := runs[len(runs)-1]
	byP99 := slices.Clone(runs)
	slices.SortFunc(byP99, func(a, b gangReport) int { return cmp.Compare(a.BindSpreadP99Ms, b.BindSpreadP99Ms) })
	med := byP99[(len(byP99)-1)/2]
	spread := fmt.Sprintf("%.0f / %.0f", med.BindSpreadP50Ms, med.BindSpreadP99Ms)
	if len(runs) > 1 {
		spread += fmt.Sprintf(" (%.0f-%.0f)", byP99[0].BindSpreadP99Ms, byP99[len(byP99)-1].BindSpreadP99Ms)
	}
	gangs := fmt.Sprintf("%d / %d / %d", last.Whole, last.Partial, last.Unbound)
	if last.CliqueGangs > 0 {
		// NVL72Gangs: how many bound gangs the clique check found split.
		gangs += fmt.Sprintf(" (%d split across cliques)", last.CliqueSplit)
	}
	return fmt.Sprintf("%s | %s", gangs, spread)
}

func renderReport(results map[string]*result, gangs map[string][]gangReport) string {
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
	b.WriteString("| workload | contender | runs | throughput avg (pods/s) | p50 | p90 | p99 | HiveSched / row (avg) | HiveSchedWorkloadAPI / row (avg) | scheduling latency p50 / p90 / p99 (ms) | attempt p50 / p90 / p99 (ms) | gangs whole / partly bound / unbound | gang bind spread p50 / p99 (ms), median run (p99 range) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|\n")
	for _, w := range workloads {
		rs := byWorkload[w]
		sort.Slice(rs, func(i, j int) bool {
			if (rs[i].contender == "HiveSched") != (rs[j].contender == "HiveSched") {
				return rs[i].contender == "HiveSched"
			}
			return rs[i].contender < rs[j].contender
		})
		// The two HiveSched forms the other rows are compared with: native
		// gangs and Workload API pod groups.
		ours := map[string]float64{}
		for _, r := range rs {
			if m := r.median(); (r.contender == "HiveSched" || r.contender == "HiveSchedWorkloadAPI") && m.throughput != nil {
				ours[r.contender] = m.throughput["Average"]
			}
		}
		ratio := func(of string, r *result) string {
			m := r.median()
			if r.contender == of || ours[of] == 0 || m.throughput == nil || m.throughput["Average"] <= 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", ours[of]/m.throughput["Average"])
		}
		for _, r := range rs {
			m := r.median()
			gangCols := gangColumns(gangs[w+"_"+r.contender])
			fmt.Fprintf(&b, "| %s | %s | %d | %s%s | %s | %s | %s | %s | %s | %s / %s / %s | %s / %s / %s | %s |\n",
				w, r.contender, len(r.runs),
				f(m.throughput, "Average"), r.spread(), f(m.throughput, "Perc50"), f(m.throughput, "Perc90"), f(m.throughput, "Perc99"),
				ratio("HiveSched", r), ratio("HiveSchedWorkloadAPI", r),
				f(m.latency, "Perc50"), f(m.latency, "Perc90"), f(m.latency, "Perc99"),
				f(m.attempt, "Perc50"), f(m.attempt, "Perc90"), f(m.attempt, "Perc99"),
				gangCols)
		}
	}
	return b.String()
}

// claimsContender is the contender whose gang pods get their GPUs through
// ResourceClaims (DRA) that HiveSched allocates; its baseline is HiveSched
// on the same workload, whose pods ask for nvidia.com/gpu. The in-tree
// pair, GangSchedulingClaims against GangScheduling, is what claims cost
// Kubernetes' own DynamicResources on the same slices: the reference.
const (
	claimsContender       = "HiveSchedClaims"
	inTreeClaimsContender = "GangSchedulingClaims"
)

// renderClaimsReport is the cost of GPU claims: per workload that has both
// HiveSchedClaims and HiveSched, their average throughputs (median runs)
// and HiveSchedClaims / HiveSched, then the ratio of each run with the
// HiveSched run of the same round (-count repeats the whole benchmark, so
// run i of one case and run i of the other ran one after the other), and
// the claims check of each run (bound pods / their claims allocated on
// their nodes), and the in-tree pair's ratio where it ran. Empty when no
// workload has both.
func renderClaimsReport(results map[string]*result, gangs map[string][]gangReport) string {
	var workloads []string
	for _, r := range results {
		if r.contender == claimsContender && results[r.workload+"_HiveSched"] != nil {
			workloads = append(workloads, r.workload)
		}
	}
	if len(workloads) == 0 {
		return ""
	}
	sort.Strings(workloads)
	avg := func(x *run) float64 {
		if x == nil || x.throughput == nil {
			return 0
		}
		return x.throughput["Average"]
	}
	var b strings.Builder
	b.WriteString("GPU claims (DRA): HiveSchedClaims (GPUs through ResourceClaims HiveSched allocates) against HiveSched (nvidia.com/gpu), throughput avg:\n\n")
	b.WriteString("| workload | HiveSched (pods/s) | HiveSchedClaims (pods/s) | HiveSchedClaims / HiveSched | per run | bound pods / claims allocated on their node, per run | in-tree: GangSchedulingClaims / GangScheduling |\n")
	b.WriteString("|---|---:|---:|---:|---|---|---:|\n")
	for _, w := range workloads {
		claims, base := results[w+"_"+claimsContender], results[w+"_HiveSched"]
		ratio := "-"
		if c, h := avg(claims.median()), avg(base.median()); c > 0 && h > 0 {
			ratio = fmt.Sprintf("%.2f", c/h)
		}
		var per []string
		for i := 0; i < len(claims.runs) && i < len(base.runs); i++ {
			c, h := avg(claims.runs[i]), avg(base.runs[i])
			if c > 0 && h > 0 {
				per = append(per, fmt.Sprintf("%.0f / %.0f = %.2f", c, h, c/h))
			}
		}
		perRun := "-"
		if len(per) > 0 {
			perRun = strings.Join(per, "; ")
		}
		var checked []string
		for _, g := range gangs[w+"_"+claimsContender] {
			checked = append(checked, fmt.Sprintf("%d / %d", g.ClaimPods, g.ClaimsAllocated))
		}
		claimCheck := "-"
		if len(checked) > 0 {
			claimCheck = strings.Join(checked, "; ")
		}
		inTree := "-"
		if ic, ib := results[w+"_"+inTreeClaimsContender], results[w+"_GangScheduling"]; ic != nil && ib != nil {
			if c, g := avg(ic.median()), avg(ib.median()); c > 0 && g > 0 {
				inTree = fmt.Sprintf("%.1f / %.1f = %.2f", c, g, c/g)
			}
		}
		fmt.Fprintf(&b, "| %s | %.1f%s | %.1f%s | %s | %s | %s | %s |\n", w, avg(base.median()), base.spread(), avg(claims.median()), claims.spread(), ratio, perRun, claimCheck, inTree)
	}
	return b.String()
}

// renderCoreBench turns `go test -bench` output of the cell core's
// benchmarks into a table: per benchmark, the median over its repetitions of
// each reported figure.
func renderCoreBench(file string) (string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	type bench struct {
		name   string
		values map[string][]float64
	}
	var order []string
	benches := map[string]*bench{}
	units := []string{"ns/op", "p50-ns", "p99-ns", "B/op", "allocs/op", "bytes/cell"}
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := fields[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		bn := benches[name]
		if bn == nil {
			bn = &bench{name: name, values: map[string][]float64{}}
			benches[name] = bn
			order = append(order, name)
		}
		for i := 2; i+1 < len(fields); i += 2 {
			var v float64
			if _, err := fmt.Sscanf(fields[i], "%g", &v); err == nil {
				bn.values[fields[i+1]] = append(bn.values[fields[i+1]], v)
			}
		}
	}
	if len(order) == 0 {
		return "", fmt.Errorf("no benchmark lines")
	}
	var b strings.Builder
	b.WriteString("Cell core (`go test -bench` in plugins/cellcore, median of the runs):\n\n| benchmark | runs |")
	for _, u := range units {
		b.WriteString(" " + u + " |")
	}
	b.WriteString("\n|---|---:|" + strings.Repeat("---:|", len(units)) + "\n")
	for _, name := range order {
		bn := benches[name]
		fmt.Fprintf(&b, "| %s | %d |", strings.TrimPrefix(name, "Benchmark"), len(bn.values["ns/op"]))
		for _, u := range units {
			vs := bn.values[u]
			if len(vs) == 0 {
				b.WriteString(" - |")
				continue
			}
			sort.Float64s(vs)
			fmt.Fprintf(&b, " %.1f |", vs[len(vs)/2])
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

func TestGangColumns(t *testing.T) {
	run := func(p50, p99 float64, whole int) gangReport {
		return gangReport{Gangs: 250, Whole: whole, BindSpreadP50Ms: p50, BindSpreadP99Ms: p99}
	}
	for _, tc := range []struct {
		name string
		runs []gangReport
		want string
	}{
		{"no gang check", nil, "- | -"},
		{"one run", []gangReport{run(7, 60, 250)}, "250 / 0 / 0 | 7 / 60"},
		{"median run by p99, range of p99, last run's counts",
			[]gangReport{run(20, 900, 250), run(5, 40, 250), run(9, 120, 249)},
			"249 / 0 / 0 | 9 / 120 (40-900)"},
		{"clique check (NVL72Gangs)", []gangReport{{Gangs: 22, Whole: 22, CliqueGangs: 22, CliqueSplit: 1, BindSpreadP50Ms: 30, BindSpreadP99Ms: 90}},
			"22 / 0 / 0 (1 split across cliques) | 30 / 90"},
	} {
		if got := gangColumns(tc.runs); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestClaimsReport(t *testing.T) {
	tp := func(v float64) *run { return &run{throughput: map[string]float64{"Average": v}} }
	results := map[string]*result{
		"Gangs8x1_500Nodes_HiveSched":            {workload: "Gangs8x1_500Nodes", contender: "HiveSched", runs: []*run{tp(100), tp(200), tp(150)}},
		"Gangs8x1_500Nodes_HiveSchedClaims":      {workload: "Gangs8x1_500Nodes", contender: "HiveSchedClaims", runs: []*run{tp(90), tp(120), tp(180)}},
		"Gangs4x8_500Nodes_HiveSched":            {workload: "Gangs4x8_500Nodes", contender: "HiveSched", runs: []*run{tp(10)}},
		"Gangs8x1_500Nodes_GangScheduling":       {workload: "Gangs8x1_500Nodes", contender: "GangScheduling", runs: []*run{tp(400)}},
		"Gangs8x1_500Nodes_GangSchedulingClaims": {workload: "Gangs8x1_500Nodes", contender: "GangSchedulingClaims", runs: []*run{tp(300)}},
	}
	gangs := map[string][]gangReport{"Gangs8x1_500Nodes_HiveSchedClaims": {{ClaimPods: 2000, ClaimsAllocated: 2000}, {ClaimPods: 2000, ClaimsAllocated: 1999}}}
	got := renderClaimsReport(results, gangs)
	want := "| Gangs8x1_500Nodes | 150.0 (100-200) | 120.0 (90-180) | 0.80 | 90 / 100 = 0.90; 120 / 200 = 0.60; 180 / 150 = 1.20 | 2000 / 2000; 2000 / 1999 | 300.0 / 400.0 = 0.75 |"
	if !strings.Contains(got, want) || strings.Contains(got, "Gangs4x8") {
		t.Errorf("claims table:\n%s\nwant the row %q and no Gangs4x8 row", got, want)
	}
	if got := renderClaimsReport(map[string]*result{"Gangs4x8_500Nodes_HiveSched": results["Gangs4x8_500Nodes_HiveSched"]}, nil); got != "" {
		t.Errorf("no claims contender: got %q, want nothing", got)
	}
}

func TestBatchTable(t *testing.T) {
	runs := map[string][]batchReport{
		"PlainPods_500Nodes_HiveSched": {
			{Attempts: map[string]float64{"hint_used": 1}},
			{Attempts: map[string]float64{"hint_used": 2900, "no_hint": 100}, Flushes: map[string]float64{"expired": 3, "pod_skipped": 40, "empty_list": 0}},
		},
		"SingleJobs_500Nodes_HiveSched": {{}},
	}
	got := renderBatchReport(runs)
	for _, want := range []string{
		"| PlainPods_500Nodes_HiveSched | 2 | 2900 | 0 | 100 | pod_skipped: 40, expired: 3 |",
		"| SingleJobs_500Nodes_HiveSched | 1 | 0 | 0 | 0 | - |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("batch table lacks %q:\n%s", want, got)
		}
	}
}

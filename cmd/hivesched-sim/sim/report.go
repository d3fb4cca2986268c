package sim

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
)

func minutes(s float64) string {
	if math.IsNaN(s) {
		return "-"
	}
	return fmt.Sprintf("%.1f", s/60)
}

func pct(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

// WriteReport writes report.md and the plots into dir.
func (rep *Report) WriteReport(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.md"))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := rep.writeMarkdown(f); err != nil {
		return err
	}
	vcs := rep.vcNames()
	for _, vc := range vcs {
		if err := os.WriteFile(filepath.Join(dir, "delay-cdf-"+vc+".svg"), []byte(rep.delayCDF(vc)), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "utilization.svg"), []byte(rep.utilizationPlot()), 0o644)
}

func (rep *Report) vcNames() []string {
	var out []string
	for _, vc := range rep.In.VCs {
		out = append(out, vc.Name)
	}
	return out
}

// source is the label every result carries: real or calibrated.
func (rep *Report) source() string {
	if rep.In.Source == "" {
		return "a trace given as it is (its origin is not recorded)"
	}
	return rep.In.Source
}

func (rep *Report) writeMarkdown(w io.Writer) error {
	in := rep.In
	var gpus int64
	for _, c := range nodeCapacities(in.Cluster) {
		gpus += int64(c)
	}
	horizon := 0.0
	if n := len(in.Jobs); n > 0 {
		horizon = in.Jobs[n-1].Submit
	}
	fmt.Fprintf(w, "# hivesched-sim report\n\n**Jobs: %s.**\n\n", rep.source())
	for _, n := range in.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	if len(in.Notes) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%d jobs submitted over %.1f days on %d nodes (%d leaf cells); %d virtual clusters. ", len(in.Jobs), horizon/86400, len(nodeCapacities(in.Cluster)), gpus, len(in.VCs))
	fmt.Fprintf(w, "A guaranteed job is a **sharing anomaly** when it waits more than %.0f minutes longer than on its VC's private cluster (exactly the VC's cells, nothing shared); opportunistic jobs have no such promise and are not counted. ", in.Tolerance/60)
	fmt.Fprintf(w, "An anomaly's cause is **lost affinity** when, while it waited beyond its private start, it was refused although its VC had the headroom for its GPUs by count (the GPUs were free, not in its shape); **queue order** when it was refused only while its VC's own jobs held its share; **node failure** when a failure stopped it or it was refused with nodes down (docs/simulator.md).\n\n")
	if f := in.Failures; f.MTBFHours > 0 {
		fmt.Fprintf(w, "Node failures: each node fails after an exponential time of mean %.0f hours and is back after an exponential repair of mean %.1f hours (seed %d): %d outages on the shared cluster; the private references have none.\n\n", f.MTBFHours, f.RepairHours, f.Seed, len(rep.Outages))
	}
	fmt.Fprintf(w, "## Headline\n\n| policy | anomalies | lost affinity | queue order | node failure | faster than private | utilization to last submission | utilization when busy | preemptions | lazy downgrades | stopped by failures | never started |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, res := range rep.Results {
		c := rep.compare(res, "")
		s := rep.stats(res, "")
		u := utilization(res)
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %s | %s | %d | %d | %d | %d |\n", res.Policy, c.anomalies, c.byCause[causeAffinity], c.byCause[causeQueue], c.byCause[causeFailure],
			c.faster, pct(u.toLastSubmit), pct(u.busy), res.Preemptions, res.Downgrades, res.Interruptions, s.jobs-s.started)
	}
	rep.writeWithin(w)
	fmt.Fprintf(w, "\n## Utilization\n\nSampled every %.0f minutes. *To last submission*: from time 0 to the last submission (the figure earlier reports gave). *Whole run*: to the last job's end. *When busy*: over the samples where demand (GPUs in use plus those the waiting jobs ask) reached the cluster's size, with the share of time that was. *Weeks*: complete weeks of the submission period, lowest, median and highest. *Fragmented*: free GPUs on nodes where no waiting job's pod fits. *Down*: GPUs on failed nodes.\n\n", in.SampleEvery/60)
	fmt.Fprintf(w, "| policy | to last submission | whole run | when busy | time busy | weeks: min | median | max | fragmented | down |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	rows := append([]*Result(nil), rep.Results...)
	for _, res := range rows {
		u := utilization(res)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", res.Policy, pct(u.toLastSubmit), pct(u.whole), pct(u.busy), pct(u.busyShare),
			pct(u.weekMin), pct(u.weekMedian), pct(u.weekMax), pct(u.fragmented), pct(u.down))
	}
	fmt.Fprintf(w, "\n## Queuing delay and its tail\n\nMinutes, every job (opportunistic ones too): submission to the start of the run that finished (a preempted or interrupted job's lost runs count as waiting). *Late*: waited more than %.0f minutes.\n\n", in.LateAfter/60)
	fmt.Fprintf(w, "| VC | policy | jobs | started | mean | p50 | p95 | p99 | p99.9 | max | late | mean JCT | preempted | stopped by failures | GPU-h lost |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, vc := range append([]string{""}, rep.vcNames()...) {
		rows := append([]*Result(nil), rep.Results...)
		if p := rep.Private[vc]; p != nil {
			rows = append(rows, p)
		}
		name := vc
		if vc == "" {
			name = "(all)"
		}
		for _, res := range rows {
			s := rep.stats(res, vc)
			fmt.Fprintf(w, "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %d | %s | %d | %d | %.0f |\n", name, res.Policy, s.jobs, s.started,
				minutes(s.mean), minutes(s.p50), minutes(s.p95), minutes(s.p99), minutes(s.p999), minutes(s.max), s.late, minutes(s.jct), s.preempted, s.interrupted, s.lostGPUh)
		}
	}
	fmt.Fprintf(w, "\n## Against the private reference\n\nGuaranteed jobs only. *Slower* (anomalies) and *faster*: more than the tolerance later or earlier than on the VC's private cluster. *Mean delay*: shared / private, minutes. *Job-hours lost / gained*: summed over the VC's jobs, the waiting each did beyond, or short of, its private delay: what the VC pays for sharing and what it gets from it (borrowing idle GPUs under a quota).\n\n")
	fmt.Fprintf(w, "| VC | policy | jobs | slower | lost affinity | queue order | node failure | faster | mean delay | job-hours lost | job-hours gained |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, vc := range rep.vcNames() {
		for _, res := range rep.Results {
			c := rep.compare(res, vc)
			fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d | %d | %.1f / %.1f | %.1f | %.1f |\n", vc, res.Policy, c.jobs, c.anomalies,
				c.byCause[causeAffinity], c.byCause[causeQueue], c.byCause[causeFailure], c.faster, c.shared, c.private, c.lostH, c.gainedH)
		}
	}
	fmt.Fprintf(w, "\n## Plots\n\n")
	for _, vc := range rep.vcNames() {
		fmt.Fprintf(w, "![queuing delay CDF of %s](delay-cdf-%s.svg)\n\n", vc, vc)
	}
	fmt.Fprintf(w, "![GPU utilization over time](utilization.svg)\n")
	return nil
}

// gpusShare is a mean count of GPUs and its share.
func gpusShare(n, share float64) string {
	if math.IsNaN(n) {
		return "-"
	}
	return fmt.Sprintf("%.1f (%s)", n, pct(share))
}

// writeWithin is the section on jobs that must stay inside one domain,
// only for a trace that has some.
func (rep *Report) writeWithin(w io.Writer) {
	keys := rep.withinKeys()
	if len(keys) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## One domain per job\n\nJobs that must stay inside one domain of a topology key (`within_topology_key`, e.g. an NVL72 rack's NVLink domain, `nvidia.com/gpu.clique`). Counted over the guaranteed multi-node ones with a private reference: a **domain anomaly** is such a job that *ran split* across domains (a topology-blind policy put its pods in several: it ran without the interconnect it asked for), or that *waited with headroom*: it started more than %.0f minutes later than on its private cluster (or never), and was refused in that time while its VC had the headroom for its GPUs by count (within its quota, it could not get one domain). *Idle in fragmented domains*: mean free GPUs, to the last submission, in the domains that have free GPUs but can host none of the waiting within-jobs of the key (0 while none waits); *free in partly used domains*: mean free GPUs in the domains partly in use, where a whole-domain job cannot start; both on healthy nodes, whichever VC the GPUs belong to, with their share of the domains' GPUs (docs/simulator.md).\n\n", rep.In.Tolerance/60)
	fmt.Fprintf(w, "| policy | key | domains (GPUs) | within jobs | domain anomalies | ran split | waited with headroom | never started | idle in fragmented domains | free in partly used domains |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, res := range rep.Results {
		for _, k := range keys {
			c := rep.compareWithin(res, k, "")
			f, p, fs, ps := domainIdleMeans(res, k)
			doms := "-"
			if ds := res.Domains[k]; ds != nil {
				doms = fmt.Sprintf("%d (%d)", ds.Domains, ds.GPUs)
			}
			fmt.Fprintf(w, "| %s | `%s` | %s | %d | %d | %d | %d | %d | %s | %s |\n", res.Policy, k, doms, c.jobs, c.anomalies, c.split, c.waited, c.never, gpusShare(f, fs), gpusShare(p, ps))
		}
	}
	fmt.Fprintf(w, "\nPer VC (the VCs with such jobs; mean delay of those jobs, shared / private, minutes):\n\n| VC | policy | key | within jobs | domain anomalies | ran split | waited with headroom | never started | mean delay |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, vc := range rep.vcNames() {
		for _, k := range keys {
			for _, res := range rep.Results {
				c := rep.compareWithin(res, k, vc)
				if c.jobs == 0 {
					continue
				}
				fmt.Fprintf(w, "| %s | %s | `%s` | %d | %d | %d | %d | %d | %.1f / %.1f |\n", vc, res.Policy, k, c.jobs, c.anomalies, c.split, c.waited, c.never, c.shared, c.private)
			}
		}
	}
}

// Summary is a few lines per policy for a terminal.
func (rep *Report) Summary(w io.Writer) {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range rep.Elapsed {
			if !yield(k) {
				return
			}
		}
	})
	fmt.Fprintf(w, "jobs: %s\n", rep.source())
	for _, res := range rep.Results {
		c := rep.compare(res, "")
		s := rep.stats(res, "")
		u := utilization(res)
		fmt.Fprintf(w, "%-16s anomalies %5d (affinity %d, queue %d, failure %d)  faster %d  utilization %s (busy %s)  mean delay %s min  max %s min  preemptions %d\n",
			res.Policy, c.anomalies, c.byCause[causeAffinity], c.byCause[causeQueue], c.byCause[causeFailure], c.faster, pct(u.toLastSubmit), pct(u.busy),
			minutes(s.mean), minutes(s.max), res.Preemptions)
	}
	for _, k := range rep.withinKeys() {
		for _, res := range rep.Results {
			c := rep.compareWithin(res, k, "")
			f, _, fs, _ := domainIdleMeans(res, k)
			fmt.Fprintf(w, "%-16s within %s: %d jobs, domain anomalies %d (split %d, waited with headroom %d)  idle in fragmented domains %s GPUs\n",
				res.Policy, k, c.jobs, c.anomalies, c.split, c.waited, gpusShare(f, fs))
		}
	}
	for _, n := range names {
		fmt.Fprintf(w, "simulated %-16s in %v\n", n, rep.Elapsed[n].Round(1e6))
	}
}

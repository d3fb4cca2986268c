package sim

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

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

func minutes(s float64) string {
	if math.IsNaN(s) {
		return "-"
	}
	return fmt.Sprintf("%.1f", s/60)
}

// vcStats is one policy's figures for one VC ("" all).
type vcStats struct {
	jobs, started, preempted, anomalies int
	mean, p50, p95, p99, jct            float64
}

func (rep *Report) stats(res *Result, vc string) vcStats {
	d := delays(res, vc)
	s := vcStats{started: len(d), mean: mean(d), p50: percentile(d, 50), p95: percentile(d, 95), p99: percentile(d, 99)}
	var jct []float64
	for _, r := range res.Runs {
		if vc != "" && r.job.VC != vc {
			continue
		}
		s.jobs++
		s.preempted += r.preempts
		if r.started {
			jct = append(jct, r.start+r.job.Duration-r.job.Submit)
		}
	}
	s.jct = mean(jct)
	if res.Policy != "private" {
		s.anomalies = rep.anomalies(res, vc)
	}
	return s
}

func utilization(res *Result) (util, frag float64) {
	if len(res.Used) == 0 || res.TotalGPUs == 0 {
		return math.NaN(), math.NaN()
	}
	var u, f float64
	for i := range res.Used {
		u += float64(res.Used[i])
		f += float64(res.Fragmented[i])
	}
	n := float64(len(res.Used)) * float64(res.TotalGPUs)
	return u / n, f / n
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
	fmt.Fprintf(w, "# hivesched-sim report\n\n")
	fmt.Fprintf(w, "%d jobs over %.1f days on %d nodes (%d leaf cells); %d virtual clusters. ", len(in.Jobs), horizon/86400, len(nodeCapacities(in.Cluster)), gpus, len(in.VCs))
	fmt.Fprintf(w, "A job is a **sharing anomaly** when it waits more than %.0f minutes longer than it would on its VC's private cluster (a cluster of exactly the VC's cells); opportunistic jobs have no such promise and are not counted.\n\n", in.Tolerance/60)
	fmt.Fprintf(w, "## Headline\n\n| policy | sharing anomalies (guaranteed jobs) | GPU utilization | fragmented (free GPUs no waiting pod fits) | preemptions | jobs never started |\n|---|---:|---:|---:|---:|---:|\n")
	for _, res := range rep.Results {
		s := rep.stats(res, "")
		u, fr := utilization(res)
		fmt.Fprintf(w, "| %s | %d | %.1f%% | %.1f%% | %d | %d |\n", res.Policy, s.anomalies, 100*u, 100*fr, res.Preemptions, s.jobs-s.started)
	}
	fmt.Fprintf(w, "\nUtilization and fragmentation are averaged over samples every %.0f minutes from the first to the last submission.\n\n", in.SampleEvery/60)
	fmt.Fprintf(w, "## Per virtual cluster\n\nDelays (queuing: submission to the start of the run that finished; a preempted job's lost run counts as waiting) and job completion time (JCT) in minutes.\n\n")
	fmt.Fprintf(w, "| VC | policy | jobs | started | mean delay | p50 | p95 | p99 | mean JCT | preempted | anomalies |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, vc := range rep.vcNames() {
		rows := append([]*Result(nil), rep.Results...)
		if p := rep.Private[vc]; p != nil {
			rows = append(rows, p)
		}
		for _, res := range rows {
			s := rep.stats(res, vc)
			an := fmt.Sprint(s.anomalies)
			if res.Policy == "private" {
				an = "(reference)"
			}
			fmt.Fprintf(w, "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %d | %s |\n", vc, res.Policy, s.jobs, s.started,
				minutes(s.mean), minutes(s.p50), minutes(s.p95), minutes(s.p99), minutes(s.jct), s.preempted, an)
		}
	}
	fmt.Fprintf(w, "\n## Plots\n\n")
	for _, vc := range rep.vcNames() {
		fmt.Fprintf(w, "![queuing delay CDF of %s](delay-cdf-%s.svg)\n\n", vc, vc)
	}
	fmt.Fprintf(w, "![GPU utilization over time](utilization.svg)\n")
	return nil
}

// --- plots, SVG by hand ---

type series struct {
	name string
	x, y []float64
}

var seriesColours = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"}

// lineChart draws series; with logX the x axis is log10 (values <= 0 are
// drawn at the axis' left end).
func lineChart(title, xlabel, ylabel string, ss []series, logX bool, yMax float64) string {
	const W, H, L, R, T, B = 720, 420, 70, 170, 40, 50
	pw, ph := float64(W-L-R), float64(H-T-B)
	xmin, xmax := math.Inf(1), math.Inf(-1)
	tx := func(v float64) float64 {
		if logX {
			return math.Log10(math.Max(v, 0.1))
		}
		return v
	}
	for _, s := range ss {
		for _, v := range s.x {
			xmin, xmax = math.Min(xmin, tx(v)), math.Max(xmax, tx(v))
		}
	}
	if math.IsInf(xmin, 0) || xmax <= xmin {
		xmin, xmax = 0, 1
	}
	px := func(v float64) float64 { return L + (tx(v)-xmin)/(xmax-xmin)*pw }
	py := func(v float64) float64 { return T + ph - v/yMax*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14">%s</text>`+"\n", L, esc(title))
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`+"\n", L, T, pw, ph)
	for i := 0; i <= 4; i++ {
		v := yMax * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.2g</text><line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", L-6, py(v)+4, v, L, L+pw, py(v), py(v))
	}
	if logX {
		for e := math.Ceil(xmin); e <= xmax; e++ {
			x := L + (e-xmin)/(xmax-xmin)*pw
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", x, T+int(ph)+16, math.Pow(10, e))
		}
	} else {
		for i := 0; i <= 4; i++ {
			v := xmin + (xmax-xmin)*float64(i)/4
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.3g</text>`+"\n", px(v), T+int(ph)+16, v)
		}
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">%s</text>`+"\n", L+pw/2, H-12, esc(xlabel))
	fmt.Fprintf(&b, `<text x="16" y="%.0f" transform="rotate(-90 16 %.0f)" text-anchor="middle">%s</text>`+"\n", T+ph/2, T+ph/2, esc(ylabel))
	for i, s := range ss {
		col := seriesColours[i%len(seriesColours)]
		var pts []string
		for k := range s.x {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.x[k]), py(s.y[k])))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`+"\n", col, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`+"\n",
			W-R+10, W-R+30, T+10+18*i, T+10+18*i, col, W-R+36, T+14+18*i, esc(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// delayCDF: the fraction of vc's jobs (opportunistic ones included) that
// started within x minutes, per policy and on the private cluster.
func (rep *Report) delayCDF(vc string) string {
	var ss []series
	rows := append([]*Result(nil), rep.Results...)
	if p := rep.Private[vc]; p != nil {
		rows = append(rows, p)
	}
	for _, res := range rows {
		d := delays(res, vc)
		if len(d) == 0 {
			continue
		}
		s := series{name: res.Policy}
		step := max(1, len(d)/400)
		for i := 0; i < len(d); i += step {
			s.x = append(s.x, d[i]/60)
			s.y = append(s.y, float64(i+1)/float64(len(d)))
		}
		s.x = append(s.x, d[len(d)-1]/60)
		s.y = append(s.y, 1)
		ss = append(ss, s)
	}
	return lineChart("queuing delay of "+vc+"'s jobs (CDF)", "delay, minutes (log; 0 at the left)", "fraction of jobs", ss, true, 1)
}

// utilizationPlot: GPUs in use over time, per policy, daily means.
func (rep *Report) utilizationPlot() string {
	var ss []series
	for _, res := range rep.Results {
		per := max(1, int(math.Round(86400/res.SampleEvery)))
		s := series{name: res.Policy}
		for i := 0; i < len(res.Used); i += per {
			var sum float64
			n := 0
			for k := i; k < min(i+per, len(res.Used)); k++ {
				sum += float64(res.Used[k])
				n++
			}
			s.x = append(s.x, float64(i)*res.SampleEvery/86400)
			s.y = append(s.y, sum/float64(n)/float64(res.TotalGPUs))
		}
		ss = append(ss, s)
	}
	return lineChart("GPU utilization (daily mean)", "day", "fraction of GPUs in use", ss, false, 1)
}

// Summary is one line per policy for a terminal.
func (rep *Report) Summary(w io.Writer) {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range rep.Elapsed {
			if !yield(k) {
				return
			}
		}
	})
	for _, res := range rep.Results {
		s := rep.stats(res, "")
		u, _ := utilization(res)
		fmt.Fprintf(w, "%-16s anomalies %5d  utilization %5.1f%%  mean delay %7s min  preemptions %d\n", res.Policy, s.anomalies, 100*u, minutes(s.mean), res.Preemptions)
	}
	for _, n := range names {
		fmt.Fprintf(w, "simulated %-16s in %v\n", n, rep.Elapsed[n].Round(1e6))
	}
}

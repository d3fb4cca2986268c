package sim

import (
	"fmt"
	"math"
	"strings"
)

// --- plots, SVG by hand ---

type series struct {
	name string
	x, y []float64
}

var seriesColours = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"}

// lineChart draws series; with logX the x axis is log10 (values <= 0 are
// drawn at the axis' left end). source, under the title, says where the
// jobs come from ("real: ...", "calibrated, not real: ..."), so that a plot
// taken out of its report still says it.
func lineChart(title, source, xlabel, ylabel string, ss []series, logX bool, yMax float64) string {
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
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14">%s</text>`+"\n", L, esc(title))
	if len(source) > 110 {
		source = source[:107] + "..."
	}
	fmt.Fprintf(&b, `<text x="%d" y="33" font-size="10" fill="#555">jobs: %s</text>`+"\n", L, esc(source))
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
	return lineChart("queuing delay of "+vc+"'s jobs (CDF)", rep.source(), "delay, minutes (log; 0 at the left)", "fraction of jobs", ss, true, 1)
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
	return lineChart("GPU utilization (daily mean)", rep.source(), "day", "fraction of GPUs in use", ss, false, 1)
}

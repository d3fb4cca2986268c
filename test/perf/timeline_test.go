package perf

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics/legacyregistry"
)

// timeline samples, twice a second while a workload runs, where its pods
// are: the gang pods created and bound so far (the gang watch), the
// scheduling queue's pending pods by queue, and HiveSched's bind gate (its limit, what it holds, the binding
// latency it follows). It
// is written as timeline-<workload>-<time>.json beside the data items: the
// answer to "where did a slow pod wait" (issue 48), run by run.
type timeline struct {
	mu      sync.Mutex
	start   time.Time
	Samples []timelineSample `json:"samples"`
}

type timelineSample struct {
	Seconds float64            `json:"s"`
	Created int                `json:"created"` // gang pods created so far
	Bound   int                `json:"bound"`   // gang pods bound so far
	Values  map[string]float64 `json:"values"`
}

// timelineSeries are the metrics sampled: name, the label that tells the
// series apart ("" for one series), and that label's values (nil: all).
var timelineSeries = []struct{ name, label string }{
	{"scheduler_pending_pods", "queue"},
	{"hivesched_bind_gate_limit", "bound"},
	{"hivesched_bind_gate_pods", "state"},
	{"hivesched_bind_gate_latency_seconds", "kind"},
}

func (t *timeline) run(ctx context.Context, created, bound func() int) {
	t.start = time.Now()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		families, err := legacyregistry.DefaultGatherer.Gather()
		if err != nil {
			continue
		}
		s := timelineSample{Seconds: time.Since(t.start).Seconds(), Created: created(), Bound: bound(), Values: map[string]float64{}}
		for _, mf := range families {
			for _, want := range timelineSeries {
				if mf.GetName() != want.name {
					continue
				}
				for _, m := range mf.GetMetric() {
					key := want.name
					if want.label != "" {
						key += "/" + labelValue(m, want.label)
					}
					s.Values[key] += sampleValue(m)
				}
			}
		}
		t.mu.Lock()
		t.Samples = append(t.Samples, s)
		t.mu.Unlock()
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// sampleValue is a gauge's value, a counter's, or a histogram's count.
func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// write writes the samples (nothing without a -data-items-dir).
func (t *timeline) write(workload string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.Samples) == 0 {
		return nil
	}
	return writeDataFile("timeline", workload, t)
}

// summary is one line of the timeline for the log: the most pods pending
// in each queue and the lowest and highest gate limit seen.
func (t *timeline) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	max := map[string]float64{}
	min := map[string]float64{}
	for _, s := range t.Samples {
		for k, v := range s.Values {
			if v > max[k] {
				max[k] = v
			}
			if cur, ok := min[k]; !ok || v < cur {
				min[k] = v
			}
		}
	}
	var parts []string
	for _, k := range []string{"scheduler_pending_pods/active", "scheduler_pending_pods/backoff", "scheduler_pending_pods/unschedulable", "scheduler_pending_pods/gated", "hivesched_bind_gate_pods/queued_gangs"} {
		parts = append(parts, fmt.Sprintf("%s max %.0f", strings.TrimPrefix(k, "scheduler_"), max[k]))
	}
	if _, ok := max["hivesched_bind_gate_limit/current"]; ok {
		parts = append(parts, fmt.Sprintf("bind gate limit %.0f-%.0f", min["hivesched_bind_gate_limit/current"], max["hivesched_bind_gate_limit/current"]))
	}
	return strings.Join(parts, ", ")
}

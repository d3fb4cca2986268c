package metrics

import (
	"sync"

	"k8s.io/component-base/metrics"

	"github.com/hivesched/hivesched/plugins/binding"
)

// The bind gate's state, read at scrape time from the live plugin
// instances' gates (plugins/binding, Gate.Stats): the limit in force (which
// the adaptive gate moves), what it holds, and the latency it follows.
var (
	gateLimitDesc = metrics.NewDesc(metricsNamespace+"_bind_gate_limit",
		"The bind gate's limit of pods binding at once, by scheduler profile and bound: current (where the adaptive "+
			"limit is; the fixed limit with bindGate Fixed), floor and ceiling (minBindingPods and maxBindingPods).",
		[]string{"scheduler", "bound"}, nil, metrics.ALPHA, "")
	gatePodsDesc = metrics.NewDesc(metricsNamespace+"_bind_gate_pods",
		"What the bind gate holds, by scheduler profile and state: in_flight (pods binding, or room held for the members "+
			"of an admitted gang), queued_gangs (gangs waiting for room).",
		[]string{"scheduler", "state"}, nil, metrics.ALPHA, "")
	gateLatencyDesc = metrics.NewDesc(metricsNamespace+"_bind_gate_latency_seconds",
		"The binding call latency the bind gate observes, by scheduler profile and kind: smoothed (an average over the "+
			"last calls), baseline (its minimum over the last 10-20 s, what the adaptive limit compares it with).",
		[]string{"scheduler", "kind"}, nil, metrics.ALPHA, "")
)

// gates reads the bind gates of the live instances, one per scheduler name.
type gates struct {
	metrics.BaseStableCollector
	mu    sync.Mutex
	stats map[string]*gateInstance
}

type gateInstance struct{ stats func() binding.GateStats }

var gateCollector = &gates{stats: map[string]*gateInstance{}}

// RegisterBindGate reports the bind gate of scheduler (a profile's name),
// read by stats at scrape time, until done is closed.
func RegisterBindGate(scheduler string, stats func() binding.GateStats, done <-chan struct{}) {
	registerAll()
	in := &gateInstance{stats: stats}
	gateCollector.mu.Lock()
	gateCollector.stats[scheduler] = in
	gateCollector.mu.Unlock()
	go func() {
		<-done
		gateCollector.mu.Lock()
		defer gateCollector.mu.Unlock()
		if gateCollector.stats[scheduler] == in {
			delete(gateCollector.stats, scheduler)
		}
	}()
}

func (c *gates) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- gateLimitDesc
	ch <- gatePodsDesc
	ch <- gateLatencyDesc
}

func (c *gates) CollectWithStability(ch chan<- metrics.Metric) {
	c.mu.Lock()
	all := make(map[string]*gateInstance, len(c.stats))
	for name, in := range c.stats {
		all[name] = in
	}
	c.mu.Unlock()
	for name, in := range all {
		s := in.stats()
		ch <- metrics.NewLazyConstMetric(gateLimitDesc, metrics.GaugeValue, float64(s.Limit), name, "current")
		ch <- metrics.NewLazyConstMetric(gateLimitDesc, metrics.GaugeValue, float64(s.Floor), name, "floor")
		ch <- metrics.NewLazyConstMetric(gateLimitDesc, metrics.GaugeValue, float64(s.Ceiling), name, "ceiling")
		ch <- metrics.NewLazyConstMetric(gatePodsDesc, metrics.GaugeValue, float64(s.InFlight), name, "in_flight")
		ch <- metrics.NewLazyConstMetric(gatePodsDesc, metrics.GaugeValue, float64(s.Queued), name, "queued_gangs")
		ch <- metrics.NewLazyConstMetric(gateLatencyDesc, metrics.GaugeValue, s.Latency.Seconds(), name, "smoothed")
		ch <- metrics.NewLazyConstMetric(gateLatencyDesc, metrics.GaugeValue, s.Baseline.Seconds(), name, "baseline")
	}
}

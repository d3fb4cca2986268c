// Package metrics is hivesched's Prometheus metrics, registered with
// kube-scheduler's own registry (legacyregistry), so they are served on the
// scheduler's /metrics beside the framework's (docs/inspect.md lists them):
// counters the plugin increments as things happen, and gauges of cells
// and groups read from the cell core at scrape time.
package metrics

import (
	"strings"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// Labels are bounded: VC names, leaf cell types, and small fixed sets; never
// pod or group names.

const metricsNamespace = "hivesched"

var (
	placementDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: metricsNamespace,
		Name:      "placement_duration_seconds",
		Help: "Time the cell core took to decide an affinity group's placement (Schedule), by decision: " +
			"placed, preempt, wait, error.",
		// 10 µs to about 0.3 s: the core decides in microseconds.
		Buckets:        metrics.ExponentialBuckets(0.00001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	preemptedGroups = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace,
		Name:      "preempted_affinity_groups_total",
		Help: "Affinity groups preempted, by the victim's virtual cluster and kind: lazy (downgraded to opportunistic, " +
			"kept running) or delete (its pods deleted).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"virtual_cluster", "kind"})

	preemptedPods = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      metricsNamespace,
		Name:           "preempted_pods_total",
		Help:           "Pods of preempted affinity groups, by the victim's virtual cluster and kind (lazy, delete).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"virtual_cluster", "kind"})

	recoveryDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      metricsNamespace,
		Name:           "recovery_duration_seconds",
		Help:           "Time taken to rebuild the allocations of running pods (at start, or on gaining leadership).",
		Buckets:        metrics.ExponentialBuckets(0.001, 4, 10),
		StabilityLevel: metrics.ALPHA,
	})

	recoveredGroups = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace,
		Name:      "recovered_affinity_groups_total",
		Help: "Affinity groups rebuilt from their pods' placement records, by result: recovered, refused (the core " +
			"refused the record), untrusted_pods (pods whose record is not signed by hivesched, counted per pod).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	healthChanges = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      metricsNamespace,
		Name:           "node_health_changes_total",
		Help:           "Node health transitions seen by the scheduler, by the new health: healthy, bad, maintenance, retired, unknown.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"health"})

	bindFailures = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      metricsNamespace,
		Name:           "bind_failures_total",
		Help:           "Binding calls of affinity group members that failed (each is retried on the same cells), by virtual cluster.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"virtual_cluster"})

	bindGiveUps = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace,
		Name:      "bind_give_ups_total",
		Help: "Placements given up after maxBindAttempts binding failures of a member in a row (the group went back to " +
			"Pending, its bound members deleted), by virtual cluster.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"virtual_cluster"})

	ownWritesRefused = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace,
		Name:      "own_writes_refused_total",
		Help: "The scheduler's own writes refused by admission (a ValidatingAdmissionPolicy or webhook), by write: binding, " +
			"placement, downgrade. Anything but 0 means its identity is not the one the policies exempt (plugins/selfcheck).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"write"})

	foreignPods = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace,
		Name:      "foreign_pods_total",
		Help: "Pods hivesched did not place whose devices it counts as taken (each once per scheduler process), by how: " +
			"requested (their request of the leaf cell resource), referenced (they request none but name devices in " +
			"hivesched's device annotations: nothing gave them those devices).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"how"})

	internalErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace,
		Name:      "internal_errors_total",
		Help: "Errors of the cell core that are not a refusal of the user's request (a state it did not expect), by " +
			"operation: schedule (a group's decision), assign (a member's slot). The pod is retried with backoff; nothing is written on " +
			"the pod or its AffinityGroup as the user's mistake.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"operation"})

	bindingDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: metricsNamespace,
		Name:      "binding_duration_seconds",
		Help: "Duration of HiveSched's binding API calls (the call alone, not the wait at the bind gate before it), by " +
			"scheduler profile: what the adaptive bind gate follows.",
		// 1 ms to about 16 s.
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	}, []string{"scheduler"})

	rereadDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: metricsNamespace,
		Name:      "group_object_reread_duration_seconds",
		Help: "Time an event of an object that describes pods' groups took to find and read again the refused pods it may " +
			"release, by kind (affinity_group, podgroup, workload_podgroup, composite, claim): it grows with the pods the " +
			"object concerns, not with the pods of its namespace.",
		// 1 us to about 4 s.
		Buckets:        metrics.ExponentialBuckets(0.000001, 4, 12),
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})

	clusterLeafCellsDesc = metrics.NewDesc(metricsNamespace+"_cluster_leaf_cells",
		"Physical leaf cells (GPUs) by leaf cell type and state: total, free (schedulable and Free), used (by any group), "+
			"opportunistic (used by opportunistic groups), reserved (by a preempting group), bad (bad, maintenance or retired hardware).",
		[]string{"scheduler", "leaf_cell_type", "state"}, nil, metrics.ALPHA, "")
	vcLeafCellsDesc = metrics.NewDesc(metricsNamespace+"_virtual_cluster_leaf_cells",
		"A virtual cluster's leaf cells by leaf cell type and state: total (its quota), used (by its guaranteed groups), "+
			"free, reserved (by its preempting groups), bad (bound to lost hardware), opportunistic (used by its opportunistic "+
			"groups, anywhere in the cluster). The same counts as the VirtualCluster status.",
		[]string{"scheduler", "virtual_cluster", "leaf_cell_type", "state"}, nil, metrics.ALPHA, "")
	groupsDesc = metrics.NewDesc(metricsNamespace+"_affinity_groups",
		"Affinity groups the scheduler holds, by virtual cluster and state (Pending, Preempting, Allocated, Being preempted).",
		[]string{"scheduler", "virtual_cluster", "state"}, nil, metrics.ALPHA, "")
)

var registerOnce sync.Once

// Register registers the metrics once per process and makes core the one
// the gauges are read from for scheduler (a profile's name), until done is
// closed. Gauges are read at scrape time from the core, and only while
// recovered says the process holds the cluster's allocations (a standby's
// view is empty: the leader reports): the scheduling path updates nothing
// for them.
func Register(scheduler string, core *cellcore.Core, recovered func() bool, done <-chan struct{}) {
	registerAll()
	in := &instance{name: scheduler, core: core, recovered: recovered}
	cellCollector.add(in)
	go func() {
		<-done
		cellCollector.remove(in)
	}()
}

func registerAll() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(placementDuration, preemptedGroups, preemptedPods, recoveryDuration, recoveredGroups, healthChanges,
			bindFailures, bindGiveUps, ownWritesRefused, foreignPods, internalErrors, bindingDuration, rereadDuration)
		legacyregistry.CustomMustRegister(cellCollector, gateCollector)
	})
}

// PlacementDecided records one decision of the core (Schedule), started at
// start.
func PlacementDecided(start time.Time, d cellcore.Decision, err error) {
	result := "error"
	if err == nil {
		switch d.Kind {
		case cellcore.Placed:
			result = "placed"
		case cellcore.Preempt:
			result = "preempt"
		default:
			result = "wait"
		}
	}
	placementDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
}

// collector reads the cell gauges from the live plugin instances, one per
// scheduler name (a process runs one per profile; a test may start a second
// instance of a name before the first is gone: the newest counts).
type collector struct {
	metrics.BaseStableCollector
	mu        sync.Mutex
	instances map[string]*instance
}

// instance is one plugin instance's core.
type instance struct {
	name      string
	core      *cellcore.Core
	recovered func() bool
}

var cellCollector = &collector{instances: map[string]*instance{}}

func (c *collector) add(in *instance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.instances[in.name] = in
}

func (c *collector) remove(in *instance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.instances[in.name] == in {
		delete(c.instances, in.name)
	}
}

func (c *collector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- clusterLeafCellsDesc
	ch <- vcLeafCellsDesc
	ch <- groupsDesc
}

func (c *collector) CollectWithStability(ch chan<- metrics.Metric) {
	c.mu.Lock()
	instances := make([]*instance, 0, len(c.instances))
	for _, in := range c.instances {
		instances = append(instances, in)
	}
	c.mu.Unlock()
	for _, in := range instances {
		if !in.recovered() {
			continue // a standby's view is empty: the leader reports
		}
		name := in.name
		u := in.core.LeafUsage()
		for t, n := range u.Cluster {
			for _, s := range leafStates(n) {
				ch <- metrics.NewLazyConstMetric(clusterLeafCellsDesc, metrics.GaugeValue, float64(s.n), name, t, s.state)
			}
		}
		for vc, byType := range u.VCs {
			for t, n := range byType {
				for _, s := range leafStates(n) {
					ch <- metrics.NewLazyConstMetric(vcLeafCellsDesc, metrics.GaugeValue, float64(s.n), name, vc, t, s.state)
				}
			}
			st, ok := in.core.VirtualClusterStatus(vc)
			if !ok {
				continue
			}
			for _, s := range []cellcore.AGState{cellcore.AGPending, cellcore.AGPreempting, cellcore.AGAllocated, cellcore.AGBeingPreempted} {
				ch <- metrics.NewLazyConstMetric(groupsDesc, metrics.GaugeValue, float64(st.AffinityGroups[s]), name, vc, s.String())
			}
		}
	}
}

type stateCount struct {
	state string
	n     int32
}

func leafStates(n cellcore.LeafUsage) []stateCount {
	return []stateCount{{"total", n.Total}, {"free", n.Free}, {"used", n.Used}, {"opportunistic", n.Opportunistic}, {"reserved", n.Reserved}, {"bad", n.Bad}}
}

// NodeHealthChanged counts a node health transition to h.
func NodeHealthChanged(h cellcore.NodeHealth) {
	healthChanges.WithLabelValues(strings.ToLower(h.String())).Inc()
}

// Downgraded counts a group of vc lazily preempted (downgraded to
// opportunistic, kept running) and its pods.
func Downgraded(vc string, pods int) {
	preemptedGroups.WithLabelValues(vc, "lazy").Inc()
	preemptedPods.WithLabelValues(vc, "lazy").Add(float64(pods))
}

// VictimGroup counts a group of vc preempted by deleting its pods.
func VictimGroup(vc string) { preemptedGroups.WithLabelValues(vc, "delete").Inc() }

// VictimPod counts a pod of a group of vc deleted for a preemptor.
func VictimPod(vc string) { preemptedPods.WithLabelValues(vc, "delete").Inc() }

// Recovery records a rebuild of the allocations that took d: the groups
// recovered, those the core refused, and the pods whose record was not
// trusted.
func Recovery(d time.Duration, recovered, refused, untrusted int) {
	recoveryDuration.Observe(d.Seconds())
	recoveredGroups.WithLabelValues("recovered").Add(float64(recovered))
	recoveredGroups.WithLabelValues("refused").Add(float64(refused))
	recoveredGroups.WithLabelValues("untrusted_pods").Add(float64(untrusted))
}

// BindFailed counts a failed binding call of a member of a group of vc.
func BindFailed(vc string) { bindFailures.WithLabelValues(vc).Inc() }

// BindGivenUp counts a placement of a group of vc given up after binding
// failures.
func BindGivenUp(vc string) { bindGiveUps.WithLabelValues(vc).Inc() }

// InternalError counts an error of the core in operation that is not a
// refusal of the user's request.
func InternalError(operation string) { internalErrors.WithLabelValues(operation).Inc() }

// BindingCall records one binding API call of scheduler that took d.
func BindingCall(scheduler string, d time.Duration) {
	bindingDuration.WithLabelValues(scheduler).Observe(d.Seconds())
}

// GroupObjectReread records the time an object's event (kind) took to read
// again the refused pods it may release.
func GroupObjectReread(kind string, d time.Duration) {
	rereadDuration.WithLabelValues(kind).Observe(d.Seconds())
}

// OwnWriteRefused counts one of the scheduler's own writes refused by
// admission.
func OwnWriteRefused(write string) {
	ownWritesRefused.WithLabelValues(write).Inc()
}

// ForeignPodCounted counts a pod hivesched did not place whose devices it
// counts as taken, by how: "requested" or "referenced".
func ForeignPodCounted(how string) { foreignPods.WithLabelValues(how).Inc() }

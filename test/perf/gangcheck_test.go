package perf

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
)

// gangLabel names a pod's gang in every gang template, whatever the
// contender (HiveSched's affinity group, a Workload API PodGroup for
// HiveSchedWorkloadAPI, GangScheduling and TopologyAware, or none for the
// default profile), so that one check covers them all.
const gangLabel = "perf.hivesched.io/gang"

// gangSizeLabel is the number of members of the pod's gang.
const gangSizeLabel = "perf.hivesched.io/gang-size"

// cliqueLabel is the node label of an NVLink domain (NVIDIA's GPU Feature
// Discovery's; templates/node-gb200.yaml). On a cluster whose nodes carry
// it (NVL72Gangs), every gang must be bound inside one clique.
const cliqueLabel = "nvidia.com/gpu.clique"

// gangReport is what the gang check found in one workload; TestReport puts
// it in the table. It is written as gangs-<workload>-<time>.json (one file
// per run, -count runs each) next to the data
// items.
type gangReport struct {
	Workload string `json:"workload"`
	Gangs    int    `json:"gangs"`
	Whole    int    `json:"whole"`
	// Unbound gangs had no member bound when the workload ended.
	Unbound int `json:"unbound"`
	// Partial gangs had some members bound and others not (or deleted) when
	// the workload ended.
	Partial int `json:"partial"`
	// BindSpread is how long gangs stayed partly bound while binding: from
	// a gang's first member bound to its last, in milliseconds.
	BindSpreadP50Ms float64 `json:"bindSpreadP50Ms"`
	BindSpreadP99Ms float64 `json:"bindSpreadP99Ms"`
	BindSpreadMaxMs float64 `json:"bindSpreadMaxMs"`
	// ClaimPods and ClaimsAllocated are, for the HiveSchedClaims
	// contender, the bound gang pods and how many of their GPU claims are
	// allocated a device of the pod's node (checkClaims).
	ClaimPods       int `json:"claimPods,omitempty"`
	ClaimsAllocated int `json:"claimsAllocated,omitempty"`
	// CliqueGangs and CliqueSplit are, on a cluster whose nodes carry
	// cliqueLabel, the gangs with a member bound, and those of them whose
	// bound members are not all on nodes of one clique value (a node
	// without the label counts as a clique of its own) (checkCliques).
	CliqueGangs int `json:"cliqueGangs,omitempty"`
	CliqueSplit int `json:"cliqueSplit,omitempty"`
}

// gangWatch records, from a pod informer, when each member of each gang
// first appears bound.
type gangWatch struct {
	mu        sync.Mutex
	firstBind map[string]time.Time // gang -> first member seen bound
	lastBind  map[string]time.Time // gang -> last member seen bound
	bound     map[string]bool      // pod -> seen bound
	created   map[string]bool      // pod -> seen (created)
	// cliqueProblems are report's first few gangs split across cliques.
	cliqueProblems []string
}

// boundCount and createdCount: the gang pods seen bound, and seen at all.
func (w *gangWatch) boundCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bound)
}

func (w *gangWatch) createdCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.created)
}

func gangKey(p *v1.Pod) string { return p.Namespace + "/" + p.Labels[gangLabel] }

func (w *gangWatch) observe(obj interface{}) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	key := p.Namespace + "/" + p.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	w.created[key] = true
	if p.Spec.NodeName == "" || w.bound[key] {
		return
	}
	w.bound[key] = true
	g := gangKey(p)
	if _, ok := w.firstBind[g]; !ok {
		w.firstBind[g] = now
	}
	w.lastBind[g] = now
}

// watchGangs is scheduler_perf's prepare function: before each workload it
// starts watching the pods that carry gangLabel, and when the workload ends
// it lists them afresh and checks that every gang is bound whole or not at
// all and, on a cluster of NVLink domains (nodes labelled cliqueLabel),
// that every gang's bound members share one clique. A gang-aware contender
// (every one but the default profile) that leaves a gang partly bound, or
// splits one across cliques, fails the workload.
func watchGangs(tCtx ktesting.TContext) error {
	w := &gangWatch{firstBind: map[string]time.Time{}, lastBind: map[string]time.Time{}, bound: map[string]bool{}, created: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(tCtx.Client(), 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = gangLabel }))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.observe,
		UpdateFunc: func(_, obj interface{}) { w.observe(obj) },
	}); err != nil {
		cancel()
		return err
	}
	factory.Start(ctx.Done())
	tl := &timeline{}
	tlDone := make(chan struct{})
	go func() { defer close(tlDone); tl.run(ctx, w.createdCount, w.boundCount) }()
	tCtx.Cleanup(func() {
		defer factory.Shutdown() // waits for the informer's goroutines (leak check)
		defer func() { cancel(); <-tlDone }()
		// This cleanup runs before scheduler_perf's own, which stops the
		// scheduler and resets the metrics registry.
		tCtx.Logf("timeline: %s", tl.summary())
		if err := tl.write(tCtx.Name()); err != nil {
			tCtx.Errorf("timeline: %v", err)
		}
		if err := writeBatchReport(tCtx.Name()); err != nil {
			tCtx.Errorf("batching counters: %v", err)
		}
		r, err := w.report(tCtx)
		if err != nil {
			tCtx.Errorf("gang check: %v", err)
			return
		}
		if r.Gangs == 0 {
			return
		}
		tCtx.Logf("gang check: %d gangs, %d whole, %d unbound, %d partly bound; bind spread p50 %.0f ms, p99 %.0f ms, max %.0f ms",
			r.Gangs, r.Whole, r.Unbound, r.Partial, r.BindSpreadP50Ms, r.BindSpreadP99Ms, r.BindSpreadMaxMs)
		if c := contender(r.Workload); c == claimsContender || c == inTreeClaimsContender {
			c, err := checkClaims(tCtx)
			if err != nil {
				tCtx.Errorf("claims check: %v", err)
			} else {
				tCtx.Logf("claims check: %d bound pods with a GPU claim, %d claims allocated with a device of the pod's node", c.pods, c.allocated)
				r.ClaimPods, r.ClaimsAllocated = c.pods, c.allocated
				if c.allocated != c.pods || c.pods == 0 {
					tCtx.Errorf("claims check: %d bound pods, %d of their claims allocated on their nodes: %s", c.pods, c.allocated, strings.Join(c.problems, "; "))
				}
			}
		}
		if r.CliqueGangs > 0 {
			tCtx.Logf("clique check: %d gangs bound, %d of them inside one %s, %d split across cliques", r.CliqueGangs, r.CliqueGangs-r.CliqueSplit, cliqueLabel, r.CliqueSplit)
		}
		if err := writeGangReport(r); err != nil {
			tCtx.Errorf("gang check: %v", err)
		}
		if r.Partial > 0 && !strings.HasSuffix(contender(r.Workload), "Default") {
			tCtx.Errorf("gang check: %d gangs partly bound", r.Partial)
		}
		if r.CliqueSplit > 0 && !strings.HasSuffix(contender(r.Workload), "Default") {
			tCtx.Errorf("clique check: %d of %d bound gangs split across %s values: %s", r.CliqueSplit, r.CliqueGangs, cliqueLabel, strings.Join(w.cliqueProblems, "; "))
		}
	})
	return nil
}

// report lists the gang pods from the API server (not the informer, which
// may lag) and counts whole and partial gangs against the size each member's
// gangSizeLabel states. A gang that lost members to preemption while others
// stay bound is partial; a gang whose members are all gone is not counted.
func (w *gangWatch) report(tCtx ktesting.TContext) (gangReport, error) {
	r := gangReport{Workload: tCtx.Name()}
	// The test's own context may be cancelled already during cleanup.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods, err := tCtx.Client().CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: gangLabel})
	if err != nil {
		return r, err
	}
	if err := tally(pods.Items, &r); err != nil {
		return r, err
	}
	nodes, err := tCtx.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: cliqueLabel})
	if err != nil {
		return r, err
	}
	if len(nodes.Items) > 0 {
		cliques := make(map[string]string, len(nodes.Items))
		for _, n := range nodes.Items {
			cliques[n.Name] = n.Labels[cliqueLabel]
		}
		w.cliqueProblems = checkCliques(pods.Items, cliques, &r)
	}
	w.mu.Lock()
	spreads := make([]float64, 0, len(w.firstBind))
	for g, first := range w.firstBind {
		spreads = append(spreads, float64(w.lastBind[g].Sub(first).Microseconds())/1000)
	}
	w.mu.Unlock()
	slices.Sort(spreads)
	r.BindSpreadP50Ms, r.BindSpreadP99Ms, r.BindSpreadMaxMs = quantile(spreads, 0.5), quantile(spreads, 0.99), quantile(spreads, 1)
	return r, nil
}

// tally counts the gangs of pods whole, unbound or partly bound against the
// size each member's gangSizeLabel states.
func tally(pods []v1.Pod, r *gangReport) error {
	type count struct{ size, bound int }
	gangs := map[string]*count{}
	for i := range pods {
		p := &pods[i]
		size, err := strconv.Atoi(p.Labels[gangSizeLabel])
		if err != nil || size < 1 {
			return fmt.Errorf("pod %s/%s: label %s=%q: want the gang's size", p.Namespace, p.Name, gangSizeLabel, p.Labels[gangSizeLabel])
		}
		c := gangs[gangKey(p)]
		if c == nil {
			c = &count{size: size}
			gangs[gangKey(p)] = c
		}
		if p.Spec.NodeName != "" {
			c.bound++
		}
	}
	for _, c := range gangs {
		r.Gangs++
		switch c.bound {
		case 0:
			r.Unbound++
		case c.size:
			r.Whole++
		default:
			r.Partial++
		}
	}
	return nil
}

// checkCliques counts, on a cluster of NVLink domains (cliques: node name
// -> its cliqueLabel value), the gangs with a member bound and those whose
// bound members are on nodes of more than one clique (a node not in
// cliques counts as a clique of its own): a gang asked for one domain, so
// a split one got no NVLink between its parts. The first few splits are
// kept for the failure message.
func checkCliques(pods []v1.Pod, cliques map[string]string, r *gangReport) (problems []string) {
	where := map[string]map[string][]string{} // gang -> clique -> its nodes
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" {
			continue
		}
		c, ok := cliques[p.Spec.NodeName]
		if !ok {
			c = "(no " + cliqueLabel + " on node " + p.Spec.NodeName + ")"
		}
		g := gangKey(p)
		if where[g] == nil {
			where[g] = map[string][]string{}
		}
		where[g][c] = append(where[g][c], p.Spec.NodeName)
	}
	gangs := make([]string, 0, len(where))
	for g := range where {
		gangs = append(gangs, g)
	}
	slices.Sort(gangs)
	for _, g := range gangs {
		r.CliqueGangs++
		if len(where[g]) == 1 {
			continue
		}
		r.CliqueSplit++
		if len(problems) < 5 {
			var parts []string
			for c, nodes := range where[g] {
				parts = append(parts, fmt.Sprintf("%s: %d pods", c, len(nodes)))
			}
			slices.Sort(parts)
			problems = append(problems, fmt.Sprintf("gang %s on %s", g, strings.Join(parts, ", ")))
		}
	}
	return problems
}

// claimsCheck is what checkClaims found.
type claimsCheck struct {
	pods, allocated int
	problems        []string // the first few
}

// checkClaims checks, for the HiveSchedClaims and GangSchedulingClaims
// contenders, that every bound gang pod's GPU claim (the one its spec
// names, or the one made from its template that its status names) is
// allocated (by HiveSched, or by the in-tree DynamicResources) with
// devices of driver gpu.nvidia.com from the pool of the pod's node.
func checkClaims(tCtx ktesting.TContext) (claimsCheck, error) {
	var c claimsCheck
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods, err := tCtx.Client().CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: gangLabel})
	if err != nil {
		return c, err
	}
	claims, err := tCtx.Client().ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return c, err
	}
	byName := map[string]*resourceapi.ResourceClaim{}
	for i := range claims.Items {
		byName[claims.Items[i].Namespace+"/"+claims.Items[i].Name] = &claims.Items[i]
	}
	problem := func(format string, args ...any) {
		if len(c.problems) < 5 {
			c.problems = append(c.problems, fmt.Sprintf(format, args...))
		}
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		c.pods++
		var claimName *string
		if len(p.Spec.ResourceClaims) == 1 {
			claimName = p.Spec.ResourceClaims[0].ResourceClaimName
		}
		if claimName == nil && len(p.Status.ResourceClaimStatuses) == 1 {
			claimName = p.Status.ResourceClaimStatuses[0].ResourceClaimName // made from a template
		}
		if claimName == nil {
			problem("pod %s/%s: no claim name (claims %v, statuses %v)", p.Namespace, p.Name, p.Spec.ResourceClaims, p.Status.ResourceClaimStatuses)
			continue
		}
		name := p.Namespace + "/" + *claimName
		claim := byName[name]
		switch {
		case claim == nil:
			problem("pod %s/%s: claim %s missing", p.Namespace, p.Name, name)
		case claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1:
			problem("pod %s/%s on %s: claim %s not allocated one device", p.Namespace, p.Name, p.Spec.NodeName, name)
		default:
			d := claim.Status.Allocation.Devices.Results[0]
			if d.Driver != "gpu.nvidia.com" || d.Pool != p.Spec.NodeName {
				problem("pod %s/%s on %s: claim %s has %s/%s/%s", p.Namespace, p.Name, p.Spec.NodeName, name, d.Driver, d.Pool, d.Device)
				continue
			}
			c.allocated++
		}
	}
	return c, nil
}

// quantile of sorted values (nearest rank); 0 for none.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// contender is the last part of a test case name (Gangs8x1_500Nodes_HiveSched
// -> HiveSched) in a workload name BenchmarkPerfScheduling/<case>/<workload>.
func contender(workload string) string {
	parts := strings.Split(workload, "/")
	if len(parts) < 2 {
		return workload
	}
	tc := parts[len(parts)-2]
	return tc[strings.LastIndex(tc, "_")+1:]
}

// batchReport is the scheduler's opportunistic batching (KEP-5598) counters
// over a whole workload, its unmeasured pods included: how many pods were
// given the previous pod's node list as a hint and took it (hint_used),
// were given one and chose another node (hint_not_used), or got none
// (no_hint: no usable batch, for example because a plugin refused to sign
// the pod or the previous pod had another signature), and why the kept
// node list was dropped. scheduler_perf collects histograms only, so the
// check reads these counters itself. TestReport puts them in a table.
type batchReport struct {
	Workload string             `json:"workload"`
	Attempts map[string]float64 `json:"attempts"` // scheduler_batch_attempts_total by result
	Flushes  map[string]float64 `json:"flushes"`  // scheduler_batch_cache_flushed_total by reason
}

// writeBatchReport reads the batching counters of the scheduler's one
// profile from the metrics registry, which the scheduler in this process
// writes to, and writes them as batch-<workload>-<time>.json.
func writeBatchReport(workload string) error {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return err
	}
	r := batchReport{
		Workload: workload,
		Attempts: counterValues(families, "scheduler_batch_attempts_total", "result"),
		Flushes:  counterValues(families, "scheduler_batch_cache_flushed_total", "reason"),
	}
	return writeDataFile("batch", workload, r)
}

// counterValues is a counter of the default-scheduler profile by one label;
// empty, not an error, when nothing counted it (a counter vector appears
// only once a value was added).
func counterValues(families []*dto.MetricFamily, name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !testutil.LabelsMatch(m, map[string]string{"profile": "default-scheduler"}) || m.GetCounter() == nil {
				continue
			}
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					out[lp.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// writeGangReport writes r next to scheduler_perf's data items
// (-data-items-dir), where TestReport finds it.
func writeGangReport(r gangReport) error {
	return writeDataFile("gangs", r.Workload, r)
}

// writeDataFile writes v as JSON to <kind>-<workload>-<time>.json in
// scheduler_perf's -data-items-dir (nothing without one). One file per run:
// the bind spread moves a lot from run to run, and the table shows the
// runs' range, not only the last one.
func writeDataFile(kind, workload string, v any) error {
	f := flag.Lookup("data-items-dir")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%s-%s-%d.json", kind, strings.NewReplacer("/", "_").Replace(workload), time.Now().UnixNano())
	return os.WriteFile(filepath.Join(f.Value.String(), name), raw, 0o644)
}

func TestGangTally(t *testing.T) {
	pod := func(ns, name, gang, size, node string) v1.Pod {
		return v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{gangLabel: gang, gangSizeLabel: size}},
			Spec:       v1.PodSpec{NodeName: node},
		}
	}
	pods := []v1.Pod{
		// whole: both members bound
		pod("a", "p-0", "g-0", "2", "n1"), pod("a", "p-1", "g-0", "2", "n2"),
		// unbound: none bound
		pod("a", "p-2", "g-1", "2", ""), pod("a", "p-3", "g-1", "2", ""),
		// partly bound: one of two
		pod("a", "p-4", "g-2", "2", "n1"), pod("a", "p-5", "g-2", "2", ""),
		// partly bound: a victim that lost a member, the other still bound
		pod("a", "p-6", "g-3", "2", "n3"),
		// same gang name in another namespace is another gang: whole
		pod("b", "p-0", "g-0", "1", "n4"),
	}
	var r gangReport
	if err := tally(pods, &r); err != nil {
		t.Fatal(err)
	}
	want := gangReport{Gangs: 5, Whole: 2, Unbound: 1, Partial: 2}
	if r != want {
		t.Errorf("tally = %+v, want %+v", r, want)
	}
	bad := []v1.Pod{pod("a", "p-0", "g-0", "two", "n1")}
	if err := tally(bad, &r); err == nil || !strings.Contains(err.Error(), gangSizeLabel) {
		t.Errorf("a malformed size label: err = %v, want one naming %s", err, gangSizeLabel)
	}
}

func TestContender(t *testing.T) {
	for in, want := range map[string]string{
		"BenchmarkPerfScheduling/Gangs8x1_500Nodes_HiveSched/500Nodes":           "HiveSched",
		"BenchmarkPerfScheduling/Gangs8x1_500Nodes_HiveSchedPreBind/500Nodes":    "HiveSchedPreBind",
		"BenchmarkPerfScheduling/Gangs4x8_5000Nodes_Default/5000Nodes":           "Default",
		"BenchmarkPerfScheduling/Gangs4x8_500Nodes_TopologyAware/500Nodes":       "TopologyAware",
		"BenchmarkPerfScheduling/Gangs8x1_500Nodes_HiveSchedClaims/500Nodes":     "HiveSchedClaims",
		"BenchmarkPerfScheduling/NVL72Gangs18x4_500Nodes_TopologyAware/504Nodes": "TopologyAware",
	} {
		if got := contender(in); got != want {
			t.Errorf("contender(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckCliques(t *testing.T) {
	pod := func(gang, node string) v1.Pod {
		return v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "m", Labels: map[string]string{gangLabel: gang, gangSizeLabel: "2"}},
			Spec:       v1.PodSpec{NodeName: node},
		}
	}
	cliques := map[string]string{"n0": "clique-0", "n1": "clique-0", "n2": "clique-1"}
	pods := []v1.Pod{
		pod("g-0", "n0"), pod("g-0", "n1"), // one clique
		pod("g-1", "n1"), pod("g-1", "n2"), // split
		pod("g-2", "n2"), pod("g-2", ""), // partly bound, the bound member in one clique
		pod("g-3", ""), pod("g-3", ""), // unbound: not counted
		pod("g-4", "n2"), pod("g-4", "x9"), // a node without the label: split
	}
	var r gangReport
	problems := checkCliques(pods, cliques, &r)
	if r.CliqueGangs != 4 || r.CliqueSplit != 2 {
		t.Errorf("checkCliques: %d gangs, %d split; want 4, 2", r.CliqueGangs, r.CliqueSplit)
	}
	if len(problems) != 2 || !strings.Contains(problems[0], "m/g-1 on clique-0: 1 pods, clique-1: 1 pods") || !strings.Contains(problems[1], "no "+cliqueLabel+" on node x9") {
		t.Errorf("checkCliques problems = %q", problems)
	}
}

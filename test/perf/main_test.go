// Package perf runs scheduling-throughput benchmarks for the HiveSched plugin
// on Kubernetes' own scheduler_perf harness
// (k8s.io/kubernetes/test/integration/scheduler_perf), against the default
// profile and, for gangs, the in-tree GangScheduling and TopologyAware
// plugins of Kubernetes 1.37 (Workload API pod groups, feature gates
// GenericWorkload and TopologyAwareWorkloadScheduling, set per test case in
// the workload file).
//
// TestMain renders, into a temporary directory, the scheduler configurations
// (HiveSched's physical cluster must name its nodes, so there is one per node
// count), the VirtualCluster objects and the workload file itself
// (performance-config.yaml.tmpl), then hands that file to
// RunBenchmarkPerfScheduling. Nodes get deterministic names node-<i> from
// templates/node.yaml (createNodes renders node templates with .Index and
// keeps their status on create). docs/perf.md has the results.
package perf

import (
	"context"
	"fmt"
	"io"
	"k8s.io/klog/v2"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"text/template"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/component-base/metrics/legacyregistry"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedperf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"sigs.k8s.io/yaml"

	hsconfig "github.com/hivesched/hivesched/apis/config"
	// Registers HiveSchedArgs in the kube-scheduler config scheme.
	_ "github.com/hivesched/hivesched/apis/config/scheme"

	"github.com/hivesched/hivesched/plugins/hivesched"
)

// nodeCounts are the cluster sizes the workload file is rendered for; the
// label filter (<n>Nodes) picks which ones run.
var nodeCounts = []int{500, 5000}

// nvl72Sizes are the GB200 clusters of the NVL72Gangs workload: 4-GPU
// trays, 18 to an NVLink domain, so a node count is a multiple of 18, the
// nearest to the size that names the test case and labels it (<n>Nodes:
// 504 nodes for 500, 5004 for 5000). 72 nodes (4 domains) is a smoke size
// of this workload only (BENCH_NODES=72): it schedules in about a second,
// too short for scheduler_perf's throughput samples.
var nvl72Sizes = []nvl72Size{newNVL72Size(72, 72), newNVL72Size(504, 500), newNVL72Size(5004, 5000)}

// nvl72TraysPerDomain is the compute trays (nodes) of one NVL72 domain.
const nvl72TraysPerDomain = 18

// nvl72Size is one NVL72Gangs cluster: Nodes trays labelled <Label>Nodes,
// Domains of them, and the measured Gangs of 18 x 4 GPUs (each a whole
// domain): four fifths of the domains, so the last gangs still choose
// among a few free domains rather than find the one left.
type nvl72Size struct {
	Nodes, Label, Domains, Gangs, Pods int
}

func newNVL72Size(nodes, label int) nvl72Size {
	domains := nodes / nvl72TraysPerDomain
	gangs := domains * 4 / 5
	return nvl72Size{Nodes: nodes, Label: label, Domains: domains, Gangs: gangs, Pods: gangs * nvl72TraysPerDomain}
}

// configFile is the rendered workload file, set by TestMain.
var configFile string

func TestMain(m *testing.M) {
	if err := schedperf.InitTests(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	// scheduler_perf starts the scheduler on an API server that has only
	// the namespaces it creates itself (kube-system among them), before
	// any workload op runs: nothing applies manifests/scheduler/namespace.yaml,
	// so HiveSched keeps its placement key in kube-system here, as a
	// Deployment with POD_NAMESPACE would in its namespace.
	if os.Getenv("POD_NAMESPACE") == "" {
		_ = os.Setenv("POD_NAMESPACE", "kube-system")
	}
	dir, err := os.MkdirTemp("", "hivesched-perf-")
	if err == nil {
		configFile, err = render(dir)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rendering the benchmark configuration: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if os.Getenv("HIVESCHED_PERF_KEEP") == "" {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "configuration kept in %s\n", dir)
	}
	os.Exit(code)
}

func BenchmarkPerfScheduling(b *testing.B) {
	// GangScheduling, TopologyPlacementGenerator and PodGroupPodsCount are
	// in-tree: the default registry has them, and the feature gates of a
	// test case enable them in the default profile.
	registry := frameworkruntime.Registry{
		hivesched.Name: withInspectPolling(withCRDs(hivesched.New, hiveCRDs()...)),
		// The DynamicResources wrapper of the HiveSchedClaims contender's
		// profile (withDRA).
		hivesched.DRAName: hivesched.NewDRA,
		// DefaultPreemption for the pods HiveSched does not place, as
		// manifests/scheduler enables it.
		hivesched.PreemptionName: hivesched.NewPreemption,
	}
	schedperf.RunBenchmarkPerfScheduling(b, configFile, "hivesched", registry, schedperf.WithPrepareFn(watchGangs))
}

// --- rendering ---

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

func hiveCRDs() []string {
	return []string{filepath.Join(repoRoot(), "manifests", "crds", "hivesched.io_virtualclusters.yaml"),
		filepath.Join(repoRoot(), "manifests", "crds", "hivesched.io_affinitygroups.yaml")}
}

// render writes the scheduler configurations, VC objects and the workload
// file into dir and returns the workload file's path.
func render(dir string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for _, n := range nodeCounts {
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("hivesched-%d.yaml", n)), schedulerConfig(n, true)); err != nil {
			return "", err
		}
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("hivesched-prebind-%d.yaml", n)), schedulerConfig(n, false)); err != nil {
			return "", err
		}
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("hivesched-dra-%d.yaml", n)), withDRA(schedulerConfig(n, true))); err != nil {
			return "", err
		}
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("hivesched-ungated-%d.yaml", n)), withHiveArg(schedulerConfig(n, true), "maxBindingPods", 0)); err != nil {
			return "", err
		}
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("hivesched-gate64-%d.yaml", n)), withHiveArg(schedulerConfig(n, true), "maxBindingPods", 64)); err != nil {
			return "", err
		}
		gate16 := withHiveArg(withHiveArg(schedulerConfig(n, true), "maxBindingPods", 16), "bindGate", "Fixed")
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("hivesched-gate16-%d.yaml", n)), gate16); err != nil {
			return "", err
		}
		// One 8-pod gang binding at a time: the bind spread the API server
		// gives with nothing else in flight, the floor under any limit.
		gate8 := withHiveArg(withHiveArg(schedulerConfig(n, true), "maxBindingPods", 8), "bindGate", "Fixed")
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("hivesched-gate8-%d.yaml", n)), gate8); err != nil {
			return "", err
		}
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("hivesched-inspected-%d.yaml", n)), withInspectAPI(schedulerConfig(n, true))); err != nil {
			return "", err
		}
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("hivesched-dashboard-%d.yaml", n)), withHiveArg(schedulerConfig(n, true), "inspectBindAddress", dashboardAddress)); err != nil {
			return "", err
		}
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("hivesched-noagstatus-%d.yaml", n)), withoutAGStatus(schedulerConfig(n, true))); err != nil {
			return "", err
		}
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("hivesched-batching-%d.yaml", n)), withoutSpreadDefaults(schedulerConfig(n, true))); err != nil {
			return "", err
		}
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("vc-%d.yaml", n)), virtualCluster("perf", n)); err != nil {
			return "", err
		}
	}
	// NVL72Gangs: HiveSched's profile with a physical cluster of GB200
	// NVL72 domains, and a VC that owns every domain.
	for _, s := range nvl72Sizes {
		if s.Nodes%nvl72TraysPerDomain != 0 {
			return "", fmt.Errorf("NVL72Gangs: %d nodes is not a multiple of %d", s.Nodes, nvl72TraysPerDomain)
		}
		cfg := withHiveArg(schedulerConfig(s.Nodes, true), "physicalCluster", nvl72PhysicalCluster(s.Nodes))
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("hivesched-nvl72-%d.yaml", s.Nodes)), cfg); err != nil {
			return "", err
		}
		if err := writeYAML(filepath.Join(dir, fmt.Sprintf("vc-nvl72-%d.yaml", s.Nodes)), nvl72VirtualCluster("perf", s.Nodes)); err != nil {
			return "", err
		}
	}
	// The default profile. The GangScheduling and TopologyAware contenders
	// use it too: the feature gates of their test cases add GangScheduling
	// (GenericWorkload), TopologyPlacementGenerator and PodGroupPodsCount
	// (TopologyAwareWorkloadScheduling) to the default plugins, which is
	// what a 1.37 user who turns the gates on gets.
	if err := writeYAML(filepath.Join(dir, "default.yaml"), defaultConfig()); err != nil {
		return "", err
	}
	if err := writeYAML(filepath.Join(dir, "default-batching.yaml"), withoutSpreadDefaults(defaultConfig())); err != nil {
		return "", err
	}
	funcs := template.FuncMap{
		"mul": func(a, b int) int { return a * b },
		"div": func(a, b int) int { return a / b },
	}
	tmpl, err := template.New("performance-config.yaml.tmpl").Funcs(funcs).ParseFiles(filepath.Join(wd, "performance-config.yaml.tmpl"))
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "performance-config.yaml")
	f, err := os.Create(out)
	if err != nil {
		return "", err
	}
	defer f.Close()
	err = tmpl.Execute(f, map[string]any{
		"Dir":        dir,
		"Templates":  filepath.Join(wd, "templates"),
		"NodeCounts": nodeCounts,
		// Measured pods: 4 a node for 8 x 1 GPU gangs (half the GPUs); one
		// a node on every full rack for 4 x 8 GPU gangs (a pod takes a whole
		// node, and a gang stays within a rack).
		"Gangs": []gang{{Size: 8, GPUs: 1, PodsPerNode10: 40}, {Size: 4, GPUs: 8, FullRacks: true}},
		// The default profile on the PlainPods workload, with opportunistic
		// batching (on by default in 1.37) and without: what batching is
		// worth there, beside what the HiveSched profile gets.
		// The burst of Workload API gangs into a crowded namespace: HiveSched
		// (the PodGroups name its VC) and the in-tree GangScheduling.
		"BurstContenders": []burstContender{
			{Name: "HiveSched", Label: "hivesched", VC: true, PodGroup: "workload-podgroup-hive.yaml"},
			{Name: "GangScheduling", Label: "gangscheduling", PodGroup: "workload-podgroup.yaml"},
		},
		"PlainContenders": []plainContender{{Name: "Default", Label: "default"}, {Name: "DefaultNoBatching", Label: "default-nobatching", NoBatching: true}},
		"NVL72":           nvl72Sizes,
	})
	return out, err
}

type burstContender struct {
	Name, Label, PodGroup string
	VC                    bool
}

type plainContender struct {
	Name, Label string
	NoBatching  bool
}

type gang struct {
	Size, GPUs, PodsPerNode10 int
	FullRacks                 bool
}

func writeYAML(path string, obj any) error {
	raw, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}

// physicalCluster lists n V100 nodes of 8 GPUs named node-0..node-<n-1> in
// racks of 8 (RACK/NODE/SOCKET/SWITCH/GPU as in the integration tests); the
// nodes left over when n is not a multiple of 8 are top-level node cells.
func physicalCluster(n int) map[string]any {
	const perRack = 8
	var cells []any
	for r := 0; r < n/perRack; r++ {
		var nodes []any
		for j := 0; j < perRack; j++ {
			nodes = append(nodes, map[string]any{"cellAddress": fmt.Sprintf("node-%d", r*perRack+j)})
		}
		cells = append(cells, map[string]any{"cellType": "V100-RACK", "cellAddress": fmt.Sprintf("rack%d", r), "cellChildren": nodes})
	}
	for i := n / perRack * perRack; i < n; i++ {
		cells = append(cells, map[string]any{"cellType": "V100-NODE", "cellAddress": fmt.Sprintf("node-%d", i)})
	}
	return map[string]any{
		"cellTypes": map[string]any{
			"V100-SWITCH": map[string]any{"childCellType": "V100", "childCellNumber": 2},
			"V100-SOCKET": map[string]any{"childCellType": "V100-SWITCH", "childCellNumber": 2},
			"V100-NODE":   map[string]any{"childCellType": "V100-SOCKET", "childCellNumber": 2, "isNodeLevel": true},
			"V100-RACK":   map[string]any{"childCellType": "V100-NODE", "childCellNumber": perRack},
		},
		"physicalCells": cells,
	}
}

// nvl72PhysicalCluster lists n GB200 compute trays of 4 GPUs named
// node-0..node-<n-1> (n a multiple of 18) in NVL72 domains of 18: cell
// GB200-NVL72 clique-<d> holds node-18d..node-18d+17, the nodes that
// templates/node-gb200.yaml labels nvidia.com/gpu.clique=clique-<d>. The
// domain level's topologyKey is that label's key, which the gangs'
// hivesched.io/within-topology names (docs/nvlink.md).
func nvl72PhysicalCluster(n int) map[string]any {
	var cells []any
	for d := 0; d < n/nvl72TraysPerDomain; d++ {
		var trays []any
		for j := 0; j < nvl72TraysPerDomain; j++ {
			trays = append(trays, map[string]any{"cellAddress": fmt.Sprintf("node-%d", d*nvl72TraysPerDomain+j)})
		}
		cells = append(cells, map[string]any{"cellType": "GB200-NVL72", "cellAddress": fmt.Sprintf("clique-%d", d), "cellChildren": trays})
	}
	return map[string]any{
		"cellTypes": map[string]any{
			"GB200-NODE":  map[string]any{"childCellType": "GB200", "childCellNumber": 4, "isNodeLevel": true},
			"GB200-NVL72": map[string]any{"childCellType": "GB200-NODE", "childCellNumber": nvl72TraysPerDomain, "topologyKey": cliqueLabel},
		},
		"physicalCells": cells,
	}
}

// nvl72VirtualCluster is a VC that owns every NVL72 domain of n trays, open
// to every namespace.
func nvl72VirtualCluster(name string, n int) map[string]any {
	return map[string]any{
		"apiVersion": "hivesched.io/v1alpha1",
		"kind":       "VirtualCluster",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"allowedNamespaces": []any{"*"},
			"virtualCells":      []any{map[string]any{"cellType": "GB200-NVL72", "cellNumber": n / nvl72TraysPerDomain}},
		},
	}
}

// defaultConfig is kube-scheduler's default profile.
func defaultConfig() map[string]any {
	return map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"profiles":   []any{map[string]any{"schedulerName": "default-scheduler", "pluginConfig": []any{}}},
	}
}

// withoutSpreadDefaults gives PodTopologySpread no default constraints
// (defaultingType List, none listed), as upstream's own batching benchmark
// does (scheduler_perf/batching/scheduler-config-no-topology.yaml). With the
// system defaults PodTopologySpread refuses to sign every pod ("pods with
// default topology constraints are not signable"), which turns opportunistic
// batching off for every pod whatever the other plugins do, so the PlainPods
// workload, which measures whether HiveSched keeps batching on, needs this
// in both profiles.
func withoutSpreadDefaults(cfg map[string]any) map[string]any {
	profile := cfg["profiles"].([]any)[0].(map[string]any)
	profile["pluginConfig"] = append(profile["pluginConfig"].([]any), map[string]any{
		"name": "PodTopologySpread",
		"args": map[string]any{"defaultingType": "List", "defaultConstraints": []any{}},
	})
	return cfg
}

// schedulerConfig is the HiveSched profile (as manifests/scheduler/ enables
// it) as the default-scheduler profile, for a cluster of n nodes. Without
// bindFirst, HiveSched is left out of the bind extension point, so
// DefaultBinder binds and HiveSched's PreBind patches the placement first:
// the fallback for such configurations, measured as contender
// HiveSchedPreBind.
func schedulerConfig(n int, bindFirst bool) map[string]any {
	plugins := map[string]any{
		// As manifests/scheduler: HiveSchedPreemption in DefaultPreemption's
		// place, at postFilter and podGroupPostFilter (HiveSched preempts
		// whole gangs for its own pods and pod groups, the wrapper for the
		// others).
		"multiPoint": map[string]any{"enabled": []any{map[string]any{"name": hivesched.Name}, map[string]any{"name": hivesched.PreemptionName}},
			"disabled": []any{map[string]any{"name": "DefaultPreemption"}}},
		"queueSort": map[string]any{"enabled": []any{map[string]any{"name": hivesched.Name}}, "disabled": []any{map[string]any{"name": "PrioritySort"}}},
		// As manifests/scheduler, for Workload API pod groups (feature gate
		// GenericWorkload; the HiveSchedWorkloadAPI contender): HiveSched
		// gives its gangs their one placement (only the first placement
		// generator of a profile runs). Without the gates this extension
		// point is never called.
		"placementGenerate": map[string]any{"disabled": []any{map[string]any{"name": "TopologyPlacementGenerator"}}},
	}
	if bindFirst {
		plugins["bind"] = map[string]any{"enabled": []any{map[string]any{"name": hivesched.Name}}}
	}
	return map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"profiles": []any{map[string]any{
			"schedulerName": "default-scheduler",
			"plugins":       plugins,
			"pluginConfig": []any{
				// As manifests/scheduler: HiveD's pods carry a resource no
				// node advertises.
				map[string]any{"name": "NodeResourcesFit", "args": map[string]any{
					"ignoredResources": []any{hivesched.HivedSchedulingEnableResource},
				}},
				map[string]any{"name": hivesched.Name, "args": map[string]any{
					"permitWaitingTimeSeconds":    60,
					"statusUpdateIntervalSeconds": 5,
					"inspectBindAddress":          "", // withInspectAPI turns it on
					"physicalCluster":             physicalCluster(n),
				}},
			},
		}},
	}
}

// withDRA makes a schedulerConfig's profile the one manifests/scheduler
// gives for GPU claims (DRA): HiveSchedDRA enabled, DynamicResources
// disabled (HiveSchedDRA runs it on each pod without its GPU claims, which
// HiveSched allocates). HiveSched's dra args keep their defaults
// (gpuDeviceClasses [gpu.nvidia.com], driver gpu.nvidia.com), which the
// ResourceSlices and DeviceClass of templates/ match. The HiveSchedClaims
// contender.
func withDRA(cfg map[string]any) map[string]any {
	profile := cfg["profiles"].([]any)[0].(map[string]any)
	plugins := profile["plugins"].(map[string]any)
	plugins["multiPoint"] = map[string]any{
		"enabled":  []any{map[string]any{"name": hivesched.DRAName}, map[string]any{"name": hivesched.Name}, map[string]any{"name": hivesched.PreemptionName}},
		"disabled": []any{map[string]any{"name": "DynamicResources"}, map[string]any{"name": "DefaultPreemption"}},
	}
	return cfg
}

// inspectAddress is where the HiveSchedInspected contender serves the
// inspect API, which pollInspect reads once a second; dashboardAddress,
// where the HiveSchedDashboard contender does, which pollDashboard reads as
// one open dashboard page does.
const (
	inspectAddress   = "127.0.0.1:10298"
	dashboardAddress = "127.0.0.1:10299"
)

// withInspectAPI turns HiveSched's inspect API on in a schedulerConfig.
func withInspectAPI(cfg map[string]any) map[string]any {
	return withHiveArg(cfg, "inspectBindAddress", inspectAddress)
}

// withHiveArg sets one of HiveSched's args in a schedulerConfig.
func withHiveArg(cfg map[string]any, name string, value any) map[string]any {
	profile := cfg["profiles"].([]any)[0].(map[string]any)
	for _, pc := range profile["pluginConfig"].([]any) {
		if pc.(map[string]any)["name"] == hivesched.Name {
			pc.(map[string]any)["args"].(map[string]any)[name] = value
		}
	}
	return cfg
}

// withoutAGStatus turns HiveSched's AffinityGroup objects and status writes
// off in a schedulerConfig (affinityGroupStatus: false): the contender
// HiveSchedNoAGStatus, against which the default (on) is measured.
func withoutAGStatus(cfg map[string]any) map[string]any {
	profile := cfg["profiles"].([]any)[0].(map[string]any)
	for _, pc := range profile["pluginConfig"].([]any) {
		if pc.(map[string]any)["name"] == hivesched.Name {
			pc.(map[string]any)["args"].(map[string]any)["affinityGroupStatus"] = false
		}
	}
	return cfg
}

// withInspectPolling starts, for a HiveSched whose inspect API is on, a
// client that reads what an operator's dashboard reads (the cell map, the
// whole cell tree, the VCs, their history, the groups with the finished
// ones, the events) and gathers the metrics once a second while the plugin
// lives: five times as often as the dashboard page polls. It sends the
// scheduler's own token, which the inspect API reviews (TokenReview,
// SubjectAccessReview) as it does a person's.
func withInspectPolling(factory frameworkruntime.PluginFactory) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		pl, err := factory(ctx, obj, h)
		if err != nil {
			return nil, err
		}
		if args, ok := obj.(*hsconfig.HiveSchedArgs); ok {
			switch args.InspectBindAddress {
			case inspectAddress:
				go pollInspect(ctx, args.InspectBindAddress, h.KubeConfig().BearerToken)
			case dashboardAddress:
				go pollDashboard(ctx, args.InspectBindAddress, h.KubeConfig().BearerToken)
			}
		}
		return pl, nil
	}
}

// pollDashboard reads what one open dashboard page reads, as often as it
// does (plugins/inspect/dashboard/assets/app.js: POLL_MS, HISTORY_MS):
// every 5 s the VCs, the groups with the finished ones and the cell map,
// each with the ETag of its last answer (304 when unchanged), and the
// events; the VCs' history every 30 s.
func pollDashboard(ctx context.Context, addr, token string) {
	const poll, history = 5 * time.Second, 30 * time.Second
	tags := map[string]string{}
	get := func(path string, tagged bool) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/inspect/"+path, nil)
		if err != nil {
			return
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if tagged && tags[path] != "" {
			req.Header.Set("If-None-Match", tags[path])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotModified {
			klog.Warningf("dashboard polling: %s answered %s: the contender measured less than it says", path, resp.Status)
		}
		if tagged && resp.StatusCode == http.StatusOK {
			tags[path] = resp.Header.Get("ETag")
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	var historyAt time.Time
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		get("virtualclusters", true)
		get("affinitygroups?all=true", true)
		get("events", false)
		get("cellmap", true)
		if time.Since(historyAt) > history {
			get("history", false)
			historyAt = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// inspectPaths are what the dashboard and kubectl hivesched read.
var inspectPaths = []string{"cellmap", "cells", "virtualclusters", "history", "affinitygroups?all=true", "events"}

func pollInspect(ctx context.Context, addr, token string) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	refused := 0
	for {
		select {
		case <-ctx.Done():
			if refused > 0 {
				klog.Warningf("inspect polling: %d answers were not 200 OK: the contender measured less than it says", refused)
			}
			return
		case <-tick.C:
		}
		for _, path := range inspectPaths {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/inspect/"+path, nil)
			if err != nil {
				continue
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			if resp.StatusCode != http.StatusOK {
				refused++
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		_, _ = legacyregistry.DefaultGatherer.Gather()
	}
}

// virtualCluster is a VC of all n V100 nodes open to every namespace: the
// racks (chain V100-RACK) and the left-over top-level nodes (chain V100-NODE;
// a VC's cells are counted per chain).
func virtualCluster(name string, n int) map[string]any {
	cells := []any{map[string]any{"cellType": "V100-RACK", "cellNumber": n / 8}}
	if n%8 != 0 {
		cells = append(cells, map[string]any{"cellType": "V100-NODE", "cellNumber": n % 8})
	}
	return map[string]any{
		"apiVersion": "hivesched.io/v1alpha1",
		"kind":       "VirtualCluster",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"allowedNamespaces": []any{"*"},
			"virtualCells":      cells,
		},
	}
}

// --- plugin wrappers ---

// withCRDs installs the CRDs a plugin reads before the plugin is built.
// scheduler_perf starts the scheduler (and so runs the plugin factories)
// before a workload's first op, on a fresh API server, so a createAny op of
// the CRD would come too late: HiveSched lists VirtualClusters in New to
// recover allocations.
func withCRDs(factory frameworkruntime.PluginFactory, crdFiles ...string) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		for _, f := range crdFiles {
			if err := installCRD(ctx, h.KubeConfig(), f); err != nil {
				return nil, fmt.Errorf("installing CRD %s: %w", f, err)
			}
		}
		return factory(ctx, obj, h)
	}
}

func installCRD(ctx context.Context, cfg *rest.Config, file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return err
	}
	ac, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := ac.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	jc := rest.CopyConfig(cfg)
	jc.ContentType = "application/json"
	dc, err := dynamic.NewForConfig(jc)
	if err != nil {
		return err
	}
	var version string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			version = v.Name
		}
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dc.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

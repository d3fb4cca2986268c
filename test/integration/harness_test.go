// Package integration runs the real scheduler, with the HiveSched plugin, in
// process against a real kube-apiserver backed by an embedded etcd. Nodes
// are plain API objects (no kubelet); a small loop stands in for the kubelet
// by finishing the deletion of terminating pods.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	etcdtesting "k8s.io/apiserver/pkg/storage/etcd3/testing"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/configz"
	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"sigs.k8s.io/yaml"

	_ "github.com/hivesched/hivesched/apis/config/scheme"
	"github.com/hivesched/hivesched/apis/generated/clientset/versioned"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/test/util"
)

// cluster is one API server shared by the subtests of a test.
type cluster struct {
	t          *testing.T
	cfg        *rest.Config
	kubeconfig string
	kube       kubernetes.Interface
	vc         versioned.Interface
}

func repoRoot(t testing.TB) string {
	wd, err := os.Getwd()
	require.NoError(t, err)
	return filepath.Join(wd, "..", "..")
}

func startCluster(t *testing.T, extraFlags ...string) *cluster {
	_, storage := etcdtesting.NewUnsecuredEtcd3TestClientServer(t)
	srv := apiservertesting.StartTestServerOrDie(t, nil, append([]string{
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition,Priority",
	}, extraFlags...), storage)
	t.Cleanup(srv.TearDownFn)
	c := &cluster{t: t, cfg: srv.ClientConfig}
	c.kube = kubernetes.NewForConfigOrDie(c.cfg)
	jc := rest.CopyConfig(c.cfg)
	jc.ContentType = "application/json"
	c.vc = versioned.NewForConfigOrDie(jc)
	c.kubeconfig = writeKubeconfig(t, c.cfg)
	c.installCRD()
	// The scheduler's namespace (its placement key), as installed.
	c.applyManifest(t, "manifests/scheduler/namespace.yaml")
	go c.kubeletStandIn(t.Context())
	return c
}

func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, TLSServerName: cfg.ServerName, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		Impersonate: cfg.Impersonate.UserName, ImpersonateGroups: cfg.Impersonate.Groups}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

func (c *cluster) installCRD() {
	t := c.t
	ac := apiextensionsclient.NewForConfigOrDie(c.cfg)
	for _, f := range []string{"hivesched.io_virtualclusters.yaml", "hivesched.io_affinitygroups.yaml"} {
		raw, err := os.ReadFile(filepath.Join(repoRoot(t), "manifests", "crds", f))
		require.NoError(t, err)
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, yaml.UnmarshalStrict(raw, &crd))
		_, err = ac.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), &crd, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if _, err := c.vc.HiveschedV1alpha1().VirtualClusters().List(ctx, metav1.ListOptions{}); err != nil {
			return false, nil
		}
		_, err := c.vc.HiveschedV1alpha1().AffinityGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	}))
}

// kubeletStandIn finishes the deletion of terminating pods, as a kubelet does
// once their containers stopped: without it a bound pod deleted with a grace
// period would stay Terminating forever.
func (c *cluster) kubeletStandIn(ctx context.Context) {
	zero := int64(0)
	for ctx.Err() == nil {
		pods, err := c.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil {
					_ = c.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// scheduler is one in-process hivesched-scheduler.
type scheduler struct {
	cancel context.CancelFunc
	done   chan struct{}
}

const schedulerName = "hivesched"

// physicalCluster is racks x nodesPerRack V100 nodes of 8 GPUs named
// <prefix>-r<i>-n<j> (RACK/NODE/SOCKET/SWITCH/GPU) plus t4 T4 nodes of 4.
func physicalCluster(prefix string, racks, nodesPerRack, t4 int) map[string]any {
	var cells []any
	for r := 0; r < racks; r++ {
		var nodes []any
		for n := 0; n < nodesPerRack; n++ {
			nodes = append(nodes, map[string]any{"cellAddress": fmt.Sprintf("%s-r%d-n%d", prefix, r, n)})
		}
		cells = append(cells, map[string]any{"cellType": "V100-RACK", "cellAddress": fmt.Sprintf("rack%d", r), "cellChildren": nodes})
	}
	for i := 0; i < t4; i++ {
		cells = append(cells, map[string]any{"cellType": "T4-NODE", "cellAddress": fmt.Sprintf("%s-t4-%d", prefix, i)})
	}
	return map[string]any{
		"cellTypes": map[string]any{
			"V100-SWITCH": map[string]any{"childCellType": "V100", "childCellNumber": 2},
			"V100-SOCKET": map[string]any{"childCellType": "V100-SWITCH", "childCellNumber": 2},
			"V100-NODE":   map[string]any{"childCellType": "V100-SOCKET", "childCellNumber": 2, "isNodeLevel": true},
			"V100-RACK":   map[string]any{"childCellType": "V100-NODE", "childCellNumber": nodesPerRack},
			"T4-NODE":     map[string]any{"childCellType": "T4", "childCellNumber": 4, "isNodeLevel": true},
		},
		"physicalCells": cells,
	}
}

// withPinned makes node n of rack r of a physicalCluster the pinned cell id.
func withPinned(pc map[string]any, r, n int, id string) map[string]any {
	rack := pc["physicalCells"].([]any)[r].(map[string]any)
	rack["cellChildren"].([]any)[n].(map[string]any)["pinnedCellId"] = id
	return pc
}

// profileOption changes the scheduler profile (schedulerName, plugins,
// pluginConfig).
type profileOption func(profile map[string]any)

const awaitKey = "__awaitLeadership"

// kubeconfigKey carries withKubeconfig's file to startScheduler.
const kubeconfigKey = "__kubeconfig"

// extraPluginsKey carries the registry entries of test plugins (fault
// injectors) to startScheduler.
const extraPluginsKey = "__extraPlugins"

// withKubeconfig runs the scheduler with the identity of kubeconfig (the
// harness's admin otherwise).
func withKubeconfig(path string) profileOption {
	return func(profile map[string]any) { profile[kubeconfigKey] = path }
}

// withAwaitLeadership builds HiveSched as the scheduler command does for a
// configuration with leader election: it recovers its state when the
// process starts leading (client-go's leader gauge) or first schedules. The
// test drives leadership with its own client-go LeaderElector: kube-scheduler's
// own exits the process when it stops leading.
func withAwaitLeadership(profile map[string]any) { profile[awaitKey] = true }

// withDefaultBinderFirst leaves HiveSched out of the bind extension point, so
// DefaultBinder binds and HiveSched's PreBind writes the placement (the
// fallback for configurations that do not list HiveSched under bind).
func withDefaultBinderFirst(profile map[string]any) {
	delete(profile["plugins"].(map[string]any), "bind")
}

// withSchedulerName names the profile (pods select it by this name).
func withSchedulerName(name string) profileOption {
	return func(profile map[string]any) { profile["schedulerName"] = name }
}

// withoutPluginConfig drops the named plugin's args (its defaults apply).
func withoutPluginConfig(name string) profileOption {
	return func(profile map[string]any) {
		var kept []any
		for _, pc := range profile["pluginConfig"].([]any) {
			if pc.(map[string]any)["name"] != name {
				kept = append(kept, pc)
			}
		}
		profile["pluginConfig"] = kept
	}
}

// withStatusInterval sets HiveSched's statusUpdateIntervalSeconds (the
// harness uses 1).
func withStatusInterval(seconds int) profileOption {
	return func(profile map[string]any) {
		for _, pc := range profile["pluginConfig"].([]any) {
			if pc.(map[string]any)["name"] == hivesched.Name {
				pc.(map[string]any)["args"].(map[string]any)["statusUpdateIntervalSeconds"] = seconds
			}
		}
	}
}

// withVictimGrace sets HiveSched's victimGracePeriodSeconds.
func withVictimGrace(seconds int) profileOption {
	return func(profile map[string]any) {
		for _, pc := range profile["pluginConfig"].([]any) {
			if pc.(map[string]any)["name"] == hivesched.Name {
				pc.(map[string]any)["args"].(map[string]any)["victimGracePeriodSeconds"] = seconds
			}
		}
	}
}

// withInspect serves HiveSched's inspect API on addr.
func withInspect(addr string) profileOption {
	return func(profile map[string]any) {
		for _, pc := range profile["pluginConfig"].([]any) {
			if pc.(map[string]any)["name"] == hivesched.Name {
				pc.(map[string]any)["args"].(map[string]any)["inspectBindAddress"] = addr
			}
		}
	}
}

// startScheduler runs the scheduler in process with the HiveSched profile
// (as manifests/scheduler configures it).
func (c *cluster) startScheduler(t *testing.T, physical map[string]any, profileOpts ...profileOption) *scheduler {
	profile := map[string]any{
		"schedulerName": schedulerName,
		"plugins": map[string]any{
			// As manifests/scheduler: DynamicResources runs wrapped, without
			// GPU claims, which HiveSched allocates.
			// HiveSchedPreemption is DefaultPreemption for the pods and pod
			// groups HiveSched does not place.
			"multiPoint": map[string]any{"enabled": []any{map[string]any{"name": hivesched.DRAName}, map[string]any{"name": hivesched.Name},
				map[string]any{"name": hivesched.PreemptionName}},
				"disabled": []any{map[string]any{"name": "DynamicResources"}, map[string]any{"name": "DefaultPreemption"}}},
			"queueSort":         map[string]any{"enabled": []any{map[string]any{"name": hivesched.Name}}, "disabled": []any{map[string]any{"name": "PrioritySort"}}},
			"bind":              map[string]any{"enabled": []any{map[string]any{"name": hivesched.Name}}},
			"placementGenerate": map[string]any{"disabled": []any{map[string]any{"name": "TopologyPlacementGenerator"}}},
		},
		"pluginConfig": []any{
			// As manifests/scheduler: HiveD's pods carry a resource no node
			// advertises.
			map[string]any{"name": "NodeResourcesFit", "args": map[string]any{
				"ignoredResources": []any{hivesched.HivedSchedulingEnableResource},
			}},
			map[string]any{"name": hivesched.Name, "args": map[string]any{
				"permitWaitingTimeSeconds":    5,
				"statusUpdateIntervalSeconds": 1,
				// Tests may run two schedulers at once: the inspect API is
				// off unless a test asks for it (withInspect).
				"inspectBindAddress": "",
				"physicalCluster":    physical,
			}},
		},
	}
	for _, o := range profileOpts {
		o(profile)
	}
	if _, await := profile[awaitKey]; await {
		delete(profile, awaitKey)
		// As cmd/hivesched-scheduler does for a configuration with leader
		// election: HiveSched recovers when the process leads.
		hivesched.AwaitLeadership(true)
		defer hivesched.AwaitLeadership(false)
	}
	setup := []app.Option{app.WithPlugin(hivesched.Name, hivesched.New), app.WithPlugin(hivesched.DRAName, hivesched.NewDRA),
		app.WithPlugin(hivesched.PreemptionName, hivesched.NewPreemption)}
	if extra, ok := profile[extraPluginsKey]; ok {
		delete(profile, extraPluginsKey)
		setup = append(setup, extra.([]app.Option)...)
	}
	kubeconfig := c.kubeconfig
	if p, ok := profile[kubeconfigKey]; ok {
		delete(profile, kubeconfigKey)
		kubeconfig = p.(string)
	}
	profiles := []any{profile}
	if extra, ok := profile[extraProfilesKey]; ok {
		delete(profile, extraProfilesKey)
		profiles = append(profiles, extra.([]any)...)
	}
	return runApp(t, schedulerOptions(t, kubeconfig, profiles, "scheduler-config.yaml"), setup...)
}

// schedulerOptions writes a KubeSchedulerConfiguration of profiles (no
// leader election, the given kubeconfig) into the test's temporary file
// named file, and returns kube-scheduler's options reading it, serving no
// port.
func schedulerOptions(t *testing.T, kubeconfig string, profiles []any, file string) *options.Options {
	raw, err := yaml.Marshal(map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"leaderElection":   map[string]any{"leaderElect": false},
		"clientConnection": map[string]any{"kubeconfig": kubeconfig},
		"profiles":         profiles,
	})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), file)
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	opts := options.NewOptions()
	opts.ConfigFile = path
	opts.SecureServing.BindPort = 0
	return opts
}

// runApp sets kube-scheduler up and runs it as its binary does (app.Run),
// until the test ends.
func runApp(t *testing.T, opts *options.Options, setup ...app.Option) *scheduler {
	ctx, cancel := context.WithCancel(context.Background())
	cc, sched, err := app.Setup(ctx, opts, setup...)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	s := &scheduler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := app.Run(ctx, cc, sched); err != nil && ctx.Err() == nil {
			t.Errorf("scheduler stopped: %v", err)
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *scheduler) stop() {
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
	}
	// app.Run registers its configuration once per process.
	configz.Delete("componentconfig")
}

// --- objects ---

func (c *cluster) createNode(t *testing.T, name, resourceName string, gpus int64, ready bool) {
	status := v1.ConditionTrue
	if !ready {
		status = v1.ConditionFalse
	}
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1.NodeStatus{
			Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("64"), v1.ResourceMemory: resource.MustParse("512Gi"), v1.ResourcePods: resource.MustParse("110"), v1.ResourceName(resourceName): *resource.NewQuantity(gpus, resource.DecimalSI)},
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("64"), v1.ResourceMemory: resource.MustParse("512Gi"), v1.ResourcePods: resource.MustParse("110"), v1.ResourceName(resourceName): *resource.NewQuantity(gpus, resource.DecimalSI)},
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
	created, err := c.kube.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
	require.NoError(t, err)
	created.Status = n.Status
	_, err = c.kube.CoreV1().Nodes().UpdateStatus(t.Context(), created, metav1.UpdateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// createNodes creates the nodes of physicalCluster(prefix, ...).
func (c *cluster) createNodes(t *testing.T, prefix string, racks, nodesPerRack, t4 int) {
	for r := 0; r < racks; r++ {
		for n := 0; n < nodesPerRack; n++ {
			c.createNode(t, fmt.Sprintf("%s-r%d-n%d", prefix, r, n), "nvidia.com/gpu", 8, true)
		}
	}
	for i := 0; i < t4; i++ {
		c.createNode(t, fmt.Sprintf("%s-t4-%d", prefix, i), "nvidia.com/gpu", 4, true)
	}
}

func (c *cluster) createNamespace(t *testing.T, name string) {
	_, err := c.kube.CoreV1().Namespaces().Create(t.Context(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.kube.CoreV1().Pods(name).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = c.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func (c *cluster) createVC(t *testing.T, name string, namespaces []string, cells ...any) {
	c.createPinnedVC(t, name, namespaces, nil, cells...)
}

// createPinnedVC creates a VC of virtual cells (type, count, ...) and the
// pinned cells named.
func (c *cluster) createPinnedVC(t *testing.T, name string, namespaces, pinned []string, cells ...any) {
	vc := &hv1.VirtualCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: hv1.VirtualClusterSpec{AllowedNamespaces: namespaces}}
	for i := 0; i+1 < len(cells); i += 2 {
		vc.Spec.VirtualCells = append(vc.Spec.VirtualCells, hv1.VirtualCellSpec{CellType: cells[i].(string), CellNumber: int32(cells[i+1].(int))})
	}
	for _, id := range pinned {
		vc.Spec.PinnedCells = append(vc.Spec.PinnedCells, hv1.PinnedCellSpec{PinnedCellID: id})
	}
	_, err := c.vc.HiveschedV1alpha1().VirtualClusters().Create(t.Context(), vc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.vc.HiveschedV1alpha1().VirtualClusters().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// gangPods builds the pods of a native-form gang for the test scheduler.
func gangPods(ns, group, vc string, priority, n int, gpus int64) []*v1.Pod {
	return util.GangPods(ns, group, vc, priority, n, gpus, schedulerName)
}

func (c *cluster) createPods(t *testing.T, pods []*v1.Pod) {
	for _, p := range pods {
		_, err := c.kube.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

func (c *cluster) deletePods(t *testing.T, pods []*v1.Pod) {
	zero := int64(0)
	for _, p := range pods {
		err := c.kube.CoreV1().Pods(p.Namespace).Delete(t.Context(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
	}
}

func (c *cluster) getPod(t *testing.T, p *v1.Pod) *v1.Pod {
	got, err := c.kube.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
	require.NoError(t, err)
	return got
}

// waitBound waits until every pod is bound and returns their nodes.
func (c *cluster) waitBound(t *testing.T, pods []*v1.Pod, timeout time.Duration) []string {
	nodes := make([]string, len(pods))
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for i, p := range pods {
			got, err := c.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil || got.Spec.NodeName == "" {
				return false, nil
			}
			nodes[i] = got.Spec.NodeName
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pods not bound within %v: %s", timeout, c.describe(t, pods))
	}
	return nodes
}

// requireUnbound checks that no pod gets bound for a while.
func (c *cluster) requireUnbound(t *testing.T, pods []*v1.Pod, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, p := range pods {
			got, err := c.kube.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
			if err == nil && got.Spec.NodeName != "" {
				t.Fatalf("pod %s was bound to %s, want it waiting", p.Name, got.Spec.NodeName)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *cluster) waitGone(t *testing.T, pods []*v1.Pod, timeout time.Duration) {
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, err := c.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err == nil && got.UID == p.UID {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "pods not deleted: %s", c.describe(t, pods))
}

// events returns the notes of the events about a pod.
func (c *cluster) events(t *testing.T, p *v1.Pod) []string {
	var out []string
	evs, err := c.kube.EventsV1().Events(p.Namespace).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range evs.Items {
		if e.Regarding.Name == p.Name {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	cevs, err := c.kube.CoreV1().Events(p.Namespace).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range cevs.Items {
		if e.InvolvedObject.Name == p.Name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// waitEvent waits for an event about the pod whose text contains want.
func (c *cluster) waitEvent(t *testing.T, p *v1.Pod, want string, timeout time.Duration) string {
	var found string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, e := range c.events(t, p) {
			if strings.Contains(e, want) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no event containing %q on pod %s; events: %v", want, p.Name, c.events(t, p))
	return found
}

// failedScheduling waits for the pod's FailedScheduling event that contains
// want and returns its text.
func (c *cluster) failedScheduling(t *testing.T, p *v1.Pod, want string, timeout time.Duration) string {
	ev := c.waitEvent(t, p, want, timeout)
	for _, e := range c.events(t, p) {
		if strings.HasPrefix(e, "FailedScheduling: ") && strings.Contains(e, want) {
			return strings.TrimPrefix(e, "FailedScheduling: ")
		}
	}
	t.Fatalf("the event %q on pod %s is not FailedScheduling", ev, p.Name)
	return ""
}

// oneSentence matches a FailedScheduling text that is the scheduler's node
// count and one sentence of HiveSched's: no other plugin's words appended,
// no stray punctuation (the names in these tests have no periods).
var oneSentence = regexp.MustCompile(`^0/\d+ nodes are available: [^.;]+(; [^.;]+)*\.$`)

func (c *cluster) describe(t *testing.T, pods []*v1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		got, err := c.kube.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(&b, "\n  %s: %v", p.Name, err)
			continue
		}
		fmt.Fprintf(&b, "\n  %s: node=%q phase=%s nominated=%q", p.Name, got.Spec.NodeName, got.Status.Phase, got.Status.NominatedNodeName)
		for _, cond := range got.Status.Conditions {
			fmt.Fprintf(&b, " [%s=%s %s]", cond.Type, cond.Status, cond.Message)
		}
		for _, st := range got.Status.ResourceClaimStatuses {
			if st.ResourceClaimName != nil {
				fmt.Fprintf(&b, " claim %s=%s", st.Name, *st.ResourceClaimName)
			}
		}
		if got.Spec.NodeName == "" {
			for _, e := range c.events(t, got) {
				fmt.Fprintf(&b, "\n    event %s", e)
			}
		}
	}
	return b.String()
}

// createBoundPods creates pods that a scheduler bound before a restart:
// spec.nodeName and the placement annotation are in the pods, and each
// record is signed with the cluster's placement key, as hivesched signs it
// (the signature covers the pod's UID, so it is added once the pod exists).
func (c *cluster) createBoundPods(t *testing.T, pods []*v1.Pod) {
	key, err := placement.LoadKey(t.Context(), c.kube)
	require.NoError(t, err)
	for _, p := range pods {
		created, err := c.kube.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{})
		require.NoError(t, err)
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			hivesched.AnnotationPlacementSignature: placement.Signature(key, created)}}})
		require.NoError(t, err)
		_, err = c.kube.CoreV1().Pods(p.Namespace).Patch(t.Context(), p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
	}
}

// applyManifest creates every object of a manifest file (a path relative to
// the repository, or absolute), as kubectl apply would on a fresh cluster:
// the kinds the shipped manifests use.
func (c *cluster) applyManifest(t *testing.T, path string) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(repoRoot(t), path)
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	ctx := t.Context()
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if err == io.EOF {
			return
		}
		require.NoError(t, err, path)
		if obj == nil {
			continue
		}
		b, err := json.Marshal(obj)
		require.NoError(t, err)
		create := func(o any, do func() error) {
			require.NoError(t, json.Unmarshal(b, o))
			require.NoError(t, do(), "%s: %v %v", path, obj["kind"], obj["metadata"])
		}
		switch obj["kind"] {
		case "Namespace":
			var o v1.Namespace
			create(&o, func() error {
				_, err := c.kube.CoreV1().Namespaces().Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "ConfigMap":
			var o v1.ConfigMap
			create(&o, func() error {
				_, err := c.kube.CoreV1().ConfigMaps(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "Service":
			var o v1.Service
			create(&o, func() error {
				_, err := c.kube.CoreV1().Services(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "NetworkPolicy":
			var o networkingv1.NetworkPolicy
			create(&o, func() error {
				_, err := c.kube.NetworkingV1().NetworkPolicies(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "ServiceAccount":
			var o v1.ServiceAccount
			create(&o, func() error {
				_, err := c.kube.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "ClusterRole":
			var o rbacv1.ClusterRole
			create(&o, func() error {
				_, err := c.kube.RbacV1().ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			create(&o, func() error {
				_, err := c.kube.RbacV1().ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "Role":
			var o rbacv1.Role
			create(&o, func() error {
				_, err := c.kube.RbacV1().Roles(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "RoleBinding":
			var o rbacv1.RoleBinding
			create(&o, func() error {
				_, err := c.kube.RbacV1().RoleBindings(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "ValidatingAdmissionPolicy":
			var o admissionv1.ValidatingAdmissionPolicy
			create(&o, func() error {
				_, err := c.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "ValidatingAdmissionPolicyBinding":
			var o admissionv1.ValidatingAdmissionPolicyBinding
			create(&o, func() error {
				_, err := c.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "DeviceTaintRule":
			var o resourceapi.DeviceTaintRule
			create(&o, func() error {
				_, err := c.kube.ResourceV1().DeviceTaintRules().Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		default:
			t.Fatalf("%s: no applier for kind %v", path, obj["kind"])
		}
	}
}

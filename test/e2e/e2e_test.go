// Package e2e runs against the local cluster of hack/local-up.sh (real etcd,
// kube-apiserver, kwok nodes and the hivesched-scheduler process). It is
// skipped unless HIVESCHED_E2E_KUBECONFIG names that cluster's kubeconfig;
// `make e2e` sets it.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hivesched/hivesched/apis/generated/clientset/versioned"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/test/util"
)

type env struct {
	kubeconfig string
	kube       kubernetes.Interface
	vc         versioned.Interface
	root       string
}

// setup is the local cluster of the sample shape (make e2e); the tests
// that call it skip on another shape.
func setup(t *testing.T) *env {
	e := connect(t, "sample", "make e2e")
	clearSampleNamespaces.Do(func() { e.clearNamespaces(t, "vision", "speech") })
	return e
}

// connect is the local cluster of HIVESCHED_E2E_KUBECONFIG, if it is of the
// shape the test needs (HIVESCHED_CLUSTER: util.LocalClusterShape); else
// the test skips, saying which target runs it.
func connect(t *testing.T, shape, target string) *env {
	kc := os.Getenv("HIVESCHED_E2E_KUBECONFIG")
	if kc == "" {
		t.Skipf("no local cluster: run `%s` (it brings one up with hack/local-up.sh), or set HIVESCHED_E2E_KUBECONFIG", target)
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	root := filepath.Join(wd, "..", "..")
	if got, err := util.LocalClusterShape(root); err == nil && got != shape {
		t.Skipf("the local cluster is of shape %q (HIVESCHED_CLUSTER); this test needs %q: run `%s`", got, shape, target)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	require.NoError(t, err)
	jc := rest.CopyConfig(cfg)
	jc.ContentType = "application/json"
	return &env{kubeconfig: kc, kube: kubernetes.NewForConfigOrDie(cfg), vc: versioned.NewForConfigOrDie(jc), root: root}
}

// clearSampleNamespaces runs once per e2e run: the sample namespaces
// belong to the demo and these tests, and a demo run before them (make demo
// leaves its jobs running for a user to look at) would hold the cells they
// need.
var clearSampleNamespaces sync.Once

func (e *env) clearNamespaces(t *testing.T, namespaces ...string) {
	zero := int64(0)
	for _, ns := range namespaces {
		require.NoError(t, e.kube.CoreV1().Pods(ns).DeleteCollection(t.Context(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}))
	}
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 300*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, ns := range namespaces {
			l, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(l.Items) > 0 {
				return false, nil
			}
		}
		return true, nil
	}), "the sample namespaces' pods of an earlier run did not go")
}

func (e *env) kubectl(t *testing.T, args ...string) string {
	bin := filepath.Join(util.LocalDir(e.root), "bin", "kubectl")
	if _, err := os.Stat(bin); err != nil {
		bin = "kubectl"
	}
	out, err := exec.Command(bin, append([]string{"--kubeconfig", e.kubeconfig}, args...)...).CombinedOutput()
	require.NoError(t, err, "kubectl %v: %s", args, out)
	return string(out)
}

// scheduler runs hack/local-scheduler.sh (stop, start, restart [profile]).
func (e *env) scheduler(t *testing.T, args ...string) {
	cmd := exec.Command("bash", append([]string{filepath.Join(e.root, "hack", "local-scheduler.sh")}, args...)...)
	cmd.Dir = e.root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "local-scheduler.sh %v: %s", args, out)
}

var pods = util.GangPods

func (e *env) create(t *testing.T, ps []*v1.Pod) {
	for _, p := range ps {
		_, err := e.kube.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	t.Cleanup(func() { e.remove(t, ps) })
}

func (e *env) remove(t *testing.T, ps []*v1.Pod) {
	zero := int64(0)
	for _, p := range ps {
		err := e.kube.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", p.Name, err)
		}
	}
	_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		live, err := e.podsByName(ctx, ps)
		if err != nil {
			return false, nil
		}
		for _, p := range ps {
			if _, ok := live[p.Namespace+"/"+p.Name]; ok {
				return false, nil
			}
		}
		return true, nil
	})
}

// podsByName lists the namespaces of ps once each (one call per poll, not
// one per pod: the GB200 tests wait for 72 pods at once) and returns their
// pods by namespace/name.
func (e *env) podsByName(ctx context.Context, ps []*v1.Pod) (map[string]*v1.Pod, error) {
	out := map[string]*v1.Pod{}
	seen := map[string]bool{}
	for _, p := range ps {
		if seen[p.Namespace] {
			continue
		}
		seen[p.Namespace] = true
		l, err := e.kube.CoreV1().Pods(p.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			out[p.Namespace+"/"+l.Items[i].Name] = &l.Items[i]
		}
	}
	return out, nil
}

// waitRunning waits until every pod is Running (kwok runs bound pods) and
// returns their nodes.
func (e *env) waitRunning(t *testing.T, ps []*v1.Pod, timeout time.Duration) []string {
	nodes := make([]string, len(ps))
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		live, err := e.podsByName(ctx, ps)
		if err != nil {
			return false, nil
		}
		for i, p := range ps {
			got, ok := live[p.Namespace+"/"+p.Name]
			if !ok || got.UID != "" && p.UID != "" && got.UID != p.UID || got.Status.Phase != v1.PodRunning {
				return false, nil
			}
			nodes[i] = got.Spec.NodeName
		}
		return true, nil
	})
	require.NoError(t, err, "pods not Running: %s", e.describe(t, ps))
	return nodes
}

func (e *env) requirePending(t *testing.T, ps []*v1.Pod, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, p := range ps {
			got, err := e.kube.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
			require.NoError(t, err)
			require.Empty(t, got.Spec.NodeName, "pod %s was bound, want it pending", p.Name)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (e *env) waitGone(t *testing.T, ps []*v1.Pod, timeout time.Duration) {
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range ps {
			got, err := e.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err == nil && got.DeletionTimestamp == nil {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "pods not deleted: %s", e.describe(t, ps))
}

func (e *env) describe(t *testing.T, ps []*v1.Pod) string {
	var b strings.Builder
	for _, p := range ps {
		got, err := e.kube.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(&b, "\n  %s: %v", p.Name, err)
			continue
		}
		fmt.Fprintf(&b, "\n  %s: node=%q phase=%s", p.Name, got.Spec.NodeName, got.Status.Phase)
		for _, c := range got.Status.Conditions {
			if c.Message != "" {
				fmt.Fprintf(&b, " [%s: %s]", c.Type, c.Message)
			}
		}
	}
	return b.String()
}

// leaves returns node/index -> pod for every bound pod with recorded cells.
func (e *env) leaves(t *testing.T) map[string]string {
	out := map[string]string{}
	for _, ns := range []string{"vision", "speech", "default"} {
		list, err := e.kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range list.Items {
			idx := p.Annotations[hivesched.AnnotationLeafCellIndices]
			if p.Spec.NodeName == "" || idx == "" {
				continue
			}
			for _, i := range strings.Split(idx, ",") {
				key := p.Spec.NodeName + "/" + i
				require.Empty(t, out[key], "leaf %s is booked by %s and %s", key, out[key], p.Name)
				out[key] = p.Namespace + "/" + p.Name
			}
		}
	}
	return out
}

func TestLocalCluster(t *testing.T) {
	e := setup(t)

	t.Run("bring-up: nodes Ready, CRD served, VCs admitted", func(t *testing.T) {
		nodes, err := e.kube.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, nodes.Items, 10)
		for _, n := range nodes.Items {
			ready := false
			for _, c := range n.Status.Conditions {
				ready = ready || (c.Type == v1.NodeReady && c.Status == v1.ConditionTrue)
			}
			require.True(t, ready, "node %s not Ready", n.Name)
		}
		for _, name := range []string{"vc-vision", "vc-speech"} {
			require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 300*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				vc, err := e.vc.HiveschedV1alpha1().VirtualClusters().Get(ctx, name, metav1.GetOptions{})
				return err == nil && vc.Status.State == hv1.VirtualClusterActive, nil
			}))
		}
	})

	t.Run("a tenant cannot forge a placement record (manifests/admission)", func(t *testing.T) {
		// kubectl --as: the local API server lets the admin impersonate.
		// It names hivesched: a pod with hivesched.io/ keys that names
		// another scheduler is refused first by hivesched-gpu-pods.
		forged := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"forged","namespace":"vision","annotations":{"` +
			hivesched.AnnotationPlacement + `":"{}"}},"spec":{"schedulerName":"hivesched","containers":[{"name":"c","image":"busybox"}]}}`
		bin := filepath.Join(util.LocalDir(e.root), "bin", "kubectl")
		if _, err := os.Stat(bin); err != nil {
			bin = "kubectl"
		}
		var out []byte
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 300*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			cmd := exec.CommandContext(ctx, bin, "--kubeconfig", e.kubeconfig, "--as", "alice", "--as-group", "team-vision",
				"create", "--dry-run=server", "-f", "-")
			cmd.Stdin = strings.NewReader(forged)
			var err error
			out, err = cmd.CombinedOutput()
			return err != nil && strings.Contains(string(out), "hivesched-pod-placement"), nil
		}), "kubectl create of a forged pod: %s", out)
		require.Contains(t, string(out), "are written by the hivesched scheduler when it binds a pod")
	})

	t.Run("a gang selects hivesched by schedulerName and runs in one rack", func(t *testing.T) {
		g := pods("vision", "resnet", "vc-vision", 0, 4, 8, "hivesched")
		e.create(t, g)
		nodes := e.waitRunning(t, g, 60*time.Second)
		for _, n := range nodes {
			require.True(t, strings.HasPrefix(n, "gpu-a"), "vc-vision's rack is rack-a: %v", nodes)
		}
		e.leaves(t)
	})

	t.Run("deleting a gang frees its cells", func(t *testing.T) {
		a := pods("speech", "a", "vc-speech", 0, 3, 8, "hivesched")
		e.create(t, a)
		e.waitRunning(t, a, 60*time.Second)
		b := pods("speech", "b", "vc-speech", 0, 1, 8, "hivesched")
		b[0].Annotations[hivesched.AnnotationLeafCellType] = "V100"
		e.create(t, b)
		e.requirePending(t, b, 3*time.Second)
		e.remove(t, a)
		e.waitRunning(t, b, 60*time.Second)
	})

	t.Run("a higher priority gang preempts a whole gang in its VC", func(t *testing.T) {
		low := pods("speech", "low", "vc-speech", 1, 3, 8, "hivesched")
		e.create(t, low)
		e.waitRunning(t, low, 60*time.Second)
		high := pods("speech", "high", "vc-speech", 100, 2, 8, "hivesched")
		e.create(t, high)
		e.waitGone(t, low, 60*time.Second)
		e.waitRunning(t, high, 60*time.Second)
		e.leaves(t)
	})

	t.Run("a cordoned node is avoided", func(t *testing.T) {
		e.kubectl(t, "cordon", "gpu-a0")
		t.Cleanup(func() { e.kubectl(t, "uncordon", "gpu-a0") })
		g := pods("vision", "small", "vc-vision", 0, 4, 8, "hivesched")
		e.create(t, g)
		// vc-vision's rack lost a node: 3 of 4 nodes are left for 4x8.
		e.requirePending(t, g, 3*time.Second)
		e.kubectl(t, "uncordon", "gpu-a0")
		e.waitRunning(t, g, 60*time.Second)
		one := pods("vision", "one", "vc-vision", -1, 1, 1, "hivesched")
		e.kubectl(t, "cordon", "gpu-a0")
		e.create(t, one)
		nodes := e.waitRunning(t, one, 60*time.Second)
		require.NotEqual(t, "gpu-a0", nodes[0])
	})

	t.Run("a Spread VC spreads inference replicas, a Pack VC packs them", func(t *testing.T) {
		e.kubectl(t, "patch", "vc", "vc-vision", "--type", "merge", "-p", `{"spec":{"selector":"Spread"}}`)
		t.Cleanup(func() {
			e.kubectl(t, "patch", "vc", "vc-vision", "--type", "merge", "-p", `{"spec":{"selector":"Pack"}}`)
		})
		spread := pods("vision", "serve", "vc-vision", 0, 2, 1, "hivesched")
		e.create(t, spread)
		nodes := e.waitRunning(t, spread, 60*time.Second)
		require.NotEqual(t, nodes[0], nodes[1], "Spread: replicas on different nodes")
		packed := pods("speech", "serve", "vc-speech", 0, 2, 1, "hivesched")
		e.create(t, packed)
		nodes = e.waitRunning(t, packed, 60*time.Second)
		require.Equal(t, nodes[0], nodes[1], "Pack: replicas share a node")
	})

	t.Run("kubectl get vc shows usage", func(t *testing.T) {
		g := pods("vision", "cols", "vc-vision", 0, 2, 4, "hivesched")
		e.create(t, g)
		e.waitRunning(t, g, 60*time.Second)
		var out string
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			out = e.kubectl(t, "get", "vc")
			return strings.Contains(out, "vc-vision") && fieldsOf(out, "vc-vision")[2] == "8", nil // USED
		}), out)
		t.Logf("kubectl get vc:\n%s", out)
		head := strings.Fields(strings.SplitN(out, "\n", 2)[0])
		require.Equal(t, []string{"NAME", "TOTAL", "USED", "FREE", "LENT", "UNAVAILABLE", "OPP", "PENDING", "STATE", "AGE"}, head)
	})

	t.Run("a restarted scheduler keeps running pods and double-books nothing", func(t *testing.T) {
		a := pods("speech", "keep", "vc-speech", 0, 2, 8, "hivesched")
		e.create(t, a)
		before := e.waitRunning(t, a, 60*time.Second)
		e.scheduler(t, "restart")
		after := e.waitRunning(t, a, 10*time.Second)
		require.Equal(t, before, after)
		b := pods("speech", "more", "vc-speech", 0, 2, 8, "hivesched")
		b[0].Annotations[hivesched.AnnotationLeafCellType] = "V100"
		b[1].Annotations[hivesched.AnnotationLeafCellType] = "V100"
		e.create(t, b)
		// vc-speech has 3 V100 nodes: 2 kept + 2 more do not fit.
		e.requirePending(t, b, 3*time.Second)
		e.leaves(t)
	})

	t.Run("hivesched replaces the default profile", func(t *testing.T) {
		e.scheduler(t, "restart", "default")
		t.Cleanup(func() { e.scheduler(t, "restart", "second") })
		g := pods("vision", "nameless", "vc-vision", 0, 2, 8, "")
		e.create(t, g)
		e.waitRunning(t, g, 60*time.Second)
		plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default"},
			Spec: v1.PodSpec{Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}}, Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
		e.create(t, []*v1.Pod{plain})
		e.waitRunning(t, []*v1.Pod{plain}, 60*time.Second)
		e.leaves(t)
	})
}

func fieldsOf(table, name string) []string {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == name {
			return f
		}
	}
	return make([]string, 9)
}

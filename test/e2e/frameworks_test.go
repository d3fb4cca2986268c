package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/test/util"
)

// Issue 39: the frameworks' real controllers hand hivesched whole gangs that
// hold members without GPUs (an MPI launcher, a Ray head). Each test here
// runs one framework's controller, built from the Go module proxy by a
// hack/local-*.sh script, and checks that its gang binds whole, that the
// member without GPUs holds no cells, and how long it took.

// operatorReady skips (or, with env set, fails) the test unless the
// operator's health probe on the local cluster's port portVar answers.
func operatorReady(t *testing.T, e *env, name, portVar, env, start string) {
	t.Helper()
	port, err := util.LocalPort(e.root, portVar)
	require.NoError(t, err)
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("readyz: %s", resp.Status)
		}
	}
	if err != nil {
		msg := fmt.Sprintf("%s is not ready on 127.0.0.1:%d (%v): start it with %s", name, port, err, start)
		if os.Getenv(env) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// bindClock records, from a watch, when each pod matching a selector was
// first seen bound. The PodScheduled condition's time has a resolution of
// one second, too coarse for a bind spread of milliseconds; the watch sees
// each binding as the API server sends it (a few ms late, equally for all).
type bindClock struct {
	mu    sync.Mutex
	bound map[string]time.Time
	w     watch.Interface
}

func startBindClock(t *testing.T, e *env, ns, selector string) *bindClock {
	w, err := e.kube.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	c := &bindClock{bound: map[string]time.Time{}, w: w}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok || p.Spec.NodeName == "" {
				continue
			}
			c.mu.Lock()
			if _, seen := c.bound[p.Name]; !seen {
				c.bound[p.Name] = time.Now()
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return c
}

// gangTimes is what a framework's gang took: from the create call of the
// framework's object to the last member bound, and the spread between the
// first and the last member's binding (watch times; the PodScheduled
// conditions' spread, in whole seconds, is reported beside it).
type gangTimes struct {
	createToBound, spread time.Duration
	conditionSpread       time.Duration
}

func (c *bindClock) times(t *testing.T, created time.Time, got []v1.Pod) gangTimes {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first, last time.Time
	var condFirst, condLast time.Time
	for _, p := range got {
		at, ok := c.bound[p.Name]
		require.True(t, ok, "pod %s is bound but the watch never saw it bound", p.Name)
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionTrue {
				ct := cond.LastTransitionTime.Time
				if condFirst.IsZero() || ct.Before(condFirst) {
					condFirst = ct
				}
				if ct.After(condLast) {
					condLast = ct
				}
			}
		}
	}
	return gangTimes{createToBound: last.Sub(created), spread: last.Sub(first), conditionSpread: condLast.Sub(condFirst)}
}

func (g gangTimes) String() string {
	return fmt.Sprintf("every pod bound after %v, bind spread %v (PodScheduled conditions: %v, 1 s resolution)",
		g.createToBound.Round(time.Millisecond), g.spread.Round(time.Millisecond), g.conditionSpread)
}

// gangMembers checks what a bound gang's pods recorded: every pod one
// group of vc, those asking no GPU bound with no cells, the others with
// gpus cells each; it returns the pods without cells.
func gangMembers(t *testing.T, got []v1.Pod, vc string, gpus int) (cellLess []v1.Pod) {
	t.Helper()
	group := ""
	for _, p := range got {
		rec, err := placement.Decode(p.Annotations[placement.Annotation])
		require.NoError(t, err, "pod %s's placement record", p.Name)
		require.Equal(t, vc, rec.VirtualCluster, "pod %s", p.Name)
		if group == "" {
			group = rec.Group
		}
		require.Equal(t, group, rec.Group, "pod %s is in another group than its gang", p.Name)
		if rec.CellLess() {
			require.Empty(t, p.Annotations[hivesched.AnnotationLeafCellIndices], "pod %s holds no cells", p.Name)
			require.Positive(t, rec.CellLessPods, "pod %s's record counts no member without cells", p.Name)
			cellLess = append(cellLess, p)
			continue
		}
		require.Len(t, rec.LeafCellIndices, gpus, "pod %s", p.Name)
	}
	return cellLess
}

// checkGang checks a framework's bound gang of 4 in vc-vision: every pod
// of scheduler schedulerName and of PodGroup podGroup, one member without
// GPUs (the one cellLess says: a launcher, a head, a coordinator) bound
// with no cells, and three 8-GPU workers on three nodes of one rack.
func checkGang(t *testing.T, racks map[string]string, what string, got []v1.Pod, schedulerName, podGroup string, cellLess func(v1.Pod) bool) {
	t.Helper()
	for _, p := range got {
		require.Equal(t, schedulerName, p.Spec.SchedulerName, "pod %s", p.Name)
		require.Equal(t, podGroup, p.Labels["scheduling.x-k8s.io/pod-group"], "pod %s", p.Name)
	}
	noCells := gangMembers(t, got, "vc-vision", 8)
	require.Len(t, noCells, 1, "%s: one member without GPUs", what)
	require.True(t, cellLess(noCells[0]), "%s: pod %s holds no cells but is not the member without GPUs", what, noCells[0].Name)
	rack, nodes := "", map[string]bool{}
	for _, p := range got {
		if p.Name == noCells[0].Name {
			continue
		}
		nodes[p.Spec.NodeName] = true
		if rack == "" {
			rack = racks[p.Spec.NodeName]
		}
		require.Equal(t, rack, racks[p.Spec.NodeName], "%s's workers span racks: pod %s on %s", what, p.Name, p.Spec.NodeName)
	}
	require.Len(t, nodes, 3, "%s: three 8-GPU workers on three nodes", what)
}

// sample returns manifests/samples/FILE with its object's name (the line
// "  name: FROM") renamed to name: the tests run the samples the README
// points at.
func sample(t *testing.T, e *env, file, from, name string) string {
	raw, err := os.ReadFile(filepath.Join(e.root, "manifests", "samples", file))
	require.NoError(t, err)
	s := string(raw)
	require.Equal(t, 1, strings.Count(s, "\n  name: "+from+"\n"), "%s names one object %s", file, from)
	return strings.Replace(s, "\n  name: "+from+"\n", "\n  name: "+name+"\n", 1)
}

// TestMPIJob (issue 39): manifests/samples/mpijob.yaml through training-operator v1.8.1's MPI
// controller (hack/local-kubeflow.sh, --gang-scheduler-name=hivesched) is
// one scheduler-plugins PodGroup of minMember launcher + workers; its
// launcher asks for no GPU. A 1 + 3 x 8 GPU job binds whole (the launcher
// with no cells, the workers in vc-vision's rack); a second one waits
// with none of its pods bound, its launcher included, and binds whole
// once the first is deleted. A third one whose PodGroup wants more pods
// than the job has waits whole and is told so (WaitingForMembers).
func TestMPIJob(t *testing.T) {
	e := setup(t)
	operatorReady(t, e, "Kubeflow's training-operator", "KUBEFLOW_PROBE_PORT", envKubeflow, "hack/local-kubeflow.sh (make kubeflow)")
	racks := topCells(t, e.root)
	sel := func(name string) string { return "training.kubeflow.org/job-name=" + name }
	del := func(names ...string) {
		e.kubectl(t, append([]string{"delete", "mpijob", "-n", "vision", "--ignore-not-found", "--wait=true"}, names...)...)
	}
	del("mpi-a", "mpi-b")
	e.waitPods(t, "vision", "training.kubeflow.org/operator-name=mpijob-controller", 0, 60*time.Second, "left", func(v1.Pod) bool { return true })
	t.Cleanup(func() { del("mpi-a", "mpi-b") })

	check := func(name string, got []v1.Pod) {
		checkGang(t, racks, "MPIJob "+name, got, "hivesched", name, func(p v1.Pod) bool {
			return p.Labels["training.kubeflow.org/replica-type"] == "launcher"
		})
	}

	clockA := startBindClock(t, e, "vision", sel("mpi-a"))
	created := time.Now()
	cmdIn(t, e, sample(t, e, "mpijob.yaml", "pi", "mpi-a"), "apply", "-f", "-")
	a := e.waitPods(t, "vision", sel("mpi-a"), 4, 90*time.Second, "Running", running)
	timesA := clockA.times(t, created, a)
	check("mpi-a", a)
	pg := e.kubectl(t, "get", "podgroups.scheduling.x-k8s.io", "-n", "vision", "mpi-a", "-o", "jsonpath={.spec.minMember}")
	require.Equal(t, "4", pg, "training-operator's PodGroup for mpi-a: launcher + 3 workers")
	t.Logf("MPIJob mpi-a (launcher + 3 x 8 GPUs) bound whole; from its create: %v", timesA)

	// A second job of the same size cannot fit beside it: none of its pods
	// may bind, not even the launcher, which would fit anywhere.
	clockB := startBindClock(t, e, "vision", sel("mpi-b"))
	cmdIn(t, e, sample(t, e, "mpijob.yaml", "pi", "mpi-b"), "apply", "-f", "-")
	e.waitPods(t, "vision", sel("mpi-b"), 4, 60*time.Second, "created by the operator", func(v1.Pod) bool { return true })
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range e.livePods(t, "vision", sel("mpi-b")) {
			require.Empty(t, p.Spec.NodeName, "pod %s of mpi-b was bound while mpi-a holds vc-vision's rack: the gang must wait whole", p.Name)
		}
		time.Sleep(300 * time.Millisecond)
	}
	requireEvent(t, e, "vision", sel("mpi-b"), "WaitingForMembers", false)

	released := time.Now()
	del("mpi-a")
	b := e.waitPods(t, "vision", sel("mpi-b"), 4, 90*time.Second, "Running", running)
	check("mpi-b", b)
	t.Logf("MPIJob mpi-b bound whole after mpi-a was deleted: from the delete's start: %v", clockB.times(t, released, b))

	// A gang whose PodGroup wants more pods than the operator makes
	// (runPolicy.schedulingPolicy.minAvailable 5 for 4 pods, the README's
	// "leave it unset") waits with none bound, though the rack is free,
	// and its pods are told why (WaitingForMembers) instead of silence.
	del("mpi-b")
	e.waitPods(t, "vision", "training.kubeflow.org/operator-name=mpijob-controller", 0, 60*time.Second, "left", func(v1.Pod) bool { return true })
	t.Cleanup(func() { del("mpi-c") })
	c := sample(t, e, "mpijob.yaml", "pi", "mpi-c")
	policy := "  runPolicy:\n    cleanPodPolicy: Running\n"
	require.Contains(t, c, policy)
	cmdIn(t, e, strings.Replace(c, policy, policy+"    schedulingPolicy:\n      minAvailable: 5\n", 1), "apply", "-f", "-")
	e.waitPods(t, "vision", sel("mpi-c"), 4, 60*time.Second, "created by the operator", func(v1.Pod) bool { return true })
	pg = e.kubectl(t, "get", "podgroups.scheduling.x-k8s.io", "-n", "vision", "mpi-c", "-o", "jsonpath={.spec.minMember}")
	require.Equal(t, "5", pg, "training-operator's PodGroup for mpi-c takes minAvailable")
	deadline = time.Now().Add(8 * time.Second) // the event comes 5 s after a member is seen
	for time.Now().Before(deadline) {
		for _, p := range e.livePods(t, "vision", sel("mpi-c")) {
			require.Empty(t, p.Spec.NodeName, "pod %s of mpi-c was bound with 4 of its gang's 5 members", p.Name)
		}
		time.Sleep(300 * time.Millisecond)
	}
	requireEvent(t, e, "vision", sel("mpi-c"), "WaitingForMembers", true)
}

// requireEvent checks whether any pod matching selector got an event of
// reason (want true) or none did (want false).
func requireEvent(t *testing.T, e *env, ns, selector, reason string, want bool) {
	t.Helper()
	names := map[string]bool{}
	for _, p := range e.livePods(t, ns, selector) {
		names[p.Name] = true
	}
	evs, err := e.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	require.NoError(t, err)
	var hit []string
	for _, ev := range evs.Items {
		if ev.InvolvedObject.Kind == "Pod" && names[ev.InvolvedObject.Name] {
			hit = append(hit, ev.InvolvedObject.Name+": "+ev.Message)
		}
	}
	sort.Strings(hit)
	if want {
		require.NotEmpty(t, hit, "no %s event on the pods of %s", reason, selector)
		t.Logf("%s: %s", reason, hit[0])
	} else {
		require.Empty(t, hit, "%s events on the pods of %s", reason, selector)
	}
}

// envFrameworks makes the framework tests that need their own make target
// (TestKubeRay) fail, rather than skip, when their operator or the profile
// name they need is missing (make e2e-frameworks sets it).
const envFrameworks = "HIVESCHED_E2E_FRAMEWORKS"

// kubeRaySchedulerName is the schedulerName KubeRay's scheduler-plugins mode
// writes into every pod (fixed in its code).
const kubeRaySchedulerName = "scheduler-plugins-scheduler"

// profileName is the schedulerName of the running local scheduler's
// profile (hack/local-up.sh writes it, HIVESCHED_SCHEDULER_NAME).
func profileName(t *testing.T, e *env) string {
	raw, err := os.ReadFile(filepath.Join(util.LocalDir(e.root), "scheduler-config.yaml"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^- schedulerName: (\S+)$`).FindStringSubmatch(string(raw))
	require.NotNil(t, m, "no profile in the local scheduler's config")
	return m[1]
}

// kubeRayReady skips (or, with envFrameworks set, fails) a KubeRay test
// unless KubeRay's operator runs and the local hivesched profile answers to
// the schedulerName KubeRay writes into its pods.
func kubeRayReady(t *testing.T, e *env) {
	t.Helper()
	operatorReady(t, e, "KubeRay's operator", "KUBERAY_PROBE_PORT", envFrameworks, "hack/local-kuberay.sh (make e2e-frameworks)")
	if name := profileName(t, e); name != kubeRaySchedulerName {
		msg := fmt.Sprintf("the local hivesched profile is %q; KubeRay's pods ask for %q: bring the cluster up with HIVESCHED_SCHEDULER_NAME=%s (make e2e-frameworks does)", name, kubeRaySchedulerName, kubeRaySchedulerName)
		if os.Getenv(envFrameworks) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// TestKubeRay (issue 39): manifests/samples/raycluster.yaml through KubeRay
// v1.5.0's operator in its scheduler-plugins mode (hack/local-kuberay.sh):
// one scheduler-plugins PodGroup of minMember head + workers, every pod's
// schedulerName overwritten with scheduler-plugins-scheduler, which the local
// hivesched profile answers to (HIVESCHED_SCHEDULER_NAME). A CPU head + 3 x 8
// GPU workers binds whole (the head with no cells, the workers in
// vc-vision's rack); a second RayCluster waits with none of its pods bound,
// its head included, and binds whole once the first is deleted.
func TestKubeRay(t *testing.T) {
	e := setup(t)
	kubeRayReady(t, e)
	racks := topCells(t, e.root)
	sel := func(name string) string { return "ray.io/cluster=" + name }
	del := func(names ...string) {
		e.kubectl(t, append([]string{"delete", "raycluster", "-n", "vision", "--ignore-not-found", "--wait=true"}, names...)...)
	}
	// A RayCluster's pods go after it (the garbage collector): wait for
	// them too, as they hold their cells until they are gone.
	delAndWait := func(names ...string) {
		del(names...)
		for _, n := range names {
			e.waitPods(t, "vision", sel(n), 0, 60*time.Second, "left", func(v1.Pod) bool { return true })
		}
	}
	delAndWait("ray-a", "ray-b")
	t.Cleanup(func() { del("ray-a", "ray-b") })

	check := func(name string, got []v1.Pod) {
		checkGang(t, racks, "RayCluster "+name, got, kubeRaySchedulerName, name, func(p v1.Pod) bool {
			return p.Labels["ray.io/node-type"] == "head"
		})
	}

	clockA := startBindClock(t, e, "vision", sel("ray-a"))
	created := time.Now()
	cmdIn(t, e, sample(t, e, "raycluster.yaml", "ray", "ray-a"), "apply", "-f", "-")
	a := e.waitPods(t, "vision", sel("ray-a"), 4, 90*time.Second, "Running", running)
	timesA := clockA.times(t, created, a)
	check("ray-a", a)
	pg := e.kubectl(t, "get", "podgroups.scheduling.x-k8s.io", "-n", "vision", "ray-a", "-o", "jsonpath={.spec.minMember}")
	require.Equal(t, "4", pg, "KubeRay's PodGroup for ray-a: head + 3 workers")
	t.Logf("RayCluster ray-a (CPU head + 3 x 8 GPUs) bound whole; from its create: %v", timesA)

	clockB := startBindClock(t, e, "vision", sel("ray-b"))
	cmdIn(t, e, sample(t, e, "raycluster.yaml", "ray", "ray-b"), "apply", "-f", "-")
	e.waitPods(t, "vision", sel("ray-b"), 4, 60*time.Second, "created by the operator", func(v1.Pod) bool { return true })
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range e.livePods(t, "vision", sel("ray-b")) {
			require.Empty(t, p.Spec.NodeName, "pod %s of ray-b was bound while ray-a holds vc-vision's rack: the gang must wait whole", p.Name)
		}
		time.Sleep(300 * time.Millisecond)
	}
	requireEvent(t, e, "vision", sel("ray-b"), "WaitingForMembers", false)

	released := time.Now()
	delAndWait("ray-a")
	b := e.waitPods(t, "vision", sel("ray-b"), 4, 90*time.Second, "Running", running)
	check("ray-b", b)
	t.Logf("RayCluster ray-b bound whole after ray-a was deleted: from the delete's start: %v", clockB.times(t, released, b))
}

// rayScale does to worker group 0 of RayCluster vision/name what Ray's
// autoscaler does to scale it: sets its replicas and, unless workersToDelete
// is nil, its scaleStrategy.workersToDelete (the pods KubeRay is to delete:
// with enableInTreeAutoscaling it deletes no worker on a lower replicas
// alone). It returns when the patch was sent.
func rayScale(t *testing.T, e *env, name string, replicas int, workersToDelete []string) time.Time {
	t.Helper()
	ops := []map[string]any{{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": replicas}}
	if workersToDelete != nil {
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
			"value": map[string]any{"workersToDelete": workersToDelete}})
	}
	raw, err := json.Marshal(ops)
	require.NoError(t, err)
	at := time.Now()
	e.kubectl(t, "patch", "raycluster", "-n", "vision", name, "--type=json", "-p", string(raw))
	return at
}

// waitMembers waits until AffinityGroup ns/name shows members (its MEMBERS
// column) in phase Running, and returns it.
func (e *env) waitMembers(t *testing.T, ns, name, members string, timeout time.Duration) *hv1.AffinityGroup {
	t.Helper()
	return e.waitAG(t, ns, name, fmt.Sprintf("Running with members %q", members), timeout, func(ag *hv1.AffinityGroup) bool {
		return ag.Status.MembersSummary == members && ag.Status.Phase == hv1.AffinityGroupRunning
	})
}

// podEvents are the reasons and messages of the events about pod ns/name.
func (e *env) podEvents(t *testing.T, ns, name string) string {
	list, err := e.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	require.NoError(t, err)
	var out []string
	for _, ev := range list.Items {
		out = append(out, "\n    "+ev.Reason+": "+ev.Message)
	}
	return strings.Join(out, "")
}

// waitPodGone waits until pod p (its UID) is gone and returns when it was
// first seen gone.
func (e *env) waitPodGone(t *testing.T, p v1.Pod, timeout time.Duration) time.Time {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := e.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && got.UID != p.UID, nil
	})
	require.NoError(t, err, "pod %s was not deleted", p.Name)
	return time.Now()
}

// requireKept checks for d that the pods matching selector are exactly
// keep (the same UIDs), every one bound, Running and not being deleted.
func (e *env) requireKept(t *testing.T, ns, selector string, keep []v1.Pod, d time.Duration) {
	t.Helper()
	want := map[types.UID]string{}
	for _, p := range keep {
		want[p.UID] = p.Name
	}
	// events are the kept pods' events (they outlive the pods).
	events := func() string {
		var b strings.Builder
		for _, k := range keep {
			fmt.Fprintf(&b, "\n  %s's events:%s", k.Name, e.podEvents(t, ns, k.Name))
		}
		return b.String()
	}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		list, err := e.kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
		require.NoError(t, err)
		seen := 0
		for _, p := range list.Items {
			if _, ok := want[p.UID]; !ok {
				require.Failf(t, "a pod came or was replaced", "pod %s (%s) is not one of %v; pods:%s%s", p.Name, p.UID, want, podStates(list.Items), events())
			}
			seen++
			require.Nil(t, p.DeletionTimestamp, "pod %s is being deleted:%s", p.Name, events())
			require.True(t, running(p), "pod %s is not Running:%s", p.Name, podStates(list.Items))
		}
		require.Equal(t, len(want), seen, "a pod went: want %v, have:%s%s", want, podStates(list.Items), events())
	}
}

// boundAfter logs, for each pod, how long after from the bind clock saw
// it bound, and returns the longest.
func (c *bindClock) boundAfter(t *testing.T, from time.Time, got []v1.Pod) time.Duration {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var last time.Duration
	for _, p := range got {
		at, ok := c.bound[p.Name]
		require.True(t, ok, "pod %s is bound but the watch never saw it bound", p.Name)
		t.Logf("  %s bound %v after the patch", p.Name, at.Sub(from).Round(time.Millisecond))
		last = max(last, at.Sub(from))
	}
	return last
}

// rayAutoscalingCluster applies manifests/samples/raycluster-autoscaling.yaml
// as RayCluster vision/name (gone first, with every RayCluster pod left in
// vision: TestKubeRay's hold vc-vision's rack until they are gone) and
// waits for its minimum, the head and one worker, to run; it checks
// KubeRay's PodGroup and what hivesched recorded, and returns the head and
// the worker.
func rayAutoscalingCluster(t *testing.T, e *env, name string) (clock *bindClock, head, worker v1.Pod) {
	t.Helper()
	sel := "ray.io/cluster=" + name
	del := func() {
		e.kubectl(t, "delete", "raycluster", "-n", "vision", "--ignore-not-found", "--wait=true", name)
	}
	del()
	e.waitPods(t, "vision", "ray.io/is-ray-node=yes", 0, 90*time.Second, "left", func(v1.Pod) bool { return true })
	t.Cleanup(del)

	clock = startBindClock(t, e, "vision", sel)
	created := time.Now()
	cmdIn(t, e, sample(t, e, "raycluster-autoscaling.yaml", "ray-auto", name), "apply", "-f", "-")
	minimum := e.waitPods(t, "vision", sel, 2, 90*time.Second, "Running", running)
	times := clock.times(t, created, minimum)
	for _, p := range minimum {
		require.Equal(t, kubeRaySchedulerName, p.Spec.SchedulerName, "pod %s", p.Name)
		require.Equal(t, name, p.Labels["scheduling.x-k8s.io/pod-group"], "pod %s", p.Name)
		if p.Labels["ray.io/node-type"] == "head" {
			head = p
		} else {
			worker = p
		}
	}
	require.NotEmpty(t, head.Name, "no head among %s", podStates(minimum))
	require.NotEmpty(t, worker.Name, "no worker among %s", podStates(minimum))
	noCells := gangMembers(t, minimum, "vc-vision", 8)
	require.Len(t, noCells, 1, "the head holds no cells")
	require.Equal(t, head.Name, noCells[0].Name, "the member without cells is the head")
	rec, err := placement.Decode(worker.Annotations[placement.Annotation])
	require.NoError(t, err)
	require.Equal(t, "vision/"+name, rec.Group, "the minimum's worker")
	require.Empty(t, rec.ExtraOf, "the minimum's worker is no extra")
	pg := e.kubectl(t, "get", "podgroups.scheduling.x-k8s.io", "-n", "vision", name, "-o", "jsonpath={.spec.minMember}")
	require.Equal(t, "2", pg, "KubeRay's PodGroup for %s: head + replicas (1, within [minReplicas 1, maxReplicas 3])", name)
	e.waitMembers(t, "vision", name, "2/2", 30*time.Second)
	t.Logf("RayCluster %s's minimum (CPU head + 1 x 8 GPUs, PodGroup minMember 2) bound whole; from its create: %v", name, times)
	return clock, head, worker
}

// rayScaleUp scales RayCluster vision/name from its minimum (head, worker)
// to replicas workers and checks that the new ones bind as extra pods of
// the gang, alone, while the minimum runs on; it returns them.
func rayScaleUp(t *testing.T, e *env, clock *bindClock, name string, replicas int, head, worker v1.Pod) []v1.Pod {
	t.Helper()
	sel := "ray.io/cluster=" + name
	patched := rayScale(t, e, name, replicas, nil)
	all := e.waitPods(t, "vision", sel, 1+replicas, 90*time.Second, "Running", running)
	var extras []v1.Pod
	minimum := 0
	for _, p := range all {
		if p.UID == head.UID || p.UID == worker.UID {
			minimum++
			continue
		}
		extras = append(extras, p)
	}
	require.Equal(t, 2, minimum, "the minimum's pods run on, the same ones (head %s, worker %s):%s", head.Name, worker.Name, podStates(all))
	for _, p := range extras {
		require.Equal(t, "worker", p.Labels["ray.io/node-type"], "pod %s", p.Name)
		rec, err := placement.Decode(p.Annotations[placement.Annotation])
		require.NoError(t, err, "pod %s's placement record", p.Name)
		require.Equal(t, "vision/"+name, rec.ExtraOf, "pod %s's placement record names its gang: %s", p.Name, p.Annotations[placement.Annotation])
		require.Contains(t, p.Annotations[placement.Annotation], `"extraOf":"vision/`+name+`"`)
		require.Equal(t, "vision/"+name+"+"+p.Name, rec.Group, "pod %s is a one-pod group of its own", p.Name)
		require.Equal(t, "vc-vision", rec.VirtualCluster, "pod %s", p.Name)
		require.Len(t, rec.LeafCellIndices, 8, "pod %s", p.Name)
	}
	t.Logf("scaled %s to %d workers: %d extra pods bound, the last %v after the patch", name, replicas, len(extras), clock.boundAfter(t, patched, extras).Round(time.Millisecond))
	pg := e.kubectl(t, "get", "podgroups.scheduling.x-k8s.io", "-n", "vision", name, "-o", "jsonpath={.spec.minMember}")
	require.Equal(t, "2", pg, "KubeRay leaves its PodGroup as it created it")
	e.waitMembers(t, "vision", name, fmt.Sprintf("2/2 min, +%d/%d extra", len(extras), len(extras)), 30*time.Second)
	return extras
}

// TestKubeRayAutoscaling (issue 46): manifests/samples/raycluster-autoscaling.yaml
// through KubeRay v1.5.0's operator (hack/local-kuberay.sh), scaled as Ray's
// autoscaler scales it. KubeRay makes the PodGroup once, of minMember head +
// replicas (2), and never updates it: hivesched places that minimum whole;
// when replicas goes from 1 to 3 the 2 new workers bind alone, as extra
// pods of the gang ("extraOf"); when it goes back to 2 naming one of them
// in workersToDelete, KubeRay deletes that one and the gang runs on, its
// other pods (the head included) the same ones, untouched.
func TestKubeRayAutoscaling(t *testing.T) {
	e := setup(t)
	kubeRayReady(t, e)
	const name = "ray-auto"
	sel := "ray.io/cluster=" + name
	clock, head, worker := rayAutoscalingCluster(t, e, name)
	extras := rayScaleUp(t, e, clock, name, 3, head, worker)
	t.Logf("kubectl get ag -n vision:\n%s", e.kubectl(t, "get", "ag", "-n", "vision", name))

	// Ray's autoscaler removes an idle worker: replicas 2 and the pod in
	// workersToDelete, one patch.
	gone, kept := extras[0], extras[1]
	patched := rayScale(t, e, name, 2, []string{gone.Name})
	at := e.waitPodGone(t, gone, 60*time.Second)
	t.Logf("scaled %s to 2 workers: KubeRay deleted %s (an extra), gone %v after the patch", name, gone.Name, at.Sub(patched).Round(time.Millisecond))
	keep := []v1.Pod{head, worker, kept}
	// Longer than hivesched waits before it ends a gang that lost a member
	// (memberloss.go's lossSettle, 2 s).
	e.requireKept(t, "vision", sel, keep, 6*time.Second)
	e.waitMembers(t, "vision", name, "2/2 min, +1/1 extra", 30*time.Second)
	requireEvent(t, e, "vision", sel, "GangMemberLost", false)

	// The autoscaler clears workersToDelete once its pods are gone: KubeRay
	// makes no new worker (2 run), and nothing moves.
	rayScale(t, e, name, 2, []string{})
	e.requireKept(t, "vision", sel, keep, 3*time.Second)
	t.Logf("kubectl get ag -n vision:\n%s", e.kubectl(t, "get", "ag", "-n", "vision", name))
}

// TestKubeRayAutoscalingPromotion (issue 46): as TestKubeRayAutoscaling, but
// Ray's autoscaler removes the worker of the gang's minimum (any idle
// worker may be the one it picks) while an extra of its size runs: the
// extra takes its place (PromotedToMinimum, its placement record naming the
// gang without extraOf) and the gang runs on, its head and the promoted
// worker the same pods.
func TestKubeRayAutoscalingPromotion(t *testing.T) {
	e := setup(t)
	kubeRayReady(t, e)
	const name = "ray-promo"
	sel := "ray.io/cluster=" + name
	clock, head, worker := rayAutoscalingCluster(t, e, name)
	extra := rayScaleUp(t, e, clock, name, 2, head, worker)[0]

	patched := rayScale(t, e, name, 1, []string{worker.Name})
	at := e.waitPodGone(t, worker, 60*time.Second)
	t.Logf("scaled %s to 1 worker: KubeRay deleted %s (the minimum's worker), gone %v after the patch", name, worker.Name, at.Sub(patched).Round(time.Millisecond))
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := e.kube.CoreV1().Pods("vision").Get(ctx, extra.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		rec := got.Annotations[placement.Annotation]
		return strings.Contains(rec, `"group":"vision/`+name+`"`) && !strings.Contains(rec, "extraOf"), nil
	})
	require.NoError(t, err, "the promoted extra's record never named the gang; its events:%s", e.podEvents(t, "vision", extra.Name))
	require.Contains(t, e.podEvents(t, "vision", extra.Name), "PromotedToMinimum")
	e.requireKept(t, "vision", sel, []v1.Pod{head, extra}, 6*time.Second)
	e.waitMembers(t, "vision", name, "2/2", 30*time.Second)
	requireEvent(t, e, "vision", sel, "GangMemberLost", false)
}

// jobSetSample is manifests/samples/jobset.yaml with its PodGroup, JobSet
// and pod templates' group renamed to name, and its pods running until
// deleted: kwok completes a Job's pods after 10 s (hack/kwok-pod-complete.yaml),
// which would free the first gang's cells while the test still checks that
// the second one waits.
func jobSetSample(t *testing.T, e *env, name string) string {
	raw, err := os.ReadFile(filepath.Join(e.root, "manifests", "samples", "jobset.yaml"))
	require.NoError(t, err)
	s := string(raw)
	for _, line := range []string{"\n  name: train\n", "\n              scheduling.x-k8s.io/pod-group: train\n"} {
		require.Equal(t, 2, strings.Count(s, line), "jobset.yaml: %q twice", line)
		s = strings.ReplaceAll(s, line, strings.TrimSuffix(line, "train\n")+name+"\n")
	}
	meta := "\n          metadata:\n            labels:\n"
	require.Equal(t, 2, strings.Count(s, meta), "jobset.yaml: two pod templates")
	return strings.ReplaceAll(s, meta, "\n          metadata:\n            annotations: {pod-complete.stage.kwok.x-k8s.io/delay: 10m}\n            labels:\n")
}

// TestJobSet (issue 39): manifests/samples/jobset.yaml through JobSet
// v0.12.0's controller (hack/local-jobset.sh) and the kube-controller-
// manager's Job controller: the JobSet's two replicated jobs (a coordinator
// without GPUs, 3 x 8 GPU workers) are one gang through the PodGroup their
// templates name. It binds whole (the coordinator with no cells, the
// workers in vc-vision's rack); a second JobSet waits with none of its pods
// bound, its coordinator included, and binds whole once the first is
// deleted. A JobSet with exclusive placement deadlocks its gang: shown.
func TestJobSet(t *testing.T) {
	e := setup(t)
	operatorReady(t, e, "JobSet's controller", "JOBSET_PROBE_PORT", envFrameworks, "hack/local-jobset.sh (make e2e-frameworks)")
	racks := topCells(t, e.root)
	sel := func(name string) string { return "jobset.sigs.k8s.io/jobset-name=" + name }
	del := func(names ...string) {
		e.kubectl(t, append([]string{"delete", "jobset", "-n", "vision", "--ignore-not-found", "--wait=true"}, names...)...)
		e.kubectl(t, append([]string{"delete", "podgroups.scheduling.x-k8s.io", "-n", "vision", "--ignore-not-found", "--wait=true"}, names...)...)
	}
	delAndWait := func(names ...string) {
		del(names...)
		for _, n := range names {
			e.waitPods(t, "vision", sel(n), 0, 60*time.Second, "left", func(v1.Pod) bool { return true })
		}
	}
	delAndWait("js-a", "js-b", "js-x")
	t.Cleanup(func() { del("js-a", "js-b") })

	check := func(name string, got []v1.Pod) {
		checkGang(t, racks, "JobSet "+name, got, "hivesched", name, func(p v1.Pod) bool {
			return p.Labels["jobset.sigs.k8s.io/replicatedjob-name"] == "coordinator"
		})
	}

	clockA := startBindClock(t, e, "vision", sel("js-a"))
	created := time.Now()
	cmdIn(t, e, jobSetSample(t, e, "js-a"), "apply", "-f", "-")
	a := e.waitPods(t, "vision", sel("js-a"), 4, 90*time.Second, "Running", running)
	timesA := clockA.times(t, created, a)
	check("js-a", a)
	t.Logf("JobSet js-a (CPU coordinator + 3 x 8 GPUs) bound whole; from its create: %v", timesA)

	clockB := startBindClock(t, e, "vision", sel("js-b"))
	cmdIn(t, e, jobSetSample(t, e, "js-b"), "apply", "-f", "-")
	e.waitPods(t, "vision", sel("js-b"), 4, 60*time.Second, "created by the Job controller", func(v1.Pod) bool { return true })
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range e.livePods(t, "vision", sel("js-b")) {
			require.Empty(t, p.Spec.NodeName, "pod %s of js-b was bound while js-a holds vc-vision's rack: the gang must wait whole", p.Name)
		}
		time.Sleep(300 * time.Millisecond)
	}
	requireEvent(t, e, "vision", sel("js-b"), "WaitingForMembers", false)

	released := time.Now()
	delAndWait("js-a")
	b := e.waitPods(t, "vision", sel("js-b"), 4, 90*time.Second, "Running", running)
	check("js-b", b)
	t.Logf("JobSet js-b bound whole after js-a was deleted: from the delete's start: %v", clockB.times(t, released, b))

	// JobSet's exclusive placement deadlocks a gang: its pod webhook
	// refuses a Job's follower pods until the leader pod is scheduled, and
	// the gang binds no pod before all its pods exist. A legitimate job
	// (one worker Job of 2 pods x 4 GPUs, exclusive on a node, + the
	// coordinator) never gets its follower: none binds, the gang is told
	// it waits for its members, and so it stays (the README says not to).
	del("js-b")
	t.Cleanup(func() { del("js-x") })
	cmdIn(t, e, exclusiveJobSet("js-x"), "apply", "-f", "-")
	deadline = time.Now().Add(8 * time.Second) // the event comes 5 s after a member is seen
	for time.Now().Before(deadline) {
		for _, p := range e.livePods(t, "vision", sel("js-x")) {
			require.Empty(t, p.Spec.NodeName, "pod %s of js-x was bound without its gang's follower", p.Name)
		}
		time.Sleep(300 * time.Millisecond)
	}
	leaders := e.livePods(t, "vision", sel("js-x"))
	require.Len(t, leaders, 2, "the coordinator and the workers' leader exist, the follower is refused: %s", podStates(leaders))
	requireEvent(t, e, "vision", sel("js-x"), "WaitingForMembers", true)
}

// exclusiveJobSet is a JobSet with alpha.jobset.sigs.k8s.io/exclusive-topology
// (each Job alone on a node) whose worker Job has a leader and a follower
// pod, ganged with its coordinator by a PodGroup of minMember 3.
func exclusiveJobSet(name string) string {
	return fmt.Sprintf(`apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: %[1]s, namespace: vision, labels: {%[2]s: vc-vision}}
spec: {minMember: 3}
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: %[1]s
  namespace: vision
  annotations: {alpha.jobset.sigs.k8s.io/exclusive-topology: kubernetes.io/hostname}
spec:
  replicatedJobs:
  - name: coordinator
    template:
      spec:
        template:
          metadata: {labels: {scheduling.x-k8s.io/pod-group: %[1]s}}
          spec:
            schedulerName: hivesched
            restartPolicy: Never
            containers: [{name: c, image: docker.io/library/python:3.12, resources: {requests: {cpu: 500m}}}]
  - name: workers
    template:
      spec:
        parallelism: 2
        completions: 2
        completionMode: Indexed
        template:
          metadata: {labels: {scheduling.x-k8s.io/pod-group: %[1]s}}
          spec:
            schedulerName: hivesched
            restartPolicy: Never
            containers: [{name: w, image: docker.io/library/python:3.12, resources: {limits: {nvidia.com/gpu: 4}}}]
`, name, hivesched.LabelVirtualCluster)
}

// TestTrainer (issue 39): manifests/samples/trainjob.yaml through Kubeflow
// Trainer v2.3.0's controller manager (hack/local-trainer.sh) and JobSet's
// controller: a TrainJob of a dataset initializer without GPUs and 3 x 8
// GPU training nodes, one PodGroup (Trainer's coscheduling policy) of
// minMember 4. It binds whole (the initializer with no cells, the nodes in
// vc-vision's rack); a second TrainJob waits with none of its pods bound,
// its initializer included, and binds whole once the first is deleted.
func TestTrainer(t *testing.T) {
	e := setup(t)
	operatorReady(t, e, "Kubeflow Trainer's controller manager", "TRAINER_PROBE_PORT", envFrameworks, "hack/local-trainer.sh (make e2e-frameworks)")
	racks := topCells(t, e.root)
	sel := func(name string) string { return "jobset.sigs.k8s.io/jobset-name=" + name }
	del := func(names ...string) {
		e.kubectl(t, append([]string{"delete", "trainjobs.trainer.kubeflow.org", "-n", "vision", "--ignore-not-found", "--wait=true"}, names...)...)
	}
	delAndWait := func(names ...string) {
		del(names...)
		for _, n := range names {
			e.waitPods(t, "vision", sel(n), 0, 60*time.Second, "left", func(v1.Pod) bool { return true })
		}
	}
	delAndWait("tj-a", "tj-b")
	t.Cleanup(func() { del("tj-a", "tj-b") })
	// The pods run until deleted: kwok would complete a Job's pods after
	// 10 s (hack/kwok-pod-complete.yaml), freeing the first gang's cells
	// while the second one is checked to wait.
	job := func(name string) string {
		s := sample(t, e, "trainjob.yaml", "train", name)
		meta := "              metadata:\n                labels:\n"
		require.Equal(t, 2, strings.Count(s, meta), "trainjob.yaml: two pod templates")
		return strings.ReplaceAll(s, meta, "              metadata:\n                annotations: {pod-complete.stage.kwok.x-k8s.io/delay: 10m}\n                labels:\n")
	}
	check := func(name string, got []v1.Pod) {
		checkGang(t, racks, "TrainJob "+name, got, "hivesched", name, func(p v1.Pod) bool {
			return p.Labels["jobset.sigs.k8s.io/replicatedjob-name"] == "dataset-initializer"
		})
	}

	clockA := startBindClock(t, e, "vision", sel("tj-a"))
	created := time.Now()
	cmdIn(t, e, job("tj-a"), "apply", "-f", "-")
	a := e.waitPods(t, "vision", sel("tj-a"), 4, 90*time.Second, "Running", running)
	timesA := clockA.times(t, created, a)
	check("tj-a", a)
	pg := e.kubectl(t, "get", "podgroups.scheduling.x-k8s.io", "-n", "vision", "tj-a", "-o", "jsonpath={.spec.minMember}")
	require.Equal(t, "4", pg, "Trainer's PodGroup for tj-a: initializer + 3 nodes")
	t.Logf("TrainJob tj-a (CPU initializer + 3 x 8 GPUs) bound whole; from its create: %v", timesA)

	clockB := startBindClock(t, e, "vision", sel("tj-b"))
	cmdIn(t, e, job("tj-b"), "apply", "-f", "-")
	e.waitPods(t, "vision", sel("tj-b"), 4, 60*time.Second, "created by the Job controller", func(v1.Pod) bool { return true })
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range e.livePods(t, "vision", sel("tj-b")) {
			require.Empty(t, p.Spec.NodeName, "pod %s of tj-b was bound while tj-a holds vc-vision's rack: the gang must wait whole", p.Name)
		}
		time.Sleep(300 * time.Millisecond)
	}
	requireEvent(t, e, "vision", sel("tj-b"), "WaitingForMembers", false)

	released := time.Now()
	delAndWait("tj-a")
	b := e.waitPods(t, "vision", sel("tj-b"), 4, 90*time.Second, "Running", running)
	check("tj-b", b)
	t.Logf("TrainJob tj-b bound whole after tj-a was deleted: from the delete's start: %v", clockB.times(t, released, b))
}

// TestLeaderWorkerSet (issue 39): manifests/samples/leaderworkerset.yaml
// through LeaderWorkerSet v0.8.0's controller (hack/local-lws.sh) and the
// kube-controller-manager's StatefulSet controller: each replica group (a
// CPU leader + 3 x 8 GPU workers) is its own gang, named after its leader,
// from the labels LWS puts on its pods. Of the two groups, which together
// want 48 of vc-vision's 32 GPUs, one binds whole (the leader with no
// cells, the workers in vc-vision's rack) and the other waits with none of
// its pods bound, its leader included: one gang across replicas would bind
// nothing. A worker taken from the bound group restarts that group whole
// (LWS's RecreateGroupOnPodRestart and hivesched's member loss), after
// which again one group is bound whole and the other waits whole.
func TestLeaderWorkerSet(t *testing.T) {
	e := setup(t)
	operatorReady(t, e, "LeaderWorkerSet's controller", "LWS_PROBE_PORT", envFrameworks, "hack/local-lws.sh (make e2e-frameworks)")
	racks := topCells(t, e.root)
	const name = "lws-a"
	sel := "leaderworkerset.sigs.k8s.io/name=" + name
	groupSel := func(i int) string { return fmt.Sprintf("%s,leaderworkerset.sigs.k8s.io/group-index=%d", sel, i) }
	del := func() {
		e.kubectl(t, "delete", "leaderworkerset", "-n", "vision", "--ignore-not-found", "--wait=true", name)
	}
	del()
	e.waitPods(t, "vision", sel, 0, 60*time.Second, "left", func(v1.Pod) bool { return true })
	t.Cleanup(del)

	isLeader := func(p v1.Pod) bool { return p.Labels["leaderworkerset.sigs.k8s.io/worker-index"] == "0" }
	// placed returns the bound group's pods (checked whole, as its own
	// gang) after checking that the other group has none of its 4 pods
	// bound for 5 s.
	placed := func(what string) (int, []v1.Pod) {
		var bound []v1.Pod
		deadline := time.Now().Add(90 * time.Second)
		for {
			pods := e.livePods(t, "vision", sel)
			bound = bound[:0]
			for _, p := range pods {
				if p.Spec.NodeName != "" && p.Status.Phase == v1.PodRunning {
					bound = append(bound, p)
				}
			}
			if len(pods) == 8 && len(bound) == 4 {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s: want one group of 4 bound and 8 pods, have %s", what, podStates(pods))
			time.Sleep(300 * time.Millisecond)
		}
		group := bound[0].Labels["leaderworkerset.sigs.k8s.io/group-index"]
		for _, p := range bound {
			require.Equal(t, group, p.Labels["leaderworkerset.sigs.k8s.io/group-index"], "%s: pods of two replica groups bound: %s", what, podStates(bound))
		}
		checkGang(t, racks, fmt.Sprintf("LeaderWorkerSet %s group %s", name, group), bound, "hivesched", "", isLeader)
		rec, err := placement.Decode(bound[0].Annotations[placement.Annotation])
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("vision/%s-%s", name, group), rec.Group, "the gang is named after its leader")
		var i int
		_, err = fmt.Sscan(group, &i)
		require.NoError(t, err)
		other := groupSel(1 - i)
		until := time.Now().Add(5 * time.Second)
		for time.Now().Before(until) {
			waiting := e.livePods(t, "vision", other)
			require.Len(t, waiting, 4, "%s: the other group's pods", what)
			for _, p := range waiting {
				require.Empty(t, p.Spec.NodeName, "%s: pod %s of the other group was bound while group %s holds vc-vision's rack: it must wait whole", what, p.Name, group)
			}
			time.Sleep(300 * time.Millisecond)
		}
		return i, bound
	}

	clock := startBindClock(t, e, "vision", sel)
	created := time.Now()
	cmdIn(t, e, sample(t, e, "leaderworkerset.yaml", "serve", name), "apply", "-f", "-")
	first, bound := placed("after create")
	t.Logf("LeaderWorkerSet %s: group %d (CPU leader + 3 x 8 GPUs) bound whole, the other waits whole; from its create: %v", name, first, clock.times(t, created, bound))

	// A worker of the bound group is taken: the group restarts whole.
	var worker string
	for _, p := range bound {
		if !isLeader(p) {
			worker = p.Name
			break
		}
	}
	lost := map[string]bool{}
	for _, p := range bound {
		lost[string(p.UID)] = true
	}
	e.kubectl(t, "delete", "pod", "-n", "vision", "--wait=false", worker)
	deadline := time.Now().Add(60 * time.Second)
	for {
		left := 0
		for _, p := range e.livePods(t, "vision", sel) {
			if lost[string(p.UID)] {
				left++
			}
		}
		if left == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d pods of the bound group outlived the loss of its worker %s", left, worker)
		time.Sleep(300 * time.Millisecond)
	}
	again, _ := placed("after a worker was lost")
	t.Logf("LeaderWorkerSet %s: after worker %s of group %d was deleted, group %d bound whole and the other waits whole", name, worker, first, again)

	// startupPolicy LeaderReady: LWS makes the workers only once the
	// leader runs, and the gang binds no leader alone. The leader waits,
	// unbound, and is told why and what to change.
	del()
	e.waitPods(t, "vision", sel, 0, 60*time.Second, "left", func(v1.Pod) bool { return true })
	ready := sample(t, e, "leaderworkerset.yaml", "serve", name)
	require.Contains(t, ready, "startupPolicy: LeaderCreated")
	cmdIn(t, e, strings.Replace(ready, "startupPolicy: LeaderCreated", "startupPolicy: LeaderReady", 1), "apply", "-f", "-")
	until := time.Now().Add(8 * time.Second) // the event comes 5 s after a member is seen
	for time.Now().Before(until) {
		for _, p := range e.livePods(t, "vision", sel) {
			require.Empty(t, p.Spec.NodeName, "pod %s was bound without its group's workers", p.Name)
			require.True(t, isLeader(p), "LWS made worker %s before its leader ran", p.Name)
		}
		time.Sleep(300 * time.Millisecond)
	}
	requireEvent(t, e, "vision", sel, "WaitingForMembers", true)
	evs := e.kubectl(t, "get", "events", "-n", "vision", "--field-selector", "reason=WaitingForMembers,involvedObject.name="+name+"-0", "-o", "jsonpath={.items[*].message}")
	require.Contains(t, evs, "use startupPolicy LeaderCreated", "the leader is told what to change")
}

// kueueSample is manifests/samples/kueue.yaml with its Job and the Job's
// gang renamed to name, and its pods running until deleted (kwok would
// complete a Job's pods after 10 s, freeing the queue's quota while the
// test still checks that the second Job waits).
func kueueSample(t *testing.T, e *env, name string) string {
	raw, err := os.ReadFile(filepath.Join(e.root, "manifests", "samples", "kueue.yaml"))
	require.NoError(t, err)
	s := string(raw)
	for _, line := range []string{"\n  name: llm-pretrain\n", "\n        hivesched.io/affinity-group: llm-pretrain\n"} {
		require.Equal(t, 1, strings.Count(s, line), "kueue.yaml: %q once", line)
		s = strings.Replace(s, line, strings.TrimSuffix(line, "llm-pretrain\n")+name+"\n", 1)
	}
	ann := "\n      annotations:\n"
	require.Equal(t, 1, strings.Count(s, ann), "kueue.yaml: one pod template")
	return strings.Replace(s, ann, ann+"        pod-complete.stage.kwok.x-k8s.io/delay: 10m\n", 1)
}

// TestKueue (issue 39): Kueue v0.17.0's controller (hack/local-kueue.sh)
// in front of hivesched with manifests/samples/kueue.yaml's mapping (a
// ClusterQueue of vc-vision's 40 GPUs: its rack's 32 and its pinned node's 8): a Job of 4 x 8 GPUs is admitted by
// Kueue and placed whole by hivesched in vc-vision's rack; a second one
// is over the queue's quota and waits in Kueue, suspended, with no pods,
// its Kueue Workload saying so; once the first is deleted Kueue admits it
// and hivesched places it whole.
func TestKueue(t *testing.T) {
	e := setup(t)
	operatorReady(t, e, "Kueue's controller", "KUEUE_PROBE_PORT", envFrameworks, "hack/local-kueue.sh (make e2e-frameworks)")
	racks := topCells(t, e.root)
	sel := func(name string) string { return "batch.kubernetes.io/job-name=" + name }
	del := func(names ...string) {
		e.kubectl(t, append([]string{"delete", "job", "-n", "vision", "--ignore-not-found", "--wait=true", "--cascade=foreground"}, names...)...)
	}
	del("kq-a", "kq-b")
	for _, n := range []string{"kq-a", "kq-b"} {
		e.waitPods(t, "vision", sel(n), 0, 60*time.Second, "left", func(v1.Pod) bool { return true })
	}
	t.Cleanup(func() {
		del("kq-a", "kq-b")
		e.kubectl(t, "delete", "-n", "vision", "--ignore-not-found", "localqueues.kueue.x-k8s.io/vc-vision")
		e.kubectl(t, "delete", "--ignore-not-found", "clusterqueues.kueue.x-k8s.io/vc-vision", "resourceflavors.kueue.x-k8s.io/hivesched-gpu")
	})
	suspended := func(name string) string {
		return e.kubectl(t, "get", "job", "-n", "vision", name, "-o", "jsonpath={.spec.suspend}")
	}
	check := func(name string, got []v1.Pod) {
		require.Empty(t, gangMembers(t, got, "vc-vision", 8), "%s: every pod with its 8 GPUs", name)
		rack, nodes := "", map[string]bool{}
		for _, p := range got {
			nodes[p.Spec.NodeName] = true
			if rack == "" {
				rack = racks[p.Spec.NodeName]
			}
			require.Equal(t, rack, racks[p.Spec.NodeName], "Job %s spans racks: pod %s on %s", name, p.Name, p.Spec.NodeName)
		}
		require.Len(t, nodes, 4, "Job %s: four 8-GPU pods on four nodes", name)
	}

	clockA := startBindClock(t, e, "vision", sel("kq-a"))
	created := time.Now()
	cmdIn(t, e, kueueSample(t, e, "kq-a"), "apply", "-f", "-")
	a := e.waitPods(t, "vision", sel("kq-a"), 4, 90*time.Second, "Running", running)
	check("kq-a", a)
	require.Equal(t, "false", suspended("kq-a"), "Kueue admitted kq-a")
	t.Logf("Job kq-a (4 x 8 GPUs) admitted by Kueue and bound whole; from its create: %v", clockA.times(t, created, a))

	// Over the queue's quota: Kueue keeps it suspended, so its pods are
	// never made (hivesched never sees it), and its Workload says why.
	clockB := startBindClock(t, e, "vision", sel("kq-b"))
	cmdIn(t, e, kueueSample(t, e, "kq-b"), "apply", "-f", "-")
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		require.Equal(t, "true", suspended("kq-b"), "kq-b is over the queue's quota: Kueue must keep it suspended")
		require.Empty(t, e.livePods(t, "vision", sel("kq-b")), "kq-b has pods though Kueue did not admit it")
		time.Sleep(300 * time.Millisecond)
	}
	var why string
	require.Eventually(t, func() bool {
		why = e.kubectl(t, "get", "workloads.kueue.x-k8s.io", "-n", "vision", "-o",
			`jsonpath={range .items[?(@.metadata.ownerReferences[0].name=="kq-b")]}{.status.conditions[?(@.type=="QuotaReserved")].message}{end}`)
		return strings.Contains(why, "nvidia.com/gpu")
	}, 30*time.Second, 500*time.Millisecond, "kq-b's Kueue Workload does not say it waits for GPU quota: %q", why)
	t.Logf("Job kq-b waits in Kueue: %s", why)

	released := time.Now()
	del("kq-a")
	b := e.waitPods(t, "vision", sel("kq-b"), 4, 90*time.Second, "Running", running)
	check("kq-b", b)
	t.Logf("Job kq-b admitted and bound whole after kq-a was deleted: from the delete's start: %v", clockB.times(t, released, b))
}

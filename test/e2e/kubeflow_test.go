package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/hivesched/hivesched/cmd/hivesched-sim/sim"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/test/util"
)

// envKubeflow makes TestTrainingOperator fail, rather than skip, when the
// training-operator is not running (make e2e-kubeflow sets it).
const envKubeflow = "HIVESCHED_E2E_KUBEFLOW"

// pyTorchJob is a Kubeflow PyTorchJob of 1 master and workers workers, 8
// GPUs each, in vc-vision. training-operator puts no labels on the PodGroup
// it creates for the gang; the VC comes from the pod templates' label.
func pyTorchJob(name string, workers int) string {
	replica := func(role string, n int) string {
		return fmt.Sprintf(`    %s:
      replicas: %d
      restartPolicy: OnFailure
      template:
        metadata:
          labels: {%s: vc-vision}
        spec:
          containers:
          - name: pytorch
            image: docker.io/pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
            command: [torchrun, train.py]
            resources:
              limits: {nvidia.com/gpu: 8}
`, role, n, hivesched.LabelVirtualCluster)
	}
	return fmt.Sprintf(`apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: %s
  namespace: vision
spec:
  pytorchReplicaSpecs:
%s%s`, name, replica("Master", 1), replica("Worker", workers))
}

// topCells maps each node of the running scheduler's physical cluster to
// the top-level cell holding it (a rack, or a node that is a top cell).
func topCells(t *testing.T, root string) map[string]string {
	cfg, err := sim.LoadCluster(filepath.Join(util.LocalDir(root), "scheduler-config.yaml"))
	require.NoError(t, err)
	out := map[string]string{}
	var walk func(top string, c cellcore.PhysicalCellSpec)
	walk = func(top string, c cellcore.PhysicalCellSpec) {
		out[c.CellAddress] = top
		for _, ch := range c.CellChildren {
			walk(top, ch)
		}
	}
	for _, c := range cfg.PhysicalCells {
		walk(c.CellAddress, c)
	}
	return out
}

// TestTrainingOperator (issue 23): a real operator nobody here wrote,
// Kubeflow's training-operator (hack/local-kubeflow.sh), gangs its
// PyTorchJobs through scheduler-plugins PodGroups and schedulerName
// hivesched (--gang-scheduler-name=hivesched). vc-vision has one rack of
// four 8-GPU nodes: a 1+3 x 8 GPU job takes all of it, whole; a second one
// waits with none of its pods bound, and is bound once the first is
// deleted.
func TestTrainingOperator(t *testing.T) {
	e := setup(t)
	port, err := util.LocalPort(e.root, "KUBEFLOW_PROBE_PORT")
	require.NoError(t, err)
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
	if err == nil {
		_ = resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		msg := fmt.Sprintf("Kubeflow's training-operator is not ready on 127.0.0.1:%d (%v): start it with hack/local-kubeflow.sh, or run make e2e-kubeflow", port, err)
		if os.Getenv(envKubeflow) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	racks := topCells(t, e.root)

	apply := func(t *testing.T, name string, workers int) {
		cmdIn(t, e, pyTorchJob(name, workers), "apply", "-f", "-")
		t.Cleanup(func() {
			e.kubectl(t, "delete", "pytorchjob", "-n", "vision", name, "--ignore-not-found", "--wait=true")
		})
	}
	sel := func(name string) string { return "training.kubeflow.org/job-name=" + name }
	// requireWholeInOneRack checks the job's 4 pods: hivesched's, one
	// gang (their PodGroup's), on four nodes of one rack.
	requireWholeInOneRack := func(t *testing.T, name string, got []v1.Pod) {
		nodes, rack := map[string]bool{}, ""
		for _, p := range got {
			require.Equal(t, "hivesched", p.Spec.SchedulerName, "pod %s", p.Name)
			require.Equal(t, name, p.Labels["scheduling.x-k8s.io/pod-group"], "pod %s", p.Name)
			spec, _, err := placement.Recorded(&p)
			require.NoError(t, err, "pod %s", p.Name)
			require.Equal(t, "vc-vision", spec.VirtualCluster, "pod %s", p.Name)
			require.True(t, strings.HasSuffix(spec.Name, "/"+name) || spec.Name == name, "pod %s is in group %q", p.Name, spec.Name)
			nodes[p.Spec.NodeName] = true
			r := racks[p.Spec.NodeName]
			require.NotEmpty(t, r, "node %s is in no cell of the scheduler's physical cluster", p.Spec.NodeName)
			if rack == "" {
				rack = r
			}
			require.Equal(t, rack, r, "PyTorchJob %s spans racks: pod %s on %s", name, p.Name, p.Spec.NodeName)
		}
		require.Len(t, nodes, 4, "8 GPUs a pod, 8 a node: four nodes")
		t.Logf("PyTorchJob %s bound whole in %s: %v", name, rack, nodes)
	}

	// Leftovers of an interrupted run would hold the rack.
	e.kubectl(t, "delete", "pytorchjob", "-n", "vision", "ddp-a", "ddp-b", "--ignore-not-found", "--wait=true")
	e.waitPods(t, "vision", "training.kubeflow.org/operator-name=pytorchjob-controller", 0, 60*time.Second, "left", func(v1.Pod) bool { return true })

	apply(t, "ddp-a", 3)
	a := e.waitPods(t, "vision", sel("ddp-a"), 4, 90*time.Second, "Running", running)
	requireWholeInOneRack(t, "ddp-a", a)
	pg := e.kubectl(t, "get", "podgroups.scheduling.x-k8s.io", "-n", "vision", "ddp-a", "-o", "jsonpath={.spec.minMember}")
	require.Equal(t, "4", pg, "training-operator's PodGroup for ddp-a")

	apply(t, "ddp-b", 3)
	e.waitPods(t, "vision", sel("ddp-b"), 4, 60*time.Second, "created by the operator", func(v1.Pod) bool { return true })
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range e.livePods(t, "vision", sel("ddp-b")) {
			require.Empty(t, p.Spec.NodeName, "pod %s of ddp-b was bound while ddp-a holds vc-vision's rack: the gang must wait whole", p.Name)
		}
		time.Sleep(300 * time.Millisecond)
	}

	e.kubectl(t, "delete", "pytorchjob", "-n", "vision", "ddp-a", "--wait=true")
	b := e.waitPods(t, "vision", sel("ddp-b"), 4, 90*time.Second, "Running", running)
	requireWholeInOneRack(t, "ddp-b", b)
}

// cmdIn runs kubectl with stdin.
func cmdIn(t *testing.T, e *env, stdin string, args ...string) {
	bin := filepath.Join(util.LocalDir(e.root), "bin", "kubectl")
	if _, err := os.Stat(bin); err != nil {
		bin = "kubectl"
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl %v: %s", args, out)
}

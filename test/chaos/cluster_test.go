package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The local cluster's processes, as hack/local-up.sh starts them: each has a
// pid file and a log in _output/local (hack/local-env.sh). The harness
// signals only pids from those files whose command is a binary of
// _output/local/bin. (local-down.sh checks the pid's start time against the
// ident file instead, because a process just forked by local-up.sh has not
// exec'd that binary yet; the harness only looks at replicas that
// local-up.sh has seen start, or that it killed itself.)

// replicas are the scheduler processes of HIVESCHED_REPLICAS=2.
var replicas = []string{"scheduler", "scheduler-2"}

// The leader lease of the shipped configurations (leaderElection.resourceName).
const (
	leaseNamespace = "kube-system"
	leaseName      = "hivesched"
	// client-go (v0.37, structured) logs this when the process takes the
	// lease; kube-scheduler exits when it loses it, so a live process that
	// logged it leads.
	logAcquired = `"Successfully acquired lease" lock="` + leaseNamespace + "/" + leaseName + `"`
	// The plugin logs this once it has rebuilt its state as the new leader
	// (plugins/recovery/gate.go).
	logRecovered = "leading: allocations recovered"
)

func (h *harness) pidFile(name string) string { return filepath.Join(h.localDir, name+".pid") }
func (h *harness) logFile(name string) string {
	return filepath.Join(h.localDir, "logs", name+".log")
}

// pid returns the live process of component name, if any.
func (h *harness) pid(name string) (int, bool) {
	raw, err := os.ReadFile(h.pidFile(name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// A killed daemon whose parent has not reaped it yet is a zombie.
	if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) == 0 || f[0] == "Z" {
		return 0, false
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.HasPrefix(string(cmd), filepath.Join(h.localDir, "bin")+"/") {
		return 0, false
	}
	return pid, true
}

// kill9 sends SIGKILL to component name's process.
func (h *harness) kill9(name string) error {
	pid, ok := h.pid(name)
	if !ok {
		return fmt.Errorf("%s is not running", name)
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// logHas reports whether the current log of component name (local-up.sh
// starts a new one for each process) contains s.
func (h *harness) logHas(name, s string) bool {
	b, err := os.ReadFile(h.logFile(name))
	return err == nil && bytes.Contains(b, []byte(s))
}

// leaders returns the live replicas that took the lease.
func (h *harness) leaders() []string {
	var out []string
	for _, r := range replicas {
		if _, ok := h.pid(r); ok && h.logHas(r, logAcquired) {
			out = append(out, r)
		}
	}
	return out
}

func (h *harness) lease(ctx context.Context) (*coordv1.Lease, error) {
	return h.kube.CoordinationV1().Leases(leaseNamespace).Get(ctx, leaseName, metav1.GetOptions{})
}

func holder(l *coordv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// localUp runs hack/local-up.sh with two replicas (args: --schedulers starts
// only the replicas that are not running), bounded in time.
func (h *harness) localUp(ctx context.Context, args ...string) error {
	h.scriptMu.Lock()
	defer h.scriptMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(h.root, "hack", "local-up.sh")}, args...)...)
	cmd.Dir = h.root
	cmd.Env = append(os.Environ(), "HIVESCHED_REPLICAS=2")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("hack/local-up.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// ensureReplicas restarts any replica that is not running (kube-scheduler
// exits when it loses the lease, e.g. while the API server is down) and
// waits until one of them leads. expectDown names a replica the harness
// killed itself; any other dead replica is an unplanned exit.
func (h *harness) ensureReplicas(ctx context.Context, expectDown string) error {
	var dead []string
	for _, r := range replicas {
		if _, ok := h.pid(r); !ok {
			dead = append(dead, r)
			if r != expectDown {
				h.mu.Lock()
				h.fig.UnplannedExits++
				h.mu.Unlock()
				h.t.Logf("replica %s exited by itself (last log lines: %s)", r, h.tail(r))
			}
		}
	}
	if len(dead) > 0 {
		if err := h.localUp(ctx, "--schedulers"); err != nil {
			return err
		}
	}
	return h.waitLeader(ctx, h.o.takeoverBound)
}

// waitLeader waits until exactly one live replica took the lease and the
// lease names a holder.
func (h *harness) waitLeader(ctx context.Context, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		l, err := h.lease(ctx)
		ls := h.leaders()
		if err == nil && holder(l) != "" && len(ls) == 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no single leader within %v: lease holder %q (err %v), replicas that took it and run: %v", bound, holder(l), err, ls)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tail returns the last lines of a component's log (for messages).
func (h *harness) tail(name string) string {
	b, _ := os.ReadFile(h.logFile(name))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// apiserverReady polls /readyz.
func (h *harness) apiserverReady(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := h.kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil
}

// nodeReady reports whether the node exists and is Ready.
func (h *harness) nodeReady(ctx context.Context, name string) bool {
	n, err := h.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

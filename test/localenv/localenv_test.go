// Package localenv tests the process helpers of hack/local-env.sh (start,
// component_pid, wait_healthy, stop_component) against real short-lived
// processes: bash sources the script with _output/local moved to a temporary
// directory, so no cluster and no build is needed.
package localenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// env is a temporary _output/local with two binaries in its bin: daemon (a
// copy of sleep, so its command line names _output/local/bin as our
// components' do) and quitter (a copy of false).
type env struct {
	t   *testing.T
	dir string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: hack/local-env.sh identifies processes through it")
	}
	e := &env{t: t, dir: t.TempDir()}
	for _, d := range []string{"bin", "logs"} {
		if err := os.MkdirAll(filepath.Join(e.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, prog := range map[string]string{"daemon": "sleep", "quitter": "false"} {
		src, err := exec.LookPath(prog)
		if err != nil {
			t.Skipf("no %s: %v", prog, err)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.dir, "bin", name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// bash runs script after sourcing hack/local-env.sh with LOCAL_DIR at the
// temporary directory, under set -euo pipefail as local-up.sh runs. The
// background jobs of the script (the daemons it started, a start blocked on
// its log) are killed when it exits, also when it fails.
func (e *env) bash(script string) (string, error) {
	e.t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		e.t.Fatal(err)
	}
	prelude := `set -euo pipefail
source "$1/hack/local-env.sh"
LOCAL_DIR=$2 LOCAL_BIN=$2/bin LOCAL_LOGS=$2/logs
trap 'kill -KILL $(jobs -p) 2>/dev/null || true' EXIT
`
	cmd := exec.Command("bash", "-c", prelude+script, "bash", root, e.dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		e.t.Fatalf("bash did not finish within 30 s; output:\n%s", out.String())
	}
	return out.String(), err
}

func (e *env) pidFile(name string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(e.dir, name+".pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

// TestWaitHealthyBeforeExec is issue #40: a component that start has forked
// but that has not exec'd yet (on a loaded machine its /proc/PID/cmdline
// reads as the forked bash, as setsid, or empty for tens of milliseconds)
// must not be reported as exited. The child is held before its exec
// deterministically: its log is a FIFO, so its shell blocks opening the log
// until the health check opens the FIFO's other end.
func TestWaitHealthyBeforeExec(t *testing.T) {
	e := newEnv(t)
	out, err := e.bash(`
mkfifo "$LOCAL_LOGS/d.log"
# 5 s: long enough to be checked, short enough for fail's "tail" of the log
# (the FIFO) to end soon when wait_healthy wrongly says "exited".
start d "$LOCAL_BIN/daemon" 5
((STARTED)) || die "STARTED=$STARTED"
pid=$(<"$LOCAL_DIR/d.pid")
cmdline() { tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n 1; }
# Fails once while the child still blocks before its exec (so that
# wait_healthy asks component_pid about it in that state), then lets it go
# on and succeeds once the daemon runs.
calls=0
healthy() {
  calls=$((calls + 1))
  if ((calls == 1)); then
    [[ $(cmdline) != "$LOCAL_BIN/daemon" ]] || die "the child exec'd through its FIFO log"
    return 1
  fi
  if ((calls == 2)); then cat "$LOCAL_LOGS/d.log" >/dev/null & fi
  [[ $(cmdline) == "$LOCAL_BIN/daemon" ]]
}
wait_healthy d 10 healthy
((calls >= 2)) || die "healthy was called $calls times"
[[ $(component_pid d) == "$pid" ]] || die "component_pid d: not $pid"
echo OK
`)
	if err != nil || !strings.HasSuffix(out, "OK\n") {
		t.Fatalf("a live component that had not exec'd yet was not taken for ours: %v\n%s", err, out)
	}
}

// TestWaitHealthyExited: a component that does exit is reported as exited,
// at once, not after the health check's timeout.
func TestWaitHealthyExited(t *testing.T) {
	e := newEnv(t)
	t0 := time.Now()
	out, err := e.bash(`
start q "$LOCAL_BIN/quitter"
wait_healthy q 20 false
echo "wait_healthy returned"
`)
	// false's status: this shell started it, so it can tell.
	if err == nil || !strings.Contains(out, "ERROR: q exited (status 1);") {
		t.Fatalf("want \"q exited (status 1)\" and a failure, got %v:\n%s", err, out)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Fatalf("the exit was reported after %v, not at once", d)
	}
}

// TestStartStop: start records the process so that component_pid knows it
// from the start, a second start leaves it alone, stop_component stops it
// and removes its files.
func TestStartStop(t *testing.T) {
	e := newEnv(t)
	out, err := e.bash(`
start d "$LOCAL_BIN/daemon" 30
pid=$(<"$LOCAL_DIR/d.pid")
[[ $(component_pid d) == "$pid" ]] || die "component_pid d right after start: not $pid"
read -r ipid istart iboot <"$LOCAL_DIR/d.ident"
[[ $ipid == "$pid" && $istart =~ ^[0-9]+$ && $iboot == "$(</proc/sys/kernel/random/boot_id)" ]] ||
  die "d.ident: $(<"$LOCAL_DIR/d.ident")"
start d "$LOCAL_BIN/daemon" 30
((STARTED == 0)) || die "a second start started another"
[[ $(<"$LOCAL_DIR/d.pid") == "$pid" ]] || die "a second start rewrote the pid file"
stop_component d
! proc_alive "$pid" || die "stop_component left $pid running"
[[ ! -e $LOCAL_DIR/d.pid && ! -e $LOCAL_DIR/d.ident ]] || die "stop_component left its files"
echo OK
`)
	if err != nil || !strings.HasSuffix(out, "OK\n") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestStrangers: a pid file naming a live process that is not the one start
// started (its pid was reused: another start time) is nobody's: not
// running, never signalled. A pid file without an ident file (a cluster
// started before the ident files) is judged by the command line as before.
func TestStrangers(t *testing.T) {
	e := newEnv(t)
	out, err := e.bash(`
# A process of _output/local/bin with an ident of another start time: the
# pid of a component that exited, reused.
"$LOCAL_BIN/daemon" 30 &
reused=$!
echo "$reused" >"$LOCAL_DIR/d.pid"
read -r _ start boot < <(proc_ident "$reused")
echo "$reused $((start + 1)) $boot" >"$LOCAL_DIR/d.ident"
! component_pid d >/dev/null || die "a reused pid was taken for ours"
echo "$reused $start 00000000-0000-0000-0000-000000000000" >"$LOCAL_DIR/d.ident"
! component_pid d >/dev/null || die "a pid of another boot was taken for ours"
stop_component d
proc_alive "$reused" || die "stop_component signalled a stranger"
[[ ! -e $LOCAL_DIR/d.pid ]] || die "stop_component kept a stale pid file"

# Pid files without an ident: by the command line.
echo "$reused" >"$LOCAL_DIR/d.pid"
[[ $(component_pid d) == "$reused" ]] || die "a daemon of an older local-env.sh was not recognized"
sleep 30 &
other=$!
echo "$other" >"$LOCAL_DIR/q.pid"
! component_pid q >/dev/null || die "a process outside _output/local/bin was taken for ours"
# An ident of another pid (left over) does not vouch for this one.
proc_ident "$reused" >"$LOCAL_DIR/q.ident"
! component_pid q >/dev/null || die "an ident of another pid vouched for $other"
echo OK
`)
	if err != nil || !strings.HasSuffix(out, "OK\n") {
		t.Fatalf("%v\n%s", err, out)
	}
}

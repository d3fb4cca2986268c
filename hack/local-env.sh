# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables are for the scripts that source this
# Shared paths and helpers for hack/local-up.sh and hack/local-down.sh.
# Sourced, not run: it only defines variables and functions.
#
# Everything lives in the git-ignored _output/local/ so that "make clean" or
# "rm -rf _output/local" is a full reset and nothing leaks into the tree.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOCAL_DIR=$REPO_ROOT/_output/local
LOCAL_BIN=$LOCAL_DIR/bin
LOCAL_CERTS=$LOCAL_DIR/certs
LOCAL_LOGS=$LOCAL_DIR/logs
LOCAL_DATA=$LOCAL_DIR/data
LOCAL_TOOLS=$LOCAL_DIR/tools
LOCAL_KUBECONFIG=$LOCAL_DIR/kubeconfig
LOCAL_SCHED_CONFIG=$LOCAL_DIR/scheduler-config.yaml
# The second scheduler replica's configuration (HIVESCHED_REPLICAS=2): the
# first's with its own inspect API address (two processes cannot listen on
# one port).
LOCAL_SCHED2_CONFIG=$LOCAL_DIR/scheduler-2-config.yaml

# etcd v3.6.4 is what k8s 1.34's client is tested with; kwok v0.7.0 is the
# release known to resolve from the module proxy (shared/TOOLCHAIN.md).
ETCD_VERSION=v3.6.4
KWOK_VERSION=v0.7.0

ETCD_PORT=2379
ETCD_PEER_PORT=2380
APISERVER_PORT=6443
APISERVER_URL=https://127.0.0.1:$APISERVER_PORT

# Start order. Stopping walks it backwards: the schedulers and kwok first so
# they do not spin on a vanished API server, etcd last because a
# kube-apiserver whose etcd is gone hangs on SIGTERM. scheduler-2 runs only
# with HIVESCHED_REPLICAS=2 (two replicas under leader election).
COMPONENTS=(etcd kube-apiserver kwok scheduler scheduler-2)

# Builds share two cores with other work in the tree: stay polite.
NICE=(nice -n 10)

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

now_ms() { date +%s%3N; }
# since START_MS: prints the seconds elapsed since START_MS, e.g. "4.2 s".
since() {
  local ms=$(($(now_ms) - $1))
  printf '%d.%d s' $((ms / 1000)) $((ms % 1000 / 100))
}

pid_file() { printf '%s/%s.pid' "$LOCAL_DIR" "$1"; }
log_file() { printf '%s/%s.log' "$LOCAL_LOGS" "$1"; }

# proc_alive PID: true if PID exists and is not a zombie. Our daemons are
# reparented once the script that started them exits, and a zombie still
# answers "kill -0".
proc_alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0 # no /proc: trust kill -0
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

# component_pid NAME: prints the pid of NAME if its pid file names a live
# process that runs a binary from _output/local/bin. The binary check guards
# against pid reuse after a reboot or a crash: a stale pid file must never make
# us skip a start, or signal somebody else's process.
component_pid() {
  local f pid exe
  f=$(pid_file "$1")
  [[ -s $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  proc_alive "$pid" || return 1
  if [[ -r /proc/$pid/cmdline ]]; then
    exe=$(tr '\0' '\n' <"/proc/$pid/cmdline" | head -n 1)
    [[ $exe == "$LOCAL_BIN"/* ]] || return 1
  fi
  printf '%s\n' "$pid"
}

# port_open PORT: true if something accepts TCP connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# stop_component NAME: SIGTERM, up to 10 s of grace, then SIGKILL. Only ever
# signals the pid from NAME's own pid file.
stop_component() {
  local name=$1 pid i
  if ! pid=$(component_pid "$name"); then
    rm -f "$(pid_file "$name")"
    return 0
  fi
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    proc_alive "$pid" || break
    sleep 0.1
  done
  if proc_alive "$pid"; then
    log "$name did not exit within 10 s of SIGTERM: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      proc_alive "$pid" || break
      sleep 0.1
    done
  fi
  rm -f "$(pid_file "$name")"
}

# take_lock: one local-up/local-down at a time, or two runs race on pid files.
take_lock() {
  mkdir -p "$LOCAL_DIR"
  exec 9>"$LOCAL_DIR/.lock"
  flock -n 9 || die "another hack/local-up.sh or hack/local-down.sh is running (lock $LOCAL_DIR/.lock)"
}

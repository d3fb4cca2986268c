# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables are for the scripts that source this
# Shared paths and helpers for hack/local-up.sh and hack/local-down.sh.
# Sourced, not run: it only defines variables and functions.
#
# Everything lives in the git-ignored _output/local/ so that "make clean" or
# "rm -rf _output/local" is a full reset and nothing leaks into the tree.
# HIVESCHED_LOCAL_DIR puts a cluster elsewhere (a second cluster beside the
# first, on other ports: HIVESCHED_PORT_OFFSET; hack/conformance.sh runs its
# two profiles so); tests find it through the same variable
# (test/util.LocalClusterEnv).

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOCAL_DIR=${HIVESCHED_LOCAL_DIR:-$REPO_ROOT/_output/local}
[[ $LOCAL_DIR == /* ]] || LOCAL_DIR=$PWD/$LOCAL_DIR
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

# The release every local binary is built from is go.mod's k8s.io/kubernetes
# (kube-apiserver, kube-controller-manager, kubectl, the scheduler). etcd
# v3.7.0 is what Kubernetes 1.37 is tested with (its hack/lib/etcd.sh and
# build/dependencies.yaml) and what go.mod resolves for go.etcd.io/etcd.
# kwok v0.8.0: built against client-go v0.36 (v0.7.0: v0.33), and its binary
# ships no default stages, so local-up.sh gives it ours (kwok-stages.yaml:
# which pods complete, and when). docs/toolchain.md has the reasons.
ETCD_VERSION=v3.7.0
KWOK_VERSION=v0.8.0

# Ports. Each comes from the environment (HIVESCHED_<NAME>_PORT), else its
# default plus HIVESCHED_PORT_OFFSET (0), so a second checkout on the same
# machine runs its own cluster with e.g. HIVESCHED_PORT_OFFSET=1000 (etcd
# 3379/3380, kube-apiserver 7443, ...). Everything on loopback. local-up.sh
# records the ports of the running cluster in $LOCAL_CLUSTER_ENV; tests that
# talk to it read them from there (test/util.LocalPort), and local-up.sh
# refuses to mix two port sets in one _output/local (or HIVESCHED_LOCAL_DIR).
HIVESCHED_PORT_OFFSET=${HIVESCHED_PORT_OFFSET:-0}
[[ $HIVESCHED_PORT_OFFSET =~ ^[0-9]+$ ]] || { echo "HIVESCHED_PORT_OFFSET must be a number, not '$HIVESCHED_PORT_OFFSET'" >&2; exit 1; }
# PORT_VARS: every port variable, in the order local-up.sh records them.
PORT_VARS=()
# port VAR DEFAULT: VAR=${HIVESCHED_VAR:-DEFAULT+offset}.
port() {
  local env=HIVESCHED_$1 v
  v=${!env:-$(($2 + HIVESCHED_PORT_OFFSET))}
  if ! [[ $v =~ ^[0-9]+$ ]] || ((v < 1 || v > 65535)); then
    echo "$env must be a TCP port, not '$v'" >&2
    exit 1
  fi
  printf -v "$1" '%s' "$v"
  PORT_VARS+=("$1")
}
port ETCD_PORT 2379
port ETCD_PEER_PORT 2380
port APISERVER_PORT 6443
# kube-controller-manager's secure port (health checks only; 10257 is its
# usual port).
port KCM_PORT 10257
# kwok's server (/healthz, /metrics); kwok serves none unless asked.
port KWOK_PORT 10247
# The scheduler replicas' inspect API (the plugin's inspectBindAddress;
# 10262 is its default). Their kube-scheduler secure port is off (0).
port INSPECT_PORT 10262
port INSPECT_PORT_2 10263
# Kubeflow's training-operator (hack/local-kubeflow.sh): metrics, health
# probes, and the webhook server it always starts.
port KUBEFLOW_METRICS_PORT 10270
port KUBEFLOW_PROBE_PORT 10271
port KUBEFLOW_WEBHOOK_PORT 10272
# KubeRay's operator (hack/local-kuberay.sh): metrics and health probes (its
# webhooks are off).
port KUBERAY_METRICS_PORT 10273
port KUBERAY_PROBE_PORT 10274
# JobSet's controller (hack/local-jobset.sh): metrics, health probes and its
# webhook server (its webhooks are always on; the API server calls them on
# 127.0.0.1).
port JOBSET_METRICS_PORT 10275
port JOBSET_PROBE_PORT 10276
port JOBSET_WEBHOOK_PORT 10277
# Kubeflow Trainer v2's controller manager (hack/local-trainer.sh): metrics,
# health probes and its webhook server (called by the API server on
# 127.0.0.1).
port TRAINER_METRICS_PORT 10278
port TRAINER_PROBE_PORT 10279
port TRAINER_WEBHOOK_PORT 10280
# LeaderWorkerSet's controller (hack/local-lws.sh): metrics, health probes
# and its webhook server (called by the API server on 127.0.0.1).
port LWS_METRICS_PORT 10281
port LWS_PROBE_PORT 10282
port LWS_WEBHOOK_PORT 10283
# Kueue's controller (hack/local-kueue.sh): metrics, health probes and its
# webhook server (called by the API server on 127.0.0.1).
port KUEUE_METRICS_PORT 10284
port KUEUE_PROBE_PORT 10285
port KUEUE_WEBHOOK_PORT 10286
unset -f port
APISERVER_URL=https://127.0.0.1:$APISERVER_PORT

# What the Workload API needs in Kubernetes 1.37 (README "Supported
# Kubernetes versions"): the same gates for kube-apiserver,
# kube-controller-manager and the scheduler. GenericWorkload is beta but off
# by default; the others are alpha (DRAWorkloadResourceClaims beta, off).
# WorkloadWithJob makes the Job controller create a Workload and a PodGroup
# per Job. HIVESCHED_FEATURE_GATES replaces the list ("" turns none on).
FEATURE_GATES=${HIVESCHED_FEATURE_GATES-GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true,WorkloadWithJob=true,DRAWorkloadResourceClaims=true,PodGroupPreemptionPolicy=true}
# The scheduler gets the same gates unless HIVESCHED_SCHEDULER_FEATURE_GATES
# says otherwise (with GenericWorkload off, kube-scheduler treats pods of a
# Workload API PodGroup as plain pods and runs no pod-group cycle).
SCHEDULER_FEATURE_GATES=${HIVESCHED_SCHEDULER_FEATURE_GATES-$FEATURE_GATES}
# Beta and alpha API versions are off by default: Workload and PodGroup are
# served in scheduling.k8s.io/v1beta1, CompositePodGroup only in v1alpha3.
RUNTIME_CONFIG=${HIVESCHED_RUNTIME_CONFIG-scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true}

# The cluster's shape (HIVESCHED_CLUSTER): "sample" (the default: racks a
# and b of four 8-GPU V100 nodes and two 4-GPU T4 nodes, the sample
# physicalCluster of manifests/scheduler/), or "gb200": two GB200 NVL72
# NVLink domains of 18 4-GPU trays beside three 8-GPU H100 nodes
# (docs/nvlink.md; gb200_cluster in local-up.sh).
CLUSTER=${HIVESCHED_CLUSTER:-sample}
case $CLUSTER in
  sample | gb200) ;;
  *) echo "HIVESCHED_CLUSTER must be 'sample' (the default) or 'gb200', not '$CLUSTER'" >&2; exit 2 ;;
esac

# LOCAL_CLUSTER_ENV: the running cluster's settings, written by local-up.sh
# (cluster_env) and removed by local-down.sh.
LOCAL_CLUSTER_ENV=$LOCAL_DIR/cluster.env

# cluster_env: the settings a running cluster keeps, as HIVESCHED_<NAME>=value
# lines: the ports, the feature gates and the runtime config.
cluster_env() {
  local v
  for v in "${PORT_VARS[@]}"; do printf 'HIVESCHED_%s=%s\n' "$v" "${!v}"; done
  printf 'HIVESCHED_FEATURE_GATES=%s\nHIVESCHED_SCHEDULER_FEATURE_GATES=%s\nHIVESCHED_RUNTIME_CONFIG=%s\n' \
    "$FEATURE_GATES" "$SCHEDULER_FEATURE_GATES" "$RUNTIME_CONFIG"
  # Written only for another shape than the sample, so that a sample
  # cluster brought up before the option existed keeps its settings file.
  [[ $CLUSTER == sample ]] || printf 'HIVESCHED_CLUSTER=%s\n' "$CLUSTER"
}

# Start order. Stopping walks it backwards: the operator, the schedulers,
# kwok and kube-controller-manager first so they do not spin on a vanished
# API server, etcd last because a kube-apiserver whose etcd is gone hangs on
# SIGTERM. fakedra is the fake DRA driver (test/fakedra). scheduler-2 runs only with HIVESCHED_REPLICAS=2 (two replicas
# under leader election), training-operator only after
# hack/local-kubeflow.sh, kuberay-operator, jobset-controller and
# trainer-controller-manager only after hack/local-kuberay.sh,
# hack/local-jobset.sh and hack/local-trainer.sh (Trainer after JobSet: it
# makes JobSets).
COMPONENTS=(etcd kube-apiserver kube-controller-manager kwok fakedra scheduler scheduler-2 training-operator kuberay-operator jobset-controller trainer-controller-manager lws-controller kueue-controller)

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
# ident_file NAME: who the pid in NAME's pid file is, as "PID START BOOT_ID"
# (proc_ident), written by start. The pid file itself keeps holding only the
# pid: test/chaos and people's "kill $(cat ...)" read it.
ident_file() { printf '%s/%s.ident' "$LOCAL_DIR" "$1"; }
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

# proc_ident PID: prints "PID START BOOT_ID": PID, its start time (field 22
# of /proc/PID/stat, clock ticks after boot) and the boot's id. No two
# processes ever share all three, and none of them changes when the process
# execs, so this names the process start forked from the first instant,
# before setsid and then the daemon have been exec'd.
proc_ident() {
  local stat boot f
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null) || return 1
  read -ra f <<<"${stat##*) }"
  [[ ${f[19]:-} =~ ^[0-9]+$ ]] || return 1
  printf '%s %s %s\n' "$1" "${f[19]}" "$boot"
}

# component_pid NAME: prints the pid of NAME if its pid file names a live
# process that start started: the one its ident file names. A stale pid file
# (after a crash or a reboot the pid may be somebody else's) must never make
# us skip a start, or signal somebody else's process.
#
# Not the process's command line: until the exec of the daemon is complete
# /proc/PID/cmdline reads as the forked bash, as setsid, or empty (mid-exec),
# and on a loaded machine that lasts long enough for wait_healthy to take a
# healthy start for an exit (issue #40). A pid file without an ident file
# (written by a local-env.sh before the ident files) still falls back to the
# command line: those daemons exec'd long ago.
component_pid() {
  local f pid ident exe
  f=$(pid_file "$1")
  [[ -s $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  proc_alive "$pid" || return 1
  if ident=$(cat "$(ident_file "$1")" 2>/dev/null) && [[ ${ident%% *} == "$pid" ]]; then
    # The pid was reused if its start time (or the boot) differs.
    [[ $(proc_ident "$pid") == "$ident" ]] || return 1
  elif [[ -r /proc/$pid/cmdline ]]; then
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
    rm -f "$(pid_file "$name")" "$(ident_file "$name")"
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
  rm -f "$(pid_file "$name")" "$(ident_file "$name")"
}

# take_lock: one local-up/local-down at a time, or two runs race on pid files.
take_lock() {
  mkdir -p "$LOCAL_DIR"
  exec 9>"$LOCAL_DIR/.lock"
  flock -n 9 || die "another hack/local-up.sh or hack/local-down.sh is running (lock $LOCAL_DIR/.lock)"
}

# The helpers below are shared by hack/local-up.sh and hack/local-kubeflow.sh.

BUILD_REPORT=()
# fresh BIN VERSION: the binary exists, is newer than go.mod and was built at
# VERSION (its stamp file), so re-runs skip the minutes-long builds. A
# dependency bump touches go.mod and rebuilds all; a new ETCD_VERSION or
# KWOK_VERSION rebuilds that one.
stamp_file() { printf '%s/.%s.version' "$(dirname "$1")" "$(basename "$1")"; }
fresh() { [[ -x $1 && $1 -nt $REPO_ROOT/go.mod && $(cat "$(stamp_file "$1")" 2>/dev/null) == "$2" ]]; }

# timed BIN VERSION CMD...: build BIN, remember how long it took, stamp it.
timed() {
  local bin=$1 version=$2 name t0
  shift 2
  name=$(basename "$bin")
  t0=$(now_ms)
  log "building $name $version"
  "$@"
  printf '%s\n' "$version" >"$(stamp_file "$bin")"
  BUILD_REPORT+=("$name: $(since "$t0")")
}

# go_tool BIN DIR MODULE VERSION PKG: a framework's controller, package PKG
# of MODULE at VERSION, built into BIN (unless BIN is stamped VERSION) in a
# throwaway module DIR (never committed) with the dependency versions of
# MODULE's own go.mod, as "go install PKG@VERSION" would but without its
# refusal of a module with replace directives.
go_tool() {
  local bin=$1 version=$4
  if [[ -x $bin && $(cat "$(stamp_file "$bin")" 2>/dev/null) == "$version" ]]; then
    return 0
  fi
  timed "$bin" "$version" build_go_tool "$@"
  log "built: ${BUILD_REPORT[*]}"
}

build_go_tool() {
  local bin=$1 dir=$2 module=$3 version=$4 pkg=$5
  mkdir -p "$dir"
  printf 'module hivesched.local/tools/%s\n\ngo 1.24\n\nrequire %s %s\n' "$(basename "$dir")" "$module" "$version" >"$dir/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >"$dir/tools.go"
  (
    cd "$dir" || exit
    quiet env GOFLAGS="-mod=mod" go mod tidy
    "${NICE[@]}" env GOFLAGS="-mod=mod -buildvcs=false" go build -ldflags "-s -w" -o "$bin" "$pkg"
  )
}

# framework_cmd COMPONENT [ARG] [STOP_HOOK]: a framework script's command
# in $cmd (up, the default; --build; stop), with the lock taken; stop runs
# STOP_HOOK (a function), stops COMPONENT and exits.
framework_cmd() {
  cmd=${2:-up}
  case $cmd in
    up | --build | stop) ;;
    *) die "usage: $0 [--build|stop]" ;;
  esac
  take_lock
  if [[ $cmd == stop ]]; then
    if [[ -n ${3:-} ]]; then "$3"; fi
    stop_component "$1"
    exit 0
  fi
}

# kc ARGS...: kubectl on the local cluster.
kc() { "${KUBECTL:-$LOCAL_BIN/kubectl}" --kubeconfig="$LOCAL_KUBECONFIG" "$@"; }

# framework_preflight COMPONENT WHAT PORT...: a framework's controller
# starts only on a running local cluster of these settings, on ports no
# other process holds (WHAT names the settings that move them).
framework_preflight() {
  local component=$1 what=$2 p
  shift 2
  https_healthy "$APISERVER_PORT" /readyz >/dev/null 2>&1 ||
    die "the local cluster is not up on port $APISERVER_PORT: run make up first"
  if [[ -s $LOCAL_CLUSTER_ENV ]] && ! cmp -s <(cluster_env) "$LOCAL_CLUSTER_ENV"; then
    die "the local cluster runs with the settings in $LOCAL_CLUSTER_ENV, not these: use the same HIVESCHED_* settings"
  fi
  for p in "$@"; do
    if ! component_pid "$component" >/dev/null && port_open "$p"; then
      die "127.0.0.1:$p is in use by a process this script did not start; $component cannot start ($what, hack/local-env.sh)"
    fi
  done
}

# apply_crds FILE...: CRDs, server-side (some are too large for client-side
# apply's last-applied annotation), and wait until they are served.
apply_crds() {
  local args=() f
  for f in "$@"; do args+=(-f "$f"); done
  "${KUBECTL:-$LOCAL_BIN/kubectl}" --kubeconfig="$LOCAL_KUBECONFIG" apply --server-side --force-conflicts "${args[@]}" >/dev/null
  # A CRD just created has no status.conditions yet, which kubectl wait
  # takes for an error rather than for "not yet": ask again.
  for _ in 1 2 3 4 5; do
    "${KUBECTL:-$LOCAL_BIN/kubectl}" --kubeconfig="$LOCAL_KUBECONFIG" wait --for=condition=Established --timeout=60s "${args[@]}" >/dev/null 2>&1 && return 0
    sleep 1
  done
  "${KUBECTL:-$LOCAL_BIN/kubectl}" --kubeconfig="$LOCAL_KUBECONFIG" wait --for=condition=Established --timeout=60s "${args[@]}" >/dev/null
}

# serving_cert NAME DIR: DIR/tls.crt and DIR/tls.key, a webhook server's
# certificate for 127.0.0.1 from the local CA (made once).
serving_cert() {
  local name=$1 dir=$2
  mkdir -p "$dir"
  [[ -s $dir/tls.crt && -s $dir/tls.key ]] && return 0
  (
    cd "$LOCAL_CERTS" || exit
    umask 077
    sign "$name" "/CN=$name" \
      "subjectAltName=IP:127.0.0.1\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth"
    mv -f "$name.crt" "$dir/tls.crt"
    mv -f "$name.key" "$dir/tls.key"
  )
}

# webhook_entry URL CA NAME PATH GROUP VERSION RESOURCE OPERATIONS [SELECTOR]:
# one webhook of an admission webhook configuration, called by URL (the
# local cluster has no Service network) with failure policy Fail; SELECTOR,
# a label key, limits it to the objects that carry it.
webhook_entry() {
  cat <<EOT
- name: $3
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig: {url: "$1$4", caBundle: $2}
  rules: [{apiGroups: ["$5"], apiVersions: [$6], operations: [$8], resources: [$7]}]
EOT
  if [[ -n ${9:-} ]]; then
    printf '  objectSelector: {matchExpressions: [{key: %s, operator: Exists}]}\n' "$9"
  fi
}

# quiet CMD...: run CMD, show its output only if it fails (openssl and
# "go mod tidy" are chatty on success).
quiet() {
  local out
  if ! out=$("$@" 2>&1); then
    printf '%s\n' "$out" >&2
    return 1
  fi
}

# sign NAME SUBJECT EXTENSIONS: a key and a CA-signed certificate.
sign() {
  local name=$1 subj=$2 ext=$3
  quiet openssl req -new -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj"
  quiet openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 16)" \
    -days 3650 -sha256 -out "$name.crt" -extfile <(printf '%b\n' "$ext")
  rm -f "$name.csr"
}

# fail NAME WHY: the message the brief promises: who, why, where its log is.
fail() {
  local logf
  logf=$(log_file "$1")
  log "ERROR: $1 $2; log: $logf; last 20 lines:"
  tail -n 20 "$logf" >&2 2>/dev/null || true
  log "components already started keep running: hack/local-down.sh stops them"
  exit 1
}

# fail_exited NAME: fail, saying that NAME exited and, if this shell started
# it, with which status (bash keeps the statuses of its children). Only for
# a NAME that component_pid finds not running; never in a subshell, which
# cannot wait for its parent's children.
fail_exited() {
  local pid st=0
  pid=$(cat "$(pid_file "$1")" 2>/dev/null) || pid=
  # A live pid is a stranger's (ours exited): wait would block on it.
  if [[ $pid =~ ^[0-9]+$ ]] && ! proc_alive "$pid"; then
    wait "$pid" 2>/dev/null || st=$?
    # 127: not our child (or setsid could not find the binary: its log says).
    if ((st != 127)); then fail "$1" "exited (status $st)"; fi
  fi
  fail "$1" "exited"
}

STARTED=0
# start NAME CMD...: start CMD in the background unless NAME already runs;
# sets STARTED=1 if it started it.
start() {
  local name=$1 pid logf
  shift
  STARTED=0
  if pid=$(component_pid "$name"); then
    log "$name already running (pid $pid)"
    return 0
  fi
  logf=$(log_file "$name")
  if [[ -f $logf ]]; then mv -f "$logf" "$logf.prev"; fi
  log "starting $name (log $logf)"
  # setsid: its own session, so it outlives this script and neither a Ctrl-C
  # in the terminal of "make up" nor a closing terminal reaches it. In a
  # script setsid does not fork (we are no process group leader), so $! is
  # the daemon's own pid. 9>&-: the lock of take_lock must not outlive us.
  setsid "$@" >"$logf" 2>&1 </dev/null 9>&- &
  pid=$!
  # Who $! is, read at once: its start time does not depend on how far its
  # exec of setsid and then of the daemon has got, so component_pid knows it
  # from now on (no waiting for an exec here, and no guessing from
  # /proc/PID/cmdline). If it has exited (and been reaped) already, there is
  # no ident, and component_pid finds no live process: "exited", rightly.
  # The ident file first, then the pid file, each through a rename so that no
  # reader sees half of one: a reader in between sees an ident of another
  # pid and checks the old pid as before.
  local ident f
  if ident=$(proc_ident "$pid"); then
    f=$(ident_file "$name")
    printf '%s\n' "$ident" >"$f.tmp" && mv -f "$f.tmp" "$f"
  else
    rm -f "$(ident_file "$name")"
  fi
  f=$(pid_file "$name")
  printf '%s\n' "$pid" >"$f.tmp" && mv -f "$f.tmp" "$f"
  STARTED=1
}

# wait_healthy NAME TIMEOUT_S CHECK...: poll CHECK until it succeeds; fail
# fast if the process dies ("exited" only then: component_pid identifies the
# process by its pid and start time, whatever its command line says).
wait_healthy() {
  local name=$1 timeout=$2 deadline
  deadline=$(($(now_ms) + timeout * 1000))
  shift 2
  until "$@" >/dev/null 2>&1; do
    component_pid "$name" >/dev/null || fail_exited "$name"
    (($(now_ms) < deadline)) || fail "$name" "not healthy within $timeout s"
    sleep 0.2
  done
}

# https_healthy PORT PATH: a component of ours serving TLS with a cert of our CA.
https_healthy() {
  curl -fsS --max-time 2 --cacert "$LOCAL_CERTS/ca.crt" --cert "$LOCAL_CERTS/admin.crt" \
    --key "$LOCAL_CERTS/admin.key" "https://127.0.0.1:$1$2"
}

# use_local_etcd: put the local etcd on PATH for scheduler_perf (which starts
# its own from there), or stop: test/perf/run.sh builds it (make bench once,
# or make up).
use_local_etcd() {
  if [ ! -x "$LOCAL_BIN/etcd" ]; then
    echo "no etcd at $LOCAL_BIN/etcd: run make bench (or make up) once first" >&2
    exit 2
  fi
  export PATH=$LOCAL_BIN:$PATH
}

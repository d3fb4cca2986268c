#!/usr/bin/env bash
# Bring up a local control plane on loopback for trying hivesched by hand:
# etcd, kube-apiserver, kwok (fake kubelets), fake GPU nodes matching the
# sample physical cluster, the sample VirtualClusters, and hivesched itself.
# Everything is built from Go modules into _output/local/ (no Docker, no kind).
#
#   hack/local-up.sh                          # or: make up
#   HIVESCHED_PROFILE=default hack/local-up.sh  # hivesched as default-scheduler
#   KUBECTL=/usr/bin/kubectl hack/local-up.sh   # use this kubectl, build none
#   HIVESCHED_REPLICAS=2 hack/local-up.sh       # two schedulers, leader election on
#   HIVESCHED_REPLICAS=2 hack/local-up.sh --schedulers
#                                   # only start the replicas that are not running
#
# Safe to re-run: running components are left alone (the scheduler is
# restarted only if its binary or configuration changed), manifests are
# re-applied. Stop with hack/local-down.sh (make down).
set -euo pipefail

# shellcheck source=hack/local-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-env.sh"

START_MS=$(now_ms)

SCHEDULERS_ONLY=0
for arg in "$@"; do
  case $arg in
    --schedulers) SCHEDULERS_ONLY=1 ;;
    *) die "unknown argument '$arg' (known: --schedulers)" ;;
  esac
done

# One replica (the default): leader election off, no lease round trips
# before it schedules. Two: both run leader election as the shipped
# configurations do, with the lease timings below (test/chaos kills the
# leader and measures the standby's takeover; docs/chaos.md).
HIVESCHED_REPLICAS=${HIVESCHED_REPLICAS:-1}
case $HIVESCHED_REPLICAS in
  1 | 2) ;;
  *) die "HIVESCHED_REPLICAS must be 1 or 2, not '$HIVESCHED_REPLICAS'" ;;
esac
# kube-scheduler's defaults are 15 s, 10 s and 2 s: a standby takes over
# 14-21 s after the leader dies (measured, docs/chaos.md). These make it
# 4.4-8.4 s; on two busy cores a renewal still has 4 s to get through (a
# leader that cannot renew exits, and is restarted by whoever runs it:
# test/chaos does).
LEASE_DURATION=${HIVESCHED_LEASE_DURATION:-5s}
RENEW_DEADLINE=${HIVESCHED_RENEW_DEADLINE:-4s}
RETRY_PERIOD=${HIVESCHED_RETRY_PERIOD:-1s}

HIVESCHED_PROFILE=${HIVESCHED_PROFILE:-second}
case $HIVESCHED_PROFILE in
  second) SCHED_CONFIG_SRC=$REPO_ROOT/manifests/scheduler/config-second-scheduler.yaml ;;
  default) SCHED_CONFIG_SRC=$REPO_ROOT/manifests/scheduler/config-default-profile.yaml ;;
  *) die "HIVESCHED_PROFILE must be 'second' or 'default', not '$HIVESCHED_PROFILE'" ;;
esac

# A kubectl built here by default: the machine's kubectl may be missing (fresh
# CI machine) or of another minor version; KUBECTL=... opts out.
KUBECTL=${KUBECTL:-$LOCAL_BIN/kubectl}

SCHED_BIN=$LOCAL_BIN/hivesched-scheduler

take_lock
mkdir -p "$LOCAL_BIN" "$LOCAL_CERTS" "$LOCAL_LOGS" "$LOCAL_DATA" "$LOCAL_TOOLS"

# quiet CMD...: run CMD, show its output only if it fails (openssl and
# "go mod tidy" are chatty on success).
quiet() {
  local out
  if ! out=$("$@" 2>&1); then
    printf '%s\n' "$out" >&2
    return 1
  fi
}

# ---------------------------------------------------------------- binaries

BUILD_REPORT=()

# fresh BIN: the binary exists and is newer than go.mod, so re-runs skip the
# minutes-long builds. (A dependency bump touches go.mod and rebuilds all.)
fresh() { [[ -x $1 && $1 -nt $REPO_ROOT/go.mod ]]; }

# timed NAME CMD...: run a build and remember how long it took.
timed() {
  local name=$1 t0
  shift
  t0=$(now_ms)
  log "building $name"
  "$@"
  BUILD_REPORT+=("$name: $(since "$t0")")
}

# The k8s version this module uses; apiserver and kubectl are stamped with it
# (unstamped builds report v0.0.0-master, which kubectl's skew check and
# component-base's version parsing dislike).
kube_version() {
  (cd "$REPO_ROOT" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
}
kube_ldflags() {
  local v=$1 minor
  minor=${v#v1.}
  minor=${minor%%.*}
  local pkg flags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  printf '%s' "$flags"
}

# For the throwaway tool modules below. -mod=mod: their go.sum starts empty.
# -buildvcs=false: they sit inside our git tree, whose state says nothing
# about etcd or kubectl.
TOOLS_GOFLAGS="-mod=mod -buildvcs=false"

# etcd's go.mod has replace directives, so "go install ...@v3.6.4" is refused:
# build it from a throwaway module that requires it instead.
build_etcd() {
  local dir=$LOCAL_TOOLS/etcd
  mkdir -p "$dir"
  # Rewritten on every build so a new ETCD_VERSION takes effect; go.sum stays.
  cat >"$dir/go.mod" <<EOF
module hivesched.local/tools/etcd

go 1.24.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
  # Keeps the requirement alive through "go mod tidy" (a main package cannot
  # be imported by real code; the tools tag keeps it out of every build).
  cat >"$dir/tools.go" <<'EOF'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
EOF
  (
    cd "$dir"
    quiet env GOFLAGS="$TOOLS_GOFLAGS" go mod tidy
    "${NICE[@]}" env GOFLAGS="$TOOLS_GOFLAGS" go build -ldflags "-s -w" -o "$LOCAL_BIN/etcd" go.etcd.io/etcd/server/v3
  )
}

build_apiserver() {
  local v
  v=$(kube_version)
  (
    cd "$REPO_ROOT"
    if ! go list -deps k8s.io/kubernetes/cmd/kube-apiserver >/dev/null 2>&1; then
      die "go.sum lacks entries for k8s.io/kubernetes/cmd/kube-apiserver; pin it in a //go:build tools file (hack/tools/) and run 'go mod tidy'"
    fi
    "${NICE[@]}" go build -ldflags "$(kube_ldflags "$v")" -o "$LOCAL_BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  )
}

# kubectl from its own throwaway module, not from this one: building
# k8s.io/kubernetes/cmd/kubectl here would add cli-runtime, kustomize and ~20
# other modules to the project's go.mod just for a dev script. main.go is
# k8s.io/kubernetes/cmd/kubectl/kubectl.go of the same release.
build_kubectl() {
  local v staging dir=$LOCAL_TOOLS/kubectl
  v=$(kube_version)
  staging=v0.${v#v1.}
  mkdir -p "$dir"
  cat >"$dir/go.mod" <<EOF
module hivesched.local/tools/kubectl

go 1.24.0

require (
	k8s.io/client-go $staging
	k8s.io/component-base $staging
	k8s.io/kubectl $staging
)
EOF
  cat >"$dir/main.go" <<'EOF'
// kubectl, as in k8s.io/kubernetes/cmd/kubectl/kubectl.go.
package main

import (
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) // nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
EOF
  (
    cd "$dir"
    quiet env GOFLAGS="$TOOLS_GOFLAGS" go mod tidy
    "${NICE[@]}" env GOFLAGS="$TOOLS_GOFLAGS" go build -ldflags "$(kube_ldflags "$v")" -o "$LOCAL_BIN/kubectl" .
  )
}

build_kwok() {
  # "go install pkg@version" ignores the surrounding module: kwok's own go.mod rules.
  GOBIN=$LOCAL_BIN GOFLAGS=-buildvcs=false "${NICE[@]}" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
}

# The scheduler is what one edits, so "newer than go.mod" is not enough here:
# rebuild when any non-test Go file or go.mod/go.sum is newer than the binary.
# (make build stamps a build date, so it always relinks: ~10 s saved per re-run.)
scheduler_stale() {
  [[ -x $SCHED_BIN ]] || return 0
  [[ -n $(find "$REPO_ROOT" \( -path "$REPO_ROOT/.git" -o -path "$REPO_ROOT/_output" -o -path "$REPO_ROOT/bin" \) -prune \
    -o \( \( -name '*.go' ! -name '*_test.go' \) -o -name go.mod -o -name go.sum \) -newer "$SCHED_BIN" -print -quit) ]]
}

build_all() {
  fresh "$LOCAL_BIN/etcd" || timed etcd build_etcd
  fresh "$LOCAL_BIN/kube-apiserver" || timed kube-apiserver build_apiserver
  if [[ $KUBECTL == "$LOCAL_BIN/kubectl" ]]; then
    fresh "$KUBECTL" || timed kubectl build_kubectl
  else
    command -v "$KUBECTL" >/dev/null || die "KUBECTL=$KUBECTL is not an executable"
  fi
  fresh "$LOCAL_BIN/kwok" || timed kwok build_kwok
  if scheduler_stale; then
    timed hivesched-scheduler build_scheduler
  fi
}

# "make build" into _output/local/bin rather than bin/: the running
# scheduler's binary must not change under it when someone rebuilds bin/.
# The Makefile stamps the Kubernetes version it is built from (component-base
# derives the emulation version from it).
build_scheduler() {
  "${NICE[@]}" make -s -C "$REPO_ROOT" build BIN="$LOCAL_BIN"
}

# ---------------------------------------------------------------- certificates

# sign NAME SUBJECT EXTENSIONS: a key and a CA-signed certificate.
sign() {
  local name=$1 subj=$2 ext=$3
  quiet openssl req -new -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj"
  quiet openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 16)" \
    -days 3650 -sha256 -out "$name.crt" -extfile <(printf '%b\n' "$ext")
  rm -f "$name.csr"
}

gen_certs() {
  (
    cd "$LOCAL_CERTS"
    umask 077 # private keys
    if [[ ! -s ca.crt || ! -s ca.key ]]; then
      # A new CA invalidates whatever the old one signed.
      rm -f apiserver.crt apiserver.key admin.crt admin.key
      log "creating certificates in $LOCAL_CERTS"
      quiet openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout ca.key -out ca.crt \
        -subj "/CN=hivesched-local-ca" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    fi
    if [[ ! -s apiserver.crt || ! -s apiserver.key ]]; then
      # 10.96.0.1 and kubernetes.default: what in-cluster clients would dial.
      sign apiserver "/CN=kube-apiserver" \
        "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes.default,DNS:kubernetes,DNS:kubernetes.default.svc\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth"
    fi
    if [[ ! -s admin.crt || ! -s admin.key ]]; then
      # O=system:masters: full access even if authorization becomes RBAC.
      sign admin "/O=system:masters/CN=admin" \
        "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth"
    fi
    if [[ ! -s sa.key || ! -s sa.pub ]]; then
      quiet openssl genrsa -out sa.key 2048
      quiet openssl rsa -in sa.key -pubout -out sa.pub
    fi
  )
}

# write_if_changed FILE: stdin to FILE, leaving FILE's mtime alone when the
# content is the same (the scheduler restarts when its config is newer).
write_if_changed() {
  local tmp
  tmp=$(mktemp "$1.XXXXXX")
  cat >"$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv -f "$tmp" "$1"; fi
}

write_kubeconfig() {
  # Embedded, so the file can be copied anywhere on this machine.
  write_if_changed "$LOCAL_KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: hivesched-local
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $(base64 -w0 "$LOCAL_CERTS/ca.crt")
users:
- name: admin
  user:
    client-certificate-data: $(base64 -w0 "$LOCAL_CERTS/admin.crt")
    client-key-data: $(base64 -w0 "$LOCAL_CERTS/admin.key")
contexts:
- name: hivesched-local
  context:
    cluster: hivesched-local
    user: admin
current-context: hivesched-local
EOF
  chmod 600 "$LOCAL_KUBECONFIG"
}

# The sample config with our kubeconfig in its clientConnection.kubeconfig
# (kube-scheduler ignores --kubeconfig when --config is given) and, for one
# replica, leader election off (no lease round trips before it schedules);
# for two, leader election on with the lease timings above, and a second
# file for scheduler-2 that differs in its inspect API address.
write_scheduler_config() {
  grep -q '^  kubeconfig: ""$' "$SCHED_CONFIG_SRC" ||
    die "$SCHED_CONFIG_SRC has no 'clientConnection: kubeconfig: \"\"' line for local-up.sh to fill in"
  local le=(-e 's/^\([[:space:]]*leaderElect:\).*/\1 false/')
  if ((HIVESCHED_REPLICAS == 2)); then
    le=(-e "s/^\\([[:space:]]*\\)leaderElect:.*/\\1leaderElect: true\\n\\1leaseDuration: $LEASE_DURATION\\n\\1renewDeadline: $RENEW_DEADLINE\\n\\1retryPeriod: $RETRY_PERIOD/")
  fi
  {
    printf '# Generated by hack/local-up.sh from %s\n' "${SCHED_CONFIG_SRC#"$REPO_ROOT"/}"
    sed "${le[@]}" -e "s|^  kubeconfig: \"\"\$|  kubeconfig: $LOCAL_KUBECONFIG|" "$SCHED_CONFIG_SRC"
  } | write_if_changed "$LOCAL_SCHED_CONFIG"
  grep -q "leaderElect: $( ((HIVESCHED_REPLICAS == 2)) && echo true || echo false)" "$LOCAL_SCHED_CONFIG" ||
    die "could not set leader election in $LOCAL_SCHED_CONFIG"
  grep -qxF "  kubeconfig: $LOCAL_KUBECONFIG" "$LOCAL_SCHED_CONFIG" ||
    die "could not set clientConnection.kubeconfig in $LOCAL_SCHED_CONFIG"
  if ((HIVESCHED_REPLICAS == 2)); then
    # The first replica serves the inspect API on the default address.
    sed 's/^\([[:space:]]*\)permitWaitingTimeSeconds:\(.*\)$/\1permitWaitingTimeSeconds:\2\n\1inspectBindAddress: 127.0.0.1:10263/' \
      "$LOCAL_SCHED_CONFIG" | write_if_changed "$LOCAL_SCHED2_CONFIG"
    grep -q 'inspectBindAddress: 127.0.0.1:10263' "$LOCAL_SCHED2_CONFIG" ||
      die "could not set inspectBindAddress in $LOCAL_SCHED2_CONFIG"
  fi
}

# ---------------------------------------------------------------- processes

kc() { "$KUBECTL" --kubeconfig="$LOCAL_KUBECONFIG" "$@"; }

# fail NAME WHY: the message the brief promises: who, why, where its log is.
fail() {
  local logf
  logf=$(log_file "$1")
  log "ERROR: $1 $2; log: $logf; last 20 lines:"
  tail -n 20 "$logf" >&2 2>/dev/null || true
  log "components already started keep running: hack/local-down.sh stops them"
  exit 1
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
  printf '%s\n' "$!" >"$(pid_file "$name")"
  STARTED=1
}

# wait_healthy NAME TIMEOUT_S CHECK...: poll CHECK until it succeeds; fail
# fast if the process dies.
wait_healthy() {
  local name=$1 timeout=$2 deadline
  deadline=$(($(now_ms) + timeout * 1000))
  shift 2
  until "$@" >/dev/null 2>&1; do
    component_pid "$name" >/dev/null || fail "$name" "exited"
    (($(now_ms) < deadline)) || fail "$name" "not healthy within $timeout s"
    sleep 0.2
  done
}

# refuse_foreign_port NAME PORT: a port held by a process we did not start
# (another engineer's etcd, an e2e test) would make us talk to the wrong
# server; say so instead.
refuse_foreign_port() {
  if ! component_pid "$1" >/dev/null && port_open "$2"; then
    die "127.0.0.1:$2 is in use by a process this script did not start; $1 cannot start"
  fi
}

# Checked before anything starts, so a conflict leaves nothing half up.
preflight() {
  refuse_foreign_port etcd "$ETCD_PORT"
  refuse_foreign_port etcd "$ETCD_PEER_PORT"
  refuse_foreign_port kube-apiserver "$APISERVER_PORT"
}

etcd_healthy() { curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
apiserver_healthy() {
  curl -fsS --max-time 2 --cacert "$LOCAL_CERTS/ca.crt" --cert "$LOCAL_CERTS/admin.crt" \
    --key "$LOCAL_CERTS/admin.key" "$APISERVER_URL/readyz"
}

start_etcd() {
  # --unsafe-no-fsync: a throwaway store; fsync is most of etcd's latency.
  start etcd "$LOCAL_BIN/etcd" \
    --name=local \
    --data-dir="$LOCAL_DATA/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="local=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync
  wait_healthy etcd 30 etcd_healthy
}

start_apiserver() {
  # No controller-manager runs: the ServiceAccount admission would wait for
  # token controllers, and TaintNodesByCondition would leave new nodes
  # tainted not-ready forever. --endpoint-reconciler-type=none: the default
  # reconciler refuses a loopback advertise address.
  start kube-apiserver "$LOCAL_BIN/kube-apiserver" \
    --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 \
    --secure-port="$APISERVER_PORT" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --tls-cert-file="$LOCAL_CERTS/apiserver.crt" \
    --tls-private-key-file="$LOCAL_CERTS/apiserver.key" \
    --client-ca-file="$LOCAL_CERTS/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$LOCAL_CERTS/sa.pub" \
    --service-account-signing-key-file="$LOCAL_CERTS/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 \
    --authorization-mode=AlwaysAllow \
    --endpoint-reconciler-type=none \
    --disable-admission-plugins=ServiceAccount,TaintNodesByCondition
  wait_healthy kube-apiserver 90 apiserver_healthy
}

kwok_alive() {
  # kwok serves no health endpoint by default. "Watch nodes" is what v0.7.0
  # logs once its informers are set up; nodes turning Ready below is the
  # real test.
  grep -q 'Watch nodes' "$(log_file kwok)"
}

start_kwok() {
  # Only nodes annotated kwok.x-k8s.io/node=fake: should this ever point at a
  # cluster with real kubelets, kwok leaves their nodes alone.
  start kwok "$LOCAL_BIN/kwok" \
    --kubeconfig="$LOCAL_KUBECONFIG" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake
  wait_healthy kwok 30 kwok_alive
}

# node NAME GPUS CPU MEMORY: one fake node. Status is accepted on create for
# nodes; kwok keeps capacity/allocatable and adds Ready conditions.
node() {
  cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $1
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/hostname: $1
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
status:
  capacity: &res
    nvidia.com/gpu: "$2"
    cpu: "$3"
    memory: $4
    pods: "110"
  allocatable: *res
  nodeInfo:
    architecture: amd64
    operatingSystem: linux
    kubeletVersion: fake
    kubeProxyVersion: fake
EOF
}

# The nodes of the sample physicalCluster in both scheduler configs: racks a
# and b of four 8-GPU V100 nodes, and two 4-GPU T4 nodes.
apply_cluster_objects() {
  log "applying CRD, nodes, namespaces, VirtualClusters"
  kc apply -f "$REPO_ROOT/manifests/crds/" >/dev/null
  kc wait --for=condition=Established --timeout=60s -f "$REPO_ROOT/manifests/crds/" >/dev/null
  # What tenants may not do to pods and the placement key (docs/security.md);
  # the local scheduler runs as the admin, whom the policies exempt.
  kc apply -f "$REPO_ROOT/manifests/admission/" >/dev/null

  local n
  {
    for n in gpu-a0 gpu-a1 gpu-a2 gpu-a3 gpu-b0 gpu-b1 gpu-b2 gpu-b3; do node "$n" 8 64 512Gi; done
    for n in t4-0 t4-1; do node "$n" 4 32 128Gi; done
  } | kc apply -f - >/dev/null
  if ! kc wait --for=condition=Ready --timeout=60s node -l type=kwok >/dev/null; then
    fail kwok "did not make the fake nodes Ready within 60 s"
  fi

  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: vision}
---
apiVersion: v1
kind: Namespace
metadata: {name: speech}
EOF
  kc apply -f "$REPO_ROOT/manifests/samples/virtualclusters.yaml" >/dev/null
}

scheduler_started() { grep -q 'Starting Kubernetes Scheduler' "$(log_file "$1")"; }

# start_replica NAME CONFIG: the one component under development: a rebuilt
# binary or a changed config (other HIVESCHED_PROFILE or replica count)
# restarts it.
start_replica() {
  local name=$1 config=$2 pid
  if pid=$(component_pid "$name") &&
    [[ $SCHED_BIN -nt $(pid_file "$name") || $config -nt $(pid_file "$name") ]]; then
    log "scheduler binary or config changed since $name (pid $pid) started: restarting it"
    stop_component "$name"
  fi
  start "$name" "$SCHED_BIN" \
    --config="$config" \
    --secure-port=0 \
    --v=2
  REPLICA_STARTED+=("$STARTED")
}

start_scheduler() {
  local i names=(scheduler)
  write_scheduler_config
  REPLICA_STARTED=()
  start_replica scheduler "$LOCAL_SCHED_CONFIG"
  if ((HIVESCHED_REPLICAS == 2)); then
    names+=(scheduler-2)
    start_replica scheduler-2 "$LOCAL_SCHED2_CONFIG"
  else
    stop_component scheduler-2
  fi
  if [[ " ${REPLICA_STARTED[*]} " == *" 1 "* ]]; then
    # Alive 3 s after start: bad flags and config errors exit before that.
    sleep 3
  fi
  for i in "${!names[@]}"; do
    if ((REPLICA_STARTED[i])); then
      component_pid "${names[i]}" >/dev/null || fail "${names[i]}" "exited"
    fi
    wait_healthy "${names[i]}" 30 scheduler_started "${names[i]}"
  done
}

# ---------------------------------------------------------------- main

if ((SCHEDULERS_ONLY)); then
  # The harness of test/chaos restarts a killed replica this way: nothing
  # else is touched (the full run re-applies the nodes it may have deleted).
  take_lock
  apiserver_healthy >/dev/null 2>&1 || die "kube-apiserver is not up: run hack/local-up.sh without --schedulers"
  scheduler_stale && die "the scheduler binary is stale: run hack/local-up.sh without --schedulers"
  start_scheduler
  exit 0
fi

build_all
BUILD_MS=$(now_ms)
preflight
gen_certs
start_etcd
start_apiserver
write_kubeconfig
start_kwok
apply_cluster_objects
start_scheduler

log "up (profile $HIVESCHED_PROFILE: $(case $HIVESCHED_PROFILE in second) echo 'pods select hivesched with schedulerName: hivesched' ;; *) echo 'hivesched is the default-scheduler' ;; esac))"
if ((${#BUILD_REPORT[@]})); then
  log "built: ${BUILD_REPORT[*]}"
fi
for c in "${COMPONENTS[@]}"; do
  if pid=$(component_pid "$c"); then
    log "  $c: pid $pid, log $(log_file "$c")"
  fi
done
cat <<EOF

kubeconfig: $LOCAL_KUBECONFIG
  export KUBECONFIG=$LOCAL_KUBECONFIG
  $KUBECTL get nodes,vc
bring-up took $(since "$START_MS") ($(since "$BUILD_MS") after builds); stop with: make down
EOF

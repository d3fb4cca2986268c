#!/usr/bin/env bash
# Bring up a local control plane on loopback for trying hivesched by hand:
# etcd, kube-apiserver, kube-controller-manager (Job, ReplicaSet, Deployment,
# garbage collector, namespace, service account and token controllers),
# kwok (fake kubelets), fake GPU nodes matching the sample physical cluster,
# a fake DRA driver publishing their GPUs as ResourceSlices (test/fakedra),
# the sample VirtualClusters, and hivesched itself. Everything is built from
# Go modules into _output/local/ (no Docker, no kind), from the Kubernetes
# release in go.mod.
#
#   hack/local-up.sh                          # or: make up
#   hack/local-up.sh --build                  # only build the binaries
#   HIVESCHED_PORT_OFFSET=1000 hack/local-up.sh # other ports (hack/local-env.sh)
#   HIVESCHED_PROFILE=default hack/local-up.sh  # hivesched as default-scheduler
#   HIVESCHED_PROFILE=stock hack/local-up.sh    # the same binary, stock default
#                                   # profile, no hivesched plugin (make conformance)
#   HIVESCHED_SCHEDULER_NAME=scheduler-plugins-scheduler hack/local-up.sh
#                                   # its profile answers to that schedulerName
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
BUILD_ONLY=0
for arg in "$@"; do
  case $arg in
    --schedulers) SCHEDULERS_ONLY=1 ;;
    --build) BUILD_ONLY=1 ;;
    *) die "unknown argument '$arg' (known: --schedulers, --build)" ;;
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
  # The baseline make conformance compares hivesched's default profile with:
  # the hivesched-scheduler binary running kube-scheduler's stock profile
  # (no hivesched plugin enabled), so that a spec failing only on "default"
  # is hivesched's doing and not the binary's, the cluster's or kwok's.
  stock) SCHED_CONFIG_SRC=$REPO_ROOT/manifests/scheduler/config-stock.yaml ;;
  *) die "HIVESCHED_PROFILE must be 'second', 'default' or 'stock', not '$HIVESCHED_PROFILE'" ;;
esac
# The schedulerName hivesched's profile answers to (profile second): a
# framework that writes its own name into every pod it creates (KubeRay's
# scheduler-plugins mode writes scheduler-plugins-scheduler) is scheduled by
# hivesched under that name; the admission policy's list of hivesched's
# profiles (manifests/admission/gpu-pod-policy.yaml) gets it too. A change
# restarts the scheduler (its config changed); pods it bound under another
# name stay its own (their placement records are signed, whatever name).
HIVESCHED_SCHEDULER_NAME=${HIVESCHED_SCHEDULER_NAME:-hivesched}
[[ $HIVESCHED_SCHEDULER_NAME =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] ||
  die "HIVESCHED_SCHEDULER_NAME must be a DNS subdomain, not '$HIVESCHED_SCHEDULER_NAME'"
if [[ $HIVESCHED_PROFILE != second && $HIVESCHED_SCHEDULER_NAME != hivesched ]]; then
  die "HIVESCHED_SCHEDULER_NAME names the second-scheduler profile; with HIVESCHED_PROFILE=$HIVESCHED_PROFILE hivesched is default-scheduler"
fi

# A kubectl built here by default: the machine's kubectl may be missing (fresh
# CI machine) or of another minor version; KUBECTL=... opts out.
KUBECTL=${KUBECTL:-$LOCAL_BIN/kubectl}

SCHED_BIN=$LOCAL_BIN/hivesched-scheduler
FAKEDRA_BIN=$LOCAL_BIN/hivesched-fakedra

take_lock
mkdir -p "$LOCAL_BIN" "$LOCAL_CERTS" "$LOCAL_LOGS" "$LOCAL_DATA" "$LOCAL_TOOLS"

# ---------------------------------------------------------------- binaries

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

# etcd's go.mod has replace directives, so "go install ...@$ETCD_VERSION" is
# refused: build it from a throwaway module that requires it instead.
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

build_kube_apiserver() {
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

# kube-controller-manager from a throwaway module, like kubectl: it imports
# kubelet packages (cadvisor, cgroups, ...) that would add ~15 modules to the
# project's go.mod and go.sum for a dev script. Its go.mod is the project's
# (renamed, without the tool block): the same requirements and replace
# directives, so the same versions and the build cache that kube-apiserver
# and the scheduler filled are reused.
build_kube_controller_manager() {
  local v dir=$LOCAL_TOOLS/kube-controller-manager
  v=$(kube_version)
  mkdir -p "$dir"
  {
    printf 'module hivesched.local/tools/kube-controller-manager\n'
    sed -e '/^module /d' -e '/^tool (/,/^)/d' -e '/^tool /d' "$REPO_ROOT/go.mod"
  } >"$dir/go.mod"
  cp "$REPO_ROOT/go.sum" "$dir/go.sum"
  cat >"$dir/tools.go" <<'EOF'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-controller-manager"
EOF
  (
    cd "$dir"
    quiet env GOFLAGS="$TOOLS_GOFLAGS" go mod tidy
    "${NICE[@]}" env GOFLAGS="$TOOLS_GOFLAGS" go build -ldflags "$(kube_ldflags "$v")" \
      -o "$LOCAL_BIN/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
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
  # "go install pkg@version" ignores the surrounding module: kwok's own go.mod
  # rules (v0.8.0: client-go v0.36.1, go 1.26).
  GOBIN=$LOCAL_BIN GOFLAGS=-buildvcs=false "${NICE[@]}" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
}

# The scheduler is what one edits, so "newer than go.mod" is not enough here:
# rebuild when any non-test Go file or go.mod/go.sum is newer than the binary.
# (make build stamps a build date, so it always relinks: ~10 s saved per re-run.)
# go_stale BIN: the same for any binary built from this module.
go_stale() {
  [[ -x $1 ]] || return 0
  [[ -n $(find "$REPO_ROOT" \( -path "$REPO_ROOT/.git" -o -path "$REPO_ROOT/_output" -o -path "$REPO_ROOT/bin" \) -prune \
    -o \( \( -name '*.go' ! -name '*_test.go' \) -o -name go.mod -o -name go.sum \) -newer "$1" -print -quit) ]]
}
scheduler_stale() { go_stale "$SCHED_BIN"; }

build_all() {
  local kv b
  kv=$(kube_version)
  fresh "$LOCAL_BIN/etcd" "$ETCD_VERSION" || timed "$LOCAL_BIN/etcd" "$ETCD_VERSION" build_etcd
  for b in kube-apiserver kube-controller-manager; do
    fresh "$LOCAL_BIN/$b" "$kv" || timed "$LOCAL_BIN/$b" "$kv" "build_${b//-/_}"
  done
  if [[ $KUBECTL == "$LOCAL_BIN/kubectl" ]]; then
    fresh "$KUBECTL" "$kv" || timed "$KUBECTL" "$kv" build_kubectl
  else
    command -v "$KUBECTL" >/dev/null || die "KUBECTL=$KUBECTL is not an executable"
  fi
  fresh "$LOCAL_BIN/kwok" "$KWOK_VERSION" || timed "$LOCAL_BIN/kwok" "$KWOK_VERSION" build_kwok
  if scheduler_stale; then
    timed "$SCHED_BIN" "$kv" build_scheduler
  fi
  if go_stale "$FAKEDRA_BIN"; then
    timed "$FAKEDRA_BIN" "$kv" build_fakedra
  fi
}

# The fake DRA driver (test/fakedra): small, from this module.
build_fakedra() {
  (cd "$REPO_ROOT" && "${NICE[@]}" go build -o "$FAKEDRA_BIN" ./test/fakedra)
}

# "make build" into _output/local/bin rather than bin/: the running
# scheduler's binary must not change under it when someone rebuilds bin/.
# The Makefile stamps the Kubernetes version it is built from (component-base
# derives the emulation version from it).
build_scheduler() {
  "${NICE[@]}" make -s -C "$REPO_ROOT" build BIN="$LOCAL_BIN"
}

# ---------------------------------------------------------------- certificates

gen_certs() {
  (
    cd "$LOCAL_CERTS"
    umask 077 # private keys
    if [[ ! -s ca.crt || ! -s ca.key ]]; then
      # A new CA invalidates whatever the old one signed.
      rm -f apiserver.crt apiserver.key admin.crt admin.key kube-controller-manager.crt kube-controller-manager.key
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
    if [[ ! -s kube-controller-manager.crt || ! -s kube-controller-manager.key ]]; then
      # Its secure port serves only health checks here; signed by our CA so
      # that they need no --insecure.
      sign kube-controller-manager "/CN=kube-controller-manager" \
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth"
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
  # Each replica's inspect API on its own port (INSPECT_PORT, INSPECT_PORT_2):
  # two processes cannot listen on one, nor two checkouts' schedulers.
  local inspect='s/^\([[:space:]]*\)permitWaitingTimeSeconds:\(.*\)$/\1permitWaitingTimeSeconds:\2\n\1inspectBindAddress: 127.0.0.1:'
  # Another shape than the sample (HIVESCHED_CLUSTER) replaces the
  # physicalCluster section, the last of the HiveSched args.
  local cut=()
  if [[ $CLUSTER != sample ]] && grep -q '^      physicalCluster:$' "$SCHED_CONFIG_SRC"; then
    cut=(-e '/^      physicalCluster:$/,$d')
  fi
  {
    printf '# Generated by hack/local-up.sh from %s\n' "${SCHED_CONFIG_SRC#"$REPO_ROOT"/}"
    sed "${le[@]}" "${cut[@]}" -e "s|^  kubeconfig: \"\"\$|  kubeconfig: $LOCAL_KUBECONFIG|" -e "$inspect$INSPECT_PORT/" \
      -e "s/^- schedulerName: hivesched\$/- schedulerName: $HIVESCHED_SCHEDULER_NAME/" "$SCHED_CONFIG_SRC"
    if ((${#cut[@]})); then
      printf '      # HIVESCHED_CLUSTER=%s: manifests/samples/%s/physical-cluster.yaml\n' "$CLUSTER" "$CLUSTER"
      "${CLUSTER}_physical_cluster"
    fi
  } | write_if_changed "$LOCAL_SCHED_CONFIG"
  if [[ $HIVESCHED_PROFILE == second ]]; then
    grep -qx -- "- schedulerName: $HIVESCHED_SCHEDULER_NAME" "$LOCAL_SCHED_CONFIG" ||
      die "could not set the profile's schedulerName in $LOCAL_SCHED_CONFIG"
  fi
  # The stock profile has no HiveSched args, hence no inspect API to place.
  if grep -q 'permitWaitingTimeSeconds:' "$SCHED_CONFIG_SRC"; then
    grep -q "inspectBindAddress: 127.0.0.1:$INSPECT_PORT\$" "$LOCAL_SCHED_CONFIG" ||
      die "could not set inspectBindAddress in $LOCAL_SCHED_CONFIG"
  fi
  grep -q "leaderElect: $( ((HIVESCHED_REPLICAS == 2)) && echo true || echo false)" "$LOCAL_SCHED_CONFIG" ||
    die "could not set leader election in $LOCAL_SCHED_CONFIG"
  grep -qxF "  kubeconfig: $LOCAL_KUBECONFIG" "$LOCAL_SCHED_CONFIG" ||
    die "could not set clientConnection.kubeconfig in $LOCAL_SCHED_CONFIG"
  if ((HIVESCHED_REPLICAS == 2)); then
    sed "s/inspectBindAddress: 127.0.0.1:$INSPECT_PORT\$/inspectBindAddress: 127.0.0.1:$INSPECT_PORT_2/" \
      "$LOCAL_SCHED_CONFIG" | write_if_changed "$LOCAL_SCHED2_CONFIG"
    if grep -q 'permitWaitingTimeSeconds:' "$SCHED_CONFIG_SRC"; then
      grep -q "inspectBindAddress: 127.0.0.1:$INSPECT_PORT_2\$" "$LOCAL_SCHED2_CONFIG" ||
        die "could not set inspectBindAddress in $LOCAL_SCHED2_CONFIG"
    fi
  fi
}

# ---------------------------------------------------------------- processes

kc() { "$KUBECTL" --kubeconfig="$LOCAL_KUBECONFIG" "$@"; }

# refuse_foreign_port NAME PORT: a port held by a process we did not start
# (another checkout's cluster, another engineer's etcd, an e2e test) would
# make us talk to the wrong server; say so instead.
refuse_foreign_port() {
  if ! component_pid "$1" >/dev/null && port_open "$2"; then
    die "127.0.0.1:$2 is in use by a process this script did not start; $1 cannot start (another local cluster? set HIVESCHED_PORT_OFFSET or HIVESCHED_<NAME>_PORT, hack/local-env.sh)"
  fi
}

# any_running: true if a component of this checkout's cluster runs.
any_running() {
  local c
  for c in "${COMPONENTS[@]}"; do
    component_pid "$c" >/dev/null && return 0
  done
  return 1
}

# check_ports: a running cluster keeps the ports (and feature gates) it
# started with; starting the missing components with others would split it.
check_ports() {
  if any_running && [[ -s $LOCAL_CLUSTER_ENV ]] && ! cmp -s <(cluster_env) "$LOCAL_CLUSTER_ENV"; then
    die "the local cluster in $LOCAL_DIR runs with the settings in $LOCAL_CLUSTER_ENV, not these ($(cluster_env | diff "$LOCAL_CLUSTER_ENV" - | sed -n 's/^> //p' | paste -sd' ' -)); use the same HIVESCHED_* settings, or stop it first (make down)"
  fi
}

# Checked before anything starts, so a conflict leaves nothing half up.
preflight() {
  check_ports
  refuse_foreign_port etcd "$ETCD_PORT"
  refuse_foreign_port etcd "$ETCD_PEER_PORT"
  refuse_foreign_port kube-apiserver "$APISERVER_PORT"
  refuse_foreign_port kube-controller-manager "$KCM_PORT"
  refuse_foreign_port kwok "$KWOK_PORT"
  refuse_foreign_port scheduler "$INSPECT_PORT"
  if ((HIVESCHED_REPLICAS == 2)); then
    refuse_foreign_port scheduler-2 "$INSPECT_PORT_2"
  fi
  cluster_env >"$LOCAL_CLUSTER_ENV"
}

etcd_healthy() { curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
apiserver_healthy() { https_healthy "$APISERVER_PORT" /readyz; }
kcm_healthy() { https_healthy "$KCM_PORT" /healthz; }

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

# gate_flags [GATES]: the feature gates (local-env.sh's FEATURE_GATES), as a
# flag; none if the list is empty.
gate_flags() {
  local gates=${1-$FEATURE_GATES}
  [[ -z $gates ]] || printf '%s\n' "--feature-gates=$gates"
}

start_apiserver() {
  # TaintNodesByCondition stays off: it taints every new node not-ready, and
  # only the node lifecycle controller, which we do not run (kwok's nodes are
  # Ready from the start), would take the taint off. ServiceAccount admission
  # is on: kube-controller-manager makes the service accounts and tokens.
  # --endpoint-reconciler-type=none: the default reconciler refuses a
  # loopback advertise address.
  # An API server started by an older local-up.sh without
  # --allow-privileged=true is restarted (its flags are fixed at start).
  local pid
  if pid=$(component_pid kube-apiserver) &&
    ! tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- --allow-privileged=true; then
    log "kube-apiserver (pid $pid) runs without --allow-privileged=true: restarting it"
    stop_component kube-apiserver
  fi
  # --allow-privileged=true as kubeadm's API server has it: without it any
  # pod with a privileged container is refused (Kubernetes' e2e framework
  # creates some, e.g. its GangScheduling spec's pods; make conformance).
  # shellcheck disable=SC2054 # the commas are in flag values
  local args=(
    --allow-privileged=true
    --bind-address=127.0.0.1
    --advertise-address=127.0.0.1
    --secure-port="$APISERVER_PORT"
    --etcd-servers="http://127.0.0.1:$ETCD_PORT"
    --tls-cert-file="$LOCAL_CERTS/apiserver.crt"
    --tls-private-key-file="$LOCAL_CERTS/apiserver.key"
    --client-ca-file="$LOCAL_CERTS/ca.crt"
    --service-account-issuer=https://kubernetes.default.svc
    --service-account-key-file="$LOCAL_CERTS/sa.pub"
    --service-account-signing-key-file="$LOCAL_CERTS/sa.key"
    --service-cluster-ip-range=10.96.0.0/16
    --authorization-mode=Node,RBAC
    --endpoint-reconciler-type=none
    --disable-admission-plugins=TaintNodesByCondition
  )
  [[ -z $RUNTIME_CONFIG ]] || args+=(--runtime-config="$RUNTIME_CONFIG")
  mapfile -t -O "${#args[@]}" args < <(gate_flags)
  start kube-apiserver "$LOCAL_BIN/kube-apiserver" "${args[@]}"
  wait_healthy kube-apiserver 90 apiserver_healthy
}

# The controllers a user of Jobs, Deployments and operators needs, and what
# they lean on: the garbage collector (Jobs' pods, ReplicaSets, operators'
# children go with their owner), namespace deletion, service accounts and
# their tokens (the ServiceAccount admission refuses pods whose account does
# not exist), the root CA ConfigMap every pod's token volume names, and
# podgroup-protection (the PodGroupProtection admission, on by default in
# 1.37, puts a finalizer on every Workload API PodGroup that only this
# controller removes: without it a Job's PodGroup never goes away), and
# clusterrole-aggregation (the API server authorizes with RBAC: the
# built-in admin, edit and view roles get their rules from it), and
# resourceclaim (DRA: it creates the ResourceClaims of pods that name a
# ResourceClaimTemplate, which hivesched then allocates, and takes finished
# or deleted pods out of their claims' reservedFor, deallocating claims
# nobody uses any more, so that their GPUs' cells are free again).
# The persistent-volume binder binds PVCs to PVs (a pod with an unbound
# PVC is never scheduled), and the two protection controllers take the
# finalizers the StorageObjectInUseProtection admission puts on every PVC
# and PV off again (without them a namespace holding a PVC is never
# deleted); ReplicationControllers get their pods as ReplicaSets do.
# Kubernetes' e2e suite (make conformance) leans on all four.
KCM_CONTROLLERS=job-controller,replicaset-controller,deployment-controller,garbage-collector-controller
KCM_CONTROLLERS+=,namespace-controller,serviceaccount-controller,serviceaccount-token-controller
KCM_CONTROLLERS+=,root-ca-certificate-publisher-controller,podgroup-protection-controller
KCM_CONTROLLERS+=,clusterrole-aggregation-controller,resourceclaim-controller
KCM_CONTROLLERS+=,persistentvolume-binder-controller,persistentvolumeclaim-protection-controller
KCM_CONTROLLERS+=,persistentvolume-protection-controller,replicationcontroller-controller
# LeaderWorkerSet (hack/local-lws.sh) runs each replica group as two
# StatefulSets.
KCM_CONTROLLERS+=,statefulset-controller

start_controller_manager() {
  # A controller manager started by an older local-up.sh with other
  # controllers (before resourceclaim-controller, say) is restarted.
  local pid
  if pid=$(component_pid kube-controller-manager) &&
    ! tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "--controllers=$KCM_CONTROLLERS"; then
    log "kube-controller-manager (pid $pid) runs other controllers than these: restarting it"
    stop_component kube-controller-manager
  fi
  # --leader-elect=false: one instance, no lease round trips. The API server
  # address and credentials come from the admin kubeconfig (AlwaysAllow).
  local args=(
    --kubeconfig="$LOCAL_KUBECONFIG"
    --authentication-kubeconfig="$LOCAL_KUBECONFIG"
    --authorization-kubeconfig="$LOCAL_KUBECONFIG"
    --bind-address=127.0.0.1
    --secure-port="$KCM_PORT"
    --tls-cert-file="$LOCAL_CERTS/kube-controller-manager.crt"
    --tls-private-key-file="$LOCAL_CERTS/kube-controller-manager.key"
    --leader-elect=false
    --controllers="$KCM_CONTROLLERS"
    --service-account-private-key-file="$LOCAL_CERTS/sa.key"
    --root-ca-file="$LOCAL_CERTS/ca.crt"
    --use-service-account-credentials=false
  )
  mapfile -t -O "${#args[@]}" args < <(gate_flags)
  start kube-controller-manager "$LOCAL_BIN/kube-controller-manager" "${args[@]}"
  wait_healthy kube-controller-manager 60 kcm_healthy
}

kwok_healthy() { curl -fsS --max-time 2 "http://127.0.0.1:$KWOK_PORT/healthz"; }

# kwok v0.8.0 ships no default stages: it gets kwok's own "fast" node and pod
# stages of the same release (from its module), but for pod-delete, which
# hack/kwok-pod-delete.yaml replaces (why there), plus hack/kwok-pod-complete.yaml,
# which lets pods of Jobs succeed after a delay (10 s, or the pod's
# annotation pod-complete.stage.kwok.x-k8s.io/delay). Every other pod runs
# until deleted, as a long-running training job or server would.
write_kwok_stages() {
  local dir f
  dir=$(cd "$LOCAL_TOOLS" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -d $dir/kustomize/stage ]] || die "no kwok $KWOK_VERSION module source with kustomize/stage (go mod download sigs.k8s.io/kwok@$KWOK_VERSION)"
  {
    printf '# Generated by hack/local-up.sh: kwok %s stages, pod-delete and pod-complete from hack/\n' "$KWOK_VERSION"
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
      pod/fast/pod-ready.yaml; do
      [[ -s $dir/kustomize/stage/$f ]] || die "kwok $KWOK_VERSION has no stage $f"
      printf -- '---\n'
      cat "$dir/kustomize/stage/$f"
    done
    printf -- '---\n'
    cat "$REPO_ROOT/hack/kwok-pod-delete.yaml"
    printf -- '---\n'
    cat "$REPO_ROOT/hack/kwok-pod-complete.yaml"
  } | write_if_changed "$LOCAL_DIR/kwok-stages.yaml"
}

start_kwok() {
  write_kwok_stages
  local pid
  if pid=$(component_pid kwok) && [[ $LOCAL_DIR/kwok-stages.yaml -nt $(pid_file kwok) ]]; then
    log "kwok's stages changed since it (pid $pid) started: restarting it"
    stop_component kwok
  fi
  # Only nodes annotated kwok.x-k8s.io/node=fake: should this ever point at a
  # cluster with real kubelets, kwok leaves their nodes alone. KWOK_WORKDIR:
  # kwok would otherwise also load ~/.kwok/kwok.yaml, whatever it holds.
  local -x KWOK_WORKDIR=$LOCAL_DATA/kwok
  mkdir -p "$KWOK_WORKDIR"
  start kwok "$LOCAL_BIN/kwok" \
    --kubeconfig="$LOCAL_KUBECONFIG" \
    --config="$LOCAL_DIR/kwok-stages.yaml" \
    --server-address="127.0.0.1:$KWOK_PORT" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake
  wait_healthy kwok 30 kwok_healthy
}

# node NAME GPUS CPU MEMORY PRODUCT ZONE IP [LABEL]: one fake node (LABEL: one
# more label, "key: value"); PRODUCT is its GPU
# model as GPU Feature Discovery labels it (the fake DRA driver's devices'
# productName). Status is accepted on create for
# nodes; kwok keeps capacity/allocatable and adds Ready conditions.
# What a kubelet on a cloud VM would also report, and Kubernetes' e2e
# suite (make conformance) reads: a zone label (its Multi-AZ specs spread
# over zones), an InternalIP (its hostPort specs bind to the node's IP;
# from 192.0.2.0/24, TEST-NET-1, reachable nowhere, as nothing runs on a
# kwok node) and ephemeral-storage (its local-storage spec fails on a node
# without).
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
    nvidia.com/gpu.product: $5
    topology.kubernetes.io/zone: $6${8:+
    $8}
status:
  addresses:
  - type: InternalIP
    address: $7
  - type: Hostname
    address: $1
  capacity: &res
    nvidia.com/gpu: "$2"
    cpu: "$3"
    memory: $4
    ephemeral-storage: 1Ti
    pods: "110"
  allocatable: *res
  nodeInfo:
    architecture: amd64
    operatingSystem: linux
    kubeletVersion: fake
    kubeProxyVersion: fake
EOF
}

# The GB200-shaped cluster (HIVESCHED_CLUSTER=gb200, docs/nvlink.md): two
# GB200 NVL72 racks, each one NVLink domain of 18 compute trays of 4 GPUs
# (gb-a00..gb-a17, gb-b00..gb-b17), every tray labelled with its domain's
# nvidia.com/gpu.clique=<ClusterUUID>.<CliqueID> as GPU Feature Discovery
# labels it, and three 8-GPU H100 nodes (h100-0..2).
GB200_RACKS=(a b)
GB200_TRAYS=18
gb200_clique() { printf '7f3c9a2e-5d41-4b8e-9a6f-0c2d4e6f8a%s.1' "$([[ $1 == a ]] && echo 1a || echo 2b)"; }

# gb200_physical_cluster: the cells of the GB200-shaped cluster
# (manifests/samples/gb200/physical-cluster.yaml, its nodes gb200_nodes'),
# in the scheduler config's indentation.
gb200_physical_cluster() {
  sed -e '/^#/d' -e 's/^/      /' "$REPO_ROOT/manifests/samples/gb200/physical-cluster.yaml"
}

# gb200_nodes: the GB200-shaped cluster's nodes (node's arguments). A GB200
# compute tray has two Grace CPUs of 72 cores and 960 GiB of LPDDR5X.
gb200_nodes() {
  local r t i=10
  for r in "${GB200_RACKS[@]}"; do
    for ((t = 0; t < GB200_TRAYS; t++)); do
      node "$(printf 'gb-%s%02d' "$r" "$t")" 4 144 960Gi NVIDIA-GB200 "zone-$r" "192.0.2.$((i++))" \
        "nvidia.com/gpu.clique: $(gb200_clique "$r")"
    done
  done
  for t in 0 1 2; do
    node "h100-$t" 8 224 2Ti NVIDIA-H100-80GB-HBM3 zone-h "192.0.2.$((i++))"
  done
}

# The nodes of the sample physicalCluster in both scheduler configs: racks a
# and b of four 8-GPU V100 nodes, and two 4-GPU T4 nodes.
# scheduler-plugins' PodGroup CRD (scheduling.x-k8s.io), from the module
# version go.mod pins: Kubeflow's and other operators create these PodGroups
# for their gangs (--gang-scheduler-name other than volcano), and refuse to
# start their gang scheduling without the CRD. hivesched reads them.
podgroup_crd() {
  local dir
  dir=$(cd "$REPO_ROOT" && go mod download sigs.k8s.io/scheduler-plugins && go list -m -f '{{.Dir}}' sigs.k8s.io/scheduler-plugins)
  [[ -s $dir/manifests/coscheduling/crd.yaml ]] || die "no PodGroup CRD at $dir/manifests/coscheduling/crd.yaml (sigs.k8s.io/scheduler-plugins module)"
  printf '%s\n' "$dir/manifests/coscheduling/crd.yaml"
}

# move_placement_key: a local cluster brought up before the key moved out
# of kube-system (issue 28, finding 8) keeps its key, so that the records
# of the pods running there still verify: copied into the scheduler's
# namespace, then deleted from kube-system (docs/security.md, "Signatures
# and the key", says the same for a real cluster).
move_placement_key() {
  local key
  kc -n hivesched-system get secret hivesched-placement-key >/dev/null 2>&1 && return 0
  key=$(kc -n kube-system get secret hivesched-placement-key -o go-template='{{index .data "key"}}' 2>/dev/null) || return 0
  [[ -n $key ]] || return 0
  log "moving the placement key from kube-system to hivesched-system"
  printf '%s' "$key" | base64 -d | kc -n hivesched-system create secret generic hivesched-placement-key \
    --from-file=key=/dev/stdin >/dev/null
  kc -n kube-system delete secret hivesched-placement-key >/dev/null
}

# NODE_PODS: the per-node system pods a real cluster's nodes run and
# Kubernetes' e2e framework looks for on every schedulable node (its
# requiredPerNodePods: kube-proxy, fluentd-elasticsearch,
# node-problem-detector, by name, Running in kube-system). Without them its
# scheduling specs each wait a minute for them before they start.
NODE_PODS=(kube-proxy fluentd-elasticsearch node-problem-detector)

# node_pod_manifest COMPONENT NODE: the pod as its DaemonSet would make it,
# but unscheduled: no scheduler is named hivesched-local-bind, so none picks
# it up, and apply_node_pods binds it itself. It requests nothing (a fake
# node's capacity is the workload's) and tolerates every taint, as
# DaemonSet pods do.
node_pod_manifest() {
  cat <<EOF
---
apiVersion: v1
kind: Pod
metadata:
  name: $1-$2
  namespace: kube-system
  labels: {k8s-app: $1, hivesched.io/local-node-pod: "true"}
spec:
  schedulerName: hivesched-local-bind
  priorityClassName: system-node-critical
  tolerations: [{operator: Exists}]
  containers: [{name: $1, image: registry.k8s.io/pause:3.10}]
EOF
}

# apply_node_pods: one of each NODE_PODS on every fake node, bound through
# the pods/binding subresource as a scheduler binds (the API server sets
# spec.nodeName and the PodScheduled condition, which the e2e framework
# checks on every bound pod); kwok then runs them. Pods already bound are
# left alone.
apply_node_pods() {
  local nodes have want=() n c
  nodes=$(kc get nodes -l type=kwok -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
  have=$(kc get pods -n kube-system -l hivesched.io/local-node-pod=true \
    -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}')
  for n in $nodes; do
    for c in "${NODE_PODS[@]}"; do
      grep -qE "^$c-$n [^ ]+\$" <<<"$have" || want+=("$c $n")
    done
  done
  ((${#want[@]})) || return 0
  log "binding ${#want[@]} per-node system pods (${NODE_PODS[*]})"
  local comp node
  for c in "${want[@]}"; do
    read -r comp node <<<"$c"
    grep -q "^$comp-$node " <<<"$have" || node_pod_manifest "$comp" "$node"
  done | kc apply -f - >/dev/null
  for c in "${want[@]}"; do
    read -r comp node <<<"$c"
    printf '{"apiVersion":"v1","kind":"Binding","metadata":{"name":"%s-%s"},"target":{"kind":"Node","name":"%s"}}' "$comp" "$node" "$node" |
      kc create --raw "/api/v1/namespaces/kube-system/pods/$comp-$node/binding" -f - >/dev/null
  done
}

apply_cluster_objects() {
  log "applying CRDs, nodes, namespaces, VirtualClusters"
  local pgcrd
  pgcrd=$(podgroup_crd)
  kc apply -f "$REPO_ROOT/manifests/crds/" -f "$pgcrd" >/dev/null
  kc wait --for=condition=Established --timeout=60s -f "$REPO_ROOT/manifests/crds/" -f "$pgcrd" >/dev/null
  # What tenants may not do to pods and the placement key (docs/security.md);
  # the local scheduler (and every component) runs as the admin, in
  # system:masters, which passes the policies' authorization checks.
  kc apply -f "$REPO_ROOT/manifests/admission/" >/dev/null
  if [[ $HIVESCHED_SCHEDULER_NAME != hivesched ]]; then
    kc -n kube-system patch configmap hivesched-admission --type merge \
      -p "{\"data\":{\"profiles\":\"hivesched,$HIVESCHED_SCHEDULER_NAME\"}}" >/dev/null
  fi
  # The scheduler's namespace, where it keeps its placement key (it runs
  # here without POD_NAMESPACE: plugins/placement's DefaultNamespace).
  kc apply -f "$REPO_ROOT/manifests/scheduler/namespace.yaml" >/dev/null
  move_placement_key

  local n i=10
  if [[ $CLUSTER == gb200 ]]; then
    gb200_nodes | kc apply -f - >/dev/null
  else
    # Two zones of five nodes each: a rack and a T4 node each.
    {
      for n in gpu-a0 gpu-a1 gpu-a2 gpu-a3; do node "$n" 8 64 512Gi Tesla-V100-SXM2-32GB zone-a "192.0.2.$((i++))"; done
      for n in gpu-b0 gpu-b1 gpu-b2 gpu-b3; do node "$n" 8 64 512Gi Tesla-V100-SXM2-32GB zone-b "192.0.2.$((i++))"; done
      node t4-0 4 32 128Gi Tesla-T4 zone-a 192.0.2.20
      node t4-1 4 32 128Gi Tesla-T4 zone-b 192.0.2.21
    } | kc apply -f - >/dev/null
  fi
  # Real nodes have ephemeral storage, and frameworks ask for it (Kubeflow's
  # MPIJob launcher has an init container requesting 5Gi). Apply leaves the
  # status of an existing node alone: nodes of a cluster brought up before
  # they had it get it by a status patch.
  local old
  old=$(kc get nodes -l type=kwok -o go-template='{{range .items}}{{if not (index .status.allocatable "ephemeral-storage")}}{{.metadata.name}} {{end}}{{end}}')
  for n in $old; do
    kc patch node "$n" --subresource=status --type merge \
      -p '{"status":{"capacity":{"ephemeral-storage":"1Ti"},"allocatable":{"ephemeral-storage":"1Ti"}}}' >/dev/null
  done
  if ! kc wait --for=condition=Ready --timeout=60s node -l type=kwok >/dev/null; then
    fail kwok "did not make the fake nodes Ready within 60 s"
  fi
  apply_node_pods

  # The sample tenants (their namespaces, manifests/samples/): user alice
  # may do what a namespace's editor does in each (the API server
  # authorizes with RBAC, as a real cluster does, so the admission policies'
  # exemptions mean something; the components run as the admin).
  local tenants=(vision speech) vcs=$REPO_ROOT/manifests/samples/virtualclusters.yaml ns
  if [[ $CLUSTER == gb200 ]]; then
    tenants=(frontier labs)
    vcs=$REPO_ROOT/manifests/samples/gb200/virtualclusters.yaml
  fi
  for ns in "${tenants[@]}"; do
    cat <<EOF
---
apiVersion: v1
kind: Namespace
metadata: {name: $ns}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: tenant-alice, namespace: $ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
EOF
  done | kc apply -f - >/dev/null
  kc apply -f "$vcs" >/dev/null

  # The ServiceAccount admission refuses a pod until its namespace's
  # "default" account exists, which kube-controller-manager creates a moment
  # after the namespace: wait, so that the first pod of a user or a test is
  # not refused.
  local i
  for ns in default "${tenants[@]}"; do
    for ((i = 0; i < 150; i++)); do
      kc get serviceaccount default -n "$ns" >/dev/null 2>&1 && continue 2
      sleep 0.2
    done
    fail kube-controller-manager "made no service account $ns/default within 30 s"
  done
}

# The fake DRA driver (test/fakedra): for every fake node with GPUs the
# ResourceSlice NVIDIA's driver would publish, and the DeviceClass
# gpu.nvidia.com; it re-reads the nodes every 10 s (slices of nodes added
# or deleted later follow). It never prepares a device: kwok runs no
# kubelet. A rebuilt binary restarts it.
fakedra_reconciled() { grep -q 'reconciled: DeviceClass' "$(log_file fakedra)"; }
start_fakedra() {
  local pid
  if pid=$(component_pid fakedra) && [[ $FAKEDRA_BIN -nt $(pid_file fakedra) ]]; then
    log "fake DRA driver binary changed since it (pid $pid) started: restarting it"
    stop_component fakedra
  fi
  start fakedra "$FAKEDRA_BIN" --kubeconfig="$LOCAL_KUBECONFIG" --interval=10s
  wait_healthy fakedra 30 fakedra_reconciled
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
  local gates
  gates=$(gate_flags "$SCHEDULER_FEATURE_GATES")
  start "$name" "$SCHED_BIN" \
    --config="$config" \
    --secure-port=0 \
    ${gates:+"$gates"} \
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
      component_pid "${names[i]}" >/dev/null || fail_exited "${names[i]}"
    fi
    wait_healthy "${names[i]}" 30 scheduler_started "${names[i]}"
  done
}

# ---------------------------------------------------------------- main

if ((SCHEDULERS_ONLY)); then
  # The harness of test/chaos restarts a killed replica this way: nothing
  # else is touched (the full run re-applies the nodes it may have deleted).
  take_lock
  check_ports
  apiserver_healthy >/dev/null 2>&1 || die "kube-apiserver is not up: run hack/local-up.sh without --schedulers"
  scheduler_stale && die "the scheduler binary is stale: run hack/local-up.sh without --schedulers"
  start_scheduler
  exit 0
fi

build_all
BUILD_MS=$(now_ms)
if ((BUILD_ONLY)); then
  log "binaries in $LOCAL_BIN are up to date${BUILD_REPORT:+; built: ${BUILD_REPORT[*]}}"
  exit 0
fi
preflight
gen_certs
start_etcd
start_apiserver
write_kubeconfig
start_controller_manager
start_kwok
apply_cluster_objects
start_fakedra
start_scheduler

log "up (profile $HIVESCHED_PROFILE: $(case $HIVESCHED_PROFILE in second) echo "pods select hivesched with schedulerName: $HIVESCHED_SCHEDULER_NAME" ;; stock) echo 'the stock default profile, no hivesched plugin' ;; *) echo 'hivesched is the default-scheduler' ;; esac))"
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

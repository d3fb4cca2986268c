#!/usr/bin/env bash
# KubeRay's operator on the local cluster of hack/local-up.sh, in its
# scheduler-plugins mode (--batch-scheduler=scheduler-plugins): for a
# RayCluster labelled ray.io/gang-scheduling-enabled it creates a
# scheduler-plugins PodGroup (minMember = the head + each worker group's
# replicas clamped to [minReplicas, maxReplicas], when it creates it; never
# updated: workers added later are extra pods of an elastic gang,
# docs/elastic.md) and labels the
# pods with it; for every RayCluster it overwrites each pod's schedulerName
# with scheduler-plugins-scheduler, a name fixed in its code. hivesched must
# therefore answer to that name: run the cluster with
# HIVESCHED_SCHEDULER_NAME=scheduler-plugins-scheduler (hack/local-up.sh).
# test/e2e's TestKubeRay runs RayClusters through it (make e2e-frameworks).
#
#   hack/local-kuberay.sh          # build if needed, install its CRDs, start it
#   hack/local-kuberay.sh --build  # only build it
#   hack/local-kuberay.sh stop     # stop it (hack/local-down.sh stops it too)
#
# It is built from github.com/ray-project/kuberay/ray-operator at
# KUBERAY_VERSION in a throwaway module under _output/kuberay (never
# committed), with the dependency versions of its own go.mod; its CRDs come
# from the same module's config/crd/bases. Its webhooks are off unless
# ENABLE_WEBHOOKS=true, so it needs no certificate here.
set -euo pipefail
# shellcheck source=hack/local-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-env.sh"

KUBERAY_VERSION=v1.5.0
KUBERAY_MODULE=$REPO_ROOT/_output/kuberay
KUBERAY_BIN=$LOCAL_BIN/kuberay-operator
KUBECTL=${KUBECTL:-$LOCAL_BIN/kubectl}

framework_cmd kuberay-operator "${1:-}"

mkdir -p "$LOCAL_BIN" "$LOCAL_LOGS" "$KUBERAY_MODULE"

go_tool "$KUBERAY_BIN" "$KUBERAY_MODULE" github.com/ray-project/kuberay/ray-operator "$KUBERAY_VERSION" github.com/ray-project/kuberay/ray-operator
[[ $cmd == --build ]] && exit 0

framework_preflight kuberay-operator "HIVESCHED_KUBERAY_*_PORT" "$KUBERAY_METRICS_PORT" "$KUBERAY_PROBE_PORT"

# Its CRDs, server-side: they are too large for client-side apply's
# last-applied annotation.
moddir=$(cd "$KUBERAY_MODULE" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' github.com/ray-project/kuberay/ray-operator)
crds=("$moddir"/config/crd/bases/ray.io_*.yaml)
[[ -s ${crds[0]} ]] || die "no CRDs in $moddir/config/crd/bases"
log "installing ${#crds[@]} CRDs from $moddir/config/crd/bases"
apply_crds "${crds[@]}"

operator_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$KUBERAY_PROBE_PORT/readyz"; }

START_MS=$(now_ms)
# KUBECONFIG: controller-runtime's config loader (the operator has no
# --kubeconfig flag of its own). Console logs: its JSON default is
# unreadable in a terminal.
KUBECONFIG=$LOCAL_KUBECONFIG start kuberay-operator "$KUBERAY_BIN" \
  --metrics-addr="127.0.0.1:$KUBERAY_METRICS_PORT" \
  --health-probe-bind-address="127.0.0.1:$KUBERAY_PROBE_PORT" \
  --enable-leader-election=false \
  --batch-scheduler=scheduler-plugins \
  --log-stdout-encoder=console
wait_healthy kuberay-operator 120 operator_ready
log "kuberay-operator $KUBERAY_VERSION up in $(since "$START_MS") (pid $(component_pid kuberay-operator), log $(log_file kuberay-operator))"

#!/usr/bin/env bash
# Kubeflow's training-operator on the local cluster of hack/local-up.sh: a
# real operator nobody here wrote, creating scheduler-plugins PodGroups for
# its gangs (--gang-scheduler-name=hivesched) and pods with schedulerName
# hivesched. test/e2e's TestTrainingOperator runs PyTorchJobs through it.
#
#   hack/local-kubeflow.sh          # build if needed, install its CRDs, start it (make kubeflow)
#   hack/local-kubeflow.sh --build  # only build it
#   hack/local-kubeflow.sh stop     # stop it (hack/local-down.sh stops it too)
#
# It is built from github.com/kubeflow/training-operator at
# TRAINING_OPERATOR_VERSION in a throwaway module under _output/kubeflow
# (never committed), with the dependency versions of its own go.mod
# (Kubernetes v0.29 clients, controller-runtime v0.17): it talks to our
# v1.37 API server through stable APIs only. Its CRDs come from the same
# module's manifests.
#
# Outside a cluster it needs two things its Deployment would have
# (docs/toolchain.md):
# - The Secret kubeflow/training-operator-webhook-cert, which its
#   certificate rotator fills (it fails to start without the Secret).
# - Serving certificate files for the webhook server it always starts. Its
#   rotator waits for tls.crt under the fixed path
#   /tmp/k8s-webhook-server/serving-certs (a mounted Secret in a pod);
#   controller-runtime's webhook server reads $TMPDIR/k8s-webhook-server/
#   serving-certs. We point TMPDIR at our own directory with a certificate of
#   our CA, and create the fixed path's tls.crt only if missing (its content
#   is never served). The validating webhook is not registered with the API
#   server: it would dial a Service (training-operator.kubeflow.svc), and
#   this cluster has no Service network. PyTorchJobs are therefore not
#   validated on admission here; the operator still checks them when it
#   reconciles.
set -euo pipefail
# shellcheck source=hack/local-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-env.sh"

TRAINING_OPERATOR_VERSION=v1.8.1
KUBEFLOW_MODULE=$REPO_ROOT/_output/kubeflow
OPERATOR_BIN=$LOCAL_BIN/training-operator
OPERATOR_NS=kubeflow
OPERATOR_DATA=$LOCAL_DATA/training-operator
# The rotator's fixed certificate path (pkg/cert in training-operator v1.8.1).
ROTATOR_CERT_DIR=/tmp/k8s-webhook-server/serving-certs
KUBECTL=${KUBECTL:-$LOCAL_BIN/kubectl}

kc() { "$KUBECTL" --kubeconfig="$LOCAL_KUBECONFIG" "$@"; }

cmd=${1:-up}
case $cmd in
  up | --build | stop) ;;
  *) die "usage: $0 [--build|stop]" ;;
esac

take_lock

if [[ $cmd == stop ]]; then
  stop_component training-operator
  exit 0
fi

mkdir -p "$LOCAL_BIN" "$LOCAL_LOGS" "$KUBEFLOW_MODULE"

build_operator() {
  cat >"$KUBEFLOW_MODULE/go.mod" <<EOF
module hivesched.local/tools/training-operator

go 1.22

require github.com/kubeflow/training-operator $TRAINING_OPERATOR_VERSION
EOF
  # Keeps the requirement through "go mod tidy" (the tools tag keeps the
  # main package out of every build).
  cat >"$KUBEFLOW_MODULE/tools.go" <<'EOF'
//go:build tools

package tools

import _ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
EOF
  (
    cd "$KUBEFLOW_MODULE"
    quiet env GOFLAGS="-mod=mod" go mod tidy
    "${NICE[@]}" env GOFLAGS="-mod=mod -buildvcs=false" go build -ldflags "-s -w" -o "$OPERATOR_BIN" \
      github.com/kubeflow/training-operator/cmd/training-operator.v1
  )
}

# fresh: the stamp names this version (go.mod of the project does not
# matter here: the operator has its own dependency versions).
if [[ ! -x $OPERATOR_BIN || $(cat "$(stamp_file "$OPERATOR_BIN")" 2>/dev/null) != "$TRAINING_OPERATOR_VERSION" ]]; then
  timed "$OPERATOR_BIN" "$TRAINING_OPERATOR_VERSION" build_operator
  log "built: ${BUILD_REPORT[*]}"
fi
[[ $cmd == --build ]] && exit 0

https_healthy "$APISERVER_PORT" /readyz >/dev/null 2>&1 ||
  die "the local cluster is not up on port $APISERVER_PORT: run make up first"
if [[ -s $LOCAL_CLUSTER_ENV ]] && ! cmp -s <(cluster_env) "$LOCAL_CLUSTER_ENV"; then
  die "the local cluster runs with the settings in $LOCAL_CLUSTER_ENV, not these: use the same HIVESCHED_* settings"
fi
refuse() {
  if ! component_pid training-operator >/dev/null && port_open "$1"; then
    die "127.0.0.1:$1 is in use by a process this script did not start; training-operator cannot start (HIVESCHED_KUBEFLOW_*_PORT, hack/local-env.sh)"
  fi
}
refuse "$KUBEFLOW_METRICS_PORT"
refuse "$KUBEFLOW_PROBE_PORT"
refuse "$KUBEFLOW_WEBHOOK_PORT"

# Its CRDs, from the module it was built from. Server-side: the CRDs are
# too large for client-side apply's last-applied annotation.
moddir=$(cd "$KUBEFLOW_MODULE" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' github.com/kubeflow/training-operator)
crds=("$moddir"/manifests/base/crds/kubeflow.org_*.yaml)
[[ -s ${crds[0]} ]] || die "no CRDs in $moddir/manifests/base/crds"
log "installing ${#crds[@]} CRDs from $moddir/manifests/base/crds"
crd_args=()
for f in "${crds[@]}"; do crd_args+=(-f "$f"); done
kc apply --server-side --force-conflicts "${crd_args[@]}" >/dev/null
kc wait --for=condition=Established --timeout=60s "${crd_args[@]}" >/dev/null

kc create namespace "$OPERATOR_NS" --dry-run=client -o yaml | kc apply -f - >/dev/null
if ! kc get secret -n "$OPERATOR_NS" training-operator-webhook-cert >/dev/null 2>&1; then
  kc create secret generic -n "$OPERATOR_NS" training-operator-webhook-cert >/dev/null
fi

# The webhook server's certificate, from our CA.
webhook_certs=$OPERATOR_DATA/tmp/k8s-webhook-server/serving-certs
mkdir -p "$webhook_certs"
if [[ ! -s $webhook_certs/tls.crt || ! -s $webhook_certs/tls.key ]]; then
  (
    cd "$LOCAL_CERTS"
    umask 077
    sign training-operator-webhook "/CN=training-operator.$OPERATOR_NS.svc" \
      "subjectAltName=DNS:training-operator.$OPERATOR_NS.svc,IP:127.0.0.1\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth"
    mv -f training-operator-webhook.crt "$webhook_certs/tls.crt"
    mv -f training-operator-webhook.key "$webhook_certs/tls.key"
  )
fi
if [[ ! -s $ROTATOR_CERT_DIR/tls.crt ]]; then
  mkdir -p "$ROTATOR_CERT_DIR"
  cp "$webhook_certs/tls.crt" "$ROTATOR_CERT_DIR/tls.crt"
fi

operator_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$KUBEFLOW_PROBE_PORT/readyz"; }

START_MS=$(now_ms)
# MY_POD_NAMESPACE: where its rotator looks for the Secret. --kubeconfig is
# controller-runtime's flag. --gang-scheduler-name: any name but volcano
# means scheduler-plugins PodGroups, and becomes the pods' schedulerName.
local_tmp=$OPERATOR_DATA/tmp
export MY_POD_NAMESPACE=$OPERATOR_NS TMPDIR=$local_tmp
start training-operator "$OPERATOR_BIN" \
  --kubeconfig="$LOCAL_KUBECONFIG" \
  --metrics-bind-address="127.0.0.1:$KUBEFLOW_METRICS_PORT" \
  --health-probe-bind-address="127.0.0.1:$KUBEFLOW_PROBE_PORT" \
  --webhook-server-port="$KUBEFLOW_WEBHOOK_PORT" \
  --gang-scheduler-name=hivesched \
  --leader-elect=false
unset MY_POD_NAMESPACE TMPDIR
wait_healthy training-operator 120 operator_ready
log "training-operator $TRAINING_OPERATOR_VERSION up in $(since "$START_MS") (pid $(component_pid training-operator), log $(log_file training-operator))"

#!/usr/bin/env bash
# LeaderWorkerSet's controller on the local cluster of hack/local-up.sh: a
# real controller nobody here wrote, turning a LeaderWorkerSet into a leader
# StatefulSet and, for each leader pod, a worker StatefulSet (the
# kube-controller-manager's StatefulSet controller makes their pods).
# hivesched gangs each replica group by the labels LWS puts on its pods
# (README "LeaderWorkerSet"; test/e2e TestLeaderWorkerSet, make
# e2e-frameworks).
#
#   hack/local-lws.sh          # build if needed, install its CRD and webhooks, start it
#   hack/local-lws.sh --build  # only build it
#   hack/local-lws.sh stop     # stop it (hack/local-down.sh stops it too)
#
# It is built from sigs.k8s.io/lws at LWS_VERSION (v0.10.0 is refused by the
# module proxy here; v0.8.0 is served) in a throwaway module under
# _output/lws (never committed), with the dependency versions of its own
# go.mod; its CRD and webhook paths come from the same module's config/.
#
# Its webhooks carry part of its logic: the pod webhook gives a leader pod
# its group index and group key (the worker StatefulSet copies them), the
# LeaderWorkerSet one defaults the spec the controller reads. In a cluster
# they are reached through a Service with a certificate its own rotator
# makes; here, with no Service network, the API server calls them at
# https://127.0.0.1:LWS_WEBHOOK_PORT with a serving certificate of the local
# CA made at bring-up, and the rotator is off (internalCertManagement.enable:
# false). The pod webhooks keep the objectSelector of its kustomize patch
# (pods of a LeaderWorkerSet only): no other pod depends on it running.
set -euo pipefail
# shellcheck source=hack/local-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-env.sh"

LWS_VERSION=v0.8.0
LWS_MODULE=$REPO_ROOT/_output/lws
LWS_BIN=$LOCAL_BIN/lws-controller
LWS_DATA=$LOCAL_DATA/lws
KUBECTL=${KUBECTL:-$LOCAL_BIN/kubectl}

framework_cmd lws-controller "${1:-}"

mkdir -p "$LOCAL_BIN" "$LOCAL_LOGS" "$LWS_MODULE" "$LWS_DATA"

# The controller's main package is sigs.k8s.io/lws/cmd.
go_tool "$LWS_BIN" "$LWS_MODULE" sigs.k8s.io/lws "$LWS_VERSION" sigs.k8s.io/lws/cmd
[[ $cmd == --build ]] && exit 0

framework_preflight lws-controller "HIVESCHED_LWS_*_PORT" "$LWS_METRICS_PORT" "$LWS_PROBE_PORT" "$LWS_WEBHOOK_PORT"

moddir=$(cd "$LWS_MODULE" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' sigs.k8s.io/lws)
crd=$moddir/config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml
[[ -s $crd ]] || die "no LeaderWorkerSet CRD at $crd"
log "installing the LeaderWorkerSet CRD from $moddir"
apply_crds "$crd"

certs=$LWS_DATA/serving-certs
serving_cert lws-webhook "$certs"

cat >"$LWS_DATA/config.yaml" <<EOF
apiVersion: config.lws.x-k8s.io/v1alpha1
kind: Configuration
internalCertManagement:
  enable: false
leaderElection:
  leaderElect: false
webhook:
  host: 127.0.0.1
  port: $LWS_WEBHOOK_PORT
  certDir: $certs
metrics:
  bindAddress: 127.0.0.1:$LWS_METRICS_PORT
health:
  healthProbeBindAddress: 127.0.0.1:$LWS_PROBE_PORT
EOF

# Its webhook configurations (config/webhook/manifests.yaml with the
# objectSelector config/webhook's patches add to the pod webhooks), called
# by URL: the same paths, rules and failure policy.
ca=$(base64 -w0 <"$LOCAL_CERTS/ca.crt")
url=https://127.0.0.1:$LWS_WEBHOOK_PORT
webhook() { webhook_entry "$url" "$ca" "$@"; }
{
  printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: lws-mutating-webhook-configuration}\nwebhooks:\n'
  webhook mleaderworkerset.kb.io /mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset leaderworkerset.x-k8s.io v1 leaderworkersets CREATE,UPDATE
  webhook mpod.kb.io /mutate--v1-pod "" v1 pods CREATE leaderworkerset.sigs.k8s.io/name
  printf -- '---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: lws-validating-webhook-configuration}\nwebhooks:\n'
  webhook vleaderworkerset.kb.io /validate-leaderworkerset-x-k8s-io-v1-leaderworkerset leaderworkerset.x-k8s.io v1 leaderworkersets CREATE,UPDATE
  webhook vpod.kb.io /validate--v1-pod "" v1 pods CREATE,UPDATE leaderworkerset.sigs.k8s.io/name
} >"$LWS_DATA/webhooks.yaml"
# The paths must be the module's: a renamed path would fail every pod of a
# LeaderWorkerSet.
for path in /mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset /mutate--v1-pod \
  /validate-leaderworkerset-x-k8s-io-v1-leaderworkerset /validate--v1-pod; do
  grep -q "path: $path\$" "$moddir/config/webhook/manifests.yaml" ||
    die "LeaderWorkerSet $LWS_VERSION serves no webhook at $path (config/webhook/manifests.yaml)"
done

controller_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$LWS_PROBE_PORT/readyz"; }

START_MS=$(now_ms)
# KUBECONFIG: controller-runtime's config loader.
KUBECONFIG=$LOCAL_KUBECONFIG start lws-controller "$LWS_BIN" --config="$LWS_DATA/config.yaml"
wait_healthy lws-controller 120 controller_ready
# Registered once it serves them: failurePolicy Fail would refuse
# LeaderWorkerSets meanwhile.
kc apply -f "$LWS_DATA/webhooks.yaml" >/dev/null
log "lws-controller $LWS_VERSION up in $(since "$START_MS") (pid $(component_pid lws-controller), log $(log_file lws-controller))"

#!/usr/bin/env bash
# Kueue's controller on the local cluster of hack/local-up.sh, in front of
# hivesched (README "Kueue in front"): Kueue admits Jobs (and JobSets) by
# the quota of their ClusterQueue, un-suspending them; the Job controller
# then makes their pods, which hivesched places. test/e2e TestKueue (make
# e2e-frameworks).
#
#   hack/local-kueue.sh          # build if needed, install its CRDs and webhooks, start it
#   hack/local-kueue.sh --build  # only build it
#   hack/local-kueue.sh stop     # stop it and remove its webhook configurations
#
# It is built from sigs.k8s.io/kueue at KUEUE_VERSION in a throwaway module
# under _output/kueue (never committed), with the dependency versions of
# its own go.mod; its CRDs and webhook configurations come from the same
# module's config/components.
#
# As for JobSet (hack/local-jobset.sh): its cert rotator is off, its webhook
# server has a certificate of the local CA for 127.0.0.1 and the API server
# calls it by URL. Kueue 0.17 then reads its metrics server's certificate
# from the fixed path /etc/kueue/metrics/certs: it runs in a mount namespace
# of its own whose /etc is the host's with that directory added (an overlay;
# a copy of /etc where overlayfs is missing), so nothing is written to the
# host's /etc (hence: root, and unshare from util-linux).
#
# Only the webhooks of what it manages here are registered: its own objects
# (ClusterQueues, Cohorts, ResourceFlavors, Workloads) and the integrations
# its configuration enables, batch/job and jobset.x-k8s.io/jobset. The Job
# and JobSet webhooks carry an objectSelector Kueue's own manifests do not:
# only objects labelled kueue.x-k8s.io/queue-name reach them (Kueue leaves
# the others alone anyway, manageJobsWithoutQueueName being false), so that
# every other Job of the cluster is created whether this controller runs or
# not; LocalQueue defaulting (a Job without the label sent to a namespace's
# "default" LocalQueue) is therefore off.
#
# Its TopologyAwareScheduling gate is off (hivesched places by its cells;
# README) and so is VisibilityOnDemand (an aggregated API server of its own,
# which needs a Service).
set -euo pipefail
# shellcheck source=hack/local-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-env.sh"

KUEUE_VERSION=v0.17.0
KUEUE_MODULE=$REPO_ROOT/_output/kueue
KUEUE_BIN=$LOCAL_BIN/kueue-controller
KUEUE_DATA=$LOCAL_DATA/kueue
KUBECTL=${KUBECTL:-$LOCAL_BIN/kubectl}
# The webhook configurations this script registers (stop removes them).
KUEUE_WEBHOOKS=(mutatingwebhookconfiguration/kueue-mutating-webhook-configuration
  validatingwebhookconfiguration/kueue-validating-webhook-configuration)

# Its Job webhooks only see Jobs with a queue name, but those would be
# refused (failurePolicy Fail) with no controller to answer.
remove_webhooks() {
  if https_healthy "$APISERVER_PORT" /readyz >/dev/null 2>&1; then
    kc delete --ignore-not-found "${KUEUE_WEBHOOKS[@]}" >/dev/null
  fi
}
framework_cmd kueue-controller "${1:-}" remove_webhooks

mkdir -p "$LOCAL_BIN" "$LOCAL_LOGS" "$KUEUE_MODULE" "$KUEUE_DATA"

go_tool "$KUEUE_BIN" "$KUEUE_MODULE" sigs.k8s.io/kueue "$KUEUE_VERSION" sigs.k8s.io/kueue/cmd/kueue
[[ $cmd == --build ]] && exit 0

((EUID == 0)) || die "Kueue $KUEUE_VERSION reads its metrics certificate from /etc/kueue/metrics/certs: this script gives it one in a mount namespace of its own, which needs root"
command -v unshare >/dev/null || die "unshare (util-linux) is needed"
command -v jq >/dev/null || die "jq is needed"
framework_preflight kueue-controller "HIVESCHED_KUEUE_*_PORT" "$KUEUE_METRICS_PORT" "$KUEUE_PROBE_PORT" "$KUEUE_WEBHOOK_PORT"

moddir=$(cd "$KUEUE_MODULE" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
crds=("$moddir"/config/components/crd/bases/kueue.x-k8s.io_*.yaml)
[[ -s ${crds[0]} ]] || die "no CRDs in $moddir/config/components/crd/bases"
log "installing ${#crds[@]} CRDs from $moddir/config/components/crd/bases"
apply_crds "${crds[@]}"
kc create namespace kueue-system --dry-run=client -o yaml | kc apply -f - >/dev/null

certs=$KUEUE_DATA/serving-certs
serving_cert kueue-webhook "$certs"
# Its metrics server's certificate, at the path Kueue fixes: the upper
# layer of its /etc.
etc_upper=$KUEUE_DATA/etc-upper
mkdir -p "$etc_upper/kueue/metrics/certs" "$KUEUE_DATA/etc-work"
cp -f "$certs/tls.crt" "$certs/tls.key" "$etc_upper/kueue/metrics/certs/"

cat >"$KUEUE_DATA/config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
manageJobsWithoutQueueName: false
internalCertManagement:
  enable: false
leaderElection:
  leaderElect: false
webhook:
  host: 127.0.0.1
  port: $KUEUE_WEBHOOK_PORT
  certDir: $certs
metrics:
  bindAddress: 127.0.0.1:$KUEUE_METRICS_PORT
health:
  healthProbeBindAddress: 127.0.0.1:$KUEUE_PROBE_PORT
integrations:
  frameworks:
  - batch/job
  - jobset.x-k8s.io/jobset
featureGates:
  TopologyAwareScheduling: false
  VisibilityOnDemand: false
EOF

# Its webhook configurations from the module's manifests: the webhooks of
# the paths below, called by URL with the local CA, the Job and JobSet ones
# limited to objects with a queue name.
paths='["/mutate-kueue-x-k8s-io-v1beta2-clusterqueue", "/mutate-kueue-x-k8s-io-v1beta2-resourceflavor",
  "/mutate-kueue-x-k8s-io-v1beta2-workload", "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
  "/validate-kueue-x-k8s-io-v1beta2-cohort", "/validate-kueue-x-k8s-io-v1beta2-resourceflavor",
  "/validate-kueue-x-k8s-io-v1beta2-workload", "/mutate-batch-v1-job", "/validate-batch-v1-job",
  "/mutate-jobset-x-k8s-io-v1alpha2-jobset", "/validate-jobset-x-k8s-io-v1alpha2-jobset"]'
kc create --dry-run=client -o json -f "$moddir/config/components/webhook/manifests.yaml" |
  jq -s --argjson paths "$paths" --arg url "https://127.0.0.1:$KUEUE_WEBHOOK_PORT" \
    --arg ca "$(base64 -w0 <"$LOCAL_CERTS/ca.crt")" '
    {apiVersion: "v1", kind: "List", items: map(
      .metadata = {name: ("kueue-" + .metadata.name)}
      | .webhooks |= map(
          select(.clientConfig.service.path as $p | $paths | index($p))
          | .clientConfig = {url: ($url + .clientConfig.service.path), caBundle: $ca}
          | if (.rules[0].resources[0] == "jobs" or .rules[0].resources[0] == "jobsets")
            then .objectSelector = {matchExpressions: [{key: "kueue.x-k8s.io/queue-name", operator: "Exists"}]}
            else . end))}' >"$KUEUE_DATA/webhooks.json"
n=$(jq '[.items[].webhooks[]] | length' "$KUEUE_DATA/webhooks.json")
want=$(jq 'length' <<<"$paths")
((n == want)) || die "Kueue $KUEUE_VERSION's config/components/webhook/manifests.yaml has $n of the $want webhooks this script registers"

controller_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$KUEUE_PROBE_PORT/readyz"; }

# Its own /etc: the host's with kueue/metrics/certs on top (overlayfs), or,
# where overlayfs is not available, a copy of the host's in a tmpfs.
etc_setup="mount -t overlay overlay -o lowerdir=/etc,upperdir=$etc_upper,workdir=$KUEUE_DATA/etc-work /etc 2>/dev/null || {
  mkdir -p '$KUEUE_DATA/host-etc' && mount --bind /etc '$KUEUE_DATA/host-etc' && mount -t tmpfs tmpfs /etc &&
  cp -a '$KUEUE_DATA/host-etc/.' /etc/ && cp -a '$etc_upper/.' /etc/; }"

START_MS=$(now_ms)
# KUBECONFIG: controller-runtime's config loader.
KUBECONFIG=$LOCAL_KUBECONFIG start kueue-controller unshare --mount --propagation private -- \
  sh -c "$etc_setup && exec \"\$0\" \"\$@\"" "$KUEUE_BIN" --config="$KUEUE_DATA/config.yaml"
wait_healthy kueue-controller 120 controller_ready
# Registered once it serves them: failurePolicy Fail would refuse queued
# Jobs meanwhile.
kc apply -f "$KUEUE_DATA/webhooks.json" >/dev/null
log "kueue-controller $KUEUE_VERSION up in $(since "$START_MS") (pid $(component_pid kueue-controller), log $(log_file kueue-controller))"

#!/usr/bin/env bash
# Kubeflow Trainer v2's controller manager on the local cluster of
# hack/local-up.sh: TrainJobs become JobSets (JobSet's controller must run:
# hack/local-jobset.sh), and a runtime with podGroupPolicy.coscheduling makes
# a scheduler-plugins PodGroup of minMember = every pod of every replicated
# job (initializers included) and labels the pods with it. test/e2e's
# TestTrainer runs TrainJobs through it (make e2e-frameworks).
#
#   hack/local-trainer.sh          # build if needed, install its CRDs and webhooks, start it
#   hack/local-trainer.sh --build  # only build it
#   hack/local-trainer.sh stop     # stop it (hack/local-down.sh stops it too)
#
# Built from github.com/kubeflow/trainer/v2 at TRAINER_VERSION in a
# throwaway module under _output/trainer (never committed), with its own
# go.mod's dependency versions; CRDs from the module's manifests/base/crds.
# Its webhooks default and validate TrainJobs and runtimes: as for JobSet
# (hack/local-jobset.sh), its cert rotator is off, its webhook server gets
# a certificate of the local CA for 127.0.0.1 (controller-runtime reads it
# from $TMPDIR/k8s-webhook-server/serving-certs: the configuration has no
# certificate directory) and the API server calls the webhooks by URL.
set -euo pipefail
# shellcheck source=hack/local-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-env.sh"

TRAINER_VERSION=v2.3.0
TRAINER_MODULE=$REPO_ROOT/_output/trainer
TRAINER_BIN=$LOCAL_BIN/trainer-controller-manager
TRAINER_DATA=$LOCAL_DATA/trainer
KUBECTL=${KUBECTL:-$LOCAL_BIN/kubectl}

framework_cmd trainer-controller-manager "${1:-}"

mkdir -p "$LOCAL_BIN" "$LOCAL_LOGS" "$TRAINER_MODULE"

go_tool "$TRAINER_BIN" "$TRAINER_MODULE" github.com/kubeflow/trainer/v2 "$TRAINER_VERSION" github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
[[ $cmd == --build ]] && exit 0

component_pid jobset-controller >/dev/null || die "JobSet's controller is not running: start it first (hack/local-jobset.sh)"
framework_preflight trainer-controller-manager "HIVESCHED_TRAINER_*_PORT" "$TRAINER_METRICS_PORT" "$TRAINER_PROBE_PORT" "$TRAINER_WEBHOOK_PORT"

moddir=$(cd "$TRAINER_MODULE" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' github.com/kubeflow/trainer/v2)
crds=("$moddir"/manifests/base/crds/trainer.kubeflow.org_*.yaml)
[[ -s ${crds[0]} ]] || die "no CRDs in $moddir/manifests/base/crds"
log "installing ${#crds[@]} CRDs from $moddir/manifests/base/crds"
apply_crds "${crds[@]}"

certs=$TRAINER_DATA/tmp/k8s-webhook-server/serving-certs
serving_cert trainer-webhook "$certs"

cat >"$TRAINER_DATA/config.yaml" <<EOT
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
certManagement:
  enable: false
leaderElection:
  leaderElect: false
webhook:
  host: 127.0.0.1
  port: $TRAINER_WEBHOOK_PORT
metrics:
  bindAddress: 127.0.0.1:$TRAINER_METRICS_PORT
  secureServing: false
health:
  healthProbeBindAddress: 127.0.0.1:$TRAINER_PROBE_PORT
featureGates:
  TrainJobStatus: false
EOT

ca=$(base64 -w0 <"$LOCAL_CERTS/ca.crt")
url=https://127.0.0.1:$TRAINER_WEBHOOK_PORT
webhook() { webhook_entry "$url" "$ca" "$1" "$2" trainer.kubeflow.org v1alpha1 "$3" "$4"; } # NAME PATH RESOURCE OPERATIONS
{
  printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: defaulter.trainer.kubeflow.org}\nwebhooks:\n'
  webhook defaulter.trainjob.trainer.kubeflow.org /mutate-trainer-kubeflow-org-v1alpha1-trainjob trainjobs CREATE
  printf -- '---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: validator.trainer.kubeflow.org}\nwebhooks:\n'
  webhook validator.clustertrainingruntime.trainer.kubeflow.org /validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime clustertrainingruntimes CREATE,UPDATE
  webhook validator.trainingruntime.trainer.kubeflow.org /validate-trainer-kubeflow-org-v1alpha1-trainingruntime trainingruntimes CREATE,UPDATE
  webhook validator.trainjob.trainer.kubeflow.org /validate-trainer-kubeflow-org-v1alpha1-trainjob trainjobs CREATE,UPDATE
} >"$TRAINER_DATA/webhooks.yaml"
for path in /mutate-trainer-kubeflow-org-v1alpha1-trainjob /validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime \
  /validate-trainer-kubeflow-org-v1alpha1-trainingruntime /validate-trainer-kubeflow-org-v1alpha1-trainjob; do
  grep -q "path: $path\$" "$moddir/manifests/base/webhook/manifests.yaml" ||
    die "Trainer $TRAINER_VERSION serves no webhook at $path (manifests/base/webhook/manifests.yaml)"
done

controller_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$TRAINER_PROBE_PORT/readyz"; }

START_MS=$(now_ms)
KUBECONFIG=$LOCAL_KUBECONFIG TMPDIR=$TRAINER_DATA/tmp start trainer-controller-manager "$TRAINER_BIN" \
  --config="$TRAINER_DATA/config.yaml"
wait_healthy trainer-controller-manager 120 controller_ready
kc apply -f "$TRAINER_DATA/webhooks.yaml" >/dev/null
log "trainer-controller-manager $TRAINER_VERSION up in $(since "$START_MS") (pid $(component_pid trainer-controller-manager), log $(log_file trainer-controller-manager))"

#!/usr/bin/env bash
# JobSet's controller on the local cluster of hack/local-up.sh: a real
# controller nobody here wrote, turning JobSets into Jobs (and the
# kube-controller-manager's Job controller those into pods). JobSet makes
# no gang objects of its own: test/e2e's TestJobSet gangs a JobSet's
# replicated jobs with one scheduler-plugins PodGroup that their pod
# templates name (make e2e-frameworks).
#
#   hack/local-jobset.sh          # build if needed, install its CRD and webhooks, start it
#   hack/local-jobset.sh --build  # only build it
#   hack/local-jobset.sh stop     # stop it (hack/local-down.sh stops it too)
#
# It is built from sigs.k8s.io/jobset at JOBSET_VERSION in a throwaway
# module under _output/jobset (never committed), with the dependency
# versions of its own go.mod; its CRD and webhook configurations come from
# the same module's config/components.
#
# Its webhooks are always on, and it depends on them: the mutating one
# defaults a JobSet (success policy, network, ...), which its controller
# dereferences. In a cluster they are reached through a Service with a
# certificate its own rotator makes; here, with no Service network, the
# API server calls them at https://127.0.0.1:JOBSET_WEBHOOK_PORT with a
# serving certificate of the local CA made at bring-up, and the rotator is
# off (internalCertManagement.enable: false in its configuration file). The
# pod webhooks keep their objectSelector (pods of a JobSet only): no other
# pod depends on this controller running.
set -euo pipefail
# shellcheck source=hack/local-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-env.sh"

JOBSET_VERSION=v0.12.0
JOBSET_MODULE=$REPO_ROOT/_output/jobset
JOBSET_BIN=$LOCAL_BIN/jobset-controller
JOBSET_DATA=$LOCAL_DATA/jobset
KUBECTL=${KUBECTL:-$LOCAL_BIN/kubectl}

framework_cmd jobset-controller "${1:-}"

mkdir -p "$LOCAL_BIN" "$LOCAL_LOGS" "$JOBSET_MODULE"

go_tool "$JOBSET_BIN" "$JOBSET_MODULE" sigs.k8s.io/jobset "$JOBSET_VERSION" sigs.k8s.io/jobset
[[ $cmd == --build ]] && exit 0

framework_preflight jobset-controller "HIVESCHED_JOBSET_*_PORT" "$JOBSET_METRICS_PORT" "$JOBSET_PROBE_PORT" "$JOBSET_WEBHOOK_PORT"

moddir=$(cd "$JOBSET_MODULE" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' sigs.k8s.io/jobset)
crd=$moddir/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml
[[ -s $crd ]] || die "no JobSet CRD at $crd"
log "installing the JobSet CRD from $moddir"
apply_crds "$crd"

# The webhook server's certificate, from our CA, for 127.0.0.1.
certs=$JOBSET_DATA/serving-certs
serving_cert jobset-webhook "$certs"

cat >"$JOBSET_DATA/config.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
internalCertManagement:
  enable: false
leaderElection:
  leaderElect: false
webhook:
  host: 127.0.0.1
  port: $JOBSET_WEBHOOK_PORT
  certDir: $certs
metrics:
  bindAddress: 127.0.0.1:$JOBSET_METRICS_PORT
health:
  healthProbeBindAddress: 127.0.0.1:$JOBSET_PROBE_PORT
EOF

# Its webhook configurations (config/components/webhook/manifests.yaml with
# the objectSelector its kustomize patches add to the pod webhooks), called
# by URL: the same paths, rules and failure policy.
ca=$(base64 -w0 <"$LOCAL_CERTS/ca.crt")
url=https://127.0.0.1:$JOBSET_WEBHOOK_PORT
webhook() { webhook_entry "$url" "$ca" "$@"; }
{
  printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: jobset-mutating-webhook-configuration}\nwebhooks:\n'
  webhook mjobset.kb.io /mutate-jobset-x-k8s-io-v1alpha2-jobset jobset.x-k8s.io v1alpha2 jobsets CREATE
  webhook mpod.kb.io /mutate--v1-pod "" v1 pods CREATE jobset.sigs.k8s.io/jobset-name
  printf -- '---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: jobset-validating-webhook-configuration}\nwebhooks:\n'
  webhook vjobset.kb.io /validate-jobset-x-k8s-io-v1alpha2-jobset jobset.x-k8s.io v1alpha2 jobsets CREATE,UPDATE
  webhook vpod.kb.io /validate--v1-pod "" v1 pods CREATE jobset.sigs.k8s.io/jobset-name
} >"$JOBSET_DATA/webhooks.yaml"
# The paths must be the module's: a renamed path would fail every JobSet.
for path in /mutate-jobset-x-k8s-io-v1alpha2-jobset /mutate--v1-pod /validate-jobset-x-k8s-io-v1alpha2-jobset /validate--v1-pod; do
  grep -q "path: $path\$" "$moddir/config/components/webhook/manifests.yaml" ||
    die "JobSet $JOBSET_VERSION serves no webhook at $path (config/components/webhook/manifests.yaml)"
done

controller_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$JOBSET_PROBE_PORT/readyz"; }

START_MS=$(now_ms)
# KUBECONFIG: controller-runtime's config loader.
KUBECONFIG=$LOCAL_KUBECONFIG start jobset-controller "$JOBSET_BIN" --config="$JOBSET_DATA/config.yaml"
wait_healthy jobset-controller 120 controller_ready
# Registered once it serves them: failurePolicy Fail would refuse JobSets
# meanwhile.
kc apply -f "$JOBSET_DATA/webhooks.yaml" >/dev/null
log "jobset-controller $JOBSET_VERSION up in $(since "$START_MS") (pid $(component_pid jobset-controller), log $(log_file jobset-controller))"

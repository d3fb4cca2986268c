#!/usr/bin/env bash
# make chart-install-test: the chart installed on the local cluster and the
# scheduler run as its pod would run, under the chart's RBAC and admission
# policies (the local cluster has no kubelet to run the Deployment's pod;
# kwok only fakes the GPU nodes):
#   1. the local cluster's own scheduler is stopped (hack/local-scheduler.sh),
#      and helm install --take-ownership installs the chart (it adopts the
#      CRDs, policies and namespace hack/local-up.sh applied);
#   2. the scheduler binary is taken out of the built image's layer
#      (_output/image/oci, linux/amd64) and started as uid/gid 65532 in a
#      private mount namespace holding what the kubelet would mount: the
#      chart's ConfigMap at /etc/hivesched, a TokenRequest token of the
#      chart's ServiceAccount, the cluster CA and the namespace at
#      /var/run/secrets/kubernetes.io/serviceaccount, a tmpfs /tmp;
#      KUBERNETES_SERVICE_HOST/PORT point at the API server; no kubeconfig;
#   3. the placement key created by the scheduler itself (the local one's is
#      deleted first when no pod's record needs it); its readiness (the
#      inspect server's /readyz, as the chart's probe), /livez, and /metrics:
#      403 for an identity the chart does not list, 200 for the scraper it
#      lists (metrics.scrapers);
#   4. a gang of 4 pods x 8 GPUs in VC vision (a tenant's pods, created as
#      user alice) binds whole, each pod with its signed placement record;
#   5. helm upgrade without the CRDs keeps them and the VCs, and a
#      configuration change rolls the pod template; helm uninstall keeps the
#      CRDs, VirtualClusters, AffinityGroups and the namespace with its key.
# Everything started is stopped at the end; the local scheduler is left
# stopped (hack/local-scheduler.sh start brings it back).
# HELM, IMAGE_BUILDER, HIVESCHED_PORT_OFFSET (as for make up).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO_ROOT=$PWD
HELM=${HELM:?set HELM}
IMAGE_BUILDER=${IMAGE_BUILDER:?set IMAGE_BUILDER}
OFFSET=${HIVESCHED_PORT_OFFSET:-0}
KUBECONFIG_FILE=$REPO_ROOT/_output/local/kubeconfig
KUBECTL=$REPO_ROOT/_output/local/bin/kubectl
CA=$REPO_ROOT/_output/local/certs/ca.crt
NS=hivesched-system
SECURE_PORT=$((10269 + OFFSET))
INSPECT_PORT=$((10266 + OFFSET))
work=$REPO_ROOT/_output/chart-install
rm -rf "$work" && mkdir -p "$work"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
log() { printf '== %s\n' "$*"; }
die() { printf 'chart-install-test: FAIL: %s\n' "$*" >&2; exit 1; }
[[ -s $KUBECONFIG_FILE && -s $CA ]] || die "no local cluster: HIVESCHED_PORT_OFFSET=$OFFSET make up"
[[ -d $REPO_ROOT/_output/image/oci ]] || die "no image: make image"
server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
api_host=${server#https://}
api_port=${api_host##*:}
api_host=${api_host%:*}

scheduler_pid=
made_etc_dir=0
cleanup() {
  if [[ -n $scheduler_pid ]] && kill -0 "$scheduler_pid" 2>/dev/null; then
    kill "$scheduler_pid" 2>/dev/null || true
    wait "$scheduler_pid" 2>/dev/null || true
  fi
  if ((made_etc_dir)); then rmdir /etc/hivesched 2>/dev/null || true; fi
}
trap cleanup EXIT

log "stopping the local cluster's own scheduler"
HIVESCHED_PORT_OFFSET=$OFFSET bash hack/local-scheduler.sh stop

log "helm install (release in kube-system, the scheduler in $NS)"
k create namespace monitoring --dry-run=client -o yaml | k apply -f - >/dev/null
k -n monitoring create serviceaccount prometheus --dry-run=client -o yaml | k apply -f - >/dev/null
k -n monitoring create serviceaccount not-a-scraper --dry-run=client -o yaml | k apply -f - >/dev/null
"$HELM" --kubeconfig "$KUBECONFIG_FILE" uninstall hivesched -n kube-system >/dev/null 2>&1 || true
"$HELM" --kubeconfig "$KUBECONFIG_FILE" install hivesched manifests/charts/hivesched -n kube-system --take-ownership --wait=false \
  --set inspect.port="$INSPECT_PORT" --set scheduler.securePort="$SECURE_PORT" \
  --set 'metrics.scrapers[0].name=prometheus' --set 'metrics.scrapers[0].namespace=monitoring' \
  --set image.repository=hivesched-scheduler --set image.tag="${IMAGE_TAG:-dev}" \
  | tee "$work/helm-install.txt" | sed -n '1,6p'
"$HELM" --kubeconfig "$KUBECONFIG_FILE" get manifest hivesched -n kube-system >"$work/manifest.yaml"
# kube-controller-manager creates the Deployment's pods (nothing schedules
# them here): admitted under the namespace's Pod Security level, restricted.
for ((i = 0; i < 60; i++)); do
  pods=$(k -n "$NS" get pods -l app.kubernetes.io/name=hivesched-scheduler -o name | grep -c . || true)
  ((pods == 2)) && break
  sleep 1
done
((pods == 2)) || { k -n "$NS" get events | tail -5; die "$pods of 2 scheduler pods created (Pod Security?)"; }
printf '   the Deployment'"'"'s 2 pods admitted in %s (pod-security.kubernetes.io/enforce=%s)\n' "$NS" \
  "$(k get namespace "$NS" -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')"

log "the pod's files: the binary from the image, the ConfigMap, a TokenRequest token"
"$IMAGE_BUILDER" -layout _output/image/oci -platform linux/amd64 -extract "$work/hivesched-scheduler"
file "$work/hivesched-scheduler" | grep -q 'statically linked' || die "the image's binary is not static: $(file "$work/hivesched-scheduler")"
mkdir -p "$work/config" "$work/serviceaccount"
k -n "$NS" get configmap hivesched-scheduler-config -o jsonpath='{.data.config\.yaml}' >"$work/config/config.yaml"
k -n "$NS" create token hivesched-scheduler --duration=1h >"$work/serviceaccount/token"
cp "$CA" "$work/serviceaccount/ca.crt"
printf '%s' "$NS" >"$work/serviceaccount/namespace"
# The chart's container command, as rendered (everything after the binary).
mapfile -t args < <(k -n "$NS" get deployment hivesched-scheduler -o jsonpath='{range .spec.template.spec.containers[0].command[*]}{@}{"\n"}{end}' | tail -n +2)
printf '   args: %s\n' "${args[*]}"
chmod 0755 "$work" "$work/config" "$work/serviceaccount" "$work/hivesched-scheduler"
chmod 0644 "$work/config/config.yaml" "$work/serviceaccount/"*
if [[ ! -e /etc/hivesched ]]; then mkdir /etc/hivesched && made_etc_dir=1; fi

# A first start creates the placement key under the chart's RBAC and the
# key policy: the key hack/local-up.sh's scheduler (an admin) made goes,
# unless a pod's signed record still needs it.
signed_pods=$(k get pods -A -o json | jq '[.items[] | select(.metadata.annotations["hivesched.io/placement-signature"] != null)] | length')
fresh_key=0
if ((signed_pods == 0)); then
  k -n "$NS" delete secret hivesched-placement-key --ignore-not-found >/dev/null
  fresh_key=1
fi

log "starting the scheduler as 65532:65532 in a private mount namespace, no kubeconfig"
export API_HOST=$api_host API_PORT=$api_port POD_NS=$NS
unshare --mount --propagation private -- bash -c '
  set -euo pipefail
  work=$1; shift
  mount --bind -o ro "$work/config" /etc/hivesched
  mount -t tmpfs -o mode=0755 tmpfs /run
  mkdir -p /run/secrets/kubernetes.io/serviceaccount /run/hivesched-tmp
  mount --bind -o ro "$work/serviceaccount" /run/secrets/kubernetes.io/serviceaccount
  mount -t tmpfs -o mode=1777 tmpfs /tmp
  exec setpriv --reuid=65532 --regid=65532 --clear-groups --no-new-privs -- \
    env -i KUBERNETES_SERVICE_HOST="$API_HOST" KUBERNETES_SERVICE_PORT="$API_PORT" POD_NAMESPACE="$POD_NS" \
    "$work/hivesched-scheduler" "$@"
' bash "$work" "${args[@]}" >"$work/scheduler.log" 2>&1 &
scheduler_pid=$!

ready=0
for ((i = 0; i < 120; i++)); do
  kill -0 "$scheduler_pid" 2>/dev/null || { tail -30 "$work/scheduler.log"; die "the scheduler exited"; }
  if curl -fsS --max-time 2 "http://127.0.0.1:$INSPECT_PORT/readyz" >/dev/null 2>&1; then ready=1; break; fi
  sleep 1
done
((ready)) || { tail -30 "$work/scheduler.log"; die "the inspect server's /readyz did not answer 200 within 120 s"; }
printf '   /readyz (inspect, the chart readiness probe): 200 after %s s\n' "$i"
# unshare, bash, setpriv and env each exec the next: the pid is the scheduler's.
uid=$(ps -o uid= -p "$scheduler_pid" | tr -d ' ')
comm=$(ps -o comm= -p "$scheduler_pid")
[[ $comm == hivesched-sched* ]] || die "pid $scheduler_pid is $comm, not the scheduler"
printf '   running as uid %s\n' "$uid"
[[ $uid == 65532 ]] || die "the scheduler runs as uid $uid, not 65532"
code=$(curl -ks -o /dev/null -w '%{http_code}' "https://127.0.0.1:$SECURE_PORT/livez")
printf '   /livez: %s\n' "$code"
[[ $code == 200 ]] || die "/livez answered $code"

log "/metrics: the listed scraper 200, another identity 403"
scraper=$(k -n monitoring create token prometheus --duration=10m)
other=$(k -n monitoring create token not-a-scraper --duration=10m)
code_scraper=$(curl -ks -o "$work/metrics.txt" -w '%{http_code}' -H "Authorization: Bearer $scraper" "https://127.0.0.1:$SECURE_PORT/metrics")
code_other=$(curl -ks -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $other" "https://127.0.0.1:$SECURE_PORT/metrics")
printf '   monitoring/prometheus: %s (%s hivesched_ series); monitoring/not-a-scraper: %s\n' \
  "$code_scraper" "$(grep -c '^hivesched_' "$work/metrics.txt" || true)" "$code_other"
[[ $code_scraper == 200 && $code_other == 403 ]] || die "/metrics: scraper $code_scraper, other $code_other"

log "leader lease and placement key"
for ((i = 0; i < 60; i++)); do
  holder=$(k -n kube-system get lease hivesched -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)
  [[ -n $holder ]] && grep -qi 'successfully acquired lease' "$work/scheduler.log" && break
  sleep 1
done
grep -qi 'successfully acquired lease' "$work/scheduler.log" || die "no lease acquired"
printf '   lease kube-system/hivesched held by %s\n' "$holder"
k -n "$NS" get secret hivesched-placement-key -o name >/dev/null || die "no placement key in $NS"
if ((fresh_key)); then
  printf '   placement key %s/hivesched-placement-key created by the scheduler (manager %s)\n' "$NS" \
    "$(k -n "$NS" get secret hivesched-placement-key -o jsonpath='{.metadata.managedFields[0].manager}')"
else
  printf '   placement key kept: %s pods carry records it signed\n' "$signed_pods"
fi

log "a gang of 4 pods x 8 GPUs in vc-vision, created by tenant alice"
# A group name of its own per run: a group's name is its identity, and an
# earlier run's deleted members would count against it.
k -n vision delete pod -l app.kubernetes.io/name=chart-install-test --ignore-not-found --wait=true >/dev/null
gang=chart-install-$(date +%s)
for i in 0 1 2 3; do
  cat <<EOF
---
apiVersion: v1
kind: Pod
metadata:
  name: $gang-$i
  namespace: vision
  labels: {hivesched.io/virtual-cluster: vc-vision, hivesched.io/affinity-group: $gang, app.kubernetes.io/name: chart-install-test}
  annotations: {hivesched.io/group-members: "4", hivesched.io/priority: "10"}
spec:
  schedulerName: hivesched
  containers:
  - name: train
    image: busybox
    command: [sleep, infinity]
    resources:
      limits: {nvidia.com/gpu: 8}
EOF
done | k --as alice apply -f - >/dev/null
bound=0
for ((i = 0; i < 90; i++)); do
  bound=$(k -n vision get pods -l hivesched.io/affinity-group="$gang" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true)
  ((bound == 4)) && break
  sleep 1
done
k -n vision get pods -l hivesched.io/affinity-group="$gang" -o wide | tee "$work/gang.txt"
((bound == 4)) || { tail -40 "$work/scheduler.log"; die "$bound of 4 gang pods bound after 90 s"; }
signed=$(k -n vision get pods -l hivesched.io/affinity-group="$gang" -o json |
  jq '[.items[] | select(.metadata.annotations["hivesched.io/placement-signature"] != null)] | length')
racks=$(k -n vision get pods -l hivesched.io/affinity-group="$gang" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' |
  sed 's/gpu-\([ab]\).*/\1/' | sort -u | wc -l)
printf '   4 of 4 bound after %s s, %s with a signed placement record, on %s rack(s)\n' "$i" "$signed" "$racks"
((signed == 4)) || die "$signed of 4 pods carry a placement signature"
((racks == 1)) || die "the gang is spread over $racks racks"
# The scheduler records the gang as an AffinityGroup (its own create and
# status writes, under the chart's RBAC).
for ((i = 0; i < 60; i++)); do
  phase=$(k -n vision get affinitygroup "$gang" -o jsonpath='{.status.phase}' 2>/dev/null || true)
  [[ $phase == Running ]] && break
  sleep 1
done
[[ $phase == Running ]] || { grep -i 'affinitygroup' "$work/scheduler.log" | tail -5; die "AffinityGroup vision/$gang is '$phase', not Running, after 60 s"; }
printf '   AffinityGroup vision/%s: %s\n' "$gang" "$phase"

# Everything it did it was allowed to do by the chart's RBAC.
if grep -qi 'forbidden' "$work/scheduler.log"; then
  grep -i 'forbidden' "$work/scheduler.log" | head -5 || true
  die "the scheduler was refused a call under the chart's RBAC"
fi
echo "   no call refused (no 'forbidden' in its log)"

log "helm upgrade: CRDs left out of the release stay (and the VCs with them), are taken back; a config change rolls the pods"
checksum() { k -n "$NS" get deployment hivesched-scheduler -o jsonpath="{.spec.template.metadata.annotations['checksum/config']}"; }
vcs_before_upgrade=$(k get virtualclusters -o name | sort)
checksum_before=$(checksum)
"$HELM" --kubeconfig "$KUBECONFIG_FILE" upgrade hivesched manifests/charts/hivesched -n kube-system --reuse-values --set crds.install=false >/dev/null
k get crd virtualclusters.hivesched.io affinitygroups.hivesched.io -o name >/dev/null || die "an upgrade without the CRDs deleted them"
[[ $(k get virtualclusters -o name | sort) == "$vcs_before_upgrade" ]] || die "VirtualClusters changed by the upgrade"
"$HELM" --kubeconfig "$KUBECONFIG_FILE" upgrade hivesched manifests/charts/hivesched -n kube-system --reuse-values \
  --set crds.install=true --set args.permitWaitingTimeSeconds=90 >/dev/null
"$HELM" --kubeconfig "$KUBECONFIG_FILE" get manifest hivesched -n kube-system >"$work/manifest-upgraded.yaml"
grep -q 'name: virtualclusters.hivesched.io' "$work/manifest-upgraded.yaml" || die "the CRDs are not back in the release"
[[ $(checksum) != "$checksum_before" ]] || die "a configuration change left the pod template's checksum as it was"
printf '   revision %s: CRDs and %s VirtualClusters kept through an upgrade without them; checksum/config %.12s -> %.12s\n' \
  "$("$HELM" --kubeconfig "$KUBECONFIG_FILE" history hivesched -n kube-system -o json | jq length)" \
  "$(wc -l <<<"$vcs_before_upgrade")" "$checksum_before" "$(checksum)"

log "stopping the scheduler; helm uninstall keeps CRDs, VirtualClusters, AffinityGroups, the namespace and its key"
kill "$scheduler_pid"; wait "$scheduler_pid" 2>/dev/null || true; scheduler_pid=
vcs_before=$(k get virtualclusters -o name | sort)
ags_before=$(k get affinitygroups -A -o name | sort)
"$HELM" --kubeconfig "$KUBECONFIG_FILE" uninstall hivesched -n kube-system | tee "$work/helm-uninstall.txt"
k get crd virtualclusters.hivesched.io affinitygroups.hivesched.io -o name
[[ $(k get virtualclusters -o name | sort) == "$vcs_before" ]] || die "VirtualClusters changed by uninstall"
[[ $(k get affinitygroups -A -o name | sort) == "$ags_before" ]] || die "AffinityGroups changed by uninstall"
k -n "$NS" get secret hivesched-placement-key -o name >/dev/null || die "the placement key went with the release"
k get namespace "$NS" -o jsonpath='{.metadata.labels.hivesched\.io/scheduler-namespace}' | grep -qx true || die "namespace label gone"
gone=$(k get deployment -n "$NS" hivesched-scheduler -o name 2>/dev/null || true)
[[ -z $gone ]] || die "the Deployment is still there"
printf '   kept: %s VirtualClusters, %s AffinityGroups, namespace %s with its key; the Deployment, RBAC and policies are gone\n' \
  "$(wc -l <<<"$vcs_before")" "$(grep -c . <<<"$ags_before" || true)" "$NS"
# The gang goes too (its AffinityGroup stays: the scheduler that would
# expire it is stopped).
k -n vision delete pod -l app.kubernetes.io/name=chart-install-test --wait=false >/dev/null
echo "chart-install-test: ok"

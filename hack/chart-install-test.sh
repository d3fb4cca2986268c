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
#   5. a Workload API gang (a scheduling.k8s.io/v1beta1 PodGroup with a
#      gang policy, 2 pods x 8 GPUs in vc-speech) binds whole; a pod asking
#      for 2 GPUs with a ResourceClaimTemplate (DRA) gets its claim
#      allocated with the devices of its cells; each VC's usedLeafCells is
#      what its bound pods hold; a tenant's pod carrying a forged
#      hivesched.io/placement is refused by the chart's
#      ValidatingAdmissionPolicy;
#   6. helm upgrade without the CRDs keeps them and the VCs; then, while a
#      loop creates gangs, helm upgrade changes a config value and the
#      replica count, and the scheduler is stopped and started again from the
#      new ConfigMap (as the rolled pod would be): the new process takes the
#      lease, and from API objects alone no device is double-booked and no
#      gang stays partly bound (test/chaos's checks, in jq);
#   7. helm uninstall keeps the CRDs, VirtualClusters, AffinityGroups and
#      the namespace with its key.
# It prints the test's time and the time from the scheduler's start to it
# holding the lease (first start and after the roll).
# Everything started is stopped at the end; the local scheduler is left
# stopped (hack/local-scheduler.sh start brings it back).
# HELM, IMAGE_BUILDER, HIVESCHED_PORT_OFFSET (as for make up).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
test_start=$(date +%s%N)
REPO_ROOT=$PWD
HELM=${HELM:?set HELM}
IMAGE_BUILDER=${IMAGE_BUILDER:?set IMAGE_BUILDER}
OFFSET=${HIVESCHED_PORT_OFFSET:-0}
LOCAL_DIR=${HIVESCHED_LOCAL_DIR:-$REPO_ROOT/_output/local}
KUBECONFIG_FILE=$LOCAL_DIR/kubeconfig
KUBECTL=$LOCAL_DIR/bin/kubectl
CA=$LOCAL_DIR/certs/ca.crt
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
loop_pid=
watch_pid=
made_etc_dir=0
cleanup() {
  [[ -d $work ]] && touch "$work/watch.stop"
  for p in $loop_pid $watch_pid; do kill "$p" 2>/dev/null || true; done
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
# The scheduler's feature gates as the local cluster's API server has them
# (hack/local-env.sh): GenericWorkload for the Workload API gang.
gate_args=()
IFS=, read -ra gates < <(HIVESCHED_PORT_OFFSET=$OFFSET bash -c 'source hack/local-env.sh; printf "%s\n" "$SCHEDULER_FEATURE_GATES"')
for g in "${gates[@]}"; do [[ -n $g ]] && gate_args+=(--set "scheduler.featureGates.${g%%=*}=${g#*=}"); done
"$HELM" --kubeconfig "$KUBECONFIG_FILE" install hivesched manifests/charts/hivesched -n kube-system --take-ownership --wait=false \
  "${gate_args[@]}" \
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
# pod_files: what the kubelet would give the Deployment's pod as it is now:
# the ConfigMap's config, a fresh token, and the container's command.
pod_files() {
  k -n "$NS" get configmap hivesched-scheduler-config -o jsonpath='{.data.config\.yaml}' >"$work/config/config.yaml"
  k -n "$NS" create token hivesched-scheduler --duration=1h >"$work/serviceaccount/token"
  cp "$CA" "$work/serviceaccount/ca.crt"
  printf '%s' "$NS" >"$work/serviceaccount/namespace"
  # The chart's container command, as rendered (everything after the binary).
  mapfile -t args < <(k -n "$NS" get deployment hivesched-scheduler -o jsonpath='{range .spec.template.spec.containers[0].command[*]}{@}{"\n"}{end}' | tail -n +2)
  chmod 0755 "$work" "$work/config" "$work/serviceaccount" "$work/hivesched-scheduler"
  chmod 0644 "$work/config/config.yaml" "$work/serviceaccount/"*
}
pod_files
printf '   args: %s\n' "${args[*]}"
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

# start_scheduler LOG: the scheduler started as the pod's container would
# be, logging to $work/LOG; started_ns is when.
start_scheduler() {
  export API_HOST=$api_host API_PORT=$api_port POD_NS=$NS
  started_ns=$(date +%s%N)
  # shellcheck disable=SC2016 # expanded by the inner bash
  unshare --mount --propagation private -- bash -c '
    set -euo pipefail
    work=$1; shift
    mount --bind -o ro "$work/config" /etc/hivesched
    mount -t tmpfs -o mode=0755 tmpfs /run
    mkdir -p /run/secrets/kubernetes.io/serviceaccount /run/hivesched-tmp /run/hivesched-bin
    mount --bind -o ro "$work/serviceaccount" /run/secrets/kubernetes.io/serviceaccount
    # The binary at a path of its own: the tmpfs on /tmp below hides $work
    # when the checkout itself is under /tmp (a CI clone may be).
    touch /run/hivesched-bin/hivesched-scheduler
    mount --bind -o ro "$work/hivesched-scheduler" /run/hivesched-bin/hivesched-scheduler
    mount -t tmpfs -o mode=1777 tmpfs /tmp
    exec setpriv --reuid=65532 --regid=65532 --clear-groups --no-new-privs -- \
      env -i KUBERNETES_SERVICE_HOST="$API_HOST" KUBERNETES_SERVICE_PORT="$API_PORT" POD_NAMESPACE="$POD_NS" \
      /run/hivesched-bin/hivesched-scheduler "$@"
  ' bash "$work" "${args[@]}" >"$work/$1" 2>&1 &
  scheduler_pid=$!
  scheduler_log=$work/$1
}
secs_since() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'; }
# wait_ready: the inspect server's /readyz (the chart's readiness probe)
# answers 200; ready_after is the time from the start, in seconds.
wait_ready() {
  local i
  for ((i = 0; i < 240; i++)); do
    kill -0 "$scheduler_pid" 2>/dev/null || { tail -30 "$scheduler_log"; die "the scheduler exited"; }
    if curl -fsS --max-time 2 "http://127.0.0.1:$INSPECT_PORT/readyz" >/dev/null 2>&1; then
      ready_after=$(secs_since "$started_ns")
      return 0
    fi
    sleep 0.5
  done
  tail -30 "$scheduler_log"
  die "the inspect server's /readyz did not answer 200 within 120 s"
}
# wait_leader: this process holds the lease kube-system/hivesched (its log
# says it acquired it and the Lease names a holder); leader_after is the
# time from the start, in seconds.
wait_leader() {
  local i
  for ((i = 0; i < 240; i++)); do
    kill -0 "$scheduler_pid" 2>/dev/null || { tail -30 "$scheduler_log"; die "the scheduler exited"; }
    holder=$(k -n kube-system get lease hivesched -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)
    if [[ -n $holder ]] && grep -qi 'successfully acquired lease' "$scheduler_log"; then
      leader_after=$(secs_since "$started_ns")
      return 0
    fi
    sleep 0.5
  done
  tail -30 "$scheduler_log"
  die "no lease acquired within 120 s"
}

log "starting the scheduler as 65532:65532 in a private mount namespace, no kubeconfig"
start_scheduler scheduler.log
wait_ready
printf '   /readyz (inspect, the chart readiness probe): 200 after %s s\n' "$ready_after"
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
wait_leader
first_leader_after=$leader_after
printf '   lease kube-system/hivesched held by %s, %s s after the start (the chart'"'"'s time to a leader)\n' "$holder" "$leader_after"
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
k -n speech delete pod,podgroups,resourceclaimtemplates -l app.kubernetes.io/name=chart-install-test --ignore-not-found --wait=true >/dev/null
stamp=$(date +%s)
gang=chart-install-$stamp
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

# bound_count NS SELECTOR: how many of the selected pods are bound.
bound_count() { k -n "$1" get pods -l "$2" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true; }
# wait_bound NS SELECTOR N WHAT: all N selected pods bound within 90 s.
wait_bound() {
  local i n=0
  for ((i = 0; i < 90; i++)); do
    n=$(bound_count "$1" "$2")
    ((n == $3)) && { bound_after=$i; return 0; }
    sleep 1
  done
  k -n "$1" get pods -l "$2" -o wide
  tail -40 "$scheduler_log"
  die "$4: $n of $3 pods bound after 90 s"
}
signed_count() {
  k -n "$1" get pods -l "$2" -o json | jq '[.items[] | select(.metadata.annotations["hivesched.io/placement-signature"] != null)] | length'
}

log "a Workload API gang: a PodGroup (scheduling.k8s.io/v1beta1, gang minCount 2) of 2 pods x 8 GPUs in vc-speech, by tenant alice"
# The VC is the PodGroup's label; the pods name the group by
# spec.schedulingGroup and carry no hivesched gang label or annotation.
wl=wl-$stamp
k --as alice apply -f - >/dev/null <<EOF2
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: $wl
  namespace: speech
  labels: {hivesched.io/virtual-cluster: vc-speech, app.kubernetes.io/name: chart-install-test}
spec:
  schedulingPolicy:
    gang: {minCount: 2}
EOF2
for i in 0 1; do
  cat <<EOF2
---
apiVersion: v1
kind: Pod
metadata:
  name: $wl-$i
  namespace: speech
  labels: {hivesched.io/virtual-cluster: vc-speech, app.kubernetes.io/name: chart-install-test, chart-install-test/group: $wl}
spec:
  schedulerName: hivesched
  schedulingGroup: {podGroupName: $wl}
  containers:
  - name: train
    image: busybox
    command: [sleep, infinity]
    resources:
      limits: {nvidia.com/gpu: 8}
EOF2
done | k --as alice apply -f - >/dev/null
wait_bound speech chart-install-test/group="$wl" 2 "the Workload API gang"
k -n speech get pods -l chart-install-test/group="$wl" -o wide | tee "$work/workload-gang.txt"
signed=$(signed_count speech chart-install-test/group="$wl")
nodes=$(k -n speech get pods -l chart-install-test/group="$wl" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | paste -sd, -)
printf '   2 of 2 bound after %s s on %s, %s with a signed placement record\n' "$bound_after" "$nodes" "$signed"
((signed == 2)) || die "$signed of 2 Workload API gang pods carry a placement signature"
[[ $nodes != *t4-* ]] || die "an 8-GPU pod of the Workload API gang is on a T4 node: $nodes"

log "a GPU ResourceClaim (DRA, class gpu.nvidia.com, 2 devices) for a pod on vc-speech's T4 node, by tenant alice"
# kube-controller-manager makes the pod's claim from the template; the
# scheduler allocates it with the devices of the cells it chose (the local
# cluster's fake DRA driver, test/fakedra, publishes the ResourceSlices).
dra=dra-$stamp
k --as alice apply -f - >/dev/null <<EOF2
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $dra, namespace: speech, labels: {app.kubernetes.io/name: chart-install-test}}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly: {deviceClassName: gpu.nvidia.com, count: 2}
---
apiVersion: v1
kind: Pod
metadata:
  name: $dra
  namespace: speech
  labels: {hivesched.io/virtual-cluster: vc-speech, hivesched.io/affinity-group: $dra, app.kubernetes.io/name: chart-install-test, chart-install-test/group: $dra}
  annotations: {hivesched.io/group-members: "1", hivesched.io/priority: "0", hivesched.io/leaf-cell-type: T4}
spec:
  schedulerName: hivesched
  resourceClaims: [{name: gpus, resourceClaimTemplateName: $dra}]
  containers:
  - name: main
    image: busybox
    resources: {claims: [{name: gpus}]}
EOF2
wait_bound speech chart-install-test/group="$dra" 1 "the DRA pod"
got=
for ((i = 0; i < 60; i++)); do
  claim=$(k -n speech get pod "$dra" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
  [[ -n $claim ]] && got=$(k -n speech get resourceclaim "$claim" -o jsonpath='{range .status.allocation.devices.results[*]}{.pool}/{.device}{"\n"}{end}' | sort | paste -sd, -)
  [[ -n $got ]] && break
  sleep 1
done
node=$(k -n speech get pod "$dra" -o jsonpath='{.spec.nodeName}')
cells=$(k -n speech get pod "$dra" -o jsonpath='{.metadata.annotations.hivesched\.io/leaf-cell-indices}')
want=$(tr ',' '\n' <<<"$cells" | sed "s|^|$node/gpu-|" | sort | paste -sd, -)
printf '   pod %s on %s: leaf-cell-indices %s; claim %s allocated %s\n' "$dra" "$node" "$cells" "${claim:-none}" "${got:-nothing}"
[[ -n $got ]] || { tail -40 "$scheduler_log"; die "the pod's ResourceClaim was not allocated within 60 s"; }
[[ $got == "$want" ]] || die "the claim's devices $got are not the pod's cells $want"
[[ $node == t4-* ]] || die "the T4 pod is on $node"

# vc_used: each VC's leaf cells held by bound, live hivesched pods (their
# hivesched.io/leaf-cell-indices), as "vc=n" lines: what the VCs' status
# columns must say.
vc_used() {
  k get pods -A -o json | jq -r '
    [.items[] | select(.spec.schedulerName == "hivesched" and (.spec.nodeName // "") != ""
       and .status.phase != "Succeeded" and .status.phase != "Failed"
       and (.metadata.annotations["hivesched.io/leaf-cell-indices"] // "") != "")
     | {vc: .metadata.labels["hivesched.io/virtual-cluster"],
        n: (.metadata.annotations["hivesched.io/leaf-cell-indices"] | split(",") | length)}]
    | group_by(.vc) | map("\(.[0].vc)=\(map(.n) | add)") | .[]'
}
vc_status() { k get virtualclusters -o json | jq -r '.items[] | select(.status.usedLeafCells > 0) | "\(.metadata.name)=\(.status.usedLeafCells)"'; }
log "the VCs' status columns: usedLeafCells is what their bound pods hold"
# This test's pods alone: vc-vision 4x8, vc-speech 2x8 + 2 (the status is
# written every statusUpdateIntervalSeconds).
want_used=$'vc-speech=18\nvc-vision=32'
[[ $(vc_used | sort) == "$want_used" ]] || die "the bound pods hold $(vc_used | paste -sd' ' -), not $(paste -sd' ' - <<<"$want_used") (another workload on the cluster?)"
for ((i = 0; i < 30; i++)); do
  [[ $(vc_status | sort) == "$want_used" ]] && break
  sleep 1
done
k get virtualclusters -o wide | tee "$work/vcs.txt"
[[ $(vc_status | sort) == "$want_used" ]] || die "VC usedLeafCells $(vc_status | paste -sd' ' -), the pods hold $(paste -sd' ' - <<<"$want_used")"
printf '   usedLeafCells %s, as the pods hold\n' "$(vc_status | sort | paste -sd' ' -)"

log "a tenant's forged placement is refused by the chart's ValidatingAdmissionPolicy"
policy_release=$(k get validatingadmissionpolicy hivesched-pod-placement -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-name}')
binding_release=$(k get validatingadmissionpolicybinding hivesched-pod-placement -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-name}' 2>/dev/null || true)
[[ $policy_release == hivesched ]] || die "the policy hivesched-pod-placement is not the release's (release-name '$policy_release')"
[[ $binding_release == hivesched ]] || die "the policy binding hivesched-pod-placement is not the release's (release-name '$binding_release')"
# forged_pod ANNOTATIONS: a pod alice may create in vision, with ANNOTATIONS.
forged_pod() {
  cat <<EOF2
apiVersion: v1
kind: Pod
metadata:
  name: forged-$stamp
  namespace: vision
  labels: {hivesched.io/virtual-cluster: vc-vision, hivesched.io/affinity-group: forged-$stamp, app.kubernetes.io/name: chart-install-test}
  annotations: {hivesched.io/group-members: "1", hivesched.io/priority: "10"$1}
spec:
  schedulerName: hivesched
  containers:
  - name: main
    image: busybox
    resources:
      limits: {nvidia.com/gpu: 8}
EOF2
}
# The same pod without the record passes admission (server-side dry run):
# the refusal is the record's, not alice's rights.
forged_pod "" | k --as alice create --dry-run=server -f - >/dev/null || die "alice may not create the pod even without a placement"
if forged_pod ', hivesched.io/placement: "{\"vc\":\"vc-vision\",\"node\":\"gpu-b3\",\"cells\":[0,1,2,3,4,5,6,7]}"' |
  k --as alice create -f - >"$work/forged.txt" 2>&1; then
  die "alice created a pod with a forged hivesched.io/placement"
fi
grep -q 'hivesched-pod-placement' "$work/forged.txt" || { cat "$work/forged.txt"; die "the forged pod was refused, but not by the policy hivesched-pod-placement"; }
printf '   refused: %s\n' "$(head -c 220 "$work/forged.txt")"

# Everything it did it was allowed to do by the chart's RBAC.
if grep -qi 'forbidden' "$work/scheduler.log"; then
  grep -i 'forbidden' "$work/scheduler.log" | head -5 || true
  die "the scheduler was refused a call under the chart's RBAC"
fi
echo "   no call refused (no 'forbidden' in its log)"

log "helm upgrade: CRDs left out of the release stay (and the VCs with them), are taken back"
checksum() { k -n "$NS" get deployment hivesched-scheduler -o jsonpath="{.spec.template.metadata.annotations['checksum/config']}"; }
vcs_before_upgrade=$(k get virtualclusters -o name | sort)
checksum_before=$(checksum)
"$HELM" --kubeconfig "$KUBECONFIG_FILE" upgrade hivesched manifests/charts/hivesched -n kube-system --reuse-values --set crds.install=false >/dev/null
k get crd virtualclusters.hivesched.io affinitygroups.hivesched.io -o name >/dev/null || die "an upgrade without the CRDs deleted them"
[[ $(k get virtualclusters -o name | sort) == "$vcs_before_upgrade" ]] || die "VirtualClusters changed by the upgrade"

log "helm upgrade of the config and the replica count while gangs are created: the pod rolls, the new leader recovers"
# The gangs above go first, so that vc-vision's 40 GPUs are free for the
# loop's: 8 gangs of 2 pods x 4 GPUs ask for 64, so some bind and some wait
# whole while the scheduler is stopped and started.
k -n vision delete pod -l app.kubernetes.io/name=chart-install-test --grace-period=0 --wait=true --timeout=60s >/dev/null
k -n speech delete pod -l app.kubernetes.io/name=chart-install-test --grace-period=0 --wait=true --timeout=60s >/dev/null
k -n speech delete podgroups,resourceclaimtemplates -l app.kubernetes.io/name=chart-install-test --wait=false >/dev/null
roll_gangs=8
(
  for ((g = 0; g < roll_gangs; g++)); do
    for m in 0 1; do
      cat <<EOF2
---
apiVersion: v1
kind: Pod
metadata:
  name: roll-$stamp-$g-$m
  namespace: vision
  labels: {hivesched.io/virtual-cluster: vc-vision, hivesched.io/affinity-group: roll-$stamp-$g, app.kubernetes.io/name: chart-install-test, chart-install-test/roll: "$stamp"}
  annotations: {hivesched.io/group-members: "2", hivesched.io/priority: "10"}
spec:
  schedulerName: hivesched
  containers:
  - name: train
    image: busybox
    command: [sleep, infinity]
    resources:
      limits: {nvidia.com/gpu: 4}
EOF2
    done | k --as alice apply -f - >/dev/null
    sleep 2 # the roll (about 6 s in) must land mid-loop, on a busy machine too
  done
) >"$work/roll-loop.txt" 2>&1 &
loop_pid=$!

# snapshot: test/chaos's checks on one List of the pods, from API objects
# alone: "double NODE/DEVICE POD POD" for a device two live pods use (by
# their hivesched.io/leaf-cell-indices) and "partial GANG BOUND/MEMBERS"
# for a hivesched gang (affinity-group label) with some members bound and
# not terminating, but not all.
snapshot() {
  k get pods -A -o json | jq -r '
    [.items[] | select(.spec.schedulerName == "hivesched" and .status.phase != "Succeeded" and .status.phase != "Failed")] as $pods
    | ([$pods[] | select((.spec.nodeName // "") != "" and (.metadata.annotations["hivesched.io/leaf-cell-indices"] // "") != "")
        | . as $p | .metadata.annotations["hivesched.io/leaf-cell-indices"] | split(",")[]
        | {dev: "\($p.spec.nodeName)/\(. | gsub(" "; ""))", pod: "\($p.metadata.namespace)/\($p.metadata.name)"}]
       | group_by(.dev)[] | select(length > 1) | "double \(.[0].dev) \(map(.pod) | join(" "))"),
      ([$pods[] | select((.metadata.labels["hivesched.io/affinity-group"] // "") != "")]
       | group_by("\(.metadata.namespace)/\(.metadata.labels["hivesched.io/affinity-group"])")[]
       | {g: "\(.[0].metadata.namespace)/\(.[0].metadata.labels["hivesched.io/affinity-group"])",
          members: (.[0].metadata.annotations["hivesched.io/group-members"] // "1" | tonumber),
          running: map(select((.spec.nodeName // "") != "" and .metadata.deletionTimestamp == null)) | length}
       | select(.running > 0 and .running < .members) | "partial \(.g) \(.running)/\(.members)")'
}
# watch_checks: a snapshot a second until told to stop (the file
# $work/watch.stop): double booking fails at once (nothing legitimate shows
# it even for a moment); a gang partly bound for longer than test/chaos's
# window (60 s: binding a gang's members takes time) fails too.
watch_checks() {
  declare -A since=()
  local now kind g rest snaps=0
  while [[ ! -e $work/watch.stop ]]; do
    now=$SECONDS
    declare -A seen=()
    while read -r kind g rest; do
      [[ -z $kind ]] && continue
      case $kind in
        double) echo "double-booked: device $g used by $rest" >>"$work/violations.txt" ;;
        partial)
          seen[$g]=1
          [[ -n ${since[$g]:-} ]] || since[$g]=$now
          if ((now - since[$g] > 60)); then echo "gang $g partly bound ($rest) for over 60 s" >>"$work/violations.txt"; fi ;;
      esac
    done < <(snapshot)
    for g in "${!since[@]}"; do [[ -n ${seen[$g]:-} ]] || unset "since[$g]"; done
    unset seen
    snaps=$((snaps + 1))
    echo "$snaps" >"$work/snapshots.txt"
    sleep 1
  done
}
rm -f "$work/watch.stop" "$work/violations.txt"
watch_checks &
watch_pid=$!

sleep 3 # a few gangs created (and some bound) before the upgrade
replicas_before=$(k -n "$NS" get deployment hivesched-scheduler -o jsonpath='{.spec.replicas}')
"$HELM" --kubeconfig "$KUBECONFIG_FILE" upgrade hivesched manifests/charts/hivesched -n kube-system --reuse-values \
  --set crds.install=true --set args.permitWaitingTimeSeconds=90 --set replicas=3 >/dev/null
"$HELM" --kubeconfig "$KUBECONFIG_FILE" get manifest hivesched -n kube-system >"$work/manifest-upgraded.yaml"
grep -q 'name: virtualclusters.hivesched.io' "$work/manifest-upgraded.yaml" || die "the CRDs are not back in the release"
[[ $(checksum) != "$checksum_before" ]] || die "a configuration change left the pod template's checksum as it was"
replicas_after=$(k -n "$NS" get deployment hivesched-scheduler -o jsonpath='{.spec.replicas}')
((replicas_after == 3)) || die "the Deployment has $replicas_after replicas after the upgrade, not 3"
# kube-controller-manager rolls the template: a second ReplicaSet (its pods
# stay pending: nothing runs pods here).
for ((i = 0; i < 30; i++)); do
  rs=$(k -n "$NS" get replicasets -l app.kubernetes.io/name=hivesched-scheduler -o name | grep -c . || true)
  ((rs >= 2)) && break
  sleep 1
done
((rs >= 2)) || die "the pod template changed but no new ReplicaSet rolls it"
printf '   revision %s: CRDs and %s VirtualClusters kept through an upgrade without them; checksum/config %.12s -> %.12s; replicas %s -> %s; %s ReplicaSets\n' \
  "$("$HELM" --kubeconfig "$KUBECONFIG_FILE" history hivesched -n kube-system -o json | jq length)" \
  "$(wc -l <<<"$vcs_before_upgrade")" "$checksum_before" "$(checksum)" "$replicas_before" "$replicas_after" "$rs"

# The roll, as the kubelet would do it: SIGTERM to the old pod's process
# while gangs are still being created, then the new pod from the new
# ConfigMap, a new token, the new template's command.
old_holder=$(k -n kube-system get lease hivesched -o jsonpath='{.spec.holderIdentity}')
sel=chart-install-test/roll=$stamp
created_at_stop=$(k -n vision get pods -l "$sel" -o name | grep -c . || true)
bound_at_stop=$(bound_count vision "$sel")
kill "$scheduler_pid"; wait "$scheduler_pid" 2>/dev/null || true; scheduler_pid=
printf '   the old process stopped with %s of the loop'"'"'s %s pods created, %s bound\n' "$created_at_stop" "$((2 * roll_gangs))" "$bound_at_stop"
# The roll must land while the loop still creates gangs, or it tests a
# quiet cluster.
kill -0 "$loop_pid" 2>/dev/null || die "the loop had finished before the scheduler was stopped: the roll was not under load"
pod_files
grep -q 'permitWaitingTimeSeconds: 90' "$work/config/config.yaml" || die "the new ConfigMap does not have permitWaitingTimeSeconds: 90"
start_scheduler scheduler-rolled.log
wait_ready
wait_leader
[[ $holder != "$old_holder" ]] || die "the lease is still held by the stopped process $old_holder"
rolled_leader_after=$leader_after
printf '   the rolled scheduler (permitWaitingTimeSeconds: 90 from the new ConfigMap): /readyz after %s s, holds the lease after %s s (%s, was %s)\n' \
  "$ready_after" "$leader_after" "$holder" "$old_holder"

wait "$loop_pid" || { cat "$work/roll-loop.txt"; die "the loop could not create its gangs"; }
# Settled: every gang bound whole or waiting whole, and the same for 5 s.
prev='' same=0
for ((i = 0; i < 120; i++)); do
  cur=$(k -n vision get pods -l "$sel" -o jsonpath='{range .items[*]}{.metadata.name}={.spec.nodeName}{"\n"}{end}' | sort)
  if [[ $cur == "$prev" ]] && ! snapshot | grep -q '^partial '; then same=$((same + 1)); else same=0; fi
  ((same >= 5)) && break
  prev=$cur
  sleep 1
done
touch "$work/watch.stop"; wait "$watch_pid" || true
k -n vision get pods -l "$sel" -o wide >"$work/roll-gangs.txt"
if [[ -s $work/violations.txt ]]; then
  sort -u "$work/violations.txt" | head -10
  die "the chaos checks failed during the roll"
fi
snapshot >"$work/roll-final.txt"
[[ ! -s $work/roll-final.txt ]] || { cat "$work/roll-final.txt"; die "the chaos checks fail once the gangs settled"; }
bound_pods=$(bound_count vision "$sel")
((bound_pods > 0 && bound_pods % 2 == 0)) || die "$bound_pods of the loop's pods bound"
signed=$(signed_count vision "$sel")
((signed == bound_pods)) || die "$signed of $bound_pods bound pods carry a placement signature"
printf '   %s of %s gangs bound whole, the others waiting whole; %s snapshots: no device double-booked, no gang partly bound\n' \
  "$((bound_pods / 2))" "$roll_gangs" "$(cat "$work/snapshots.txt")"
for ((i = 0; i < 30; i++)); do
  [[ $(vc_status | sort) == "$(vc_used | sort)" ]] && break
  sleep 1
done
[[ $(vc_status | sort) == "$(vc_used | sort)" ]] || die "after the roll VC usedLeafCells $(vc_status | paste -sd' ' -), the pods hold $(vc_used | paste -sd' ' -)"
printf '   usedLeafCells %s, as the pods hold\n' "$(vc_status | sort | paste -sd' ' -)"
if grep -qi 'forbidden' "$scheduler_log"; then
  grep -i 'forbidden' "$scheduler_log" | head -5 || true
  die "the rolled scheduler was refused a call under the chart's RBAC"
fi

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
k -n speech delete pod,podgroups,resourceclaimtemplates -l app.kubernetes.io/name=chart-install-test --wait=false >/dev/null
printf '   the chart'"'"'s time to a leader: %s s at the first start, %s s after the roll (scheduler start to holding the lease)\n' \
  "$first_leader_after" "$rolled_leader_after"
printf '   chart-install-test took %s s\n' "$(secs_since "$test_start")"
echo "chart-install-test: ok"

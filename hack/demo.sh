#!/usr/bin/env bash
# make demo: plays a short scenario on the local cluster, bringing it up if
# it is not. Each step prints `kubectl get vc`, the pods, and one line saying
# what happened. The cluster is left up to keep playing with.
#
#   hack/demo.sh          # make demo
#   hack/demo.sh --clean  # make demo DEMO_FLAGS=--clean: stop the cluster,
#                         # drop etcd's data, bring it up empty, then play
#
# The scenario needs a clean control plane: the sample VirtualClusters
# alone, both Active, and no GPUs held outside its namespaces. A cluster
# that still holds other state (an earlier `make up` whose etcd kept other
# VirtualClusters, which can take vc-vision's rack and get it Rejected) is
# refused with what is in the way, before anything is touched.
set -euo pipefail
# shellcheck source=hack/local-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-env.sh"

clean=0
for arg in "$@"; do
  case $arg in
    --clean) clean=1 ;;
    *) die "unknown argument '$arg' (known: --clean)" ;;
  esac
done

if ((clean)); then
  log "--clean: stopping the local cluster and dropping etcd's data"
  bash "$REPO_ROOT/hack/local-down.sh" --clean
fi
if [[ -s $LOCAL_CLUSTER_ENV ]] && ! cmp -s <(cluster_env) "$LOCAL_CLUSTER_ENV"; then
  die "the local cluster runs with the settings in $LOCAL_CLUSTER_ENV, not these: run make demo with the same HIVESCHED_* settings"
fi
if ! component_pid scheduler >/dev/null || ! port_open "$APISERVER_PORT"; then
  bash "$REPO_ROOT/hack/local-up.sh"
fi
KUBECTL=("$LOCAL_BIN/kubectl" --kubeconfig "$LOCAL_KUBECONFIG")
[[ -x $LOCAL_BIN/kubectl ]] || KUBECTL=(kubectl --kubeconfig "$LOCAL_KUBECONFIG")
k() { "${KUBECTL[@]}" "$@"; }

bold=$'\e[1m'; off=$'\e[0m'
[[ -t 1 ]] || { bold=; off=; }

# refuse WHY...: the control plane is not clean; say what is in the way and
# how to start from a clean one.
refuse() {
  local r
  log "ERROR: make demo needs a clean control plane, and this one is not:"
  for r in "$@"; do log "  - $r"; done
  log "start from an empty one: make down DOWN_FLAGS=--clean && make demo"
  log "  (or make demo DEMO_FLAGS=--clean, which does both; either drops everything in the local cluster)"
  exit 1
}

# The sample VirtualClusters, as make up applies them: re-applied here in
# case they were deleted or edited, then they must be alone and Active.
check_clean() {
  local why=() vcs others states i line
  k apply -f "$REPO_ROOT/manifests/samples/virtualclusters.yaml" >/dev/null
  vcs=$(k get virtualclusters -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
  others=$(grep -vxE 'vc-vision|vc-speech' <<<"$vcs" | paste -sd, - || true)
  [[ -z $others ]] || why+=("VirtualClusters other than the demo's vc-vision and vc-speech: $others (their cells may be the ones the demo's VCs need)")
  # A VC's state is written within a status interval (5 s) of a change.
  for ((i = 0; i < 30; i++)); do
    states=$(k get vc vc-vision vc-speech -o jsonpath='{range .items[*]}{.metadata.name}={.status.state}{" "}{end}' 2>/dev/null || true)
    [[ $states == "vc-vision=Active vc-speech=Active " ]] && break
    sleep 1
  done
  if [[ $states != "vc-vision=Active vc-speech=Active " ]]; then
    why+=("the demo's VirtualClusters are not both Active: $states($(k get vc vc-vision vc-speech -o jsonpath='{range .items[*]}{.metadata.name}: {.status.conditions[*].message}; {end}' 2>/dev/null))")
  fi
  # Bound pods holding GPUs outside the demo's namespaces take cells the
  # scenario counts on.
  while read -r line; do
    [[ -n $line ]] && why+=("a pod outside vision/speech holds GPUs: $line")
  done < <(k get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.spec.nodeName} {.spec.containers[*].resources.limits.nvidia\.com/gpu}{"\n"}{end}' |
    awk '$1 !~ /^(vision|speech)\// && $2 != "" && $3 != "" {print $1 " on " $2}')
  # Controllers in the demo's namespaces would recreate the pods it deletes.
  local owners
  owners=$(k get jobs,deployments,statefulsets -n vision -o name 2>/dev/null; k get jobs,deployments,statefulsets -n speech -o name 2>/dev/null)
  owners=$(paste -sd, - <<<"$owners")
  [[ -z $owners ]] || why+=("workload controllers in the demo's namespaces vision and speech would recreate the pods it deletes: $owners")
  ((${#why[@]} == 0)) || refuse "${why[@]}"
}
check_clean

# gang NAMESPACE NAME VC PRIORITY PODS GPUS: a native-form gang of PODS pods.
gang() {
  local ns=$1 name=$2 vc=$3 prio=$4 n=$5 gpus=$6 i
  for ((i = 0; i < n; i++)); do
    cat <<YAML
---
apiVersion: v1
kind: Pod
metadata:
  name: $name-$i
  namespace: $ns
  labels: {hivesched.io/virtual-cluster: $vc, hivesched.io/affinity-group: $name}
  annotations: {hivesched.io/group-members: "$n", hivesched.io/priority: "$prio"}
spec:
  schedulerName: hivesched
  containers:
  - name: main
    image: busybox
    resources: {limits: {nvidia.com/gpu: $gpus}}
YAML
  done | k apply -f - >/dev/null
}

# hived NAMESPACE NAME VC PODS GPUS: the same gang in HiveD's annotation.
hived() {
  local ns=$1 name=$2 vc=$3 n=$4 gpus=$5 i
  for ((i = 0; i < n; i++)); do
    cat <<YAML
---
apiVersion: v1
kind: Pod
metadata:
  name: $name-$i
  namespace: $ns
  annotations:
    hivedscheduler.microsoft.com/pod-scheduling-spec: |-
      virtualCluster: $vc
      priority: 0
      leafCellType: V100
      leafCellNumber: $gpus
      affinityGroup: {name: $name, members: [{podNumber: $n, leafCellNumber: $gpus}]}
spec:
  schedulerName: hivesched
  containers:
  - name: main
    image: busybox
    resources: {limits: {nvidia.com/gpu: $gpus}}
YAML
  done | k apply -f - >/dev/null
}

# running NAMESPACE PREFIX COUNT: wait until COUNT pods named PREFIX-* run.
running() {
  local ns=$1 prefix=$2 want=$3 n i
  for ((i = 0; i < 120; i++)); do
    n=$(k get pods -n "$ns" --no-headers 2>/dev/null | awk -v p="^$prefix-" '$1 ~ p && $3 == "Running"' | wc -l)
    ((n == want)) && return 0
    sleep 0.5
  done
  echo "timed out waiting for $want Running pods $ns/$prefix-*" >&2
  k get pods -n "$ns" -o wide >&2
  return 1
}

# gone NAMESPACE PREFIX: wait until no pod named PREFIX-* is left.
gone() {
  local i
  for ((i = 0; i < 120; i++)); do
    k get pods -n "$1" --no-headers 2>/dev/null | awk -v p="^$2-" '$1 ~ p' | grep -q . || return 0
    sleep 0.5
  done
  return 1
}

# show LINE: the state after a step, then what happened.
step=0
show() {
  step=$((step + 1))
  # The status writer writes a VC's change within a fraction of a second,
  # but each VC's status at most every statusUpdateIntervalSeconds (5 s in
  # the shipped configuration): a change soon after the last write of its
  # VC may show a few seconds late.
  sleep 2
  echo
  echo "${bold}== step $step${off}"
  k get vc
  k get ag -A 2>/dev/null
  k get pods -n vision -o wide 2>/dev/null | cut -c1-120
  k get pods -n speech -o wide 2>/dev/null | cut -c1-120
  echo "${bold}-> $1${off}"
}

# A fresh start: the demo's own pods only.
k delete pods -n vision --all --grace-period=0 --wait=false >/dev/null 2>&1 || true
k delete pods -n speech --all --grace-period=0 --wait=false >/dev/null 2>&1 || true
k delete resourceclaimtemplates -n speech --all --wait=false >/dev/null 2>&1 || true
k delete ag -n vision --all --wait=false >/dev/null 2>&1 || true
k delete ag -n speech --all --wait=false >/dev/null 2>&1 || true
k uncordon gpu-a3 >/dev/null 2>&1 || true
k patch vc vc-vision --type merge -p '{"spec":{"selector":"Pack"}}' >/dev/null 2>&1 || true
sleep 2

gang vision resnet vc-vision 0 2 8
hived speech asr vc-speech 2 4
running vision resnet 2 && running speech asr 2
show "two tenants: vision's 2x8 gang runs inside its rack; speech's HiveD job (2x4, HiveD's annotation) shares one node"

# Per-VC policies (docs/policies.md): vc-vision serves inference and wants
# its replicas on different nodes; vc-speech keeps HiveD's packing.
k patch vc vc-vision --type merge -p '{"spec":{"selector":"Spread"}}' >/dev/null
gang vision serve vc-vision 0 2 1
running vision serve 2
show "vc-vision's selector is Spread: its 2 inference replicas (2x1) run on two nodes; vc-speech (Pack) put its 2x4 job on one node"
k delete pods -n vision serve-0 serve-1 --grace-period=0 >/dev/null 2>&1
gone vision serve
k patch vc vc-vision --type merge -p '{"spec":{"selector":"Pack"}}' >/dev/null

gang speech sweep vc-speech -1 2 8
running speech sweep 2
show "an opportunistic 2x8 job (priority -1) scavenges idle GPUs that vc-speech has not claimed yet"

gang speech lm vc-speech 0 2 8
gone speech sweep && running speech lm 2
show "vc-speech claims its nodes for a guaranteed 2x8 job: the opportunistic gang was preempted, whole"

gang speech big vc-speech 0 2 8
sleep 3
show "vc-speech is full: the 2x8 gang 'big' waits for capacity (kubectl describe pod -n speech big-0 says why)"

gang speech urgent vc-speech 100 1 8
running speech urgent 1
show "priority 100 job 'urgent' preempted a whole lower-priority gang in vc-speech; 'big' keeps waiting"

k cordon gpu-a3 >/dev/null
gang vision detr vc-vision 0 1 8
running vision detr 1
show "gpu-a3 is cordoned (maintenance): vision's new 1x8 job avoided it"

# GPUs through DRA (issue 25): the pods ask with a ResourceClaimTemplate of
# class gpu.nvidia.com, not nvidia.com/gpu. kube-controller-manager's
# resourceclaim controller makes each pod's claim from the template;
# hivesched allocates it with the devices of the cells it chose (the fake
# DRA driver, test/fakedra, publishes the nodes' ResourceSlices; it
# prepares nothing). vc-speech's T4 node is still free.
k apply -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: tts-gpus, namespace: speech}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly: {deviceClassName: gpu.nvidia.com, count: 2}
YAML
for i in 0 1; do
  cat <<YAML
---
apiVersion: v1
kind: Pod
metadata:
  name: tts-$i
  namespace: speech
  labels: {hivesched.io/virtual-cluster: vc-speech, hivesched.io/affinity-group: tts}
  annotations: {hivesched.io/group-members: "2", hivesched.io/priority: "0", hivesched.io/leaf-cell-type: T4}
spec:
  schedulerName: hivesched
  resourceClaims: [{name: gpus, resourceClaimTemplateName: tts-gpus}]
  containers:
  - name: main
    image: busybox
    resources: {claims: [{name: gpus}]}
YAML
done | k apply -f - >/dev/null
running speech tts 2
# pod_claim POD: the name of the claim the resourceclaim controller made
# for the pod from its template; claim_devices CLAIM: its allocated devices
# as pool/device, sorted ("" until allocated).
pod_claim() { k get pod -n speech "$1" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}'; }
claim_devices() {
  k get resourceclaim -n speech "$1" -o jsonpath='{range .status.allocation.devices.results[*]}{.pool}/{.device}{"\n"}{end}' | sort | paste -sd, -
}
for p in tts-0 tts-1; do
  for _ in $(seq 60); do
    c=$(pod_claim "$p") && [[ -n $c && -n $(claim_devices "$c") ]] && break
    sleep 0.5
  done
done
show "a 2x2 job asks for its GPUs with a ResourceClaimTemplate (DRA, class gpu.nvidia.com): hivesched allocated each pod's claim with the devices of its cells on vc-speech's T4 node"
k get resourceclaims -n speech -o wide
k get resourceclaims -n speech -o custom-columns='NAME:.metadata.name,NODE:.status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[0],DEVICES:.status.allocation.devices.results[*].device,RESERVED-FOR:.status.reservedFor[*].name'
dra_ok=1
for p in tts-0 tts-1; do
  node=$(k get pod -n speech "$p" -o jsonpath='{.spec.nodeName}')
  cells=$(k get pod -n speech "$p" -o jsonpath='{.metadata.annotations.hivesched\.io/leaf-cell-indices}')
  c=$(pod_claim "$p")
  got=$(claim_devices "$c")
  want=$(tr ',' '\n' <<<"$cells" | sed "s|^|$node/gpu-|" | sort | paste -sd, -)
  if [[ -n $got && $got == "$want" ]]; then verdict=match; else verdict=DIFFER; dra_ok=0; fi
  echo "pod $p on $node: leaf-cell-indices $cells; claim $c devices $got: $verdict"
done
if ((!dra_ok)); then
  echo "a claim's devices are not its pod's cells" >&2
  exit 1
fi
k delete pods -n speech tts-0 tts-1 --grace-period=0 >/dev/null 2>&1
gone speech tts
k delete resourceclaimtemplate -n speech tts-gpus >/dev/null
# The garbage collector deletes the pods' claims after them.
for _ in $(seq 60); do
  [[ -z $(k get resourceclaims -n speech -o name 2>/dev/null) ]] && break
  sleep 0.5
done

echo
echo "${bold}== a tenant tries to forge a placement record (manifests/admission refuses it)${off}"
# It names hivesched: a pod with hivesched.io/ keys that names another
# scheduler is refused first by the policy hivesched-gpu-pods.
forged='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"forged","namespace":"speech","annotations":{"hivesched.io/placement":"{}"}},"spec":{"schedulerName":"hivesched","containers":[{"name":"c","image":"busybox"}]}}'
if out=$(echo "$forged" | k --as alice --as-group team-speech create --dry-run=server -f - 2>&1); then
  echo "the forged pod was admitted: is manifests/admission applied?" >&2
  exit 1
fi
if [[ $out != *hivesched-pod-placement* ]]; then
  echo "the forged pod was refused, but not by the admission policy: $out" >&2
  exit 1
fi
echo "kubectl --as alice create ...: ${out#*: }"

# kubectl hivesched (cmd/kubectl-hivesched): the cells as the scheduler sees
# them, read from its inspect API (127.0.0.1:$INSPECT_PORT on this machine).
[[ -x $LOCAL_BIN/kubectl-hivesched ]] || make -s -C "$REPO_ROOT" build BIN="$LOCAL_BIN"
# The inspect API authenticates a bearer token and asks the API server
# whether its owner may read it (docs/inspect.md); the local admin's
# kubeconfig holds a client certificate, so the demo reads it as a service
# account bound to hivesched-inspect-admin (manifests/inspect/rbac.yaml).
k apply -f "$REPO_ROOT/manifests/inspect/rbac.yaml" >/dev/null
k -n kube-system create serviceaccount hivesched-demo-viewer --dry-run=client -o yaml | k apply -f - >/dev/null
k create clusterrolebinding hivesched-demo-viewer --clusterrole=hivesched-inspect-admin \
  --serviceaccount=kube-system:hivesched-demo-viewer --dry-run=client -o yaml | k apply -f - >/dev/null
INSPECT_TOKEN_FILE=$LOCAL_DIR/inspect-token
mkdir -p "$(dirname "$INSPECT_TOKEN_FILE")"
k -n kube-system create token hivesched-demo-viewer --duration=24h > "$INSPECT_TOKEN_FILE"
chmod 600 "$INSPECT_TOKEN_FILE"
# kubectl finds a plugin by the first word after "kubectl": flags go after it.
khs() { PATH="$LOCAL_BIN:$PATH" "${KUBECTL[0]}" hivesched --kubeconfig "$LOCAL_KUBECONFIG" --token "$(cat "$INSPECT_TOKEN_FILE")" --inspect-url "http://127.0.0.1:$INSPECT_PORT" "$@"; }
# RBAC takes the new binding from its informers: wait until it reads.
for _ in $(seq 50); do khs vcs >/dev/null 2>&1 && break; sleep 0.2; done
echo
echo "${bold}== kubectl hivesched cells${off}"
khs cells
echo
echo "${bold}== kubectl hivesched why -n speech big-0${off}"
khs why -n speech big-0
mkdir -p "$REPO_ROOT/_output"
khs cells -o png --out "$REPO_ROOT/_output/demo-cells.png"
echo
echo "the cell tree as a picture: $REPO_ROOT/_output/demo-cells.png (kubectl hivesched cells -o png)"

echo
echo "The cluster stays up. Keep playing:"
echo "  export KUBECONFIG=$LOCAL_KUBECONFIG"
echo "  kubectl get vc; kubectl get ag -A; kubectl get pods -A -o wide"
echo "  PATH=$LOCAL_BIN:\$PATH kubectl hivesched --token \$(cat $INSPECT_TOKEN_FILE) --inspect-url http://127.0.0.1:$INSPECT_PORT cells|why POD|vcs|groups"
echo
echo "${bold}Open the dashboard${off} (cells, virtual clusters, groups and why they wait, preemptions; live):"
echo "  PATH=$LOCAL_BIN:\$PATH kubectl hivesched --kubeconfig $LOCAL_KUBECONFIG --token \$(cat $INSPECT_TOKEN_FILE) \\"
echo "    --inspect-url http://127.0.0.1:$INSPECT_PORT dashboard --open"
echo "  (it serves the page on 127.0.0.1:10264 and prints the URL to open; docs/dashboard.md)"
echo "Stop it with: make down"

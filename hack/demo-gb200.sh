#!/usr/bin/env bash
# make demo-gb200: NVLink domains reserved whole (issue 45, docs/nvlink.md),
# on the GB200-shaped local cluster (HIVESCHED_CLUSTER=gb200: two NVL72
# domains of 18 4-GPU trays, three 8-GPU H100 nodes; kwok nodes and a FAKE
# DRA driver: no GPUs run anything), brought up if it is not. vc-frontier
# owns one whole domain, vc-labs half of one (manifests/samples/gb200/).
#
#   1. frontier's 72-GPU job lands inside one domain;
#   2. labs' guaranteed 1-GPU notebooks run in its half domain, and its
#      opportunistic 1-GPU jobs fill every other GB200 GPU;
#   3. frontier's job ends; labs' opportunistic jobs fill its domain too;
#   4. frontier's next 72-GPU job still gets a whole domain: it preempts one
#      domain's opportunistic jobs, never labs' guaranteed notebooks.
#
# Each step prints `kubectl get vc`, where the pods are (per domain) and one
# line saying what happened. The cluster is left up (make down-gb200).
#   hack/demo-gb200.sh [--clean]   # --clean: start from an empty cluster
set -euo pipefail
export HIVESCHED_CLUSTER=${HIVESCHED_CLUSTER:-gb200}
# shellcheck source=hack/local-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-env.sh"
[[ $CLUSTER == gb200 ]] || die "make demo-gb200 needs HIVESCHED_CLUSTER=gb200, not '$CLUSTER'"

for arg in "$@"; do
  case $arg in
    --clean) log "--clean: stopping the GB200 local cluster and dropping etcd's data"; bash "$REPO_ROOT/hack/local-down.sh" --clean ;;
    *) die "unknown argument '$arg' (known: --clean)" ;;
  esac
done
if [[ -s $LOCAL_CLUSTER_ENV ]] && ! cmp -s <(cluster_env) "$LOCAL_CLUSTER_ENV"; then
  die "the local cluster in $LOCAL_DIR runs with the settings in $LOCAL_CLUSTER_ENV, not these: run make demo-gb200 with the same HIVESCHED_* settings"
fi
if ! component_pid scheduler >/dev/null || ! port_open "$APISERVER_PORT"; then
  bash "$REPO_ROOT/hack/local-up.sh"
fi
KUBECTL=("$LOCAL_BIN/kubectl" --kubeconfig "$LOCAL_KUBECONFIG")
k() { "${KUBECTL[@]}" "$@"; }
bold=$'\e[1m'; off=$'\e[0m'
[[ -t 1 ]] || { bold=; off=; }

# pods NAMESPACE NAME VC PRIORITY PODS GPUS [WITHIN]: a native-form gang of
# PODS pods of GPUS GB200 each (one pod: a group alone); WITHIN=1 keeps it
# inside one NVLink domain.
pods() {
  local ns=$1 name=$2 vc=$3 prio=$4 n=$5 gpus=$6 within=${7:-0} i
  for ((i = 0; i < n; i++)); do
    cat <<YAML
---
apiVersion: v1
kind: Pod
metadata:
  name: $name-$i
  namespace: $ns
  labels: {hivesched.io/virtual-cluster: $vc, hivesched.io/affinity-group: $name}
  annotations:
    hivesched.io/group-members: "$n"
    hivesched.io/priority: "$prio"
    hivesched.io/leaf-cell-type: GB200
$( ((within)) && echo '    hivesched.io/within-topology: nvidia.com/gpu.clique')
spec:
  schedulerName: hivesched
  containers:
  - {name: main, image: busybox, resources: {limits: {nvidia.com/gpu: $gpus}}}
YAML
  done
}

# singles NAMESPACE PREFIX VC PRIORITY COUNT FROM: COUNT one-pod 1-GPU groups
# PREFIX-FROM.. (each its own job).
singles() {
  local i
  for ((i = $6; i < $6 + $5; i++)); do pods "$1" "$2-$i" "$3" "$4" 1 1; done | k apply -f - >/dev/null
}

# running NAMESPACE REGEXP COUNT: wait until COUNT pods whose names match run.
running() {
  local n i
  for ((i = 0; i < 240; i++)); do
    n=$(k get pods -n "$1" --no-headers 2>/dev/null | awk -v p="$2" '$1 ~ p && $3 == "Running"' | wc -l)
    ((n == $3)) && return 0
    sleep 0.5
  done
  die "timed out waiting for $3 Running pods $1/$2 (have $n)"
}

# where: the Running pods of both tenants per domain (the clique label of
# their trays) and per kind.
where() {
  local cliques
  cliques=$(k get nodes -l nvidia.com/gpu.clique -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.labels.nvidia\.com/gpu\.clique}{"\n"}{end}')
  {
    k get pods -n frontier --no-headers -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase 2>/dev/null
    k get pods -n labs --no-headers -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase 2>/dev/null
  } | awk -v cl="$cliques" '
    BEGIN { n = split(cl, lines, "\n"); for (i = 1; i <= n; i++) { split(lines[i], f, " "); clique[f[1]] = substr(f[2], 1, 8) "..." substr(f[2], length(f[2]) - 5) } }
    $4 == "Running" { job = $2; sub(/-[0-9]+$/, "", job); if (job ~ /^(scavenge|notebook)-[0-9]+$/) sub(/-[0-9]+$/, "", job); key = "  domain " clique[$3] "  " $1 "/" job; count[key]++ }
    END { for (k in count) printf "%s: %d pods\n", k, count[k] }' | sort
}

step=0
show() {
  step=$((step + 1))
  sleep 2
  echo
  echo "${bold}== step $step${off}"
  k get vc
  echo "Running pods by NVLink domain (GB200 trays; kwok nodes, fake DRA driver: no GPUs):"
  where
  echo "${bold}-> $1${off}"
}

# A fresh start: the demo's own pods only.
k delete pods -n frontier --all --grace-period=0 --wait=false >/dev/null 2>&1 || true
k delete pods -n labs --all --grace-period=0 --wait=false >/dev/null 2>&1 || true
for ((i = 0; i < 120; i++)); do
  [[ -z $(k get pods -n frontier -o name 2>/dev/null)$(k get pods -n labs -o name 2>/dev/null) ]] && break
  sleep 0.5
done

pods frontier pretrain vc-frontier 50 18 4 1 | k apply -f - >/dev/null
running frontier '^pretrain-' 18
show "vc-frontier's 72-GPU job (18 pods x 4 GB200, within nvidia.com/gpu.clique) runs inside one NVLink domain"

for i in 0 1 2 3; do pods labs "notebook-$i" vc-labs 10 1 1 1; done | k apply -f - >/dev/null
running labs '^notebook-' 4
singles labs scavenge vc-labs -1 68 0
running labs '^scavenge-' 68
show "vc-labs: 4 guaranteed 1-GPU notebooks in its half domain; 68 opportunistic 1-GPU jobs (priority -1) fill every other GB200 GPU"

k delete pods -n frontier -l hivesched.io/affinity-group=pretrain --grace-period=0 >/dev/null
singles labs scavenge vc-labs -1 72 68
running labs '^scavenge-' 140
show "vc-frontier's job ended; vc-labs' opportunistic 1-GPU jobs took its idle domain too: all 144 GB200 GPUs are busy"

pods frontier pretrain-2 vc-frontier 50 18 4 1 | k apply -f - >/dev/null
running frontier '^pretrain-2-' 18
running labs '^notebook-' 4
show "vc-frontier's next 72-GPU job got a whole domain back: it preempted that domain's 72 opportunistic jobs, and vc-labs' guaranteed notebooks run on"
echo
echo "The cluster stays up: kubectl --kubeconfig $LOCAL_KUBECONFIG get vc,ag -A; make down-gb200 stops it."

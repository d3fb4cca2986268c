#!/usr/bin/env bash
# Stop the local control plane started by hack/local-up.sh (make down).
#
#   hack/local-down.sh           # stop; keep binaries, certs and etcd data
#   hack/local-down.sh --clean   # also drop etcd data (next "up" starts empty)
#
# Only the pids recorded in _output/local/*.pid are signalled. Succeeds when
# nothing is running.
set -euo pipefail

# shellcheck source=hack/local-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-env.sh"

clean=0
for arg in "$@"; do
  case $arg in
    --clean) clean=1 ;;
    -h | --help)
      sed -n '2,8s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) die "unknown argument '$arg' (known: --clean)" ;;
  esac
done

START_MS=$(now_ms)
if [[ ! -d $LOCAL_DIR ]]; then
  log "nothing to stop: $LOCAL_DIR does not exist"
  exit 0
fi
take_lock

# Reverse start order (see COMPONENTS in local-env.sh for why it matters).
for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
  stop_component "${COMPONENTS[i]}"
done

# The settings file describes a running cluster; none runs now.
rm -f "$LOCAL_CLUSTER_ENV"
if ((clean)); then
  log "removing etcd data $LOCAL_DATA/etcd"
  rm -rf "$LOCAL_DATA/etcd"
fi
log "down in $(since "$START_MS")"

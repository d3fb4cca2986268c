#!/usr/bin/env bash
# Stop, start or restart only the scheduler of the local cluster, for example
# to switch profiles or to test recovery from a scheduler restart:
#   hack/local-scheduler.sh stop
#   hack/local-scheduler.sh start [second|default]
#   hack/local-scheduler.sh restart [second|default]
# HIVESCHED_REPLICAS=2 starts two replicas under leader election (scheduler
# and scheduler-2; hack/local-up.sh); stop and restart stop both.
# Starting goes through hack/local-up.sh, which starts only what is not
# running and recreates nothing that exists.
set -euo pipefail
# shellcheck source=hack/local-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-env.sh"

stop_all() {
  stop_component scheduler-2
  stop_component scheduler
}

cmd=${1:-}
profile=${2:-${HIVESCHED_PROFILE:-second}}
case $cmd in
  stop) stop_all ;;
  start) HIVESCHED_PROFILE=$profile bash "$REPO_ROOT/hack/local-up.sh" ;;
  restart)
    stop_all
    HIVESCHED_PROFILE=$profile bash "$REPO_ROOT/hack/local-up.sh"
    ;;
  *) die "usage: $0 stop|start|restart [second|default]" ;;
esac

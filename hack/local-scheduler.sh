#!/usr/bin/env bash
# Stop, start or restart only the scheduler of the local cluster, for example
# to switch profiles or to test recovery from a scheduler restart:
#   hack/local-scheduler.sh stop
#   hack/local-scheduler.sh start [second|default]
#   hack/local-scheduler.sh restart [second|default]
# Starting goes through hack/local-up.sh, which starts only what is not
# running and recreates nothing that exists.
set -euo pipefail
# shellcheck source=hack/local-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-env.sh"

cmd=${1:-}
profile=${2:-${HIVESCHED_PROFILE:-second}}
case $cmd in
  stop) stop_component scheduler ;;
  start) HIVESCHED_PROFILE=$profile bash "$REPO_ROOT/hack/local-up.sh" ;;
  restart)
    stop_component scheduler
    HIVESCHED_PROFILE=$profile bash "$REPO_ROOT/hack/local-up.sh"
    ;;
  *) die "usage: $0 stop|start|restart [second|default]" ;;
esac

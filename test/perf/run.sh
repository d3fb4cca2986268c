#!/usr/bin/env bash
# Runs the scheduler_perf benchmarks of test/perf and writes the markdown
# table (make bench). BENCH_NODES picks the cluster size (500 by default;
# 5000 runs the large variants), BENCH_FILTER the test cases (a regexp on
# their names, default all; an alternation such as "Gangs8x1|Preemption"
# works), BENCH_COUNT the runs of each case (default 1; the table shows the
# median run), BENCH_TIMEOUT the go test timeout, BENCH_PROFILE=1 writes a
# CPU profile of the whole process (API server and scheduler in one) next to
# the log, BENCH_CORE=0 skips the cell core's benchmarks.
#
# It needs an etcd binary on PATH: _output/local/bin/etcd, built here the way
# hack/local-up.sh does when it is missing or of another version.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
source hack/local-env.sh
OUT=$ROOT/_output/perf
NODES=${BENCH_NODES:-500}
FILTER=${BENCH_FILTER:-.}
TIMEOUT=${BENCH_TIMEOUT:-90m}
COUNT=${BENCH_COUNT:-1}
NICE=(nice -n 10)
mkdir -p "$OUT"

# ETCD_VERSION comes from hack/local-env.sh, so the benchmark's etcd is the
# local cluster's. It is built in a module of its own, whatever this module's
# go.sum holds; an etcd of another version (left by an earlier checkout) is
# rebuilt.
# (The output is read whole first: grep -q closing the pipe early can kill
# etcd with SIGPIPE, which pipefail would count as a mismatch.)
have=
[[ ! -x $LOCAL_BIN/etcd ]] || have=$("$LOCAL_BIN/etcd" --version 2>/dev/null || true)
if [[ -x $LOCAL_BIN/etcd && $have != *"etcd Version: ${ETCD_VERSION#v}"* ]]; then
  echo "$LOCAL_BIN/etcd is not etcd $ETCD_VERSION: rebuilding it"
  rm -f "$LOCAL_BIN/etcd"
fi
if [[ ! -x $LOCAL_BIN/etcd ]]; then
  echo "building etcd $ETCD_VERSION into $LOCAL_BIN"
  dir=$LOCAL_TOOLS/etcd
  mkdir -p "$dir" "$LOCAL_BIN"
  printf 'module hivesched.local/tools/etcd\n\ngo 1.24.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$dir/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$dir/tools.go"
  (cd "$dir" && GOFLAGS="-mod=mod -buildvcs=false" go mod tidy >/dev/null 2>&1 &&
    "${NICE[@]}" env GOFLAGS="-mod=mod -buildvcs=false" go build -ldflags "-s -w" -o "$LOCAL_BIN/etcd" go.etcd.io/etcd/server/v3)
fi
export PATH=$LOCAL_BIN:$PATH

"${NICE[@]}" go test -c -o "$OUT/perf.test" ./test/perf/

stamp=$(date -u +%Y%m%dT%H%M%SZ)
data=$OUT/data-$stamp
mkdir -p "$data"
log=$OUT/bench-$stamp.log
profile=()
if [[ ${BENCH_PROFILE:-0} == 1 ]]; then
  profile=(-test.cpuprofile="$OUT/cpu-$stamp.pprof")
fi
echo "benchmarks: nodes=$NODES filter=$FILTER count=$COUNT; log $log, data $data"
set +e
(cd test/perf && "${NICE[@]}" "$OUT/perf.test" -test.run='^$' -test.bench="BenchmarkPerfScheduling/($FILTER)" \
  -test.benchtime=1ns -test.count="$COUNT" -test.timeout="$TIMEOUT" "${profile[@]}" \
  -perf-scheduling-label-filter="performance,${NODES}Nodes" -data-items-dir="$data") >"$log" 2>&1
rc=$?
set -e
grep -E '^(Benchmark|--- FAIL|FAIL|PASS|ok)|Error running|gang check|scheduler_perf.go:[0-9]+: .*(error|timed out)' "$log" | cut -c1-400 || true
[[ ${#profile[@]} == 0 ]] || echo "CPU profile: $OUT/cpu-$stamp.pprof (go tool pprof $OUT/perf.test ...)"

core=
if [[ ${BENCH_CORE:-1} == 1 ]]; then
  core=$OUT/core-$stamp.txt
  echo "cell core benchmarks: $core"
  "${NICE[@]}" go test -run '^$' -bench . -benchmem -count 3 ./plugins/cellcore/ >"$core" 2>&1 || { cat "$core"; rc=1; }
fi

report=$OUT/results-${NODES}.md
[[ $FILTER == . ]] || report=$OUT/results-${NODES}-${FILTER//[^A-Za-z0-9]/_}.md
(cd test/perf && HIVESCHED_PERF_DATA="$data" HIVESCHED_PERF_REPORT="$report" HIVESCHED_CORE_BENCH="$core" \
  "$OUT/perf.test" -test.run='^TestReport$') >/dev/null
echo "table: $report"
cat "$report"
exit $rc

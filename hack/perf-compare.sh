#!/usr/bin/env bash
# perf-compare.sh: scheduler_perf (test/perf) at commit BASE against the
# working tree, on this machine, in one run: both perf.test binaries are
# built, then run alternately ROUNDS times each on the workloads FILTER
# selects (BENCH_NODES nodes), and benchstat compares what they reported
# (SchedulingThroughput, pods/s: ratios with confidence intervals and
# p-values). Alternating, not one side after the other, so that a machine
# that gets busier or quieter during the run weighs on both sides alike.
#
#   make perf-compare BASE=<commit> [PERF_FILTER=...] [ROUNDS=5] [BENCH_NODES=500]
#
# Both sides run their own test/perf (the workloads as each commit defines
# them): compare commits whose contenders of that name do the same work.
# Output in _output/perf-compare: base.txt, new.txt (the benchmark lines),
# benchstat.txt; each run's data items (and timeline) in data-<side>-XXXX.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
: "${BASE:?set BASE to the commit to compare against, e.g. make perf-compare BASE=a9f05be}"
FILTER=${PERF_FILTER:-Gangs8x1_500Nodes_HiveSched$}
ROUNDS=${ROUNDS:-5}
NODES=${BENCH_NODES:-500}
GO=${GO:-go}

source hack/local-env.sh
out=$root/_output/perf-compare
base=$(git rev-parse --verify "$BASE^{commit}")
short=$(git rev-parse --short "$base")
head=$(git describe --always --dirty)
mkdir -p "$out" "$root/_output/bin"

source hack/benchstat.sh

use_local_etcd

src=$out/base-$short
rm -rf "$src"
mkdir -p "$src"
git archive --format=tar "$base" | tar -x -C "$src"

echo "building the perf binaries: base $short, new $head"
nice -n 10 "$GO" test -c -o "$out/new.test" ./test/perf/
(cd "$src" && nice -n 10 "$GO" test -c -o "$out/base.test" ./test/perf/)

run() { # run <side> <test/perf dir>: one pass of the workloads, benchmark lines appended to <side>.txt
	local data
	data=$(mktemp -d "$out/data-$1-XXXX")
	(cd "$2/test/perf" && nice -n 10 "$out/$1.test" -test.run='^$' -test.bench="BenchmarkPerfScheduling/($FILTER)" \
		-test.benchtime=1ns -test.count=1 -test.timeout=60m \
		-perf-scheduling-label-filter="performance,${NODES}Nodes" -data-items-dir="$data") >"$out/$1-last.log" 2>&1 || {
		tail -40 "$out/$1-last.log" >&2
		echo "the $1 side failed (log: $out/$1-last.log)" >&2
		exit 1
	}
	grep -E '^Benchmark' "$out/$1-last.log" >>"$out/$1.txt"
	# The data items and timelines stay, per side and round (the latency
	# percentiles, where the pods waited: test/perf/timeline_test.go).
	echo "$1: data items $data"
}

: >"$out/base.txt"
: >"$out/new.txt"
rm -rf "$out"/data-*
for i in $(seq "$ROUNDS"); do
	echo "round $i of $ROUNDS ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))"
	if ((i % 2)); then
		run base "$src"
		run new "$root"
	else
		run new "$root"
		run base "$src"
	fi
done

echo "base $short against the working tree $head, ${NODES} nodes, $ROUNDS rounds alternating:"
"$benchstat" -filter '.unit:(SchedulingThroughput/Average)' base="$out/base.txt" new="$out/new.txt" | tee "$out/benchstat.txt"

#!/usr/bin/env bash
# bench-core-compare.sh BASE: the cell core's benchmarks of commit BASE
# against the working tree's, interleaved on this machine, compared with
# golang.org/x/perf's benchstat (make bench-core-compare BASE=<commit>).
#
# Both test binaries run the working tree's portable benchmark files
# (BENCH_FILES, copied over BASE's own), so that both cores serve the same
# workloads; a BASE whose package lacks what they call fails to build, and
# says so. The binaries run alternately, ROUNDS times each, the first of
# each round alternating too, so that the neighbours' load and the
# machine's drift fall on both alike; benchstat then gives each metric's
# median, its confidence interval and the change with its p-value
# (sec/op, p50-ns, p99-ns, B/op, allocs/op, ...).
#
#   BASE         the commit to compare against (required)
#   ROUNDS       runs of each binary (6: benchstat's minimum for a 95% interval)
#   BENCH        -test.bench regexp
#   BENCHTIME    -test.benchtime (empty: Go's default, 1s a benchmark)
#   BENCH_FILES  benchmark files of plugins/cellcore to run on both sides
#   NICE         nice level of the runs (10: the machine is shared)
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
: "${BASE:?set BASE to the commit to compare against, e.g. make bench-core-compare BASE=2f9ab04}"
ROUNDS=${ROUNDS:-6}
BENCH=${BENCH:-'^Benchmark(ScheduleAffinityGroup|Fragmented|PreemptAffinityGroup|BuildCluster)$'}
BENCHTIME=${BENCHTIME:-}
BENCH_FILES=${BENCH_FILES:-bench_test.go bench_fragmented_test.go}
NICE=${NICE:-10}
GO=${GO:-go}

out=$root/_output/bench-compare
base=$(git rev-parse --verify "$BASE^{commit}")
short=$(git rev-parse --short "$base")
head=$(git describe --always --dirty)
mkdir -p "$out" "$root/_output/bin"

source hack/benchstat.sh

# BASE's module and cell core, with the working tree's benchmark files.
src=$out/base-$short
rm -rf "$src"
mkdir -p "$src"
git archive --format=tar "$base" go.mod go.sum plugins/cellcore | tar -x -C "$src"
rm -f "$src"/plugins/cellcore/bench*_test.go
for f in $BENCH_FILES; do
	cp "plugins/cellcore/$f" "$src/plugins/cellcore/$f"
done

echo "building the test binaries: base $short, new $head"
"$GO" test -c -o "$out/new.test" ./plugins/cellcore/
if ! (cd "$src" && "$GO" test -c -o "$out/base.test" ./plugins/cellcore/); then
	echo "the core of $short does not build with the working tree's $BENCH_FILES (see above)" >&2
	exit 1
fi

args=(-test.run '^$' -test.bench "$BENCH" -test.benchmem -test.count 1)
if [ -n "$BENCHTIME" ]; then
	args+=(-test.benchtime "$BENCHTIME")
fi
: >"$out/base.txt"
: >"$out/new.txt"
{
	echo "base: $base"
	echo "new: $head ($(git rev-parse HEAD), working tree)"
	echo "benchstat: golang.org/x/perf/cmd/benchstat@$BENCHSTAT_VERSION"
	echo "go: $("$GO" env GOVERSION), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "runs: $ROUNDS rounds, alternating, nice -n $NICE, ${args[*]}"
	echo "start: $(date -u +%Y-%m-%dT%H:%M:%SZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/header.txt"

run() { # run <name>: one run of a binary, appended to <name>.txt
	(cd "$root/plugins/cellcore" && nice -n "$NICE" "$out/$1.test" "${args[@]}") >>"$out/$1.txt"
}
for ((i = 1; i <= ROUNDS; i++)); do
	echo "round $i of $ROUNDS ($(date -u +%H:%M:%S), load average $(cut -d' ' -f1-3 /proc/loadavg))"
	if ((i % 2)); then
		run base
		run new
	else
		run new
		run base
	fi
done
if ! grep -q '^Benchmark' "$out/new.txt" || ! grep -q '^Benchmark' "$out/base.txt"; then
	echo "no benchmark matched $BENCH on both sides" >&2
	exit 1
fi
echo "end: $(date -u +%Y-%m-%dT%H:%M:%SZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/header.txt"

{
	cat "$out/header.txt"
	echo
	(cd "$out" && "$benchstat" base=base.txt new=new.txt)
} | tee "$out/compare.txt"
echo "raw runs: $out/base.txt $out/new.txt; this table: $out/compare.txt"

#!/usr/bin/env bash
# perf-contenders.sh: contenders of one scheduler_perf workload (test/perf)
# side by side, from one perf.test binary built from the working tree, run
# alternately: each contender alone per run, the order reversed every other
# round, so that a machine that gets busier or quieter weighs on all alike.
#
#   make perf-contenders CONTENDERS='HiveSched HiveSchedGate8 HiveSchedUngated' \
#       [WORKLOAD=Gangs8x1] [BENCH_NODES=500] [ROUNDS=3]
#
# Per run it prints the throughput, the scheduling latency p50 (the SLI
# histogram's), and the gang and claims checks (bind spread, gangs whole);
# at the end benchstat compares the contenders' throughputs. Single runs of
# the end-to-end benchmark move by tens of percent on a shared machine
# (docs/perf.md): this is the way to put two contenders side by side.
# Output in _output/perf-contenders: <contender>.txt (benchmark lines),
# last-<contender>.log (the last run's log), runs.txt (the per-run lines).
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
read -r -a contenders <<<"${CONTENDERS:-HiveSched HiveSchedUngated}"
WORKLOAD=${WORKLOAD:-Gangs8x1}
ROUNDS=${ROUNDS:-3}
NODES=${BENCH_NODES:-500}
GO=${GO:-go}

source hack/local-env.sh
out=$root/_output/perf-contenders
mkdir -p "$out" "$root/_output/bin"
source hack/benchstat.sh

use_local_etcd

echo "building perf.test from $(git describe --always --dirty)"
nice -n 10 "$GO" test -c -o "$out/perf.test" ./test/perf/

: >"$out/runs.txt"
for c in "${contenders[@]}"; do : >"$out/$c.txt"; done

run() { # run <contender>: one run, alone
	local c=$1 data log
	data=$(mktemp -d "$out/data-XXXX")
	log=$out/last-$c.log
	(cd test/perf && nice -n 10 "$out/perf.test" -test.run='^$' -test.v \
		-test.bench="BenchmarkPerfScheduling/(${WORKLOAD}_${NODES}Nodes_$c\$)" \
		-test.benchtime=1ns -test.count=1 -test.timeout=60m \
		-perf-scheduling-label-filter="performance,${NODES}Nodes" -data-items-dir="$data") >"$log" 2>&1 || {
		tail -40 "$log" >&2
		echo "contender $c failed (log: $log)" >&2
		exit 1
	}
	rm -rf "$data"
	if ! grep -q '^Benchmark' "$log"; then
		echo "contender $c ran no benchmark: is ${WORKLOAD}_${NODES}Nodes_$c a workload of test/perf?" >&2
		exit 1
	fi
	# One benchmark name for all contenders, so that benchstat puts them in
	# columns side by side.
	grep '^Benchmark' "$log" | sed "s/_${c}\//_X\//" >>"$out/$c.txt"
	local tput p50 checks
	tput=$(grep -o '[0-9.]* SchedulingThroughput/Average' "$log" | head -1 | cut -d' ' -f1)
	p50=$(grep -o '[0-9.]* scheduler_pod_scheduling_sli_duration_ms/Perc50' "$log" | head -1 | cut -d' ' -f1)
	checks=$(grep -oE '(gang|claims) check: [^"]*' "$log" | sort -u | tr '\n' ' ')
	printf '%s\tthroughput %s pods/s\tlatency p50 %s ms\t%s\n' "$c" "$tput" "$p50" "$checks" | tee -a "$out/runs.txt"
}

for i in $(seq "$ROUNDS"); do
	echo "round $i of $ROUNDS ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$out/runs.txt"
	order=("${contenders[@]}")
	if ((i % 2 == 0)); then
		order=()
		for ((j = ${#contenders[@]} - 1; j >= 0; j--)); do order+=("${contenders[$j]}"); done
	fi
	for c in "${order[@]}"; do run "$c"; done
done
echo "done ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$out/runs.txt"

args=()
for c in "${contenders[@]}"; do args+=("$c=$out/$c.txt"); done
"$benchstat" -filter '.unit:(SchedulingThroughput/Average)' "${args[@]}" | tee "$out/benchstat.txt"

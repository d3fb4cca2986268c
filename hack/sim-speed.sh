#!/usr/bin/env bash
# The simulator's speed at scale (issue 13): a month of about 100k jobs on
# 1,000 nodes (125 racks x 8 nodes x 8 V100), every policy and the private
# references, timed with its peak memory. The inputs are the sample's
# (manifests/sim) scaled up: 62 racks for vc-train, 252 nodes each for
# vc-dev and vc-research, arrival rates x11.4 and durations x5 (about the
# sample's load). Writes _output/sim-speed/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=_output/sim-speed
mkdir -p "$out"
{
  sed -n '/^apiVersion/,/^        physicalCells:/p' manifests/sim/scheduler-config.yaml | sed 's/childCellNumber: 8}/childCellNumber: 8}/'
  for ((r = 0; r < 125; r++)); do
    printf '        - cellType: V100-RACK\n          cellAddress: rack%d\n          cellChildren:\n' "$r"
    for ((n = 0; n < 8; n++)); do printf '          - cellAddress: r%d-n%d\n' "$r" "$n"; done
  done
} > "$out/scheduler-config.yaml"
sed -e 's/{cellType: V100-RACK, cellNumber: 1}/{cellType: V100-RACK, cellNumber: 62}/' \
    -e 's/{cellType: V100-NODE, cellNumber: 4}/{cellType: V100-NODE, cellNumber: 252}/' \
    manifests/sim/virtualclusters.yaml > "$out/virtualclusters.yaml"
awk '
  /^days:/ { print "days: 30"; next }
  /jobsPerHour:/ { split($0, a, ": "); printf "%s: %.4g\n", a[1], a[2] * 11.4; next }
  /medianMinutes:/ { match($0, /medianMinutes: [0-9.]+/); v = substr($0, RSTART + 15, RLENGTH - 15); sub(/medianMinutes: [0-9.]+/, "medianMinutes: " v * 5); print; next }
  { print }
' manifests/sim/generator.yaml > "$out/generator.yaml"
go build -o "$out/hivesched-sim" ./cmd/hivesched-sim
if command -v /usr/bin/time >/dev/null; then
  /usr/bin/time -f 'wall %e s, peak memory %M KiB' "$out/hivesched-sim" -config "$out/scheduler-config.yaml" -vcs "$out/virtualclusters.yaml" \
    -generate "$out/generator.yaml" -out "$out" 2>&1
else
  time "$out/hivesched-sim" -config "$out/scheduler-config.yaml" -vcs "$out/virtualclusters.yaml" -generate "$out/generator.yaml" -out "$out"
fi
echo "jobs: $(($(wc -l < "$out/trace.csv") - 1))"

#!/usr/bin/env bash
# Sourced by hack/bench-core-compare.sh and hack/perf-compare.sh: benchstat
# (golang.org/x/perf), pinned, since its version is part of every report,
# installed into _output/bin once. Sets $benchstat to its path.
BENCHSTAT_VERSION=v0.0.0-20260908200009-22c9c6c9d4da
benchstat=$PWD/_output/bin/benchstat
if [ ! -x "$benchstat" ] || ! "${GO:-go}" version -m "$benchstat" | grep -q "$BENCHSTAT_VERSION"; then
	echo "installing golang.org/x/perf/cmd/benchstat@$BENCHSTAT_VERSION"
	mkdir -p "$PWD/_output/bin"
	GOFLAGS="" GOBIN=$PWD/_output/bin "${GO:-go}" install "golang.org/x/perf/cmd/benchstat@$BENCHSTAT_VERSION"
fi

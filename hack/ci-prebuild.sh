#!/usr/bin/env bash
# ci-prebuild.sh: the builds .ci/run's later steps need, run by .ci/run in
# the background at the lowest CPU priority while make test runs (docs/ci.md).
#
# Why: make test's integration suite (about 11 minutes) mostly waits on the
# API servers it starts, and a cold CI machine then has a core idle while
# every binary of the later steps is still to be built (the local cluster's
# etcd, kube-apiserver, kube-controller-manager, kubectl and kwok, Kubeflow's
# training-operator, Helm, crane, the image's static binary, the conformance
# e2e binary, scheduler_perf's test binary: about 25 CPU-minutes cold). At
# nice 19 they take only what the tests leave; a warm machine finds them
# built in seconds. Each build is the very command of the step that needs
# it, so nothing is built differently for being built early; the steps find
# their output up to date (or rebuild from Go's cache).
#
#   hack/ci-prebuild.sh [IMAGE_PLATFORMS]
set -euo pipefail
cd "$(dirname "$0")/.."
platforms=${1:-linux/amd64}
t0=$SECONDS
built() { echo "ci-prebuild: $1 in $((SECONDS - t0)) s since start"; }

bash hack/local-up.sh --build
built "local cluster binaries"
bash hack/local-kubeflow.sh --build
built "training-operator"
make --no-print-directory helm crane image-builder
built "helm, image-builder, crane"
make --no-print-directory image-binaries IMAGE_PLATFORMS="$platforms"
built "image binaries ($platforms)"
bash hack/conformance.sh --build
built "conformance e2e binary"
go test -c -o _output/perf/perf.test ./test/perf/
built "scheduler_perf binary"

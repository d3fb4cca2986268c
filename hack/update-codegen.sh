#!/usr/bin/env bash
# Copyright The hivesched Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Regenerates all generated code of the repository:
#   - deepcopy for every package under apis/ tagged +k8s:deepcopy-gen
#   - conversion and defaults for apis/config/v1
#   - clientset, listers, informers and apply configurations for
#     hivesched.io/v1alpha1 into apis/generated/
#   - the CRD manifests into manifests/crds/ (controller-gen)
#
# Needs only Go and bash. Generator binaries are built into _output/bin
# (git-ignored) at the versions pinned in go.mod.
#
# Environment:
#   HIVESCHED_ROOT  tree to generate into (default: the repository containing
#                   this script); used by verify-codegen.sh.
#   HIVESCHED_BIN   where generator binaries go (default: $HIVESCHED_ROOT/_output/bin).
#   KUBE_VERBOSE    verbosity of the code generators (default 0).

set -o errexit
set -o nounset
set -o pipefail

ROOT="${HIVESCHED_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)}"
cd "${ROOT}"

MODULE="$(go list -m)"
BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"
BIN_DIR="${HIVESCHED_BIN:-${ROOT}/_output/bin}"
mkdir -p "${BIN_DIR}"

# kube_codegen.sh "go install"s its generators into $GOBIN.
export GOBIN="${BIN_DIR}"

CODEGEN_PKG="$(go list -m -f '{{.Dir}}' k8s.io/code-generator)"
if [[ -z "${CODEGEN_PKG}" || ! -f "${CODEGEN_PKG}/kube_codegen.sh" ]]; then
    echo "k8s.io/code-generator not in the module cache; running go mod download" >&2
    go mod download k8s.io/code-generator
    CODEGEN_PKG="$(go list -m -f '{{.Dir}}' k8s.io/code-generator)"
fi

# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

echo "+++ helpers (deepcopy, defaults, conversion)"
kube::codegen::gen_helpers \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/apis"

echo "+++ clients (clientset, listers, informers, applyconfigurations)"
# kube_codegen.sh greps these for stale files; create them so a first run is quiet.
mkdir -p "${ROOT}"/apis/generated/{applyconfiguration,clientset,listers,informers}
kube::codegen::gen_client \
    --with-watch \
    --with-applyconfig \
    --output-dir "${ROOT}/apis/generated" \
    --output-pkg "${MODULE}/apis/generated" \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/apis"

echo "+++ CRDs (controller-gen)"
go build -o "${BIN_DIR}/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen
rm -f "${ROOT}"/manifests/crds/*.yaml
"${BIN_DIR}/controller-gen" \
    crd:crdVersions=v1 \
    paths="./apis/hivesched/..." \
    output:crd:artifacts:config=manifests/crds

echo "+++ done"

#!/usr/bin/env bash
# Copyright The hivesched Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Fails if the generated code or CRD manifests in the work tree are stale.
# Regenerates into a temporary copy of the inputs (go.mod, go.sum, apis/,
# hack/, manifests/) and compares it with the work tree; needs no git history
# and never modifies the work tree.

set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
# Directories that hold generated files (plus the hand-written inputs).
CHECKED=(apis manifests/crds)

TMP="$(mktemp -d "${TMPDIR:-/tmp}/hivesched-verify-codegen.XXXXXX")"
trap 'rm -rf "${TMP}"' EXIT

cd "${ROOT}"
mkdir -p "${TMP}/manifests"
cp -a go.mod go.sum apis hack "${TMP}/"
if [[ -d manifests/crds ]]; then
    cp -a manifests/crds "${TMP}/manifests/"
fi

echo "Regenerating into ${TMP} ..."
# Reuse the generator binaries of the work tree (built if missing).
if ! HIVESCHED_ROOT="${TMP}" HIVESCHED_BIN="${ROOT}/_output/bin" \
        bash "${TMP}/hack/update-codegen.sh" >"${TMP}.log" 2>&1; then
    cat "${TMP}.log" >&2
    rm -f "${TMP}.log"
    echo "ERROR: hack/update-codegen.sh failed (see above)." >&2
    exit 1
fi
rm -f "${TMP}.log"

rc=0
for d in "${CHECKED[@]}"; do
    mkdir -p "${TMP}/${d}"
    if [[ ! -d "${ROOT}/${d}" ]]; then
        echo "ERROR: ${d}/ is missing." >&2
        rc=1
        continue
    fi
    if ! diff -r -u "${ROOT}/${d}" "${TMP}/${d}"; then
        rc=1
    fi
done

if [[ "${rc}" != 0 ]]; then
    echo >&2
    echo "ERROR: generated files are out of date (diff above: work tree vs. regenerated)." >&2
    echo "ERROR: run 'bash hack/update-codegen.sh' and include the result." >&2
    exit 1
fi
echo "Generated files are up to date."

#!/usr/bin/env bash
# core-decisions-compare.sh BASE: do the cell core of commit BASE and the
# working tree's make the same decisions? Both run the randomized model test
# (the working tree's model_test.go and helpers_test.go on both, so both
# replay the same operations) with -model.digest, which logs a digest of the
# core's state after every step of each seeded run; equal digests mean
# every placement, preemption and wait left the same state
# (make core-decisions-compare BASE=<commit>, MODEL_OPS operations).
set -euo pipefail

cd "$(dirname "$0")/.."
: "${BASE:?set BASE to the commit to compare against}"
MODEL_OPS=${MODEL_OPS:-100000}
GO=${GO:-go}

base=$(git rev-parse --verify "$BASE^{commit}")
short=$(git rev-parse --short "$base")
out=$PWD/_output/decisions-compare
src=$out/base-$short
rm -rf "$src"
mkdir -p "$src"
git archive --format=tar "$base" go.mod go.sum plugins/cellcore | tar -x -C "$src"
cp plugins/cellcore/model_test.go plugins/cellcore/helpers_test.go "$src/plugins/cellcore/"

digests() { # digests <dir>: the per-seed digests of the model test run there
	(cd "$1" && nice -n 10 "$GO" test -count=1 -run '^TestModelRandomized$' -v ./plugins/cellcore/ \
		-args -model.ops="$MODEL_OPS" -model.digest) | grep -o 'seed [0-9]*: digest.*' | sort
}
digests "$src" >"$out/base.txt"
digests "$PWD" >"$out/new.txt"
echo "base $short:"
cat "$out/base.txt"
echo "working tree ($(git describe --always --dirty)):"
cat "$out/new.txt"
if [ ! -s "$out/new.txt" ] || ! cmp -s "$out/base.txt" "$out/new.txt"; then
	echo "the decisions differ (or a run failed)" >&2
	exit 1
fi
echo "same decisions: $(wc -l <"$out/new.txt") seeded runs, $MODEL_OPS operations in all"

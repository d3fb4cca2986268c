#!/usr/bin/env bash
# make image-push-test: what README's "crane push" does, against a registry
# of our own: crane's in-memory registry on a free loopback port, the OCI
# layout of make image pushed to it, the pushed index's digest compared with
# make image's, every platform's image validated as a client pulls it
# (crane validate --remote), and the docker-archives validated
# (crane validate --tarball). The registry is stopped at the end.
# CRANE: the crane binary (the Makefile's pinned one); IMAGE_TAG.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CRANE=${CRANE:?set CRANE}
IMAGE_TAG=${IMAGE_TAG:?set IMAGE_TAG}
out=_output/image
[[ -s $out/digest ]] || { echo "no image: make image" >&2; exit 1; }
log=$(mktemp)
"$CRANE" registry serve --address 127.0.0.1:0 >"$log" 2>&1 &
registry=$!
trap 'kill "$registry" 2>/dev/null || true; wait "$registry" 2>/dev/null || true; rm -f "$log"' EXIT
port=
for ((i = 0; i < 50; i++)); do
  port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$log")
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || { cat "$log" >&2; echo "the registry did not start" >&2; exit 1; }
ref=127.0.0.1:$port/gpu/hivesched-scheduler:$IMAGE_TAG
"$CRANE" push "$out/oci" "$ref" >/dev/null 2>&1
pushed=$("$CRANE" digest "$ref")
built=$(cat "$out/digest")
echo "pushed $ref: $pushed (make image: $built)"
[[ $pushed == "$built" ]] || { echo "the registry holds another digest than make image wrote" >&2; exit 1; }
"$CRANE" validate --remote "$ref"
for platform in $("$CRANE" manifest "$ref" | jq -r '.manifests[].platform | .os + "/" + .architecture'); do
  user=$("$CRANE" config --platform "$platform" "$ref" | jq -r '.config.User')
  echo "$platform: user $user"
  [[ $user == 65532:65532 ]] || { echo "$platform runs as $user" >&2; exit 1; }
done
for archive in "$out"/hivesched-scheduler-*.tar; do "$CRANE" validate --tarball "$archive"; done

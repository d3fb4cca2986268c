#!/usr/bin/env bash
# make chart-test: the Helm chart (manifests/charts/hivesched) for each values
# combination of its ci/ directory:
#   1. helm lint --strict (a template `fail` is only INFO to lint: step 2
#      renders too);
#   2. helm template into _output/chart/<combination>.yaml;
#   3. go test ./test/chart: every rendered object decodes strictly, the
#      rendered scheduler configuration passes kube-scheduler's loader and
#      validation and the HiveSched args' validation, the profile is the
#      shipped one, the pod is hardened;
#   4. with CHART_TEST_KUBECONFIG (make chart-test-server sets the local
#      cluster's), kubectl apply --dry-run=server of each rendering: the
#      API server's own validation and admission, nothing is changed.
#      The cluster must have the hivesched CRDs (the samples are
#      VirtualClusters) and namespace hivesched-system; ServiceMonitors are
#      left out where the Prometheus Operator's CRD is not installed.
# HELM: the helm binary (the Makefile's pinned one); KUBECTL for step 4.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
HELM=${HELM:?set HELM to a helm binary (make chart-test builds the pinned one)}
KUBE_VERSION=${KUBE_VERSION:-1.37.2}
chart=manifests/charts/hivesched
out=_output/chart
rm -rf "$out" && mkdir -p "$out"

combos=()
for values in "$chart"/ci/*-values.yaml; do
  name=$(basename "$values" -values.yaml)
  combos+=("$name")
  echo "== $name: lint"
  "$HELM" lint --strict --kube-version "$KUBE_VERSION" "$chart" -f "$values" --namespace kube-system
  echo "== $name: template"
  "$HELM" template hivesched "$chart" --namespace kube-system --kube-version "$KUBE_VERSION" -f "$values" >"$out/$name.yaml"
  printf '   %s objects\n' "$(grep -c '^kind:' "$out/$name.yaml")"
done

echo "== go test ./test/chart"
HIVESCHED_HELM=$(realpath "$HELM") ${GO:-go} test -count=1 ./test/chart/

if [[ -n ${CHART_TEST_KUBECONFIG:-} ]]; then
  KUBECTL=${KUBECTL:-kubectl}
  k() { "$KUBECTL" --kubeconfig "$CHART_TEST_KUBECONFIG" "$@"; }
  k get namespace hivesched-system >/dev/null
  k get crd virtualclusters.hivesched.io affinitygroups.hivesched.io >/dev/null
  have_monitor_crd=0
  k get crd servicemonitors.monitoring.coreos.com >/dev/null 2>&1 && have_monitor_crd=1
  for name in "${combos[@]}"; do
    file=$out/$name.yaml
    if ((!have_monitor_crd)); then
      # One object per document; drop the ServiceMonitor's.
      awk 'BEGIN{RS="\n---\n"; ORS="\n---\n"} !/\nkind: ServiceMonitor\n/' "$file" >"$out/$name.server.yaml"
      file=$out/$name.server.yaml
    fi
    echo "== $name: kubectl apply --dry-run=server"
    k apply --dry-run=server -f "$file" >"$out/$name.server.txt" 2>"$out/$name.server.stderr" ||
      { cat "$out/$name.server.stderr" >&2; exit 1; }
    # The API server warns of a Deployment whose pods its namespace's Pod
    # Security level would refuse: nothing else may be said.
    if [[ -s $out/$name.server.stderr ]]; then cat "$out/$name.server.stderr" >&2; echo "warnings from the API server" >&2; exit 1; fi
    printf '   %s objects accepted\n' "$(wc -l <"$out/$name.server.txt")"
  done
fi
echo "chart-test: ok (${combos[*]})"

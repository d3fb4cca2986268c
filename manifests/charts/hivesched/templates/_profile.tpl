{{/*
==========================================================================
THE PROFILE'S PLUGIN SET: keep in step with the `plugins:` and the
NodeResourcesFit pluginConfig of manifests/scheduler/config-second-scheduler.yaml
and config-default-profile.yaml (both have the same set; the comments there
say why each plugin is enabled or disabled). test/manifests
TestChartProfileMatchesShippedConfigs fails when they differ.
==========================================================================
*/}}
{{- define "hivesched.profilePlugins" -}}
multiPoint:
  enabled:
  - name: HiveSchedDRA
  - name: HiveSched
  - name: HiveSchedPreemption
  disabled:
  - name: DynamicResources
  - name: DefaultPreemption
queueSort:
  enabled:
  - name: HiveSched
  disabled:
  - name: PrioritySort
bind:
  enabled:
  - name: HiveSched
placementGenerate:
  disabled:
  - name: TopologyPlacementGenerator
{{- end -}}
{{/* ======================= end of the plugin set ======================= */}}

{{/* The HiveSched args: the values' args, the physical cluster and the
inspect address the probes need. */}}
{{- define "hivesched.hiveSchedArgs" -}}
{{- $args := deepCopy .Values.args -}}
{{- $_ := set $args "inspectBindAddress" (printf ":%d" (int .Values.inspect.port)) -}}
{{- if eq .Values.physicalClusterFrom "ResourceSlices" -}}
{{- $_ := set $args "physicalClusterFrom" "ResourceSlices" -}}
{{- if .Values.sliceTopology -}}
{{- $_ := set $args "sliceTopology" .Values.sliceTopology -}}
{{- end -}}
{{- else -}}
{{- $_ := set $args "physicalCluster" (required "physicalCluster is required with physicalClusterFrom: Config" .Values.physicalCluster) -}}
{{- end -}}
{{- toYaml $args -}}
{{- end -}}

{{/* The KubeSchedulerConfiguration of the scheduler's ConfigMap. */}}
{{- define "hivesched.schedulerConfig" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: {{ .Values.leaderElection.enabled }}
  resourceName: {{ include "hivesched.leaseName" . }}
  resourceNamespace: {{ .Values.leaderElection.namespace }}
clientConnection:
  # Empty: the pod's service account.
  kubeconfig: ""
profiles:
- schedulerName: {{ include "hivesched.schedulerName" . }}
  plugins:
    {{- include "hivesched.profilePlugins" . | nindent 4 }}
  pluginConfig:
  - name: NodeResourcesFit
    args:
      ignoredResources:
      {{- toYaml .Values.ignoredResources | nindent 6 }}
  - name: HiveSched
    args:
      {{- include "hivesched.hiveSchedArgs" . | nindent 6 }}
{{- end -}}

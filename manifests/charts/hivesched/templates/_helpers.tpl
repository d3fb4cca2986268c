{{/*
Names are fixed where the scheduler, the admission policies or the shipped
manifests rely on them (ServiceAccount hivesched-scheduler, the cluster roles,
Secret hivesched-placement-key): one release per cluster.
*/}}

{{- define "hivesched.namespace" -}}
{{- default .Release.Namespace .Values.schedulerNamespace.name -}}
{{- end -}}

{{- define "hivesched.serviceAccountName" -}}hivesched-scheduler{{- end -}}

{{/* The scheduler name of the profile. */}}
{{- define "hivesched.schedulerName" -}}
{{- if eq .Values.profile.mode "default-profile" -}}
default-scheduler
{{- else if eq .Values.profile.mode "second-scheduler" -}}
{{- required "profile.schedulerName is required in mode second-scheduler" .Values.profile.schedulerName -}}
{{- else -}}
{{- fail (printf "profile.mode must be second-scheduler or default-profile, not %q" .Values.profile.mode) -}}
{{- end -}}
{{- end -}}

{{- define "hivesched.leaseName" -}}
{{- default (include "hivesched.schedulerName" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{- define "hivesched.selectorLabels" -}}
app.kubernetes.io/name: hivesched-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hivesched.labels" -}}
{{ include "hivesched.selectorLabels" . }}
app.kubernetes.io/part-of: hivesched
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "hivesched.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The admission parameters: comma-separated lists. */}}
{{- define "hivesched.admissionLeafResources" -}}
{{- if .Values.admission.leafResources -}}
{{ join "," .Values.admission.leafResources }}
{{- else -}}
{{ default "nvidia.com/gpu" .Values.args.leafCellResourceName }},hivedscheduler.microsoft.com/pod-scheduling-enable
{{- end -}}
{{- end -}}

{{- define "hivesched.admissionProfiles" -}}
{{- if .Values.admission.profiles -}}
{{ join "," .Values.admission.profiles }}
{{- else -}}
{{ include "hivesched.schedulerName" . }}
{{- end -}}
{{- end -}}

{{/* Checks that make a wrong combination fail at install, not at run time. */}}
{{- define "hivesched.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicas > 1 needs leaderElection.enabled: two replicas without a lease would place the same cells twice" -}}
{{- end -}}
{{- if and .Values.schedulerNamespace.create (eq (include "hivesched.namespace" .) .Release.Namespace) -}}
{{- fail (printf "schedulerNamespace.create: the chart creates namespace %s (labelled hivesched.io/scheduler-namespace) but the release is in it, and Helm needs a release's namespace before it installs: install the release in another namespace (helm install -n kube-system ...), or set schedulerNamespace.create=false and label %s yourself" (include "hivesched.namespace" .) (include "hivesched.namespace" .)) -}}
{{- end -}}
{{- if not (has .Values.physicalClusterFrom (list "Config" "ResourceSlices")) -}}
{{- fail (printf "physicalClusterFrom must be Config or ResourceSlices, not %q" .Values.physicalClusterFrom) -}}
{{- end -}}
{{- if hasKey .Values.args "inspectBindAddress" -}}
{{- fail "args.inspectBindAddress is set by the chart from inspect.port (the readiness probe reads the inspect server)" -}}
{{- end -}}
{{- end -}}

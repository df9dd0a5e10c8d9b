{{/*
Named templates. Each takes a context with .Values, .Release and .Chart:
the chart's own, or, in a model server's chart that has infergate as a
dependency, (dict "Values" .Values.infergate "Release" .Release "Chart" (dict "Name" "infergate")).
*/}}
{{- define "infergate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "infergate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "infergate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "infergate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "infergate.labels" -}}
{{ include "infergate.selectorLabels" . }}
app.kubernetes.io/component: {{ .Values.mode }}
app.kubernetes.io/part-of: infergate
{{- end }}

{{- define "infergate.configMapName" -}}
{{ include "infergate.fullname" . }}-config
{{- end }}

{{- define "infergate.tokenSecretName" -}}
{{ .Values.adminToken.existingSecret | default (printf "%s-admin-token" (include "infergate.fullname" .)) }}
{{- end }}

{{/* The default upstream of each mode. */}}
{{- define "infergate.upstream" -}}
{{- if .Values.upstream }}{{ .Values.upstream }}
{{- else if eq .Values.mode "sidecar" }}127.0.0.1:{{ .Values.sidecar.modelServerPort }}
{{- else if not .Values.upstreams }}dns:///{{ .Values.pool.service }}.{{ .Release.Namespace }}.svc.cluster.local:{{ .Values.pool.port }}
{{- end }}
{{- end }}

{{/* infergate.yaml, from the values' sections. */}}
{{- define "infergate.config" -}}
{{- $c := dict }}
{{- with (include "infergate.upstream" .) }}{{ $_ := set $c "upstream" . }}{{ end }}
{{- with .Values.upstreams }}{{ $_ := set $c "upstreams" . }}{{ end }}
{{- with .Values.affinityHeader }}{{ $_ := set $c "affinity_header" . }}{{ end }}
{{- with .Values.breaker }}{{ $_ := set $c "breaker" . }}{{ end }}
{{- with .Values.retryBudget }}{{ $_ := set $c "retry_budget" . }}{{ end }}
{{- with .Values.routes }}{{ $_ := set $c "routes" . }}{{ end }}
{{- with .Values.batching }}{{ $_ := set $c "batching" . }}{{ end }}
{{- with .Values.flowControl }}{{ $_ := set $c "flow_control" . }}{{ end }}
{{- with .Values.tracing }}{{ $_ := set $c "tracing" . }}{{ end }}
{{- $gpu := .Values.gpu }}
{{- if and (not $gpu) (eq .Values.mode "sidecar") .Values.sidecar.modelServerMetricsPort }}
{{- $gpu = dict "sources" (list (dict "kind" "prometheus" "url" (printf "http://127.0.0.1:%v/metrics" .Values.sidecar.modelServerMetricsPort))) }}
{{- end }}
{{- with $gpu }}{{ $_ := set $c "gpu" . }}{{ end }}
{{- with .Values.slo }}{{ $_ := set $c "slo" . }}{{ end }}
{{- with .Values.rules }}{{ $_ := set $c "rules" . }}{{ end }}
{{- $alerting := merge (dict) (deepCopy .Values.alerting) (dict "state_file" "/var/lib/infergate/alerts.json" "baseline" (dict "file" "/var/lib/infergate/baseline.json")) }}
{{- $_ := set $c "alerting" $alerting }}
{{- with .Values.releases }}
{{- $_ := set $c "releases" . }}
{{- $_ := set $c "release_state_file" "/var/lib/infergate/releases.json" }}
{{- end }}
{{- with .Values.log }}{{ $_ := set $c "log" . }}{{ end }}
{{- $c = merge $c (deepCopy .Values.extraConfig) }}
{{- toYaml $c }}
{{- end }}

{{/* infergate's container: include it in the model server's pod spec (sidecar mode). */}}
{{- define "infergate.container" -}}
- name: infergate
  image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args:
    - --config=/etc/infergate/infergate.yaml
    - --listen=:{{ .Values.ports.grpc }}
    # On the pod IP for the kubelet's probes and Prometheus.
    - --admin=:{{ .Values.ports.admin }}
    - --drain-delay={{ .Values.drainDelay }}
    - --shutdown-timeout={{ .Values.shutdownTimeout }}
    {{- if .Values.adminToken.enabled }}
    - --admin-token-file=/etc/infergate/token/{{ .Values.adminToken.key }}
    {{- end }}
    {{- range .Values.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  {{- with .Values.env }}
  env:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  ports:
    - {name: grpc, containerPort: {{ .Values.ports.grpc }}}
    - {name: admin, containerPort: {{ .Values.ports.admin }}}
  # 503 while the model server is not ready, and from SIGTERM on.
  readinessProbe:
    httpGet: {path: /readyz, port: admin}
    {{- toYaml .Values.probes.readiness | nindent 4 }}
  # /healthz, not /readyz: a model server outage must not restart infergate.
  livenessProbe:
    httpGet: {path: /healthz, port: admin}
    {{- toYaml .Values.probes.liveness | nindent 4 }}
  # The memory limit sets GOMEMLIMIT (90% of it) and the buffer budget (a
  # quarter): no flag or env needed.
  resources:
    {{- toYaml .Values.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    # A directory, not a subPath: the kubelet swaps it on a ConfigMap change
    # and infergate reloads.
    - {name: infergate-config, mountPath: /etc/infergate, readOnly: true}
    {{- if .Values.adminToken.enabled }}
    - {name: infergate-token, mountPath: /etc/infergate/token, readOnly: true}
    {{- end }}
    - {name: infergate-state, mountPath: /var/lib/infergate}
{{- end }}

{{/* infergate's volumes: include them in the model server's pod spec (sidecar mode). */}}
{{- define "infergate.volumes" -}}
- name: infergate-config
  configMap:
    name: {{ include "infergate.configMapName" . }}
{{- if .Values.adminToken.enabled }}
- name: infergate-token
  secret:
    secretName: {{ include "infergate.tokenSecretName" . }}
{{- end }}
- name: infergate-state
  {{- toYaml .Values.state | nindent 2 }}
{{- end }}

{{/* Pod annotations: scrape annotations and the optional config checksum. */}}
{{- define "infergate.podAnnotations" -}}
{{- $a := deepCopy .Values.podAnnotations }}
{{- if .Values.scrapeAnnotations }}
{{- $_ := set $a "prometheus.io/scrape" "true" }}
{{- $_ := set $a "prometheus.io/port" (toString .Values.ports.admin) }}
{{- $_ := set $a "prometheus.io/path" "/metrics" }}
{{- end }}
{{- if .Values.config.checksumAnnotation }}
{{- $_ := set $a "checksum/config" (include "infergate.config" . | sha256sum) }}
{{- end }}
{{- with $a }}{{ toYaml . }}{{ end }}
{{- end }}

{{/* The pods' namespace and name pattern, for the autoscalers' queries. */}}
{{- define "infergate.podSelector" -}}
namespace="{{ .Release.Namespace }}",pod=~"{{ include "infergate.fullname" . }}-[a-z0-9]+-[a-z0-9]+"
{{- end }}

{{/* drainDelay + shutdownTimeout + 5s margin, in whole seconds (0 when they are not plain seconds). */}}
{{- define "infergate.terminationGrace" -}}
{{- $d := toString .Values.drainDelay }}{{- $s := toString .Values.shutdownTimeout }}
{{- if and (regexMatch "^[0-9]+s$" $d) (regexMatch "^[0-9]+s$" $s) }}
{{- add (trimSuffix "s" $d | int) (trimSuffix "s" $s | int) 5 }}
{{- else }}0{{ end }}
{{- end }}

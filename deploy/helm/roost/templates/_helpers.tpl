{{/* Chart name, truncated to the 63 characters Kubernetes allows in a label value. */}}
{{- define "roost.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name. Role suffixes ("-gateway" is the longest, 8 characters) are appended to
it, so it is truncated to 55.
*/}}
{{- define "roost.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 55 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 55 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 55 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "roost.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "roost.labels" -}}
helm.sh/chart: {{ include "roost.chart" . }}
{{ include "roost.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: roost
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "roost.selectorLabels" -}}
app.kubernetes.io/name: {{ include "roost.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of one role's objects: call with (dict "root" $ "role" "api"). */}}
{{- define "roost.roleLabels" -}}
{{ include "roost.labels" .root }}
app.kubernetes.io/component: {{ .role }}
{{- end }}

{{- define "roost.roleSelectorLabels" -}}
{{ include "roost.selectorLabels" .root }}
app.kubernetes.io/component: {{ .role }}
{{- end }}

{{- define "roost.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else -}}
{{ printf "%s:%s" .Values.image.repository $tag }}
{{- end -}}
{{- end }}

{{- define "roost.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "roost.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding each credential: the user's existing Secret or the chart's. */}}
{{- define "roost.postgresSecretName" -}}
{{- default (include "roost.fullname" .) .Values.postgres.existingSecret }}
{{- end }}
{{- define "roost.redisSecretName" -}}
{{- default (include "roost.fullname" .) .Values.redis.existingSecret }}
{{- end }}
{{- define "roost.adminSecretName" -}}
{{- default (include "roost.fullname" .) .Values.adminToken.existingSecret }}
{{- end }}

{{/* Fail early, with the value to set, when a shared dependency is not configured. */}}
{{- define "roost.validate" -}}
{{- if and (not .Values.postgres.url) (not .Values.postgres.existingSecret) }}
{{- fail "roost: set postgres.url or postgres.existingSecret (every role needs a shared Postgres)" }}
{{- end }}
{{- if and (not .Values.redis.url) (not .Values.redis.existingSecret) }}
{{- fail "roost: set redis.url or redis.existingSecret (api, gateway and worker reach each other through Redis)" }}
{{- end }}
{{- if and .Values.adminToken.value .Values.adminToken.existingSecret }}
{{- fail "roost: set adminToken.value or adminToken.existingSecret, not both" }}
{{- end }}
{{- if and .Values.caBundle.configMap .Values.caBundle.secret }}
{{- fail "roost: set caBundle.configMap or caBundle.secret, not both" }}
{{- end }}
{{- end }}

{{/* True (non-empty) when the chart's own Secret holds the admin token. */}}
{{- define "roost.chartHoldsAdminToken" -}}
{{- if and (not .Values.adminToken.existingSecret) (not .Values.adminToken.hash) }}true{{- end }}
{{- end }}

{{/* ROOST_PUBLIC_URL: config.publicUrl, else the ingress host, else unset (loopback default). */}}
{{- define "roost.publicUrl" -}}
{{- if .Values.config.publicUrl }}
{{- .Values.config.publicUrl }}
{{- else if and .Values.ingress.enabled .Values.ingress.host }}
{{- printf "%s://%s" (ternary "https" "http" .Values.ingress.tls.enabled) .Values.ingress.host }}
{{- end }}
{{- end }}

{{/* Prometheus label matchers selecting this release's Roost targets. */}}
{{- define "roost.alertSelector" -}}
namespace="{{ .Release.Namespace }}",job=~"{{ include "roost.fullname" . }}-(api|gateway|worker)"
{{- end }}

{{/* The credential env vars every role (and the migration Job) reads. */}}
{{- define "roost.credentialEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "roost.postgresSecretName" . }}
      key: {{ .Values.postgres.existingSecretKey }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "roost.redisSecretName" . }}
      key: {{ .Values.redis.existingSecretKey }}
{{- if .Values.adminToken.hash }}
- name: ROOST_ADMIN_TOKEN_HASH
  value: {{ .Values.adminToken.hash | quote }}
{{- else }}
- name: ROOST_ADMIN_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "roost.adminSecretName" . }}
      key: {{ .Values.adminToken.existingSecretKey }}
{{- end }}
{{- end }}

{{/* Pod-level security context shared by every Roost pod. */}}
{{- define "roost.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext }}
{{- end }}

{{/* The CA bundle (caBundle) mounted into every Roost pod: its file path, or empty when unset. */}}
{{- define "roost.caBundlePath" -}}
{{- if or .Values.caBundle.configMap .Values.caBundle.secret -}}
/etc/roost/ca/{{ .Values.caBundle.key }}
{{- end -}}
{{- end }}

{{/* Env of the CA bundle: Node adds NODE_EXTRA_CA_CERTS to its roots, which pg and ioredis use. */}}
{{- define "roost.caBundleEnv" -}}
{{- with include "roost.caBundlePath" . }}
- name: NODE_EXTRA_CA_CERTS
  value: {{ . | quote }}
{{- end }}
{{- end }}

{{- define "roost.caBundleVolumeMount" -}}
{{- if include "roost.caBundlePath" . }}
- name: ca-bundle
  mountPath: /etc/roost/ca
  readOnly: true
{{- end }}
{{- end }}

{{- define "roost.caBundleVolume" -}}
{{- if include "roost.caBundlePath" . }}
- name: ca-bundle
  {{- if .Values.caBundle.configMap }}
  configMap:
    name: {{ .Values.caBundle.configMap }}
    items:
      - key: {{ .Values.caBundle.key }}
        path: {{ .Values.caBundle.key }}
  {{- else }}
  secret:
    secretName: {{ .Values.caBundle.secret }}
    items:
      - key: {{ .Values.caBundle.key }}
        path: {{ .Values.caBundle.key }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
Soft spreading of one role's pods over topologySpread.topologyKeys, when the role sets no
constraints of its own. Call with (dict "root" $ "role" "api").
*/}}
{{- define "roost.defaultTopologySpread" -}}
{{- $root := .root -}}
{{- range $key := $root.Values.topologySpread.topologyKeys }}
- maxSkew: {{ $root.Values.topologySpread.maxSkew }}
  topologyKey: {{ $key }}
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "roost.roleSelectorLabels" (dict "root" $root "role" $.role) | nindent 6 }}
{{- end }}
{{- end }}

{{/*
A number from values as an integer string: Helm reads YAML numbers as float64, which would print
1048576 as 1.048576e+06. Anything else is printed as is.
*/}}
{{- define "roost.scalar" -}}
{{- if or (kindIs "float64" .) (kindIs "int" .) (kindIs "int64" .) -}}
{{- . | int64 | toString -}}
{{- else -}}
{{- . | toString -}}
{{- end -}}
{{- end }}

{{/* A map NAME: value as EnvVar objects, names sorted. */}}
{{- define "roost.envMap" -}}
{{- range $name, $value := . }}
- name: {{ $name }}
  value: {{ include "roost.scalar" $value | quote }}
{{- end }}
{{- end }}

{{/*
One role: Deployment, Service, PodDisruptionBudget and HorizontalPodAutoscaler.
Call with (dict "root" $ "role" "api").
*/}}
{{- define "roost.workload" -}}
{{- $root := .root -}}
{{- $role := .role -}}
{{- $values := index $root.Values $role -}}
{{- if $values.enabled }}
{{- include "roost.validate" $root }}
{{- $fullname := printf "%s-%s" (include "roost.fullname" $root) $role -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $fullname }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "roost.roleLabels" . | nindent 4 }}
spec:
  {{- if not $values.autoscaling.enabled }}
  replicas: {{ $values.replicaCount }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "roost.roleSelectorLabels" . | nindent 6 }}
  strategy:
    {{- toYaml $values.strategy | nindent 4 }}
  template:
    metadata:
      labels:
        {{- include "roost.roleSelectorLabels" . | nindent 8 }}
        {{- with $values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
        checksum/secret: {{ include (print $root.Template.BasePath "/secret.yaml") $root | sha256sum }}
        {{- with $values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "roost.serviceAccountName" $root }}
      automountServiceAccountToken: false
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      terminationGracePeriodSeconds: {{ $values.terminationGracePeriodSeconds }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      {{- $init := concat $root.Values.initContainers $values.initContainers }}
      {{- with $init }}
      initContainers:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: roost
          image: {{ include "roost.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: [{{ $role | quote }}]
          ports:
            - name: http
              containerPort: 8025
              protocol: TCP
            - name: metrics
              containerPort: {{ $root.Values.metrics.port }}
              protocol: TCP
          envFrom:
            - configMapRef:
                name: {{ include "roost.fullname" $root }}
            {{- with (concat $root.Values.extraEnvFrom $values.extraEnvFrom) }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          env:
            - name: ROOST_ROLE
              value: {{ $role | quote }}
            {{- include "roost.credentialEnv" $root | nindent 12 }}
            {{- include "roost.caBundleEnv" $root | nindent 12 }}
            {{- with $root.Values.env }}
            {{- include "roost.envMap" . | trim | nindent 12 }}
            {{- end }}
            {{- with $root.Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
            {{- with $values.env }}
            {{- include "roost.envMap" . | trim | nindent 12 }}
            {{- end }}
            {{- with $values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          startupProbe:
            httpGet: { path: /healthz, port: http }
            {{- toYaml $root.Values.probes.startup | nindent 12 }}
          livenessProbe:
            httpGet: { path: /healthz, port: http }
            {{- toYaml $root.Values.probes.liveness | nindent 12 }}
          readinessProbe:
            httpGet: { path: /readyz, port: http }
            {{- toYaml $root.Values.probes.readiness | nindent 12 }}
          {{- if gt (int $root.Values.preStopSleepSeconds) 0 }}
          lifecycle:
            preStop:
              exec:
                command: ["sleep", {{ include "roost.scalar" $root.Values.preStopSleepSeconds | quote }}]
          {{- end }}
          resources:
            {{- toYaml $values.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            - name: data
              mountPath: /data
            {{- include "roost.caBundleVolumeMount" $root | nindent 12 }}
            {{- with (concat $root.Values.extraVolumeMounts $values.extraVolumeMounts) }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: {{ $root.Values.tmpVolume.sizeLimit }}
        - name: data
          emptyDir:
            sizeLimit: {{ $root.Values.dataVolume.sizeLimit }}
        {{- include "roost.caBundleVolume" $root | nindent 8 }}
        {{- with (concat $root.Values.extraVolumes $values.extraVolumes) }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if $values.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml $values.topologySpreadConstraints | nindent 8 }}
      {{- else if $root.Values.topologySpread.enabled }}
      topologySpreadConstraints:
        {{- include "roost.defaultTopologySpread" . | trim | nindent 8 }}
      {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $fullname }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "roost.roleLabels" . | nindent 4 }}
  {{- with $values.service.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $values.service.type }}
  selector:
    {{- include "roost.roleSelectorLabels" . | nindent 4 }}
  ports:
    - name: http
      port: {{ $values.service.port }}
      targetPort: http
      protocol: TCP
    - name: metrics
      port: {{ $root.Values.metrics.port }}
      targetPort: metrics
      protocol: TCP
{{- if $values.pdb.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $fullname }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "roost.roleLabels" . | nindent 4 }}
spec:
  maxUnavailable: {{ $values.pdb.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "roost.roleSelectorLabels" . | nindent 6 }}
{{- end }}
{{- if $values.autoscaling.enabled }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ $fullname }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "roost.roleLabels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ $fullname }}
  minReplicas: {{ $values.autoscaling.minReplicas }}
  maxReplicas: {{ $values.autoscaling.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $values.autoscaling.targetCPUUtilizationPercentage }}
    {{- with $values.autoscaling.targetMemoryUtilizationPercentage }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ . }}
    {{- end }}
  {{- with $values.autoscaling.behavior }}
  behavior:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}
{{- end }}

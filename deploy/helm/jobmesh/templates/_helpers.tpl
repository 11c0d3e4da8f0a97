{{/* Names and labels. */}}
{{- define "jobmesh.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "jobmesh.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "jobmesh.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "jobmesh.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The selector of one component: (dict "root" $ "component" "server"). */}}
{{- define "jobmesh.selector" -}}
app.kubernetes.io/name: {{ include "jobmesh.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "jobmesh.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "jobmesh.connectionsSecret" -}}
{{- default (printf "%s-connections" (include "jobmesh.fullname" .)) .Values.connections.existingSecret -}}
{{- end -}}

{{- define "jobmesh.tokenHashesSecret" -}}
{{- default (printf "%s-token-hashes" (include "jobmesh.fullname" .)) .Values.auth.tokenHashesSecret -}}
{{- end -}}

{{- define "jobmesh.executorTokenSecret" -}}
{{- default (printf "%s-executor-token" (include "jobmesh.fullname" .)) .Values.auth.executorTokenSecret -}}
{{- end -}}

{{/* The server's Service name: what Envoy and the executors dial (and the server certificate's name). */}}
{{- define "jobmesh.serverHost" -}}
{{- printf "%s-server" (include "jobmesh.fullname" .) -}}
{{- end -}}

{{/* The pod annotations of a process that serves /metrics on the health port. */}}
{{- define "jobmesh.scrapeAnnotations" -}}
{{- if .Values.metrics.annotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.healthPort | quote }}
prometheus.io/path: {{ .Values.metrics.path | quote }}
{{- end }}
{{- end -}}

{{/* JOBMESH_* variables from a map of names to values, in name order. */}}
{{- define "jobmesh.envFromMap" -}}
{{- range $name, $value := . }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{/* What every process of the mesh gets: its connections (from the Secret), logs, and health port. */}}
{{- define "jobmesh.commonEnv" -}}
- name: JOBMESH_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: JOBMESH_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
- name: JOBMESH_HEALTH_LISTEN
  value: {{ printf "0.0.0.0:%v" .Values.healthPort | quote }}
- name: JOBMESH_QUEUE_URL
  valueFrom:
    secretKeyRef: { name: {{ include "jobmesh.connectionsSecret" . }}, key: queue-url }
- name: JOBMESH_SIGNALS_URL
  valueFrom:
    secretKeyRef: { name: {{ include "jobmesh.connectionsSecret" . }}, key: signals-url }
{{- end -}}

{{- define "jobmesh.databaseEnv" -}}
- name: JOBMESH_DATABASE_URL
  valueFrom:
    secretKeyRef: { name: {{ include "jobmesh.connectionsSecret" . }}, key: database-url }
{{- end -}}

{{/* The health port and the probes on it: /livez for liveness (and start-up), /readyz for readiness. */}}
{{- define "jobmesh.healthPort" -}}
- name: health
  containerPort: {{ .Values.healthPort }}
  protocol: TCP
{{- end -}}

{{- define "jobmesh.probes" -}}
startupProbe:
  httpGet: { path: /livez, port: health }
  periodSeconds: 2
  failureThreshold: 60
livenessProbe:
  httpGet: { path: /livez, port: health }
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet: { path: /readyz, port: health }
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
{{- end -}}

{{/* A writable /tmp under a read-only root. */}}
{{- define "jobmesh.tmpMount" -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "jobmesh.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

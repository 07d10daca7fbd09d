{{/* The chart's name, and the name of its objects: the release name, with
"-idgen" unless the release name already says idgen. */}}
{{- define "idgen.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "idgen.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* Labels of every object, and the subset that selects the pods. */}}
{{- define "idgen.selectorLabels" -}}
app.kubernetes.io/name: {{ include "idgen.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "idgen.labels" -}}
{{ include "idgen.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: idgen
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "idgen.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The Secret with IDGEN_DSN and IDGEN_ADMIN_TOKEN: the chart's own, or
secret.existingSecret. */}}
{{- define "idgen.secretName" -}}
{{- .Values.secret.existingSecret | default (include "idgen.fullname" .) }}
{{- end }}

{{/* The pod settings the Deployment and the migrate Job share. */}}
{{- define "idgen.podCommon" -}}
enableServiceLinks: false
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

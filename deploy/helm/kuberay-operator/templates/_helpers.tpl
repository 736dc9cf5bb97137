{{/*
Names, labels and small computed values shared by the templates. Written by hand; the
operator's RBAC rules are in the generated _rules.tpl.

Resource names and the Deployment's selector follow the upstream kuberay-operator chart, so that
`helm upgrade` of an upstream release to this chart keeps its objects (a Deployment's selector
cannot change).
*/}}

{{/* The chart's short name: nameOverride, else the chart name. */}}
{{- define "kuberay-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Value of the pods' app.kubernetes.io/component label: componentOverride, else the chart
     name. It is not part of the selector. */}}
{{- define "kuberay-operator.component" -}}
{{- default .Chart.Name .Values.componentOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of the release's namespaced and cluster-scoped objects: fullnameOverride; else the
     release name when it already contains the short name; else "<release>-<short name>".
     Kubernetes names are capped at 63 characters. */}}
{{- define "kuberay-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $short := default .Chart.Name .Values.nameOverride -}}
{{- if contains $short .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $short | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount the operator runs as. A created one is named serviceAccount.name (or the
     full name when that is empty); without creation, serviceAccount.name must exist already and
     an empty name means the namespace's "default" account. */}}
{{- define "kuberay-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kuberay-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels that select the operator's pods (Deployment selector, Service selector). Never add
     to these: the selector of an installed Deployment is immutable. */}}
{{- define "kuberay-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kuberay-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of the pod template: the selector, the component and the user's labels. */}}
{{- define "kuberay-operator.podLabels" -}}
{{ include "kuberay-operator.selectorLabels" . }}
app.kubernetes.io/component: {{ include "kuberay-operator.component" . }}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels of every object the chart renders. */}}
{{- define "kuberay-operator.labels" -}}
{{ include "kuberay-operator.selectorLabels" . }}
app.kubernetes.io/part-of: kuberay
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Namespaces to watch, as a YAML list: watchNamespace; else the release's namespace with
     singleNamespaceInstall; else none (every namespace). */}}
{{- define "kuberay-operator.watchNamespaces" -}}
{{- if .Values.watchNamespace -}}
{{- toYaml .Values.watchNamespace -}}
{{- else if .Values.singleNamespaceInstall -}}
{{- toYaml (list .Release.Namespace) -}}
{{- else -}}
[]
{{- end -}}
{{- end -}}

{{/* The batch scheduler's name: batchScheduler.name, else "volcano" for the deprecated
     batchScheduler.enabled; empty for none. */}}
{{- define "kuberay-operator.batchScheduler" -}}
{{- if .Values.batchScheduler.name -}}
{{- .Values.batchScheduler.name -}}
{{- else if .Values.batchScheduler.enabled -}}
volcano
{{- end -}}
{{- end -}}

{{/* --feature-gates's value, "" when the list is empty. */}}
{{- define "kuberay-operator.featureGates" -}}
{{- $pairs := list -}}
{{- range .Values.featureGates -}}
{{- $pairs = append $pairs (printf "%s=%t" .name .enabled) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* Path of the operator's log file inside the pod; empty unless both logging.baseDir and
     logging.fileName are set. */}}
{{- define "kuberay-operator.logFile" -}}
{{- if and .Values.logging.baseDir .Values.logging.fileName -}}
{{- printf "%s/%s" (trimSuffix "/" .Values.logging.baseDir) .Values.logging.fileName -}}
{{- end -}}
{{- end -}}

{{/* Refuses values the operator would reject at start-up, so that a bad value fails the
     install instead of crash-looping the pod. */}}
{{- define "kuberay-operator.checkValues" -}}
{{- if not (regexMatch "^[1-9][0-9]*$" (toString .Values.reconcileConcurrency)) -}}
{{- fail (printf "reconcileConcurrency must be a whole number of at least 1, not %v" .Values.reconcileConcurrency) -}}
{{- end -}}
{{- if not (regexMatch "^[0-9]+([.][0-9]+)?$" (toString .Values.kubeClient.qps)) -}}
{{- fail (printf "kubeClient.qps must be a non-negative number, not %v" .Values.kubeClient.qps) -}}
{{- end -}}
{{- if not (regexMatch "^[0-9]+$" (toString .Values.kubeClient.burst)) -}}
{{- fail (printf "kubeClient.burst must be a non-negative whole number, not %v" .Values.kubeClient.burst) -}}
{{- end -}}
{{- if and .Values.batchScheduler.enabled .Values.batchScheduler.name -}}
{{- fail "set batchScheduler.name or the deprecated batchScheduler.enabled, not both" -}}
{{- end -}}
{{- end -}}

{{/* Mount point of the configuration ConfigMap and the file the operator reads (--config). */}}
{{- define "kuberay-operator.configDir" -}}/etc/kuberay{{- end -}}
{{- define "kuberay-operator.configFile" -}}
{{- include "kuberay-operator.configDir" . }}/config.yaml
{{- end -}}

{{/* The operator's config.ray.io/v1alpha1 Configuration, built from the same values as the
     flags (which the operator ignores when --config is given) plus configuration.*. */}}
{{- define "kuberay-operator.configuration" -}}
{{- $watch := include "kuberay-operator.watchNamespaces" . | fromYamlArray -}}
{{- $scheduler := .Values.batchScheduler.name -}}
{{- $logFile := include "kuberay-operator.logFile" . -}}
apiVersion: config.ray.io/v1alpha1
kind: Configuration
metricsAddr: ":8080"
probeAddr: ":8082"
enableLeaderElection: {{ .Values.leaderElectionEnabled }}
enableMetrics: {{ .Values.metrics.enabled }}
reconcileConcurrency: {{ .Values.reconcileConcurrency }}
qps: {{ .Values.kubeClient.qps }}
burst: {{ .Values.kubeClient.burst }}
useKubernetesProxy: {{ .Values.useKubernetesProxy }}
logStdoutEncoder: {{ .Values.logging.stdoutEncoder | quote }}
{{- with .Values.logging.fileEncoder }}
logFileEncoder: {{ . | quote }}
{{- end }}
{{- with $logFile }}
logFile: {{ . | quote }}
{{- end }}
{{- with $watch }}
watchNamespace: {{ join "," . | quote }}
{{- end }}
{{- if .Values.batchScheduler.enabled }}
enableBatchScheduler: true
{{- end }}
{{- with $scheduler }}
batchScheduler: {{ . | quote }}
{{- end }}
{{- with .Values.configuration.headSidecarContainers }}
headSidecarContainers:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.configuration.workerSidecarContainers }}
workerSidecarContainers:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.configuration.defaultContainerEnvs }}
defaultContainerEnvs:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.configuration.defaultPodAnnotations }}
defaultPodAnnotations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.configuration.defaultPodLabels }}
defaultPodLabels:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

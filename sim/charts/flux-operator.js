// The flux-operator chart the simulator's repository serves (cluster-template installs it with helm,
// then a FluxInstance; sim/kube/controllers.js runs the FluxInstance). What the real chart's install
// creates that the product or `helm --wait` looks at: the FluxInstance and FluxReport CRDs
// (controlplaneio-fluxcd/flux-operator, charts/flux-operator/templates/crds.yaml), the
// ServiceAccount and the operator Deployment. Go templates real helm renders.
import { stringify } from 'yaml'
import { CHART_ANNOTATION } from './apps.js'

export const FLUX_OPERATOR_VERSIONS = ['0.33.0', '0.32.0'] // newest first; appVersion = v<version>
export const FLUX_OPERATOR_DESCRIPTION = 'A Helm chart for deploying the Flux Operator'

const VALUES = { image: { repository: 'ghcr.io/controlplaneio-fluxcd/flux-operator', tag: '' }, installCRDs: true }

const LABELS = (indent) =>
  ['app.kubernetes.io/name: flux-operator', 'app.kubernetes.io/instance: {{ .Release.Name }}'].map((l) => ' '.repeat(indent) + l).join('\n')

const crd = (plural, kind) => `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ${plural}.fluxcd.controlplane.io
  labels:
${LABELS(4)}
spec:
  group: fluxcd.controlplane.io
  names: { kind: ${kind}, listKind: ${kind}List, plural: ${plural}, singular: ${kind.toLowerCase()} }
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      subresources: { status: {} }
      schema: { openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true } }
`

const CRDS = `{{- if .Values.installCRDs }}
${crd('fluxinstances', 'FluxInstance')}---
${crd('fluxreports', 'FluxReport')}{{- end }}
`

const SERVICE_ACCOUNT = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
  labels:
${LABELS(4)}
`

const DEPLOYMENT = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
  labels:
${LABELS(4)}
spec:
  replicas: 1
  selector:
    matchLabels:
${LABELS(6)}
  template:
    metadata:
      labels:
${LABELS(8)}
      annotations:
        ${CHART_ANNOTATION}: {{ .Chart.Name }}
    spec:
      serviceAccountName: {{ .Release.Name }}
      tolerations:
        - operator: Exists
      containers:
        - name: manager
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}"
`

/** the chart's files for `version`, as `helm package` lays them out (flux-operator/...) */
export function fluxOperatorChartFiles(version) {
  const chart = {
    apiVersion: 'v2',
    name: 'flux-operator',
    version,
    appVersion: version,
    description: FLUX_OPERATOR_DESCRIPTION,
    kubeVersion: '>= 1.30.0-0',
    home: 'https://fluxcd.control-plane.io/',
  }
  return [
    ['flux-operator/Chart.yaml', stringify(chart)],
    ['flux-operator/values.yaml', stringify(VALUES)],
    ['flux-operator/templates/crds.yaml', CRDS],
    ['flux-operator/templates/serviceaccount.yaml', SERVICE_ACCOUNT],
    ['flux-operator/templates/deployment.yaml', DEPLOYMENT],
  ]
}

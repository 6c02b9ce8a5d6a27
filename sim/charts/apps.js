// The charts of cluster-template's bootstrap helmfile besides cilium and flux-operator, as the
// simulator's OCI registry serves them (oci.js). Each keeps what the real chart's install creates
// that the product or `helm --wait` looks at, as Go templates the real helm renders:
//   coredns (coredns/helm charts/coredns): the Deployment and the kube-dns Service;
//   spegel (spegel-org/spegel charts/spegel): the DaemonSet;
//   cert-manager (cert-manager/cert-manager deploy/charts/cert-manager): its CRDs (crds.enabled),
//     the controller, cainjector and webhook Deployments and the webhook Service;
//   flux-instance (controlplaneio-fluxcd/charts charts/flux-instance): the FluxInstance `flux`
//     from `.Values.instance`, which flux-operator (sim/kube/controllers.js) reconciles;
//   CRD-only charts the crds helmfile renders (gateway-helm / envoy-gateway, external-dns,
//     prometheus-operator-crds, kube-prometheus-stack): a CRD of their API group each.
// Every pod template carries CHART_ANNOTATION, the chart's name: while a scenario `chart` fault
// names that chart its pods crash-loop (sim/kube/controllers.js), as a chart whose pods cannot start.
import { stringify } from 'yaml'

export const CHART_ANNOTATION = 'sim.talos-bootstrap.dev/chart'

// the pod template's annotations: which chart the pod comes from
const chartOfPod = (indent) => `${' '.repeat(indent)}annotations:\n${' '.repeat(indent + 2)}${CHART_ANNOTATION}: {{ .Chart.Name }}`

// fullname as the real charts' _helpers.tpl: fullnameOverride, else the release name when it
// contains the chart name, else <release>-<chart>
const FULLNAME = `{{- define "sim.fullname" -}}
{{- if .Values.fullnameOverride -}}{{ .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}
`

const deployment = (name, labels, { replicas = '1', hostNetwork = false } = {}) => `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${name}
  namespace: {{ .Release.Namespace }}
  labels:
${labels(4)}
spec:
  replicas: ${replicas}
  selector:
    matchLabels:
${labels(6)}
  template:
    metadata:
      labels:
${labels(8)}
${chartOfPod(6)}
    spec:
${hostNetwork ? '      hostNetwork: true\n' : ''}      tolerations:
        - key: CriticalAddonsOnly
          operator: Exists
      containers:
        - name: ${name.includes('{{') ? 'main' : name}
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
`

// a CRD of a protected group (*.k8s.io, *.kubernetes.io) carries its API review's approval, as the
// upstream charts' do: the real API server refuses one without it (SIM_KUBE=real; apiextensions
// validation, kubernetes/enhancements#1111)
const crd = (group, plural, kind, scope = 'Namespaced', approved = null) => `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ${plural}.${group}${approved ? `\n  annotations: { api-approved.kubernetes.io: "${approved}" }` : ''}
spec:
  group: ${group}
  names: { kind: ${kind}, listKind: ${kind}List, plural: ${plural}, singular: ${kind.toLowerCase()} }
  scope: ${scope}
  versions:
    - name: v1
      served: true
      storage: true
      schema: { openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true } }
`

// coredns: k8sAppLabelOverride sets k8s-app (kube-dns in cluster-template), service.clusterIP the DNS address
const corednsLabels = (n) =>
  [
    'app.kubernetes.io/name: {{ .Chart.Name }}',
    'app.kubernetes.io/instance: {{ .Release.Name }}',
    'k8s-app: {{ .Values.k8sAppLabelOverride | default .Chart.Name }}',
  ]
    .map((l) => ' '.repeat(n) + l)
    .join('\n')
const COREDNS = {
  values: { image: { repository: 'coredns/coredns', tag: '' }, replicaCount: 1, service: { clusterIP: '', name: '' } },
  templates: {
    'deployment.yaml': deployment('{{ include "sim.fullname" . }}', corednsLabels, { replicas: '{{ .Values.replicaCount }}' }),
    'service.yaml': `apiVersion: v1
kind: Service
metadata:
  name: {{ .Values.service.name | default (include "sim.fullname" .) }}
  namespace: {{ .Release.Namespace }}
  labels:
${corednsLabels(4)}
spec:
  selector:
${corednsLabels(4)}
  {{- with .Values.service.clusterIP }}
  clusterIP: {{ . }}
  {{- end }}
  ports:
    - { name: udp-53, port: 53, protocol: UDP }
    - { name: tcp-53, port: 53, protocol: TCP }
`,
  },
}

const spegelLabels = (n) =>
  ['app.kubernetes.io/name: spegel', 'app.kubernetes.io/instance: {{ .Release.Name }}'].map((l) => ' '.repeat(n) + l).join('\n')
const SPEGEL = {
  values: { image: { repository: 'ghcr.io/spegel-org/spegel', tag: '' } },
  templates: {
    'daemonset.yaml': `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ include "sim.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
${spegelLabels(4)}
spec:
  selector:
    matchLabels:
${spegelLabels(6)}
  template:
    metadata:
      labels:
${spegelLabels(8)}
${chartOfPod(6)}
    spec:
      priorityClassName: system-node-critical
      tolerations:
        - { key: CriticalAddonsOnly, operator: Exists }
        - { effect: NoExecute, operator: Exists }
        - { effect: NoSchedule, operator: Exists }
      containers:
        - name: registry
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
`,
  },
}

const cmLabels = (component) => (n) =>
  ['app.kubernetes.io/name: ' + component, 'app.kubernetes.io/instance: {{ .Release.Name }}', 'app.kubernetes.io/component: ' + component]
    .map((l) => ' '.repeat(n) + l)
    .join('\n')
const CERT_MANAGER_CRDS = [
  ['certificates', 'Certificate'],
  ['certificaterequests', 'CertificateRequest'],
  ['issuers', 'Issuer'],
  ['clusterissuers', 'ClusterIssuer', 'Cluster'],
]
const CERT_MANAGER = {
  values: { image: { repository: 'quay.io/jetstack/cert-manager-controller', tag: '' }, crds: { enabled: false }, installCRDs: false },
  templates: {
    'crds.yaml': `{{- if or .Values.crds.enabled .Values.installCRDs }}\n${CERT_MANAGER_CRDS.map(([p, k, s]) => crd('cert-manager.io', p, k, s)).join('---\n')}{{- end }}\n`,
    'deployment.yaml': deployment('{{ include "sim.fullname" . }}', cmLabels('controller')),
    'cainjector-deployment.yaml': deployment('{{ include "sim.fullname" . }}-cainjector', cmLabels('cainjector')),
    'webhook-deployment.yaml': deployment('{{ include "sim.fullname" . }}-webhook', cmLabels('webhook')),
    'webhook-service.yaml': `apiVersion: v1
kind: Service
metadata:
  name: {{ include "sim.fullname" . }}-webhook
  namespace: {{ .Release.Namespace }}
spec:
  selector:
${cmLabels('webhook')(4)}
  ports:
    - { name: https, port: 443, protocol: TCP, targetPort: 10250 }
`,
  },
}

const FLUX_INSTANCE = {
  values: {
    instance: {
      distribution: { version: '2.x', registry: 'ghcr.io/fluxcd', artifact: '' },
      components: ['source-controller', 'kustomize-controller', 'helm-controller', 'notification-controller'],
      cluster: { type: 'kubernetes', networkPolicy: true, domain: 'cluster.local' },
      sync: {},
      kustomize: {},
      commonMetadata: {},
    },
  },
  templates: {
    'instance.yaml': `apiVersion: fluxcd.controlplane.io/v1
kind: FluxInstance
metadata:
  name: flux
  namespace: {{ .Release.Namespace }}
spec:
  distribution:
    {{- toYaml .Values.instance.distribution | nindent 4 }}
  components:
    {{- toYaml .Values.instance.components | nindent 4 }}
  cluster:
    {{- toYaml .Values.instance.cluster | nindent 4 }}
  {{- with .Values.instance.sync }}
  {{- if .url }}
  sync:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- end }}
`,
  },
}

// CRD-only charts: what the crds helmfile renders with --include-crds (the CRDs under crds/)
const crdsOnly = (group, list, approved) => ({
  values: {},
  crds: list.map(([p, k]) => crd(group, p, k, 'Namespaced', approved)).join('---\n'),
  templates: {},
})
const GATEWAY = crdsOnly(
  'gateway.networking.k8s.io',
  [
    ['gateways', 'Gateway'],
    ['httproutes', 'HTTPRoute'],
  ],
  'https://github.com/kubernetes-sigs/gateway-api/pull/2466',
)
const PROMETHEUS = crdsOnly('monitoring.coreos.com', [
  ['servicemonitors', 'ServiceMonitor'],
  ['podmonitors', 'PodMonitor'],
  ['prometheusrules', 'PrometheusRule'],
])

/** chart name → its values, templates (templates/<file>) and crds/ text */
export const APP_CHARTS = {
  coredns: COREDNS,
  spegel: SPEGEL,
  'cert-manager': CERT_MANAGER,
  'flux-instance': FLUX_INSTANCE,
  'gateway-helm': GATEWAY,
  'envoy-gateway': GATEWAY,
  'external-dns': crdsOnly(
    'externaldns.k8s.io',
    [['dnsendpoints', 'DNSEndpoint']],
    'https://github.com/kubernetes-sigs/external-dns/pull/2007',
  ),
  'prometheus-operator-crds': PROMETHEUS,
  'kube-prometheus-stack': PROMETHEUS,
}

/** the files of chart `name` at `version` as `helm package` lays them out (<name>/...) */
export function appChartFiles(name, version) {
  const c = APP_CHARTS[name]
  const meta = { apiVersion: 'v2', name, version, appVersion: version, description: `${name} (simulated)`, type: 'application' }
  return [
    [`${name}/Chart.yaml`, stringify(meta)],
    [`${name}/values.yaml`, stringify(c.values)],
    [`${name}/templates/_helpers.tpl`, FULLNAME],
    ...Object.entries(c.templates).map(([f, t]) => [`${name}/templates/${f}`, t]),
    ...(c.crds ? [[`${name}/crds/crds.yaml`, c.crds]] : []),
  ]
}

// The cilium chart the simulator's repository serves: Go templates real helm renders, covering
// what the real chart's install creates that the product or `helm --wait` looks at (the agent
// DaemonSet, the operator Deployment, their ServiceAccounts, cilium-config, the hubble-peer
// Service) and the values the product passes (k8sServiceHost/Port become the agent's
// KUBERNETES_SERVICE_HOST/PORT, as the real chart's templates/cilium-agent/daemonset.yaml does;
// sim/kube/controllers.js decides the agent's readiness from that env).
import { stringify } from 'yaml'
import { CHART_ANNOTATION } from './apps.js'

export const CILIUM_VERSIONS = ['1.18.4', '1.17.9', '1.16.16'] // newest first; appVersion = version
export const CILIUM_DESCRIPTION = 'eBPF-based Networking, Security, and Observability'
const CNI_ANNOTATION = 'sim.talos-bootstrap.dev/cni'

const VALUES = {
  image: { repository: 'quay.io/cilium/cilium', tag: '' },
  operator: { replicas: 2, image: { repository: 'quay.io/cilium/operator-generic', tag: '' } },
  ipam: { mode: 'cluster-pool' },
  kubeProxyReplacement: false,
  k8sServiceHost: '',
  k8sServicePort: '',
  // the chart's default adds SYS_MODULE, which Talos refuses (the Talos guide removes it)
  securityContext: {
    capabilities: {
      ciliumAgent: [
        'CHOWN',
        'KILL',
        'NET_ADMIN',
        'NET_RAW',
        'IPC_LOCK',
        'SYS_MODULE',
        'SYS_ADMIN',
        'SYS_RESOURCE',
        'DAC_OVERRIDE',
        'FOWNER',
        'SETGID',
        'SETUID',
      ],
      cleanCiliumState: ['NET_ADMIN', 'SYS_MODULE', 'SYS_ADMIN', 'SYS_RESOURCE'],
    },
  },
  cgroup: { autoMount: { enabled: true }, hostRoot: '/run/cilium/cgroupv2' },
  cluster: { name: 'default' },
  // the chart's own default: helm --wait counts the DaemonSet ready once desired - 2 pods are
  updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 2 } },
}

const LABELS = (name, indent) =>
  [`app.kubernetes.io/part-of: cilium`, `app.kubernetes.io/name: ${name}`].map((l) => ' '.repeat(indent) + l).join('\n')

const SERVICE_ACCOUNTS = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: cilium
  namespace: {{ .Release.Namespace }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: cilium-operator
  namespace: {{ .Release.Namespace }}
`

const CONFIGMAP = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cilium-config
  namespace: {{ .Release.Namespace }}
data:
  cluster-name: {{ .Values.cluster.name | quote }}
  ipam: {{ .Values.ipam.mode | quote }}
  kube-proxy-replacement: {{ .Values.kubeProxyReplacement | quote }}
  cni-exclusive: "true"
`

const DAEMONSET = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: cilium
  namespace: {{ .Release.Namespace }}
  labels:
    k8s-app: cilium
${LABELS('cilium-agent', 4)}
  annotations:
    ${CNI_ANNOTATION}: "true"
spec:
  selector:
    matchLabels:
      k8s-app: cilium
  updateStrategy:
    {{- toYaml .Values.updateStrategy | nindent 4 }}
  template:
    metadata:
      labels:
        k8s-app: cilium
${LABELS('cilium-agent', 8)}
      annotations:
        ${CNI_ANNOTATION}: "true"
        ${CHART_ANNOTATION}: {{ .Chart.Name }}
    spec:
      hostNetwork: true
      serviceAccountName: cilium
      priorityClassName: system-node-critical
      # the agent must run on NotReady nodes: it is what makes them Ready
      tolerations:
      - operator: Exists
      containers:
      - name: cilium-agent
        image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}"
        {{- if .Values.k8sServiceHost }}
        env:
        - name: KUBERNETES_SERVICE_HOST
          value: {{ .Values.k8sServiceHost | quote }}
        - name: KUBERNETES_SERVICE_PORT
          value: {{ .Values.k8sServicePort | quote }}
        {{- end }}
        terminationMessagePolicy: FallbackToLogsOnError
        securityContext:
          capabilities:
            add:
            {{- toYaml .Values.securityContext.capabilities.ciliumAgent | nindent 12 }}
`

const DEPLOYMENT = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: cilium-operator
  namespace: {{ .Release.Namespace }}
  labels:
    io.cilium/app: operator
    name: cilium-operator
${LABELS('cilium-operator', 4)}
spec:
  replicas: {{ .Values.operator.replicas }}
  selector:
    matchLabels:
      io.cilium/app: operator
      name: cilium-operator
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 50%
  template:
    metadata:
      labels:
        io.cilium/app: operator
        name: cilium-operator
${LABELS('cilium-operator', 8)}
    spec:
      hostNetwork: true
      serviceAccountName: cilium-operator
      priorityClassName: system-cluster-critical
      tolerations:
      - operator: Exists
      containers:
      - name: cilium-operator
        image: "{{ .Values.operator.image.repository }}:{{ .Values.operator.image.tag | default (printf "v%s" .Chart.AppVersion) }}"
`

// the real chart's templates/hubble/peer-service.yaml (hubble is on by default): a ClusterIP
// Service, which helm's --wait checks for a cluster IP (pkg/kube/ready.go serviceReady)
const HUBBLE_PEER = `apiVersion: v1
kind: Service
metadata:
  name: hubble-peer
  namespace: {{ .Release.Namespace }}
  labels:
    k8s-app: cilium
${LABELS('hubble-peer', 4)}
spec:
  selector:
    k8s-app: cilium
  ports:
  - name: peer-service
    port: 443
    protocol: TCP
    targetPort: 4244
  internalTrafficPolicy: Local
`

const NOTES = `You have successfully installed {{ title .Chart.Name }}.

Your release version is {{ .Chart.Version }}.
`

/** the chart's files for `version`, as `helm package` lays them out (cilium/...) */
export function ciliumChartFiles(version) {
  const chart = {
    apiVersion: 'v2',
    name: 'cilium',
    version,
    appVersion: version,
    description: CILIUM_DESCRIPTION,
    kubeVersion: '>= 1.21.0-0',
    home: 'https://cilium.io/',
  }
  return [
    ['cilium/Chart.yaml', stringify(chart)],
    ['cilium/values.yaml', stringify(VALUES)],
    ['cilium/templates/NOTES.txt', NOTES],
    ['cilium/templates/cilium-agent/serviceaccount.yaml', SERVICE_ACCOUNTS],
    ['cilium/templates/cilium-configmap.yaml', CONFIGMAP],
    ['cilium/templates/cilium-agent/daemonset.yaml', DAEMONSET],
    ['cilium/templates/cilium-operator/deployment.yaml', DEPLOYMENT],
    ['cilium/templates/hubble/peer-service.yaml', HUBBLE_PEER],
  ]
}

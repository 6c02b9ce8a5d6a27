// What Talos's Kubernetes controllers derive from a node's machine config, as typed COSI resources
// (the ones `talosctl upgrade-k8s` reads and watches, pkg/cluster/kubernetes), and how a changed
// config reaches the static pods and the kubelet (sim/README.md "upgrade-k8s"):
// * controllers/k8s/control_plane.go: APIServerConfig, ControllerManagerConfig, SchedulerConfig
//   (namespace controlplane) from cluster.apiServer/controllerManager/scheduler; a COSI resource's
//   version grows by one on every write that changes its spec (cosi runtime: Modify skips an equal spec)
// * controllers/k8s/control_plane_static_pod.go: StaticPod (namespace k8s) per component, its pod
//   annotated talos.dev/config-version = its config's version (and talos.dev/secrets-version); the
//   kubelet runs it and replaces its mirror pod (the mirror's annotations are the static pod's)
// * controllers/k8s/kubelet_spec.go, kubelet_service.go: KubeletSpec from machine.kubelet.image; a
//   changed spec stops the kubelet service and starts it again (the Service resource is destroyed
//   while it is not Running: controllers/v1alpha1/service.go); the kubelet then posts its Node with
//   nodeInfo.kubeletVersion = its image's tag
// * controllers/k8s/manifest.go: Manifest (namespace controlplane) per bootstrap manifest group
import { CONTROL_PLANE_PODS } from '../health-faults.js'
import { talosManifests } from '../kube-manifests.js'
import { networkOf } from './network.js'

/** simulated seconds between a kubelet's stop for a new spec and its start (kubelet_service.go: stop, certs, start) */
export const KUBELET_SPEC_RESTART_S = 3

const tagOf = (image) => {
  const ref = String(image ?? '').split('@')[0]
  const i = ref.lastIndexOf(':')
  return i > ref.lastIndexOf('/') ? ref.slice(i + 1) : ''
}
export { tagOf }

/** the image a component runs per the config (the generated configs name every one; Talos's defaults otherwise) */
export function imageOf(cfg, id, kubernetesVersion) {
  const c = cfg?.cluster ?? {}
  switch (id) {
    case 'kube-apiserver':
      return c.apiServer?.image || `registry.k8s.io/kube-apiserver:${kubernetesVersion}`
    case 'kube-controller-manager':
      return c.controllerManager?.image || `registry.k8s.io/kube-controller-manager:${kubernetesVersion}`
    case 'kube-scheduler':
      return c.scheduler?.image || `registry.k8s.io/kube-scheduler:${kubernetesVersion}`
    case 'kube-proxy':
      return c.proxy?.image || `registry.k8s.io/kube-proxy:${kubernetesVersion}`
    case 'kubelet':
      return cfg?.machine?.kubelet?.image || `ghcr.io/siderolabs/kubelet:${kubernetesVersion}`
  }
  throw new Error(`unknown component ${id}`)
}

const args = (o) => Object.entries(o).map(([k, v]) => `--${k}=${v}`)
const extraArgs = (x) => Object.fromEntries(Object.entries(x ?? {}).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : String(v)]))

/** the typed specs of one node's config (control_plane.go, kubelet_spec.go), field names as their yaml tags */
export function specsOf(node, kubernetesVersion) {
  const cfg = node.config
  const c = cfg?.cluster ?? {}
  const out = {}
  const kubeletImage = imageOf(cfg, 'kubelet', kubernetesVersion)
  const kubeletArgs = {
    'bootstrap-kubeconfig': '/etc/kubernetes/bootstrap-kubeconfig',
    'cert-dir': '/var/lib/kubelet/pki',
    config: '/etc/kubernetes/kubelet.yaml',
    'hostname-override': node.name,
    kubeconfig: '/etc/kubernetes/kubeconfig-kubelet',
    'node-ip': node.ip,
    ...extraArgs(cfg?.machine?.kubelet?.extraArgs),
  }
  out.kubelet = {
    image: kubeletImage,
    args: args(kubeletArgs).sort(),
    expectedNodename: node.name,
    config: {
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      clusterDNS: ['127.96.0.10'],
      clusterDomain: c.network?.dnsDomain ?? 'cluster.local',
      serializeImagePulls: false,
      staticPodURL: 'http://127.0.0.1:45421',
    },
  }
  if (node.role !== 'controlplane') return out
  const endpoint = c.controlPlane?.endpoint ?? ''
  const pods = c.network?.podSubnets ?? []
  const services = c.network?.serviceSubnets ?? []
  out['kube-apiserver'] = {
    image: imageOf(cfg, 'kube-apiserver', kubernetesVersion),
    cloudProvider: '',
    controlPlaneEndpoint: endpoint,
    etcdServers: ['https://localhost:2379'],
    localPort: 6443,
    serviceCIDRs: services,
    extraArgs: extraArgs(c.apiServer?.extraArgs),
    extraVolumes: [],
    environmentVariables: {},
    advertisedAddress: '$(POD_IP)',
    resources: { requests: { cpu: '200m', memory: '512Mi' }, limits: {} },
  }
  out['kube-controller-manager'] = {
    enabled: true,
    image: imageOf(cfg, 'kube-controller-manager', kubernetesVersion),
    cloudProvider: '',
    podCIDRs: pods,
    serviceCIDRs: services,
    extraArgs: extraArgs(c.controllerManager?.extraArgs),
    extraVolumes: [],
    environmentVariables: {},
    resources: { requests: { cpu: '50m', memory: '256Mi' }, limits: {} },
  }
  out['kube-scheduler'] = {
    enabled: true,
    image: imageOf(cfg, 'kube-scheduler', kubernetesVersion),
    extraArgs: extraArgs(c.scheduler?.extraArgs),
    extraVolumes: [],
    environmentVariables: {},
    resources: { requests: { cpu: '10m', memory: '64Mi' }, limits: {} },
    config: {},
  }
  return out
}

/** the command line each control plane component's static pod runs (control_plane_static_pod.go, abridged) */
function commandOf(id, spec) {
  const base = {
    'kube-apiserver': {
      'advertise-address': spec.advertisedAddress,
      'allow-privileged': 'true',
      'authorization-mode': 'Node,RBAC',
      'enable-admission-plugins': 'NodeRestriction',
      'etcd-servers': spec.etcdServers?.join(','),
      'secure-port': spec.localPort,
      'service-cluster-ip-range': spec.serviceCIDRs?.join(','),
    },
    'kube-controller-manager': {
      'allocate-node-cidrs': 'true',
      'cluster-cidr': spec.podCIDRs?.join(','),
      'service-cluster-ip-range': spec.serviceCIDRs?.join(','),
      'leader-elect': 'true',
      'use-service-account-credentials': 'true',
    },
    'kube-scheduler': { config: '/system/config/kube-scheduler/scheduler-config.yaml', 'leader-elect': 'true' },
  }[id]
  return [`/usr/local/bin/${id}`, ...args({ ...base, ...spec.extraArgs }).sort()]
}

/** the v1.Pod a StaticPod resource carries (control_plane_static_pod.go), its annotations from the config's version */
export function staticPodOf(id, spec, configVersion) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: id,
      namespace: 'kube-system',
      annotations: {
        'talos.dev/config-version': String(configVersion),
        'talos.dev/secrets-version': '1',
        ...(id === 'kube-apiserver' ? { 'talos.dev/config-file-version': '1' } : {}),
      },
      labels: {
        tier: 'control-plane',
        'k8s-app': id,
        component: id,
        'app.kubernetes.io/name': id,
        'app.kubernetes.io/version': tagOf(spec.image).replace(/^v/, ''),
        'app.kubernetes.io/component': 'control-plane',
        'app.kubernetes.io/managed-by': 'Talos',
      },
    },
    spec: {
      priority: 2000000000,
      priorityClassName: 'system-cluster-critical',
      containers: [{ name: id, image: spec.image, command: commandOf(id, spec) }],
      hostNetwork: true,
    },
  }
}

/**
 * The node's typed resources after its config changed: each spec's version grows when it changed
 * (starting at 1 in this boot). Returns the ids whose spec changed.
 */
export function syncSpecs(node, kubernetesVersion) {
  node.k8s ??= { versions: new Map() }
  const changed = []
  if (!node.configured) return changed
  for (const [id, spec] of Object.entries(specsOf(node, kubernetesVersion))) {
    const key = JSON.stringify(spec)
    const had = node.k8s.versions.get(id)
    if (had?.key === key) continue
    node.k8s.versions.set(id, { key, spec, version: (had?.version ?? 0) + 1, updated: node.ctx.clock.now() })
    if (had) changed.push(id)
  }
  return changed
}

/** the version and spec of one of the node's typed configs (after syncSpecs) */
export const specVersion = (node, id) => node.k8s?.versions.get(id)

/** the static pods a control plane's kubelet runs: component -> { image, annotations, pod } */
export function staticPods(node) {
  if (node.role !== 'controlplane' || !node.k8s) return []
  return CONTROL_PLANE_PODS.flatMap((id) => {
    const v = specVersion(node, id)
    return v ? [{ id, image: v.spec.image, pod: staticPodOf(id, v.spec, v.version) }] : []
  })
}

/** the Manifest resource a bootstrap object belongs to (controllers/k8s/manifest.go: one per template, IDs as Talos names them) */
function manifestId(o) {
  if (o.kind === 'Secret') return '00-kubelet-bootstrapping-token'
  if (o.kind === 'ClusterRoleBinding' && o.metadata.name.startsWith('system-bootstrap-'))
    return {
      'system-bootstrap-node-bootstrapper': '01-csr-node-bootstrap',
      'system-bootstrap-approve-node-client-csr': '01-csr-approver-role-binding',
      'system-bootstrap-node-renewal': '01-csr-renewal-role-binding',
    }[o.metadata.name]
  const app = o.metadata.labels?.['k8s-app'] ?? o.spec?.selector?.matchLabels?.['k8s-app'] ?? ''
  if (o.metadata.name.includes('flannel') || app === 'flannel') return '05-flannel'
  if (o.metadata.name.includes('kube-proxy') || app === 'kube-proxy') return '10-kube-proxy'
  if (o.kind === 'Service' && app === 'kube-dns') return '11-core-dns-svc'
  return '11-core-dns'
}

/**
 * A control plane's Manifest resources (controllers/k8s/manifest.go): the bootstrap objects its
 * config renders (sim/kube-manifests.js, the same the real control plane gets), grouped by template
 */
export function manifestsOf(node, sim) {
  const c = node.config?.cluster?.network ?? {}
  const objects = talosManifests({
    config: node.config,
    network: networkOf(node.config),
    net: {
      podCIDRs: c.podSubnets ?? ['127.244.0.0/16'],
      serviceCIDRs: c.serviceSubnets ?? ['127.96.0.0/12'],
      dnsDomain: c.dnsDomain ?? 'cluster.local',
    },
    // kube-proxy's template takes the config's cluster.proxy.image (what upgrade-k8s patches)
    kubernetesVersion: tagOf(imageOf(node.config, 'kube-proxy', sim.scenario.cluster.kubernetesVersion)),
    bootstrapToken: node.config?.cluster?.token ?? sim.pki?.secrets.bootstrapToken,
  })
  const groups = new Map()
  for (const o of objects) {
    const id = manifestId(o)
    if (!groups.has(id)) groups.set(id, [])
    groups.get(id).push(o)
  }
  return [...groups.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([id, items]) => ({ id, items }))
}

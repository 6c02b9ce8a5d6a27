// The simulated helm's built-in chart catalogue (there is no chart repository on loopback).
// Charts are reached as `cilium/cilium`, `cilium --repo https://helm.cilium.io` or `coredns/coredns`.
// Each chart renders a list of Kubernetes objects from its coalesced values.
import { coalesce } from './values.js'

const CNI_ANNOTATION = 'sim.talos-bootstrap.dev/cni'

const CATALOGUE = {
  cilium: {
    repo: 'cilium',
    url: 'https://helm.cilium.io',
    description: 'eBPF-based Networking, Security, and Observability',
    versions: ['1.18.4', '1.17.9', '1.16.16'], // newest first; appVersion equals the chart version
    defaults: {
      image: { repository: 'quay.io/cilium/cilium', tag: '' },
      operator: { replicas: 2, image: { repository: 'quay.io/cilium/operator-generic', tag: '' } },
      ipam: { mode: 'cluster-pool' },
      kubeProxyReplacement: false,
      k8sServiceHost: '',
      k8sServicePort: '',
      // the chart's default adds SYS_MODULE, which Talos refuses (the Talos guide removes it)
      securityContext: { capabilities: { ciliumAgent: ['CHOWN', 'KILL', 'NET_ADMIN', 'NET_RAW', 'IPC_LOCK', 'SYS_MODULE', 'SYS_ADMIN', 'SYS_RESOURCE', 'DAC_OVERRIDE', 'FOWNER', 'SETGID', 'SETUID'] } },
      cluster: { name: 'default' },
      // the cilium chart's own default: helm --wait counts a DaemonSet ready once
      // desired - maxUnavailable pods are ready
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 2 } },
    },
    render: renderCilium,
  },
  // cluster-template's Flux: flux-operator from its OCI chart, then a FluxInstance (sim/kube/controllers.js)
  'flux-operator': {
    repo: 'controlplaneio-fluxcd',
    url: 'oci://ghcr.io/controlplaneio-fluxcd/charts',
    description: 'A Helm chart for deploying the Flux Operator',
    versions: ['0.33.0', '0.32.0'],
    appVersions: { '0.33.0': 'v0.33.0', '0.32.0': 'v0.32.0' },
    defaults: { image: { repository: 'ghcr.io/controlplaneio-fluxcd/flux-operator', tag: '' }, installCRDs: true },
    render: renderFluxOperator,
  },
  coredns: {
    repo: 'coredns',
    url: 'https://coredns.github.io/helm',
    description: 'CoreDNS is a DNS server that chains plugins and provides Kubernetes DNS Services',
    versions: ['1.45.0', '1.43.3', '1.39.2'],
    appVersions: { '1.45.0': '1.13.1', '1.43.3': '1.12.3', '1.39.2': '1.12.0' },
    defaults: {
      image: { repository: 'coredns/coredns', tag: '' },
      replicaCount: 1,
      isClusterService: true,
      serviceAccount: { create: false },
    },
    render: renderCoredns,
  },
}

/** An error helm prints as `Error: <message>`. */
class ChartError extends Error {}

/** Does `version` satisfy a (small subset of) Masterminds semver constraint? */
function satisfies(version, constraint) {
  if (!constraint) return true
  const v = version.split('.').map(Number)
  const cmp = (a, b) => {
    for (let i = 0; i < 3; i++) if ((a[i] || 0) !== (b[i] || 0)) return (a[i] || 0) - (b[i] || 0)
    return 0
  }
  return constraint.split(',').every((part) => {
    const m = /^\s*(\^|~|>=|<=|>|<|=)?\s*v?([\dx*]+)(?:\.([\dx*]+))?(?:\.([\dx*]+))?\s*$/.exec(part)
    if (!m) return false
    const op = m[1] || '='
    const wild = (s) => s === undefined || s === 'x' || s === '*'
    const c = [m[2], m[3], m[4]].map((s) => (wild(s) ? 0 : Number(s)))
    if (op === '=') return [m[2], m[3], m[4]].every((s, i) => wild(s) || Number(s) === v[i])
    if (op === '^') return v[0] === c[0] && cmp(v, c) >= 0
    if (op === '~') return v[0] === c[0] && v[1] === c[1] && cmp(v, c) >= 0
    if (op === '>=') return cmp(v, c) >= 0
    if (op === '>') return cmp(v, c) > 0
    if (op === '<=') return cmp(v, c) <= 0
    return cmp(v, c) < 0
  })
}

/**
 * Resolve a chart reference the way `helm upgrade REL CHART [--repo URL] [--version V]` does.
 * Returns { name, version, appVersion, description, defaults, render }.
 */
export function locateChart(ref, { repo, version } = {}) {
  let entry
  let where
  if (ref.startsWith('oci://')) {
    // an OCI reference names the chart itself: oci://<registry>/<path>/<chart>
    const base = ref.slice(0, ref.lastIndexOf('/'))
    const chartName = ref.slice(ref.lastIndexOf('/') + 1)
    entry = Object.entries(CATALOGUE).find(([name, c]) => name === chartName && c.url === base)
    if (!entry) throw new ChartError(`failed to perform "FetchReference" on source: ${ref.slice('oci://'.length)}:${version || 'latest'}: not found`)
    where = base
  } else if (repo) {
    entry = Object.entries(CATALOGUE).find(([name, c]) => name === ref && c.url.replace(/\/+$/, '') === repo.replace(/\/+$/, ''))
    if (!entry) {
      const known = Object.values(CATALOGUE).some((c) => c.url.replace(/\/+$/, '') === repo.replace(/\/+$/, ''))
      if (!known) throw new ChartError(`looks like "${repo}" is not a valid chart repository or cannot be reached: Get "${repo.replace(/\/+$/, '')}/index.yaml": dial tcp: lookup ${new URL(repo).hostname}: no such host`)
      throw new ChartError(`chart "${ref}" not found in ${repo} repository`)
    }
    where = `${repo} repository`
  } else {
    const slash = ref.indexOf('/')
    if (slash < 0) throw new ChartError(`non-absolute URLs should be in form of repo_name/path_to_chart, got: ${ref}`)
    const repoName = ref.slice(0, slash)
    const chartName = ref.slice(slash + 1)
    if (!Object.values(CATALOGUE).some((c) => c.repo === repoName)) throw new ChartError(`repo ${repoName} not found`)
    entry = Object.entries(CATALOGUE).find(([name, c]) => c.repo === repoName && name === chartName)
    if (!entry) throw new ChartError(`chart "${chartName}" matching ${version || ''} not found in ${repoName} index. (try 'helm repo update'): no chart name found`)
    where = `${repoName} index`
  }
  const [name, c] = entry
  const found = c.versions.find((v) => satisfies(v, version))
  if (!found) {
    if (repo) throw new ChartError(`chart "${name}" version "${version}" not found in ${where}`)
    throw new ChartError(`chart "${name}" matching ${version} not found in ${where}. (try 'helm repo update'): no chart version found for ${name}-${version}`)
  }
  return {
    name,
    version: found,
    appVersion: c.appVersions?.[found] || found,
    description: c.description,
    defaults: c.defaults,
    render: (release, userValues) => c.render(release, coalesce(c.defaults, userValues), found, c.appVersions?.[found] || found),
  }
}

const meta = (name, namespace, labels = {}, annotations) => ({
  name,
  namespace,
  labels,
  ...(annotations ? { annotations } : {}),
})

function renderCilium(rel, v, version, appVersion) {
  const ns = rel.namespace
  const tag = v.image?.tag || `v${appVersion}`
  const opTag = v.operator?.image?.tag || `v${appVersion}`
  const partOf = { 'app.kubernetes.io/part-of': 'cilium' }
  return [
    {
      source: 'cilium/templates/cilium-agent/serviceaccount.yaml',
      obj: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta('cilium', ns) },
    },
    {
      source: 'cilium/templates/cilium-operator/serviceaccount.yaml',
      obj: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta('cilium-operator', ns) },
    },
    {
      source: 'cilium/templates/cilium-configmap.yaml',
      obj: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: meta('cilium-config', ns),
        data: {
          'cluster-name': String(v.cluster?.name ?? 'default'),
          ipam: String(v.ipam?.mode ?? 'cluster-pool'),
          'kube-proxy-replacement': String(v.kubeProxyReplacement ?? false),
          'cni-exclusive': 'true',
        },
      },
    },
    {
      source: 'cilium/templates/cilium-agent/daemonset.yaml',
      obj: {
        apiVersion: 'apps/v1',
        kind: 'DaemonSet',
        metadata: meta('cilium', ns, { 'k8s-app': 'cilium', ...partOf, 'app.kubernetes.io/name': 'cilium-agent' }, { [CNI_ANNOTATION]: 'true' }),
        spec: {
          selector: { matchLabels: { 'k8s-app': 'cilium' } },
          updateStrategy: v.updateStrategy,
          template: {
            metadata: {
              labels: { 'k8s-app': 'cilium', ...partOf, 'app.kubernetes.io/name': 'cilium-agent' },
              annotations: { [CNI_ANNOTATION]: 'true' },
            },
            spec: {
              hostNetwork: true,
              serviceAccountName: 'cilium',
              priorityClassName: 'system-node-critical',
              // the agent must run on NotReady nodes: it is what makes them Ready
              tolerations: [{ operator: 'Exists' }],
              containers: [{
                name: 'cilium-agent',
                image: `${v.image?.repository}:${tag}`,
                // as the chart's daemonset.yaml: the API server from k8sServiceHost/Port when set,
                // else the in-cluster Service (which needs kube-proxy); the last log lines become
                // the termination message
                ...(v.k8sServiceHost ? { env: [{ name: 'KUBERNETES_SERVICE_HOST', value: String(v.k8sServiceHost) }, { name: 'KUBERNETES_SERVICE_PORT', value: String(v.k8sServicePort ?? '') }] } : {}),
                terminationMessagePolicy: 'FallbackToLogsOnError',
                securityContext: { capabilities: { add: v.securityContext?.capabilities?.ciliumAgent ?? [] } },
              }],
            },
          },
        },
      },
    },
    {
      source: 'cilium/templates/cilium-operator/deployment.yaml',
      obj: {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: meta('cilium-operator', ns, { 'io.cilium/app': 'operator', name: 'cilium-operator', ...partOf, 'app.kubernetes.io/name': 'cilium-operator' }),
        spec: {
          replicas: Number(v.operator?.replicas ?? 2),
          selector: { matchLabels: { 'io.cilium/app': 'operator', name: 'cilium-operator' } },
          strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: '25%', maxUnavailable: '50%' } },
          template: {
            metadata: { labels: { 'io.cilium/app': 'operator', name: 'cilium-operator', ...partOf, 'app.kubernetes.io/name': 'cilium-operator' } },
            spec: {
              hostNetwork: true,
              serviceAccountName: 'cilium-operator',
              priorityClassName: 'system-cluster-critical',
              tolerations: [{ operator: 'Exists' }],
              containers: [{ name: 'cilium-operator', image: `${v.operator?.image?.repository}:${opTag}` }],
            },
          },
        },
      },
    },
  ]
}

function renderCoredns(rel, v, version, appVersion) {
  const ns = rel.namespace
  const fullname = rel.name.includes('coredns') ? rel.name : `${rel.name}-coredns`
  const labels = {
    'app.kubernetes.io/instance': rel.name,
    'app.kubernetes.io/name': 'coredns',
    'helm.sh/chart': `coredns-${version}`,
    ...(v.isClusterService ? { 'k8s-app': 'kube-dns', 'kubernetes.io/cluster-service': 'true', 'kubernetes.io/name': 'CoreDNS' } : {}),
  }
  const selector = { 'app.kubernetes.io/instance': rel.name, 'app.kubernetes.io/name': 'coredns', ...(v.isClusterService ? { 'k8s-app': 'kube-dns' } : {}) }
  return [
    {
      source: 'coredns/templates/configmap.yaml',
      obj: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: meta(fullname, ns, labels),
        data: { Corefile: '.:53 {\n    errors\n    health\n    ready\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n    }\n    forward . /etc/resolv.conf\n    cache 30\n    loop\n    reload\n    loadbalance\n}\n' },
      },
    },
    {
      source: 'coredns/templates/deployment.yaml',
      obj: {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: meta(fullname, ns, labels),
        spec: {
          replicas: Number(v.replicaCount ?? 1),
          selector: { matchLabels: selector },
          strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: '25%', maxUnavailable: 1 } },
          template: {
            metadata: { labels: selector },
            spec: {
              serviceAccountName: 'default',
              containers: [{ name: 'coredns', image: `${v.image?.repository}:${v.image?.tag || appVersion}` }],
            },
          },
        },
      },
    },
  ]
}

export { ChartError }

function renderFluxOperator(rel, v, version, appVersion) {
  const ns = rel.namespace
  const labels = { 'app.kubernetes.io/name': 'flux-operator', 'app.kubernetes.io/instance': rel.name }
  const crd = (plural, kind) => ({
    source: 'flux-operator/templates/crds.yaml',
    obj: {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: meta(`${plural}.fluxcd.controlplane.io`, undefined, labels),
      spec: { group: 'fluxcd.controlplane.io', names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() }, scope: 'Namespaced', versions: [{ name: 'v1', served: true, storage: true, subresources: { status: {} } }] },
    },
  })
  return [
    ...(v.installCRDs ? [crd('fluxinstances', 'FluxInstance'), crd('fluxreports', 'FluxReport')] : []),
    { source: 'flux-operator/templates/serviceaccount.yaml', obj: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(rel.name, ns, labels) } },
    {
      source: 'flux-operator/templates/deployment.yaml',
      obj: {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: meta(rel.name, ns, labels),
        spec: {
          replicas: 1,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: { serviceAccountName: rel.name, tolerations: [{ operator: 'Exists' }], containers: [{ name: 'manager', image: `${v.image.repository}:${v.image.tag || appVersion}` }] },
          },
        },
      },
    },
  ]
}

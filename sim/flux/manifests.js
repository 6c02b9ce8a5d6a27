// What `flux install` (and flux-operator for a FluxInstance) applies: the CRDs, the namespace and
// one ServiceAccount + Deployment per controller (flux2 manifests/, pkg/manifestgen/install).
// Shared by the simulated flux CLI and the simulated flux-operator (sim/flux-rules.js).

export const FLUX_VERSION = 'v2.9.4'
const PART_OF = 'app.kubernetes.io/part-of'
export const DEFAULT_COMPONENTS = ['source-controller', 'kustomize-controller', 'helm-controller', 'notification-controller']

const CONTROLLER_VERSIONS = {
  'source-controller': 'v1.9.1',
  'kustomize-controller': 'v1.9.1',
  'helm-controller': 'v1.6.1',
  'notification-controller': 'v1.9.1',
  'image-reflector-controller': 'v1.2.1',
  'image-automation-controller': 'v1.2.1',
  'source-watcher': 'v2.2.0',
}
const CRDS = [
  ['alerts', 'notification.toolkit.fluxcd.io', 'Alert', 'v1beta3', []],
  ['buckets', 'source.toolkit.fluxcd.io', 'Bucket', 'v1', []],
  ['gitrepositories', 'source.toolkit.fluxcd.io', 'GitRepository', 'v1', ['gitrepo']],
  ['helmcharts', 'source.toolkit.fluxcd.io', 'HelmChart', 'v1', ['hc']],
  ['helmreleases', 'helm.toolkit.fluxcd.io', 'HelmRelease', 'v2', ['hr']],
  ['helmrepositories', 'source.toolkit.fluxcd.io', 'HelmRepository', 'v1', ['helmrepo']],
  ['kustomizations', 'kustomize.toolkit.fluxcd.io', 'Kustomization', 'v1', ['ks']],
  ['ocirepositories', 'source.toolkit.fluxcd.io', 'OCIRepository', 'v1', ['ocirepo']],
  ['providers', 'notification.toolkit.fluxcd.io', 'Provider', 'v1beta3', []],
  ['receivers', 'notification.toolkit.fluxcd.io', 'Receiver', 'v1', []],
]
// The real CRDs' schemas are generated from the controllers' Go types (flux2 manifests/crds); what
// cannot be built offline is left open: spec and status keep any field (a structural schema, as the
// API server requires one: `spec.versions[0].schema.openAPIV3Schema: Required value`).
// (fresh objects each time: `flux install --export` writes YAML, which would alias shared ones)
const open = () => ({ type: 'object', 'x-kubernetes-preserve-unknown-fields': true })
const schema = () => ({
  type: 'object',
  properties: { apiVersion: { type: 'string' }, kind: { type: 'string' }, metadata: { type: 'object' }, spec: open(), status: open() },
})
function labels(namespace, component) {
  return {
    [PART_OF]: 'flux',
    'app.kubernetes.io/instance': namespace,
    'app.kubernetes.io/version': FLUX_VERSION,
    ...(component ? { 'app.kubernetes.io/component': component, 'control-plane': 'controller' } : {}),
  }
}

/** The objects for `namespace`, `components` from `registry`, each with `extraLabels` too. */
export function fluxObjects({ namespace, registry, components = DEFAULT_COMPONENTS, tolerationKeys = [], extraLabels = {} }) {
  const n = namespace
  const reg = registry || 'ghcr.io/fluxcd'
  const objs = CRDS.map(([plural, group, kind, version, shortNames]) => ({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${plural}.${group}`,
      labels: { ...labels(n), 'app.kubernetes.io/component': group.split('.')[0] + '-controller', ...extraLabels },
    },
    spec: {
      group,
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase(), ...(shortNames.length ? { shortNames } : {}) },
      scope: 'Namespaced',
      versions: [{ name: version, served: true, storage: true, subresources: { status: {} }, schema: { openAPIV3Schema: schema() } }],
    },
  }))
  objs.push({
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: n, labels: { ...labels(n), 'pod-security.kubernetes.io/warn': 'restricted', ...extraLabels } },
  })
  for (const c of components) {
    objs.push({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: c, namespace: n, labels: { ...labels(n), ...extraLabels } } })
  }
  for (const c of components) {
    objs.push({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: c, namespace: n, labels: { ...labels(n, c), ...extraLabels } },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: c } },
        template: {
          metadata: { labels: { app: c, ...labels(n, c) } },
          spec: {
            serviceAccountName: c,
            priorityClassName: 'system-cluster-critical',
            tolerations: tolerationKeys.map((key) => ({ key, operator: 'Exists' })),
            containers: [{ name: 'manager', image: `${reg}/${c}:${CONTROLLER_VERSIONS[c] || 'v1.0.0'}` }],
          },
        },
      },
    })
  }
  return objs
}

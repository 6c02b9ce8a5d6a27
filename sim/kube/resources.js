// The resource registry: every kind the simulated API serves, as discovery and the
// router see it. One entry per (group, version, plural). CRDs and writes of unknown
// kinds add entries at run time (see register()).

const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch']

// [group, version, plural, kind, namespaced, shortNames, flags]
// flags: s = has a status subresource, g = has metadata.generation, a = category "all"
const BUILTIN = [
  ['', 'v1', 'namespaces', 'Namespace', false, ['ns'], 's'],
  ['', 'v1', 'nodes', 'Node', false, ['no'], 's'],
  ['', 'v1', 'pods', 'Pod', true, ['po'], 'sa'],
  ['', 'v1', 'secrets', 'Secret', true, [], ''],
  ['', 'v1', 'configmaps', 'ConfigMap', true, ['cm'], ''],
  ['', 'v1', 'serviceaccounts', 'ServiceAccount', true, ['sa'], ''],
  ['', 'v1', 'services', 'Service', true, ['svc'], 'sa'],
  ['', 'v1', 'endpoints', 'Endpoints', true, ['ep'], ''],
  ['', 'v1', 'events', 'Event', true, ['ev'], ''],
  ['', 'v1', 'resourcequotas', 'ResourceQuota', true, ['quota'], 's'],
  ['', 'v1', 'limitranges', 'LimitRange', true, ['limits'], ''],
  ['', 'v1', 'persistentvolumeclaims', 'PersistentVolumeClaim', true, ['pvc'], 's'],
  ['', 'v1', 'persistentvolumes', 'PersistentVolume', false, ['pv'], 's'],
  ['apps', 'v1', 'daemonsets', 'DaemonSet', true, ['ds'], 'sga'],
  ['apps', 'v1', 'deployments', 'Deployment', true, ['deploy'], 'sga'],
  ['apps', 'v1', 'replicasets', 'ReplicaSet', true, ['rs'], 'sga'],
  ['apps', 'v1', 'statefulsets', 'StatefulSet', true, ['sts'], 'sga'],
  ['batch', 'v1', 'jobs', 'Job', true, [], 'sga'],
  ['batch', 'v1', 'cronjobs', 'CronJob', true, ['cj'], 'sga'],
  ['rbac.authorization.k8s.io', 'v1', 'roles', 'Role', true, [], ''],
  ['rbac.authorization.k8s.io', 'v1', 'rolebindings', 'RoleBinding', true, [], ''],
  ['rbac.authorization.k8s.io', 'v1', 'clusterroles', 'ClusterRole', false, [], ''],
  ['rbac.authorization.k8s.io', 'v1', 'clusterrolebindings', 'ClusterRoleBinding', false, [], ''],
  ['networking.k8s.io', 'v1', 'networkpolicies', 'NetworkPolicy', true, ['netpol'], 'g'],
  ['networking.k8s.io', 'v1', 'ingresses', 'Ingress', true, ['ing'], 'sg'],
  ['policy', 'v1', 'poddisruptionbudgets', 'PodDisruptionBudget', true, ['pdb'], 'sg'],
  ['apiextensions.k8s.io', 'v1', 'customresourcedefinitions', 'CustomResourceDefinition', false, ['crd', 'crds'], 'sg'],
  ['admissionregistration.k8s.io', 'v1', 'mutatingwebhookconfigurations', 'MutatingWebhookConfiguration', false, [], 'g'],
  ['admissionregistration.k8s.io', 'v1', 'validatingwebhookconfigurations', 'ValidatingWebhookConfiguration', false, [], 'g'],
  ['scheduling.k8s.io', 'v1', 'priorityclasses', 'PriorityClass', false, ['pc'], ''],
  ['coordination.k8s.io', 'v1', 'leases', 'Lease', true, [], ''],
  // kubelet serving CSRs (fault kubelet-serving-csr, sim/health-faults.js); `kubectl certificate approve` writes /approval
  ['certificates.k8s.io', 'v1', 'certificatesigningrequests', 'CertificateSigningRequest', false, ['csr'], 's'],
  ['storage.k8s.io', 'v1', 'storageclasses', 'StorageClass', false, ['sc'], ''],
  // Flux's kinds are not here: they are served once Flux's CRDs are created (index.js), as on a
  // real cluster, where kubectl says `the server doesn't have a resource type "kustomizations"` before.
]

export function createRegistry() {
  /** @type {Map<string, object>} key `${group}/${version}/${plural}` */
  const byKey = new Map()
  let generation = 0 // bumps when discovery content changes (OpenAPI hashes use it)

  function register({
    group,
    version,
    plural,
    kind,
    namespaced,
    shortNames = [],
    status = true,
    hasGeneration = true,
    categories = [],
    singular,
  }) {
    const key = `${group}/${version}/${plural}`
    if (byKey.has(key)) return byKey.get(key)
    const def = {
      key,
      group,
      version,
      plural,
      kind,
      namespaced,
      shortNames,
      status,
      hasGeneration,
      categories,
      singular: singular || kind.toLowerCase(),
      apiVersion: group ? `${group}/${version}` : version,
    }
    byKey.set(key, def)
    generation++
    return def
  }

  for (const [group, version, plural, kind, namespaced, shortNames, flags] of BUILTIN) {
    register({
      group,
      version,
      plural,
      kind,
      namespaced,
      shortNames,
      status: flags.includes('s'),
      hasGeneration: flags.includes('g'),
      categories: flags.includes('a') ? ['all'] : [],
    })
  }

  return {
    register,
    get: (group, version, plural) => byKey.get(`${group}/${version}/${plural}`),
    byKind: (apiVersion, kind) => [...byKey.values()].find((d) => d.apiVersion === apiVersion && d.kind === kind),
    all: () => [...byKey.values()],
    /** groups in registration order: [{ name, versions: [{ version, resources: [def] }] }] */
    groups() {
      const groups = new Map()
      for (const def of byKey.values()) {
        if (!groups.has(def.group)) groups.set(def.group, new Map())
        const versions = groups.get(def.group)
        if (!versions.has(def.version)) versions.set(def.version, [])
        versions.get(def.version).push(def)
      }
      return [...groups].map(([name, versions]) => ({
        name,
        versions: [...versions].map(([version, resources]) => ({ version, resources })),
      }))
    },
    get generation() {
      return generation
    },
    VERBS,
  }
}

// Discovery (/api, /apis, /api/v1, /apis/{g}[/{v}]) and the OpenAPI v3 stubs kubectl's
// apply validation needs (k8s.io/client-go discovery/discovery_client.go; kubectl's openapi3 validation).
// Aggregated discovery is negotiated on Accept.
import { createHash } from 'node:crypto'

const SCALABLE = ['Deployment', 'ReplicaSet', 'StatefulSet']
const AGG = (v) => `application/json;g=apidiscovery.k8s.io;v=${v};as=APIGroupDiscoveryList`

// v2 / v2beta1 / null (legacy), from the Accept header (the one k8s.io/client-go discovery/discovery_client.go sends).
export function aggregatedVersion(accept = '') {
  if (!accept.includes('as=APIGroupDiscoveryList')) return null
  if (/v=v2(;|,|$)/.test(accept)) return 'v2'
  if (accept.includes('v=v2beta1')) return 'v2beta1'
  return null
}

function aggResource(def, verbs) {
  const r = {
    resource: def.plural,
    responseKind: { group: def.group, version: def.version, kind: def.kind },
    scope: def.namespaced ? 'Namespaced' : 'Cluster',
    singularResource: def.singular,
    verbs,
  }
  if (def.shortNames.length) r.shortNames = def.shortNames
  if (def.categories.length) r.categories = def.categories
  // pods/eviction (kube-apiserver's pod storage; kubectl drain's CheckEvictionSupport looks for it)
  if (def.kind === 'Pod' && def.group === '')
    r.subresources = [{ subresource: 'eviction', responseKind: { group: 'policy', version: 'v1', kind: 'Eviction' }, verbs: ['create'] }]
  if (def.status)
    r.subresources = [
      ...(r.subresources || []),
      {
        subresource: 'status',
        responseKind: { group: def.group, version: def.version, kind: def.kind },
        verbs: ['get', 'patch', 'update'],
      },
    ]
  if (SCALABLE.includes(def.kind))
    r.subresources = [
      ...(r.subresources || []),
      { subresource: 'scale', responseKind: { group: 'autoscaling', version: 'v1', kind: 'Scale' }, verbs: ['get', 'patch', 'update'] },
    ]
  return r
}

export function aggregatedDiscovery(registry, version, core) {
  const items = registry
    .groups()
    .filter((g) => (core ? g.name === '' : g.name !== ''))
    .map((g) => ({
      metadata: { name: g.name, ...(version === 'v2beta1' ? { creationTimestamp: null } : {}) },
      versions: g.versions.map((v) => ({
        version: v.version,
        freshness: 'Current',
        resources: v.resources.map((d) => aggResource(d, registry.VERBS)),
      })),
    }))
  return {
    contentType: AGG(version),
    body: { kind: 'APIGroupDiscoveryList', apiVersion: `apidiscovery.k8s.io/${version}`, metadata: {}, items },
  }
}

export function legacyApiVersions(serverAddress) {
  return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }] }
}

function apiGroup(g) {
  const versions = g.versions.map((v) => ({ groupVersion: `${g.name}/${v.version}`, version: v.version }))
  return { name: g.name, versions, preferredVersion: versions[0] }
}

export function legacyGroupList(registry) {
  return {
    kind: 'APIGroupList',
    apiVersion: 'v1',
    groups: registry
      .groups()
      .filter((g) => g.name !== '')
      .map(apiGroup),
  }
}

export function legacyGroup(registry, name) {
  const g = registry.groups().find((x) => x.name === name && name !== '')
  return g ? { kind: 'APIGroup', apiVersion: 'v1', ...apiGroup(g) } : null
}

export function resourceList(registry, group, version) {
  const defs = registry.all().filter((d) => d.group === group && d.version === version)
  if (!defs.length) return null
  const resources = []
  for (const d of defs) {
    const r = { name: d.plural, singularName: d.singular, namespaced: d.namespaced, kind: d.kind, verbs: registry.VERBS }
    if (d.shortNames.length) r.shortNames = d.shortNames
    if (d.categories.length) r.categories = d.categories
    resources.push(r)
    if (d.kind === 'Pod' && d.group === '')
      resources.push({
        name: 'pods/eviction',
        singularName: '',
        namespaced: true,
        group: 'policy',
        version: 'v1',
        kind: 'Eviction',
        verbs: ['create'],
      })
    if (d.status)
      resources.push({
        name: `${d.plural}/status`,
        singularName: '',
        namespaced: d.namespaced,
        kind: d.kind,
        verbs: ['get', 'patch', 'update'],
      })
    if (SCALABLE.includes(d.kind))
      resources.push({
        name: `${d.plural}/scale`,
        singularName: '',
        namespaced: d.namespaced,
        group: 'autoscaling',
        version: 'v1',
        kind: 'Scale',
        verbs: ['get', 'patch', 'update'],
      })
  }
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: group ? `${group}/${version}` : version, resources }
}

const gvPath = (group, version) => (group ? `apis/${group}/${version}` : `api/${version}`)

function gvDoc(registry, group, version, kubernetesVersion) {
  const paths = {}
  for (const d of registry.all().filter((x) => x.group === group && x.version === version)) {
    const base = `/${gvPath(group, version)}${d.namespaced ? '/namespaces/{namespace}' : ''}/${d.plural}/{name}`
    paths[base] = {
      patch: {
        operationId: `patch${d.kind}`,
        'x-kubernetes-action': 'patch',
        'x-kubernetes-group-version-kind': { group, version, kind: d.kind },
        parameters: [
          { name: 'fieldValidation', in: 'query', schema: { type: 'string' } },
          { name: 'fieldManager', in: 'query', schema: { type: 'string' } },
          { name: 'force', in: 'query', schema: { type: 'boolean' } },
        ],
        responses: { 200: { description: 'OK' } },
      },
    }
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: kubernetesVersion }, components: { schemas: {} }, paths }
}

// Root /openapi/v3 and per group-version docs; hash changes with the registry.
export function openapiV3(registry, path, kubernetesVersion) {
  const hash = (g, v) => createHash('sha512').update(`${registry.generation}:${g}/${v}`).digest('hex').slice(0, 128).toUpperCase()
  if (path === '/openapi/v3') {
    const paths = {}
    for (const g of registry.groups())
      for (const v of g.versions) {
        paths[gvPath(g.name, v.version)] = { serverRelativeURL: `/openapi/v3/${gvPath(g.name, v.version)}?hash=${hash(g.name, v.version)}` }
      }
    return { paths }
  }
  let m = /^\/openapi\/v3\/api\/(v1)$/.exec(path)
  if (m) return gvDoc(registry, '', m[1], kubernetesVersion)
  m = /^\/openapi\/v3\/apis\/([^/]+)\/([^/]+)$/.exec(path)
  if (m && registry.all().some((d) => d.group === m[1] && d.version === m[2])) return gvDoc(registry, m[1], m[2], kubernetesVersion)
  return null
}

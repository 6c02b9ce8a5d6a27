// The HTTP side of the simulated kube-apiserver: routing, CRUD, patch flavours, watch,
// Tables, discovery and health endpoints, as the real kubectl and helm use them (k8s.io/apiserver pkg/endpoints/handlers).
import YAML from 'yaml'
import { admitCreate, admitUpdate } from './admission.js'
import {
  aggregatedDiscovery,
  aggregatedVersion,
  legacyApiVersions,
  legacyGroup,
  legacyGroupList,
  openapiV3,
  resourceList,
} from './discovery.js'
import { evict } from './disruption.js'
import { decodeDeleteOptions, decodeProtobufObject } from './protobuf.js'
import { parseFieldSelector, parseLabelSelector } from './selectors.js'
import { alreadyExists, ApiError, badRequest, invalid, methodNotAllowed, noRoute, notFound, unavailable } from './status.js'
import { toTable } from './tables.js'
import { afterUpdate, apply as serverSideApply, managerOf } from './managed-fields.js'
import { clone, jsonPatch, mergePatch, strategicMergePatch, randomHex, randomSuffix, rfc3339 } from './util.js'
import { kubeWriteRecord } from '../kube-rules.js'

const GIT_COMMIT = randomHex(40)
const SCALABLE = ['Deployment', 'ReplicaSet', 'StatefulSet']

// autoscaling/v1 Scale of a workload (`kubectl scale` PATCHes .../scale).
function scaleOf(obj) {
  const sel = Object.entries(obj.spec?.selector?.matchLabels || {})
    .map(([k, v]) => `${k}=${v}`)
    .join(',')
  const { name, namespace, uid, resourceVersion, creationTimestamp } = obj.metadata
  return {
    kind: 'Scale',
    apiVersion: 'autoscaling/v1',
    metadata: { name, namespace, uid, resourceVersion, creationTimestamp },
    spec: { replicas: obj.spec?.replicas ?? 1 },
    status: { replicas: obj.status?.replicas ?? 0, selector: sel },
  }
}

function send(res, code, body, contentType = 'application/json') {
  const text = typeof body === 'string' ? body : JSON.stringify(body)
  res.writeHead(code, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(text) })
  res.end(text)
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => resolve(Buffer.concat(chunks)))
    req.on('error', reject)
  })
}

function versionInfo(kubernetesVersion) {
  const [major, minor] = kubernetesVersion.replace(/^v/, '').split('.')
  return {
    major,
    minor,
    emulationMajor: major,
    emulationMinor: minor,
    minCompatibilityMajor: major,
    minCompatibilityMinor: String(Number(minor) - 1),
    gitVersion: kubernetesVersion,
    gitCommit: GIT_COMMIT,
    gitTreeState: 'clean',
    buildDate: '2025-12-17T12:32:06Z',
    goVersion: 'go1.25.5',
    compiler: 'gc',
    platform: 'linux/amd64',
  }
}

const HEALTH_CHECKS = [
  'ping',
  'log',
  'etcd',
  'etcd-readiness',
  'informer-sync',
  'poststarthook/start-apiserver-admission-initializer',
  'poststarthook/generic-apiserver-start-informers',
  'poststarthook/start-apiextensions-controllers',
  'poststarthook/crd-informer-synced',
  'shutdown',
]

// only /readyz has these (k8s.io/apiserver pkg/server/config.go, options/etcd.go); /healthz and /livez the rest
const READYZ_ONLY = new Set(['etcd-readiness', 'informer-sync', 'shutdown'])

/** the verbose answer of /healthz, /livez or /readyz (k8s.io/apiserver pkg/server/healthz/healthz.go); down: etcd's checks fail */
export function healthText(kind, up) {
  const lines = HEALTH_CHECKS.filter((c) => kind === 'readyz' || !READYZ_ONLY.has(c)).map((c) =>
    !up && c.startsWith('etcd') ? `[-]${c} failed: reason withheld` : `[+]${c} ok`,
  )
  return `${lines.join('\n')}\n${kind} check ${up ? 'passed' : 'failed'}\n`
}

export function createHandler({ registry, store, clock, kubernetesVersion, record, isUp, onDelete, git = {} }) {
  const ns = (name) => registry.get('', 'v1', 'namespaces') && store.get(registry.get('', 'v1', 'namespaces'), undefined, name)

  function health(path, query, res) {
    const kind = path.split('/')[1]
    if (!isUp()) return send(res, 500, healthText(kind, false), 'text/plain; charset=utf-8')
    if (query.has('verbose')) return send(res, 200, healthText(kind, true), 'text/plain; charset=utf-8')
    return send(res, 200, 'ok', 'text/plain; charset=utf-8')
  }

  // Map a path to { def, ns, name, sub, watch } or null.
  function route(path, method, body) {
    const seg = path.split('/').filter(Boolean).map(decodeURIComponent)
    let group, version, rest
    if (seg[0] === 'api' && seg.length >= 3) {
      group = ''
      version = seg[1]
      rest = seg.slice(2)
    } else if (seg[0] === 'apis' && seg.length >= 4) {
      group = seg[1]
      version = seg[2]
      rest = seg.slice(3)
    } else return null
    let watch = false
    if (rest[0] === 'watch') {
      watch = true
      rest = rest.slice(1)
    }
    let namespace, plural, name, sub
    const nsPath =
      rest[0] === 'namespaces' && rest.length >= 3 && !(group === '' && ['status', 'finalize'].includes(rest[2]) && rest.length === 3)
    if (nsPath) [, namespace, plural, name, sub] = rest
    else [plural, name, sub] = rest
    if (!plural || (nsPath ? rest.length > 5 : rest.length > 3)) return null
    let def = registry.get(group, version, plural)
    // A write of a kind this server has never heard of: accept it as an opaque object.
    // (never a CRD-defined group such as Flux's: those 404 until their CRDs exist, as on a real API server)
    if (
      !def &&
      body?.kind &&
      !group.endsWith('.fluxcd.io') &&
      ['POST', 'PUT', 'PATCH'].includes(method) &&
      (body.apiVersion || '') === (group ? `${group}/${version}` : version)
    ) {
      def = registry.register({
        group,
        version,
        plural,
        kind: body.kind,
        namespaced: Boolean(namespace),
        status: false,
        hasGeneration: Boolean(group),
      })
    }
    if (!def) return null
    if (def.namespaced !== Boolean(namespace) && (name || !def.namespaced)) return null
    if (
      sub &&
      !(sub === 'status' && def.status) &&
      !(def.kind === 'Namespace' && sub === 'finalize') &&
      !(def.kind === 'CertificateSigningRequest' && sub === 'approval') &&
      !(sub === 'scale' && SCALABLE.includes(def.kind)) &&
      !(sub === 'eviction' && def.kind === 'Pod')
    )
      return null
    return { def, namespace, name, sub, watch }
  }

  function matcher(query) {
    try {
      const l = parseLabelSelector(query.get('labelSelector'))
      const f = parseFieldSelector(query.get('fieldSelector'))
      return (o) => l(o) && f(o)
    } catch (e) {
      throw badRequest(e.message)
    }
  }

  const wantsTable = (req) => (req.headers.accept || '').includes('as=Table')
  const tableOpts = (query) => ({
    now: clock.now().getTime(),
    resourceVersion: store.rv,
    includeObject: query.get('includeObject') || 'Metadata',
  })

  function list(req, res, r, query) {
    const match = matcher(query)
    const all = store.list(r.def, r.namespace).filter(match)
    const { items, metadata } = paginate(all, query)
    if (wantsTable(req)) return send(res, 200, { ...toTable(r.def, items, tableOpts(query)), metadata })
    send(res, 200, { kind: `${r.def.kind}List`, apiVersion: r.def.apiVersion, metadata, items })
  }

  // limit/continue (apiserver's storage pagination): items in namespace/name order; the token
  // names the resourceVersion and the last key served, and says how many remain.
  function paginate(all, query) {
    const keyOf = (o) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`
    all.sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0))
    let start = 0
    let rv = store.rv
    const token = query.get('continue')
    if (token) {
      let t
      try {
        t = JSON.parse(Buffer.from(token, 'base64').toString('utf8'))
      } catch {
        t = null
      }
      if (!t || t.v !== 'meta.k8s.io/v1' || typeof t.start !== 'string')
        throw badRequest(
          `continue key is not valid: ${t ? 'incorrect encoded start resourceVersion (version meta.k8s.io/v1)' : 'illegal base64 data at input byte 0'}`,
        )
      start = all.findIndex((o) => keyOf(o) > t.start)
      if (start < 0) start = all.length
      rv = t.rv
    }
    const limit = Number(query.get('limit') || 0)
    if (!(limit > 0) || start + limit >= all.length) return { items: all.slice(start), metadata: { resourceVersion: rv } }
    const items = all.slice(start, start + limit)
    const next = Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv, start: keyOf(items[items.length - 1]) })).toString('base64')
    return { items, metadata: { resourceVersion: rv, continue: next, remainingItemCount: all.length - start - limit } }
  }

  function watch(req, res, r, query) {
    const match = matcher(query)
    const table = wantsTable(req)
    res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' })
    res.flushHeaders()
    const write = (type, object) => {
      if (res.writableEnded) return
      const obj =
        table && type !== 'ERROR'
          ? toTable(r.def, [object], { ...tableOpts(query), resourceVersion: object.metadata.resourceVersion })
          : object
      res.write(`${JSON.stringify({ type, object: obj })}\n`)
    }
    let cancel = () => {}
    // WatchList (KEP-3157, client-go's reflector with streaming lists, helm 4's --wait): with
    // sendInitialEvents=true the current objects come as ADDED events, then a BOOKMARK whose
    // annotation k8s.io/initial-events-end says the initial list is complete
    // (staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go, watch_cache.go)
    const initialEvents = query.get('sendInitialEvents') === 'true'
    try {
      cancel = store.watch(r.def, {
        ns: r.namespace,
        match,
        resourceVersion: initialEvents ? '' : query.get('resourceVersion'),
        send: write,
      })
      if (initialEvents && query.get('allowWatchBookmarks') === 'true')
        write('BOOKMARK', {
          apiVersion: r.def.apiVersion,
          kind: r.def.kind,
          metadata: { resourceVersion: String(store.rv), annotations: { 'k8s.io/initial-events-end': 'true' } },
        })
    } catch (e) {
      if (e instanceof ApiError) {
        write('ERROR', e.toStatus())
        return res.end()
      }
      throw e
    }
    const timeout = Number(query.get('timeoutSeconds') || 0)
    const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : null
    // res 'close' (not req 'close', which fires once the request body is read) tells us the client went away
    res.on('close', () => {
      cancel()
      if (timer) clearTimeout(timer)
    })
  }

  function getOne(req, res, r, query) {
    const obj = store.get(r.def, r.namespace, r.name)
    if (!obj) throw notFound(r.def, r.name)
    if (wantsTable(req)) return send(res, 200, toTable(r.def, [obj], tableOpts(query)))
    send(res, 200, obj)
  }

  function prepareNew(r, body) {
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('the body of the request was in an unknown format')
    if (body.kind && body.kind !== r.def.kind)
      throw badRequest(`the API version in the data (${body.apiVersion}) does not match the expected API version (${r.def.apiVersion})`)
    const obj = clone(body)
    obj.metadata ||= {}
    if (r.namespace) {
      if (obj.metadata.namespace && obj.metadata.namespace !== r.namespace)
        throw badRequest('the namespace of the provided object does not match the namespace sent on the request')
      obj.metadata.namespace = r.namespace
    } else delete obj.metadata.namespace
    if (!obj.metadata.name && obj.metadata.generateName) obj.metadata.name = obj.metadata.generateName + randomSuffix()
    if (!obj.metadata.name) throw invalid(r.def, '', 'metadata.name: Required value: name or generateName is required')
    if (r.namespace && !ns(r.namespace)) throw notFound(registry.get('', 'v1', 'namespaces'), r.namespace)
    for (const k of ['uid', 'resourceVersion', 'creationTimestamp', 'generation', 'deletionTimestamp', 'managedFields'])
      delete obj.metadata[k]
    admitCreate(r.def, obj)
    return obj
  }

  function create(r, body, dryRun, manager, managedFields) {
    const obj = prepareNew(r, body)
    if (store.get(r.def, r.namespace, obj.metadata.name)) throw alreadyExists(r.def, obj.metadata.name)
    obj.metadata.managedFields = managedFields ?? afterUpdate(r.def, null, obj, manager, clock.now())
    if (dryRun)
      return {
        ...obj,
        apiVersion: r.def.apiVersion,
        kind: r.def.kind,
        metadata: { ...obj.metadata, creationTimestamp: rfc3339(clock.now()), uid: crypto.randomUUID() },
      }
    return store.create(r.def, obj)
  }

  function update(r, old, next, dryRun, manager, managedFields) {
    old = clone(old) // a patch's result may share nested objects with it
    if (!next || typeof next !== 'object') throw badRequest('the body of the request was in an unknown format')
    next.metadata ||= {}
    if (next.metadata.name && next.metadata.name !== r.name)
      throw badRequest(`the name of the object (${next.metadata.name}) does not match the name on the URL (${r.name})`)
    next.metadata.name = r.name
    if (r.namespace) next.metadata.namespace = r.namespace
    delete next.metadata.managedFields
    admitUpdate(r.def, next, old, r.sub)
    if (!r.sub) next.metadata.managedFields = managedFields ?? afterUpdate(r.def, old, next, manager, clock.now())
    if (dryRun)
      return {
        ...next,
        metadata: {
          ...next.metadata,
          uid: old.metadata.uid,
          creationTimestamp: old.metadata.creationTimestamp,
          resourceVersion: old.metadata.resourceVersion,
        },
      }
    return store.update(r.def, next, { checkVersion: true })
  }

  function patch(req, r, text, dryRun, query) {
    const type = (req.headers['content-type'] || '').split(';')[0].trim()
    let body
    try {
      body = type === 'application/apply-patch+yaml' ? YAML.parse(text) : JSON.parse(text)
    } catch (e) {
      throw badRequest(`error decoding patch: ${e.message}`)
    }
    const old = store.get(r.def, r.namespace, r.name)
    const manager = managerOf(query, req.headers['user-agent'])
    if (type === 'application/apply-patch+yaml' && !r.sub) {
      // server-side apply: managedFields decide conflicts and removals (managed-fields.js)
      if (!query.get('fieldManager'))
        throw new ApiError(
          422,
          'Invalid',
          'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
          {},
        )
      if (body?.metadata?.name && body.metadata.name !== r.name)
        throw badRequest(`the name of the object (${body.metadata.name}) does not match the name on the URL (${r.name})`)
      const applied = { ...body, metadata: { ...(body?.metadata || {}), name: r.name } }
      const force = ['true', '1'].includes(query.get('force') || '')
      if (!old) {
        const fresh = serverSideApply(r.def, null, applied, manager, force, clock.now())
        return { code: 201, obj: create(r, fresh, dryRun, manager, fresh.metadata.managedFields) }
      }
      const next = serverSideApply(r.def, old, applied, manager, force, clock.now())
      const managed = next.metadata.managedFields
      return { code: 200, obj: update(r, old, next, dryRun, manager, managed) }
    }
    if (!old) throw notFound(r.def, r.name)
    let next
    try {
      if (type === 'application/json-patch+json') next = jsonPatch(old, body)
      else if (type === 'application/strategic-merge-patch+json') next = strategicMergePatch(old, body)
      else if (type === 'application/merge-patch+json') next = mergePatch(old, body)
      else
        throw new ApiError(
          415,
          'UnsupportedMediaType',
          `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`,
          {},
        )
    } catch (e) {
      if (e instanceof ApiError) throw e
      throw new ApiError(422, 'Invalid', e.message, {})
    }
    return { code: 200, obj: update(r, old, next, dryRun, manager) }
  }

  function remove(r, dryRun) {
    const old = store.get(r.def, r.namespace, r.name)
    if (!old) throw notFound(r.def, r.name)
    if (dryRun) return old
    const gone = store.remove(r.def, r.namespace, r.name)
    onDelete?.(r.def, gone)
    return gone
  }

  function scale(req, res, r, path, text, body, dryRun) {
    const obj = store.get(r.def, r.namespace, r.name)
    if (!obj) throw notFound(r.def, r.name)
    if (req.method === 'GET') return send(res, 200, scaleOf(obj))
    let next
    if (req.method === 'PUT') next = body
    else if (req.method === 'PATCH') {
      const type = (req.headers['content-type'] || '').split(';')[0].trim()
      const patchBody = body ?? JSON.parse(text)
      next = type === 'application/json-patch+json' ? jsonPatch(scaleOf(obj), patchBody) : mergePatch(scaleOf(obj), patchBody)
    } else throw methodNotAllowed()
    const replicas = Number(next?.spec?.replicas)
    if (!Number.isInteger(replicas) || replicas < 0)
      throw invalid(r.def, r.name, 'spec.replicas: Invalid value: must be greater than or equal to 0')
    const updated = dryRun
      ? { ...obj, spec: { ...obj.spec, replicas } }
      : store.update(r.def, { ...obj, spec: { ...obj.spec, replicas } }, { checkVersion: false })
    recordWrite(req, path, 200, updated)
    return send(res, 200, scaleOf(updated))
  }

  // POST .../pods/{name}/eviction (pkg/registry/core/pod/storage/eviction.go, via disruption.js):
  // the pod is named by the path and must match the Eviction's name; dryRun from the query or the
  // Eviction's deleteOptions. 201 with a Success Status once the pod is deleted.
  function eviction(req, res, r, path, body, query) {
    if (req.method !== 'POST') throw methodNotAllowed()
    try {
      if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('the body of the request was in an unknown format')
      if (body.metadata?.namespace && body.metadata.namespace !== r.namespace)
        throw badRequest('the namespace of the provided object does not match the namespace sent on the request')
      if ((body.metadata?.name ?? '') !== r.name) throw badRequest('name in URL does not match name in Eviction object')
      const dryRun = query.getAll('dryRun').includes('All') || (body.deleteOptions?.dryRun || []).includes('All')
      const remove = (pod) => {
        const gone = store.remove(r.def, pod.metadata.namespace, pod.metadata.name)
        onDelete?.(r.def, gone)
        return gone
      }
      evict(
        { store, PODS: r.def, PDBS: registry.get('policy', 'v1', 'poddisruptionbudgets'), remove, now: clock.now() },
        r.namespace,
        r.name,
        {
          dryRun,
        },
      )
      const out = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 }
      recordWrite(req, path, 201, out)
      return send(res, 201, out)
    } catch (e) {
      if (e instanceof ApiError) recordWrite(req, path, e.code, e)
      throw e
    }
  }

  function recordWrite(req, path, code, result) {
    record?.(kubeWriteRecord(req, path, clock.now().toISOString(), code < 400 ? 'ok' : `error: ${result?.message || code}`))
  }

  /** a DELETE's optional DeleteOptions body: protobuf from client-go's typed clients, else JSON */
  function deleteOptions(req, raw, text) {
    if (!raw.length) return undefined
    if ((req.headers['content-type'] || '').includes('protobuf')) {
      try {
        return decodeDeleteOptions(raw)
      } catch (e) {
        throw badRequest(e.message)
      }
    }
    try {
      return JSON.parse(text)
    } catch {
      throw badRequest('the body of the request was in an unknown format')
    }
  }

  async function handleResource(req, res, path, query) {
    const method = req.method
    const raw = ['POST', 'PUT', 'PATCH', 'DELETE'].includes(method) ? await readBody(req) : Buffer.alloc(0)
    const text = raw.toString('utf8')
    let body
    if (method === 'DELETE') {
      body = deleteOptions(req, raw, text)
    } else if ((req.headers['content-type'] || '').includes('protobuf') && method !== 'PATCH') {
      try {
        body = decodeProtobufObject(raw)
      } catch (e) {
        throw new ApiError(415, 'UnsupportedMediaType', e.message, {})
      }
    } else if (text && method !== 'PATCH') {
      try {
        body = JSON.parse(text)
      } catch {
        try {
          body = YAML.parse(text)
        } catch {
          throw badRequest('the body of the request was in an unknown format')
        }
      }
    }
    if (method === 'PATCH' && (req.headers['content-type'] || '').includes('apply-patch')) {
      try {
        body = YAML.parse(text)
      } catch {
        /* reported by patch() */
      }
    }
    const r = route(path, method, body)
    if (!r) throw noRoute()
    const dryRun = query.getAll('dryRun').includes('All') || (method === 'DELETE' && (body?.dryRun || []).includes('All'))
    const write = method !== 'GET'
    if (r.sub === 'scale') return scale(req, res, r, path, text, body, dryRun)
    if (r.sub === 'eviction') return eviction(req, res, r, path, body, query)
    try {
      let code = 200
      let out
      if (method === 'GET') {
        if (r.name) return getOne(req, res, r, query)
        if (r.watch || ['true', '1'].includes(query.get('watch'))) return watch(req, res, r, query)
        return list(req, res, r, query)
      } else if (method === 'POST' && !r.name) {
        out = create(r, body, dryRun, managerOf(query, req.headers['user-agent']))
        code = 201
      } else if (method === 'PUT' && r.name) {
        const old = store.get(r.def, r.namespace, r.name)
        if (!old) throw notFound(r.def, r.name)
        out = update(r, old, body, dryRun, managerOf(query, req.headers['user-agent']))
      } else if (method === 'PATCH' && r.name) {
        ;({ code, obj: out } = patch(req, r, text, dryRun, query))
      } else if (method === 'DELETE' && r.name) {
        out = remove(r, dryRun)
      } else if (method === 'DELETE') {
        const match = matcher(query)
        const items = store
          .list(r.def, r.namespace)
          .filter(match)
          .map((o) => remove({ ...r, name: o.metadata.name, namespace: o.metadata.namespace }, dryRun))
        out = { kind: `${r.def.kind}List`, apiVersion: r.def.apiVersion, metadata: { resourceVersion: store.rv }, items }
      } else throw methodNotAllowed()
      if (write) recordWrite(req, path, code, out)
      return send(res, code, out)
    } catch (e) {
      if (write && e instanceof ApiError) recordWrite(req, path, e.code, e)
      throw e
    }
  }

  return async function handle(req, res) {
    const url = new URL(req.url, 'http://sim.invalid')
    const path = url.pathname.replace(/\/+$/, '') || '/'
    const query = url.searchParams
    try {
      if (path === '/sim/v1/calls' && req.method === 'POST') {
        const body = JSON.parse((await readBody(req)).toString('utf8') || '{}')
        for (const c of Array.isArray(body) ? body : [body]) record?.(c)
        return send(res, 201, {})
      }
      // the simulated Git server's behaviour (scenario flux.git) for the simulated flux CLI; not a Kubernetes path
      if (path === '/sim/v1/git' && req.method === 'GET') return send(res, 200, git)
      if (/^\/(readyz|livez|healthz)(\/.*)?$/.test(path)) return health(path, query, res)
      if (!isUp()) throw unavailable('the API server is not up yet')
      if (req.method === 'GET') {
        if (path === '/version') return send(res, 200, versionInfo(kubernetesVersion))
        if (path === '/api' || path === '/apis') {
          const v = aggregatedVersion(req.headers.accept)
          if (v) {
            const { contentType, body } = aggregatedDiscovery(registry, v, path === '/api')
            return send(res, 200, body, contentType)
          }
          const local = `${req.socket.localAddress}:${req.socket.localPort}`
          return send(res, 200, path === '/api' ? legacyApiVersions(local) : legacyGroupList(registry))
        }
        let m
        if ((m = /^\/api\/(v1)$/.exec(path)) || (m = /^\/apis\/([^/]+)\/([^/]+)$/.exec(path))) {
          const out = m.length === 2 ? resourceList(registry, '', m[1]) : resourceList(registry, m[1], m[2])
          if (out) return send(res, 200, out)
        }
        if ((m = /^\/apis\/([^/]+)$/.exec(path))) {
          const g = legacyGroup(registry, m[1])
          if (g) return send(res, 200, g)
        }
        if (path.startsWith('/openapi/v3')) {
          const doc = openapiV3(registry, path, kubernetesVersion)
          if (doc) return send(res, 200, doc)
        }
      }
      if (path.startsWith('/api/') || path.startsWith('/apis/')) return await handleResource(req, res, path, query)
      throw noRoute()
    } catch (e) {
      const err =
        e instanceof ApiError
          ? e
          : new ApiError(500, 'InternalError', `an error on the server ("${e.message}") has prevented the request from succeeding`, {})
      if (!(e instanceof ApiError)) console.error('[sim/kube]', e)
      if (res.headersSent) return res.end()
      // a 429 that suggests a wait says so in Retry-After too (apiserver responsewriters.ErrorNegotiated)
      if (err.details?.retryAfterSeconds > 0) res.setHeader('Retry-After', String(err.details.retryAfterSeconds))
      send(res, err.code, err.toStatus())
    }
  }
}

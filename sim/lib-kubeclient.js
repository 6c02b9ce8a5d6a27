// A small Kubernetes REST client for the simulated helm and flux CLIs.
// It reads a kubeconfig (KUBECONFIG or --kubeconfig) with inline certificate data, speaks JSON over
// HTTPS with the kubeconfig's client certificate, and turns socket/TLS failures into the texts a
// Go client (client-go) prints, e.g.
//   Get "https://127.0.10.10:6443/version": dial tcp 127.0.10.10:6443: connect: connection refused
import fs from 'node:fs'
import https from 'node:https'
import path from 'node:path'
import { home, io, local } from './cli-io.js'

/** Resource table: kind -> where it lives in the API. */
export const RESOURCES = {
  Namespace: { group: '', version: 'v1', plural: 'namespaces', namespaced: false },
  Node: { group: '', version: 'v1', plural: 'nodes', namespaced: false },
  Pod: { group: '', version: 'v1', plural: 'pods', namespaced: true },
  Secret: { group: '', version: 'v1', plural: 'secrets', namespaced: true },
  ConfigMap: { group: '', version: 'v1', plural: 'configmaps', namespaced: true },
  ServiceAccount: { group: '', version: 'v1', plural: 'serviceaccounts', namespaced: true },
  Service: { group: '', version: 'v1', plural: 'services', namespaced: true },
  DaemonSet: { group: 'apps', version: 'v1', plural: 'daemonsets', namespaced: true },
  Deployment: { group: 'apps', version: 'v1', plural: 'deployments', namespaced: true },
  CustomResourceDefinition: { group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions', namespaced: false },
  Kustomization: { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', plural: 'kustomizations', namespaced: true },
  GitRepository: { group: 'source.toolkit.fluxcd.io', version: 'v1', plural: 'gitrepositories', namespaced: true },
}

/** Path of a collection or object: resourcePath('Secret', 'ns', 'name'). */
export function resourcePath(kind, namespace, name) {
  const r = RESOURCES[kind]
  if (!r) throw new Error(`no resource mapping for kind ${kind}`)
  let p = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`
  if (r.namespaced && namespace) p += `/namespaces/${encodeURIComponent(namespace)}`
  p += `/${r.plural}`
  if (name) p += `/${encodeURIComponent(name)}`
  return p
}

/** An error the API answered (a Status object) or a transport failure with its Go text. */
export class KubeError extends Error {
  constructor(message, { code = 0, reason = '', status = null, transport = false } = {}) {
    super(message)
    this.code = code
    this.reason = reason
    this.status = status
    this.transport = transport
  }
}

function expandHome(p) {
  return local(p.startsWith('~/') ? path.join(home(), p.slice(2)) : p)
}

/**
 * Load the kubeconfig the way client-go does for a single file: --kubeconfig wins, else the first
 * existing file of KUBECONFIG (colon separated), else ~/.kube/config.
 */
export async function loadKubeconfig({ kubeconfig, context } = {}) {
  let file = kubeconfig
  if (!file) {
    const list = (io().env.KUBECONFIG || '').split(path.delimiter).filter(Boolean)
    file = list.find((f) => fs.existsSync(expandHome(f))) || list[0] || path.join(home(), '.kube', 'config')
  }
  file = expandHome(file)
  let text
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch (e) {
    if (kubeconfig) throw new KubeError(`stat ${kubeconfig}: no such file or directory`)
    // client-go with no config at all: helm says "Kubernetes cluster unreachable" with this text
    throw new KubeError('invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment variable', {
      transport: true,
    })
  }
  const { parse } = await import('yaml')
  const cfg = parse(text) || {}
  const ctxName = context || cfg['current-context']
  const ctx = (cfg.contexts || []).find((c) => c.name === ctxName)
  if (!ctx) {
    if (context) throw new KubeError(`context "${context}" does not exist`, { transport: true })
    throw new KubeError('invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment variable', {
      transport: true,
    })
  }
  const cluster = (cfg.clusters || []).find((c) => c.name === ctx.context?.cluster)?.cluster || {}
  const user = (cfg.users || []).find((u) => u.name === ctx.context?.user)?.user || {}
  const b64 = (v) => (v ? Buffer.from(v, 'base64') : undefined)
  const readMaybe = (f) => (f ? fs.readFileSync(expandHome(f)) : undefined)
  return {
    file,
    server: String(cluster.server || '').replace(/\/+$/, ''),
    ca: b64(cluster['certificate-authority-data']) || readMaybe(cluster['certificate-authority']),
    insecure: Boolean(cluster['insecure-skip-tls-verify']),
    cert: b64(user['client-certificate-data']) || readMaybe(user['client-certificate']),
    key: b64(user['client-key-data']) || readMaybe(user['client-key']),
    token: user.token,
    namespace: ctx.context?.namespace || '',
  }
}

/** Go's text for a failed dial / TLS handshake, as net/http and crypto/tls print it. */
function goTransportText(err, hostPort) {
  const code = err.code || ''
  if (code === 'ECONNREFUSED') return `dial tcp ${hostPort}: connect: connection refused`
  if (code === 'EHOSTUNREACH') return `dial tcp ${hostPort}: connect: no route to host`
  if (code === 'ENETUNREACH') return `dial tcp ${hostPort}: connect: network is unreachable`
  if (code === 'ETIMEDOUT' || code === 'SIM_DIAL_TIMEOUT') return `dial tcp ${hostPort}: i/o timeout`
  if (code === 'SIM_TLS_TIMEOUT') return 'net/http: TLS handshake timeout'
  if (code === 'ECONNRESET') return `read tcp ${hostPort}: read: connection reset by peer`
  if (
    code === 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' ||
    code === 'SELF_SIGNED_CERT_IN_CHAIN' ||
    code === 'DEPTH_ZERO_SELF_SIGNED_CERT' ||
    code === 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY'
  ) {
    return 'tls: failed to verify certificate: x509: certificate signed by unknown authority'
  }
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return `tls: failed to verify certificate: x509: certificate is valid for ${(err.cert?.subjectaltname || '').replace(/IP Address:|DNS:/g, '')}, not ${hostPort.replace(/:\d+$/, '')}`
  }
  if (code === 'CERT_HAS_EXPIRED') return 'tls: failed to verify certificate: x509: certificate has expired or is not yet valid'
  const m = /alert (?:number \d+|[a-z ]+)|tlsv13 alert certificate required|sslv3 alert bad certificate/i.exec(err.message || '')
  if (m && /certificate required/i.test(err.message)) return 'remote error: tls: certificate required'
  if (m && /bad certificate/i.test(err.message)) return 'remote error: tls: bad certificate'
  if (code === 'ECONNABORTED' || code === 'ABORT_ERR') return 'context deadline exceeded'
  return err.message || String(err)
}

const METHOD_NAMES = { GET: 'Get', POST: 'Post', PUT: 'Put', PATCH: 'Patch', DELETE: 'Delete' }

export class KubeClient {
  /** @param {object} cfg  result of loadKubeconfig; @param {object} opts { userAgent, signal } */
  constructor(cfg, { userAgent = 'sim-client', signal } = {}) {
    this.cfg = cfg
    this.userAgent = userAgent
    this.signal = signal
    const u = new URL(cfg.server || 'https://127.0.0.1:6443')
    this.url = u
    this.hostPort = `${u.hostname}:${u.port || 443}`
    this.agent = new https.Agent({
      keepAlive: true,
      ca: cfg.ca,
      cert: cfg.cert,
      key: cfg.key,
      rejectUnauthorized: !cfg.insecure,
    })
  }

  close() {
    this.agent.destroy()
  }

  /**
   * One request. Resolves { status, body } for any HTTP answer; rejects with a KubeError whose
   * message is the Go text (`Get "https://…/path": dial tcp …`) on transport failure.
   */
  request(method, p, body, { contentType = 'application/json', query, raw = false } = {}) {
    const qs = query ? '?' + new URLSearchParams(query).toString() : ''
    const full = `${this.url.origin}${p}${qs}`
    const payload = body === undefined ? undefined : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body))
    return new Promise((resolve, reject) => {
      let settled = false
      const fail = (err) => {
        if (settled) return
        settled = true
        clearTimeout(tlsTimer)
        const text = `${METHOD_NAMES[method] || method} "${full}": ${goTransportText(err, this.hostPort)}`
        reject(new KubeError(text, { transport: true }))
      }
      const headers = { 'User-Agent': this.userAgent, Accept: 'application/json' }
      if (payload) {
        headers['Content-Type'] = contentType
        headers['Content-Length'] = payload.length
      }
      if (this.cfg.token) headers.Authorization = `Bearer ${this.cfg.token}`
      const req = https.request(full, { method, agent: this.agent, headers, signal: this.signal })
      // client-go's transport gives a TLS handshake 10 s; a listener that accepts and never answers
      // (the simulator's `timeout` fault) is reported as Go reports it.
      let tlsTimer = null
      req.on('socket', (sock) => {
        if (sock._secureEstablished) return // reused keep-alive socket
        tlsTimer = setTimeout(
          () => {
            const e = new Error('tls timeout')
            e.code = 'SIM_TLS_TIMEOUT'
            fail(e)
            req.destroy()
          },
          Number(io().env.SIM_TLS_HANDSHAKE_TIMEOUT_MS || 10000),
        )
        sock.once('secureConnect', () => clearTimeout(tlsTimer))
      })
      req.on('error', (err) => {
        if (err.name === 'AbortError') {
          const e = new Error('aborted')
          e.code = 'ABORT_ERR'
          return fail(e)
        }
        fail(err)
      })
      req.on('response', (res) => {
        clearTimeout(tlsTimer)
        const chunks = []
        res.on('data', (c) => chunks.push(c))
        res.on('error', fail)
        res.on('end', () => {
          if (settled) return
          settled = true
          const text = Buffer.concat(chunks).toString('utf8')
          let parsed = text
          if (!raw) {
            try {
              parsed = text ? JSON.parse(text) : null
            } catch {
              parsed = text
            }
          }
          resolve({ status: res.statusCode, body: parsed })
        })
      })
      if (payload) req.write(payload)
      req.end()
    })
  }

  /** Like request, but a non-2xx answer rejects with the Status message. */
  async call(method, p, body, opts) {
    const res = await this.request(method, p, body, opts)
    if (res.status >= 200 && res.status < 300) return res.body
    const st = res.body && typeof res.body === 'object' ? res.body : null
    const msg = st?.message || (typeof res.body === 'string' && res.body) || `the server responded with status ${res.status}`
    throw new KubeError(msg, { code: res.status, reason: st?.reason || '', status: st })
  }

  version() {
    return this.call('GET', '/version')
  }

  get(kind, namespace, name) {
    return this.call('GET', resourcePath(kind, namespace, name))
  }

  /** Get, or null when the object (or its type) does not exist. */
  async getOrNull(kind, namespace, name) {
    try {
      return await this.get(kind, namespace, name)
    } catch (e) {
      if (e.code === 404) return null
      throw e
    }
  }

  async list(kind, namespace, { labelSelector, fieldSelector } = {}) {
    const query = {}
    if (labelSelector) query.labelSelector = labelSelector
    if (fieldSelector) query.fieldSelector = fieldSelector
    const res = await this.call('GET', resourcePath(kind, namespace), undefined, { query })
    return res?.items || []
  }

  create(obj) {
    const kind = obj.kind
    return this.call('POST', resourcePath(kind, obj.metadata?.namespace), obj)
  }

  /** RFC 7386 merge patch. */
  patch(kind, namespace, name, patch) {
    return this.call('PATCH', resourcePath(kind, namespace, name), patch, { contentType: 'application/merge-patch+json' })
  }

  replace(obj) {
    return this.call('PUT', resourcePath(obj.kind, obj.metadata?.namespace, obj.metadata?.name), obj)
  }

  async delete(kind, namespace, name) {
    try {
      return await this.call('DELETE', resourcePath(kind, namespace, name))
    } catch (e) {
      if (e.code === 404) return null
      throw e
    }
  }

  /** Record a CLI invocation in the simulator's calls log (best effort; the real API has no such path). */
  async recordCall(record) {
    try {
      await this.request('POST', '/sim/v1/calls', { time: new Date().toISOString(), node: null, ...record })
    } catch {
      /* the API may be down: nothing to record to */
    }
  }
}

/** Convenience: load the kubeconfig and build a client. */
export async function connect(opts = {}) {
  const cfg = await loadKubeconfig(opts)
  return new KubeClient(cfg, opts)
}

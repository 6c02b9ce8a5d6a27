// The kubelet's own API on <node>:10250 (SIM_KUBE=real), as the real API server reaches it for
// `kubectl logs`: it dials the Node's InternalIP and daemonEndpoints port with its kubelet client
// certificate and checks nothing of the kubelet's (no --kubelet-certificate-authority, as Talos runs it).
// What a kubelet does with such a request (kubernetes pkg/kubelet/server/server.go, auth.go, and
// kubelet_pods.go validateContainerLogStatus; texts from v1.35.0):
// * authentication: a client certificate from the cluster's CA (Talos's kubelet config clientCAFile),
//   else 401 `Unauthorized`;
// * authorization: a SubjectAccessReview with the node's own credentials (Webhook mode) for
//   `get nodes/proxy` on this node (`/containerLogs` is the default subresource), else 403;
// * the log of a container as its status allows: `previous` needs a terminated last state; a running
//   container's current log; a waiting one with a terminated last state gives that one's log; else
//   `is waiting to start: …`. The simulated containers write nothing but a crash's last words, so a
//   healthy container's log is empty: nothing is made up.
// Served only while the kubelet runs (sim/kubelet.js alive): a node that is down refuses the dial.
// With fault kubelet-serving-csr the kubelet asks for its serving certificate (serverTLSBootstrap):
// until its CSR is approved and signed it has none to offer and every handshake fails.
import https from 'node:https'
import { kubeletSelfSigned } from './pki.js'

export const KUBELET_PORT = 10250

export class KubeletApi {
  /** ctx = the Simulator; kubelets = sim/kubelet.js Kubelets (their pods and per-node state) */
  constructor(ctx, kubelets) {
    this.ctx = ctx
    this.kubelets = kubelets
    this.servers = new Map() // node name -> { server, address, certless, ready }
  }

  /** the node's kubelet runs and is registered: it serves (again, after a reboot or a serving-CSR change) */
  serve(k) {
    const n = k.n
    // serverTLSBootstrap (fault kubelet-serving-csr): the certificate its CSR gets once approved, none before
    const bootstrapped = this.ctx.health.servingCsrPending(n.name)
    const cert = bootstrapped ? (k.servingCert ?? 'none') : 'self-signed'
    const had = this.servers.get(n.name)
    if (had && had.address === n.ip && had.cert === cert && had.bootId === n.bootId) return
    if (had) this.close(n.name)
    const entry = { address: n.ip, cert, bootId: n.bootId, server: null }
    this.servers.set(n.name, entry)
    const identity =
      cert === 'self-signed' ? kubeletSelfSigned(n.name, n.ip) : Promise.resolve(cert === 'none' ? {} : { cert, key: k.servingKey })
    entry.ready = identity
      .then((identity) => {
        if (this.servers.get(n.name) !== entry) return
        const server = https.createServer(
          { ...identity, requestCert: true, rejectUnauthorized: false, ca: this.ctx.pki.kube.ca.cert },
          (req, res) => this.handle(k, req, res).catch((e) => reply(res, 500, e.message)),
        )
        server.on('error', (e) => this.ctx.log(`kubelet ${n.name}: :${KUBELET_PORT}: ${e.message}`))
        server.on('tlsClientError', () => undefined)
        server.listen(KUBELET_PORT, n.ip)
        entry.server = server
      })
      .catch((e) => this.ctx.log(`kubelet ${n.name}: :${KUBELET_PORT}: ${e.message}`))
  }

  /** the kubelet stopped (the node went down, was reset or cut off): nothing listens */
  close(name) {
    const entry = this.servers.get(name)
    if (!entry) return
    this.servers.delete(name)
    entry.ready.then(() => {
      entry.server?.close()
      entry.server?.closeAllConnections?.()
    })
  }

  closeAll() {
    for (const name of [...this.servers.keys()]) this.close(name)
  }

  async handle(k, req, res) {
    const peer = req.socket.getPeerCertificate?.()
    if (!req.socket.authorized || !peer?.subject) return reply(res, 401, 'Unauthorized')
    const user = peer.subject.CN
    const groups = [peer.subject.O ?? []].flat()
    const url = new URL(req.url, 'https://kubelet')
    const subresource = subresourceOf(url.pathname)
    const verb = { GET: 'get', POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' }[req.method] ?? req.method.toLowerCase()
    const review = await k.client.call('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user, groups, resourceAttributes: { verb, resource: 'nodes', subresource, name: k.n.name } },
    })
    if (!review.status?.allowed)
      return reply(res, 403, `Forbidden (user=${user}, verb=${verb}, resource=nodes, subresource(s)=[${subresource}])\n`)
    if (url.pathname === '/healthz') return reply(res, 200, 'ok')
    const logs = url.pathname.match(/^\/containerLogs\/([^/]+)\/([^/]+)\/([^/]+)$/)
    if (!logs || req.method !== 'GET') return reply(res, 404, '404 page not found\n')
    const [namespace, podName, container] = logs.slice(1).map(decodeURIComponent)
    return this.containerLogs(k, { namespace, podName, container }, url.searchParams, res)
  }

  /** server.go getContainerLogs and kubelet_pods.go GetKubeletContainerLogs / validateContainerLogStatus */
  containerLogs(k, { namespace, podName, container }, query, res) {
    const pod = this.kubelets.pods.find(
      (p) =>
        p.spec.nodeName === k.n.name && p.metadata.namespace === namespace && p.metadata.name === podName && !p.metadata.deletionTimestamp,
    )
    if (!pod) return reply(res, 404, `pod "${podName}" does not exist`)
    if (!(pod.spec.containers ?? []).some((c) => c.name === container))
      return reply(res, 404, `container "${container}" not found in pod "${podName}"`)
    const st = k.pods.get(pod.metadata.uid)
    const status = (st?.status ?? pod.status)?.containerStatuses?.find((c) => c.name === container)
    if (!status) return reply(res, 400, `container "${container}" in pod "${podName}" is not available`)
    const last = status.lastState?.terminated
    const { waiting, running, terminated } = status.state ?? {}
    const previous = query.get('previous') === 'true'
    let text
    if (previous) {
      if (!last?.containerID) return reply(res, 400, `previous terminated container "${container}" in pod "${podName}" not found`)
      text = last.message ?? ''
    } else if (running) text = ''
    else if (terminated) text = terminated.message ?? ''
    else if (last) {
      if (!last.containerID) return reply(res, 400, `container "${container}" in pod "${podName}" is terminated`)
      text = last.message ?? ''
    } else if (waiting) {
      const why =
        waiting.reason === 'ErrImagePull'
          ? "image can't be pulled"
          : waiting.reason === 'ImagePullBackOff'
            ? 'trying and failing to pull image'
            : waiting.reason
      return reply(res, 400, `container "${container}" in pod "${podName}" is waiting to start: ${why}`)
    } else return reply(res, 400, `container "${container}" in pod "${podName}" is waiting to start - no logs yet`)
    res.writeHead(200, { 'Content-Type': 'text/plain' })
    res.end(shapeLog(text, query, last?.finishedAt))
  }
}

/** PodLogOptions the simulated log honours: timestamps, tailLines, limitBytes */
function shapeLog(text, query, at) {
  let lines = text ? text.split('\n').map((l) => `${l}\n`) : []
  const tail = query.get('tailLines')
  if (tail !== null && Number(tail) >= 0) lines = Number(tail) === 0 ? [] : lines.slice(-Number(tail))
  if (query.get('timestamps') === 'true') {
    // RFC 3339 with nanoseconds, as the CRI log lines carry them
    const t = new Date(at ?? Date.now()).toISOString().replace(/\.(\d{3})Z$/, '.$1000000Z')
    lines = lines.map((l) => `${t} ${l}`)
  }
  const out = lines.join('')
  const limit = query.get('limitBytes')
  return limit !== null && Number(limit) > 0 ? Buffer.from(out).subarray(0, Number(limit)) : out
}

/** auth.go GetRequestAttributes: the subresource a path is authorized as (the default is proxy) */
function subresourceOf(path) {
  const under = (p) => path === p || path.startsWith(`${p}/`)
  if (under('/stats')) return 'stats'
  if (under('/metrics')) return 'metrics'
  if (under('/logs')) return 'log'
  if (under('/checkpoint')) return 'checkpoint'
  return 'proxy'
}

/** go-restful's WriteErrorString: the status and the text as it is */
function reply(res, status, text) {
  if (res.headersSent) return res.end()
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' })
  res.end(text)
}

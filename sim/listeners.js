// The simulator's listeners: each node's API on <ip>:50000 (a real TLS listener whose mode follows
// the node's stage and faults, serving Talos' gRPC services, sim/grpc/server.js), and the Kubernetes
// API on each control plane's <ip>:6443 once its API server is up and on the VIP (sim/kube behind
// them), with the `on: kube` faults acting on connections and requests.
import https from 'node:https'
import net from 'node:net'
import tls from 'node:tls'
import grpc from '@grpc/grpc-js'
import { createGrpcServer } from './grpc/server.js'

export const TALOS_PORT = 50000
export const KUBE_PORT = 6443

export class Listeners {
  /** ctx = the Simulator: nodes, faults, pki, kube, record, clock, log, stopped, scenario */
  constructor(ctx) {
    this.ctx = ctx
    this.nodeServers = new Map() // node name -> NodeServer
    this.kube = new Map() // address -> https.Server
  }

  // ---- the node API (:50000) ----
  /** one listener per node, closed until its node asks for one */
  createNodeServers(nodes) {
    for (const n of nodes) this.nodeServers.set(n.name, new NodeServer(this.ctx, n))
  }

  /**
   * The listener a node really has: what its stage asks for (off | maintenance | secure, sim/node.js),
   * after `on: any` faults (refused/unreachable: off; timeout: hang) and a foreign CA (pki).
   */
  modeOf(n) {
    const { faults } = this.ctx
    const base = n.listener
    if (base === 'off') return 'off'
    const any = faults.find(n.name, { on: 'any' }).filter((f) => f.times == null)
    if (any.some((f) => f.kind === 'unreachable' || f.kind === 'refused')) return 'off'
    if (any.some((f) => f.kind === 'timeout')) return 'hang'
    if (base === 'secure' && (n.foreignCA || faults.find(n.name, { kind: 'pki-mismatch' }).length)) return 'pki'
    return base
  }

  /**
   * What the node's own apid certificate says beyond the defaults: fault `clock` (offsetS: issued by
   * the node's clock) and fault `cert-sans` (names another address than the inventory's).
   */
  identityOf(n) {
    const { faults } = this.ctx
    const clock = faults.find(n.name, { kind: 'clock' })[0]
    const sans = faults.find(n.name, { kind: 'cert-sans' })[0]
    return { offsetS: clock ? (clock.offsetS ?? 0) : null, address: sans ? certSansAddress(n, sans) : null }
  }

  /**
   * The x509 error a client checking the node's certificate at `address` with the real time sees, or
   * null: Go's crypto/x509 texts (CertificateInvalidError Expired, HostnameError), as talosctl and apid print them.
   */
  certificateError(n, address = n.ip) {
    const { offsetS, address: named } = this.identityOf(n)
    if (offsetS != null && offsetS !== 0) {
      const now = Date.now()
      const notBefore = Math.floor((now + offsetS * 1000) / 1000) * 1000
      const notAfter = notBefore + 86400e3
      if (now < notBefore)
        return `x509: certificate has expired or is not yet valid: current time ${goTime(now)} is before ${goTime(notBefore)}`
      if (now > notAfter)
        return `x509: certificate has expired or is not yet valid: current time ${goTime(now)} is after ${goTime(notAfter)}`
    }
    if (named && named !== address) return `x509: certificate is valid for ${named}, not ${address}`
    return null
  }

  /** after a node's change: its API listener follows, the Kubernetes listeners too */
  sync(n) {
    const mode = this.modeOf(n)
    const id = mode === 'secure' ? this.identityOf(n) : null
    this.nodeServers.get(n.name)?.setMode(mode, id ? `${id.offsetS}|${id.address}` : '')
    this.reconcileKube()
  }

  /** resolves once the node's listener switches asked for so far have happened (a reboot's close) */
  closed(n) {
    return this.nodeServers.get(n.name)?.queue
  }

  /** a node listener that could not listen (address taken?), or null */
  failed() {
    return [...this.nodeServers.values()].find((sv) => sv.lastError) ?? null
  }

  /** resolves once every listener switch asked for so far has happened */
  async settle() {
    for (let i = 0; i < 3; i++) {
      await Promise.all([...this.nodeServers.values()].map((sv) => sv.queue))
      await Promise.all([...this.kube.values()].map((srv) => srv.ready))
    }
  }

  async close() {
    await Promise.all([...this.nodeServers.values()].map((s) => s.close()))
    await Promise.all([...this.kube.values()].map(closeKube))
    this.kube.clear()
  }

  // ---- the Kubernetes API (:6443) ----
  reconcileKube() {
    const { nodes, scenario } = this.ctx
    // the real API server (SIM_KUBE=real): each control plane's :6443 forwards to it once it serves;
    // a control plane whose kube-apiserver static pod does not run (fault static-pod) serves no :6443
    const serving = !this.ctx.realKube || this.ctx.realKube.serving
    const want = new Set(
      nodes
        .filter((n) => serving && n.apiServerUp && n.role === 'controlplane' && !this.ctx.health?.apiServerDown(n.name))
        .map((n) => n.ip),
    )
    const vip = scenario.cluster.vip
    if (vip && vip.up === 'after-bootstrap' && want.size) want.add(vip.address)
    for (const addr of want) if (!this.kube.has(addr)) this.openKube(addr)
    for (const [addr, srv] of this.kube)
      if (!want.has(addr)) {
        this.kube.delete(addr)
        closeKube(srv)
      }
  }

  openKube(addr) {
    const { pki, faults } = this.ctx
    const srv = https.createServer(
      { cert: pki.kube.server.cert, key: pki.kube.server.key, ca: pki.kube.ca.cert, requestCert: true, rejectUnauthorized: false },
      (req, res) => {
        const real = this.ctx.realKube
        // on: kube faults first, then the node's own health answer, then the API server
        const serve = (handle) => this.kubeRequestFault(addr, req, res, () => this.healthWithoutEtcd(addr, req, res, handle))
        // the real API server checks a bearer token itself (bootstrap and service-account tokens)
        if (real && (req.url ?? '').startsWith('/sim/v1/calls') && req.method === 'POST') return recordCalls(req, res, this.ctx)
        // the scenario's Git server (flux.git), as the simulated flux asks sim/kube for it
        if (real && (req.url ?? '').split('?')[0] === '/sim/v1/git' && req.method === 'GET') {
          res.writeHead(200, { 'content-type': 'application/json' })
          return res.end(JSON.stringify(this.ctx.scenario.flux?.git ?? {}))
        }
        if (real && !req.socket.authorized && /^Bearer /i.test(req.headers.authorization ?? '')) return serve(() => real.proxy(req, res))
        if (!req.socket.authorized) {
          res.writeHead(401, { 'content-type': 'application/json' })
          return res.end(
            JSON.stringify({
              kind: 'Status',
              apiVersion: 'v1',
              metadata: {},
              status: 'Failure',
              message: 'Unauthorized',
              reason: 'Unauthorized',
              code: 401,
            }),
          )
        }
        if (real) return serve(() => real.proxy(req, res))
        const kube = this.ctx.kube
        if (!kube) {
          res.writeHead(503, { 'content-type': 'text/plain' })
          return res.end('the Kubernetes API is not simulated yet (sim/kube missing)\n')
        }
        serve(() => kube.handle(req, res))
      },
    )
    srv.sockets = new Set()
    srv.on('connection', (s) => {
      // on: kube, refused: the API server is restarting; the connection is reset before TLS
      if (faults.takeKube(this.kubeNodeAt(addr), ['refused'], null)) return s.resetAndDestroy()
      srv.sockets.add(s)
      s.on('close', () => srv.sockets.delete(s))
    })
    srv.on('error', (e) => this.ctx.log(`kube listener ${addr}: ${e.message}`))
    srv.on('tlsClientError', () => {})
    this.kube.set(addr, srv)
    srv.ready = new Promise((r) => {
      srv.once('listening', r)
      srv.once('error', r)
    })
    srv.listen(KUBE_PORT, addr)
  }

  /** the control plane a Kubernetes listener belongs to (null for the VIP: every node's kube faults) */
  kubeNodeAt(addr) {
    return this.ctx.nodes.find((n) => n.ip === addr)?.name ?? null
  }

  /**
   * on: kube faults acting on one request: unavailable answers 503 with the Status a kube-apiserver
   * gives while its storage is unavailable (reason and message as k8s.io/apimachinery
   * pkg/api/errors/errors.go names StatusServiceUnavailable); timeout never answers; latency delays the answer by ms.
   */
  kubeRequestFault(addr, req, res, handle) {
    const path = (req.url ?? '/').split('?')[0]
    const f = this.ctx.faults.takeKube(this.kubeNodeAt(addr), ['unavailable', 'timeout', 'latency'], path)
    if (!f) return handle()
    this.ctx.record({
      time: this.ctx.clock.now().toISOString(),
      node: this.kubeNodeAt(addr),
      ip: addr,
      tool: 'kube',
      call: 'kube',
      command: `${req.method} ${path}`,
      args: [],
      outcome: `fault ${f.kind}`,
    })
    if (f.kind === 'timeout') return
    if (f.kind === 'latency') return void setTimeout(handle, f.ms ?? 0)
    res.writeHead(503, { 'content-type': 'application/json' })
    res.end(
      JSON.stringify({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'the server is currently unable to handle the request',
        reason: 'ServiceUnavailable',
        details: { causes: [{ reason: 'UnexpectedServerResponse', message: 'etcdserver: leader changed' }] },
        code: 503,
      }),
    )
  }

  /**
   * /healthz, /livez and /readyz of a control plane whose own etcd member does not answer (a crash
   * loop, a lost quorum): Talos points its kube-apiserver at that member alone (`--etcd-servers
   * https://127.0.0.1:2379`: controllers/k8s/control_plane.go), so there the etcd checks fail
   * (k8s.io/apiserver pkg/server/healthz/healthz.go: `[-]etcd failed: reason withheld`, then `<kind>
   * check failed`, 500), though the one API server behind every :6443 still reaches the other members.
   * The checks the client excludes (`?exclude=etcd`) pass, as there.
   */
  async healthWithoutEtcd(addr, req, res, handle) {
    const [path, query = ''] = (req.url ?? '/').split('?')
    const kind = /^\/(healthz|livez|readyz)$/.exec(path ?? '')?.[1]
    const n = kind && req.method === 'GET' ? this.ctx.nodes.find((x) => x.ip === addr && x.role === 'controlplane') : null
    if (!n || (await this.ctx.etcd.apiServerCheck(n))) return handle()
    const text = await (this.ctx.realKube ?? this.ctx.kube).healthText(kind, query).catch(() => '')
    const excluded = new URLSearchParams(query).getAll('exclude')
    let failed = false
    const checks = text
      .split('\n')
      .filter((line) => /^\[[+-]\]/.test(line))
      .map((line) => {
        const etcd = /^\[[+-]\](etcd|etcd-readiness) (ok|failed)/.exec(line)?.[1]
        if (!etcd || excluded.includes(etcd)) return line
        failed = true
        return `[-]${etcd} failed: reason withheld`
      })
    if (!failed) return handle()
    res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff' })
    res.end(`${checks.join('\n')}\n${kind} check failed\n`)
  }
}

/** the address a cert-sans fault's certificate names: its `address`, or another loopback address (as a NAT'd node's own address would be: not the one dialled) */
export function certSansAddress(n, fault) {
  return fault.address ?? `127.255.255.${n.ip.split('.')[3]}`
}

/** POST /sim/v1/calls: the simulated flux's record of its invocation (a path only the simulator serves) */
function recordCalls(req, res, ctx) {
  let text = ''
  req.setEncoding('utf8')
  req.on('data', (c) => (text += c))
  req.on('end', () => {
    try {
      const body = JSON.parse(text || '{}')
      for (const c of Array.isArray(body) ? body : [body]) ctx.record(c)
      res.writeHead(201, { 'content-type': 'application/json' })
      res.end('{}')
    } catch {
      res.writeHead(400)
      res.end()
    }
  })
}

/** Go's time.Time String() for a UTC time as x509 prints it (RFC3339) */
const goTime = (ms) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z')

function closeKube(srv) {
  for (const s of srv.sockets ?? []) s.destroy()
  return new Promise((r) => srv.close(() => r()))
}

/**
 * One node's API listener on <ip>:50000, in the mode the node's stage asks for:
 * * off: nothing listens (refused) while the node is down, installing (v1.12), rebooting;
 * * maintenance: server certificate self-signed by a per-node maintenance CA (empty subject), no client certificate asked;
 * * secure: server certificate signed by the cluster's Talos OS CA, client certificate required and verified
 *   against it (TLS 1.3: a client without one gets the `certificate required` alert);
 * * pki: the node's identity and trust come from another CA (fault pki-mismatch, or a config with a foreign CA);
 * * hang: connections accepted and never answered (fault timeout on any).
 * A TLS connection that negotiated ALPN h2 goes to the node's gRPC server; any other is closed: the
 * node API speaks only gRPC, as apid and the maintenance service do.
 */
export class NodeServer {
  constructor(sim, node) {
    this.sim = sim
    this.node = node
    this.mode = 'off'
    this.server = null
    this.sockets = new Set()
    this.queue = Promise.resolve()
    this.connections = 0
    this.active = new Set() // calls in flight (sim/grpc/server.js inFlight): a stage change lets them answer first
  }

  /** switch the listener (mode, and the identity its certificate carries); serialized so close/listen never overlap */
  setMode(mode, identity = '') {
    const want = `${mode}#${identity}`
    if (want === this.wantedKey) return this.queue
    this.wanted = mode
    this.wantedKey = want
    this.queue = this.queue
      .then(() => this.apply(mode, want))
      .catch((e) => {
        this.lastError = e
        this.sim.log(`listener ${this.node.ip}:${TALOS_PORT}: ${e.message}`)
      })
    return this.queue
  }

  async apply(mode, want) {
    if (want !== this.wantedKey || want === this.modeKey) return
    await this.closeServer()
    this.mode = mode
    this.modeKey = want
    if (mode === 'off' || this.sim.stopped) return
    let server
    if (mode === 'hang')
      server = net.createServer(() => {}) // accept and never answer: the client waits for its own deadline
    else {
      server = tls.createServer({ ...(await this.tlsOptions(mode)), ALPNProtocols: ['h2'] })
      this.grpc ??= createGrpcServer(this)
      const injector = this.grpc.createConnectionInjector(grpc.ServerCredentials.createInsecure())
      server.on('secureConnection', (socket) => {
        if (socket.alpnProtocol === 'h2') injector.injectConnection(socket)
        else socket.destroy()
      })
      server.on('close', () => injector.destroy())
      server.on('tlsClientError', () => {})
    }
    server.on('connection', (s) => {
      this.sockets.add(s)
      this.connections++
      s.on('close', () => this.sockets.delete(s))
    })
    await new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(TALOS_PORT, this.node.ip, () => {
        server.off('error', reject)
        resolve()
      })
    })
    this.server = server
  }

  async tlsOptions(mode) {
    await this.sim.adoption // an applied config's CA (cluster.configs: external) is in place first
    const { pki } = this.sim
    if (mode === 'maintenance') return { ...pki.maintenance.get(this.node.name), minVersion: 'TLSv1.2' }
    if (mode === 'pki') {
      const other = await pki.otherIdentity(this.node)
      return { cert: other.cert, key: other.key, ca: other.ca, requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3' }
    }
    const apid = await pki.apidFor(this.node, this.sim.listeners.identityOf(this.node))
    return {
      cert: apid.cert,
      key: apid.key,
      ca: pki.talos.ca.cert,
      requestCert: true,
      rejectUnauthorized: true,
      minVersion: 'TLSv1.3',
    }
  }

  async closeServer() {
    const s = this.server
    this.server = null
    if (!s) return
    s.close()
    // let answers already being written go out (a hung `timeout` call is cut after 300 ms)
    await new Promise((r) => setImmediate(r))
    for (let i = 0; i < 30 && this.active.size; i++) await new Promise((r) => setTimeout(r, 10))
    this.active.clear()
    // machined stops its gRPC servers gracefully (pkg/grpc/factory ServerGracefulStop): an answer
    // already written reaches the client. End each connection (its written bytes flushed first),
    // and cut only what has not closed after a moment (a hung call's connection)
    const open = [...this.sockets]
    this.sockets.clear()
    for (const sock of open) sock.end()
    for (let i = 0; i < 30 && open.some((sock) => !sock.destroyed); i++) await new Promise((r) => setTimeout(r, 10))
    for (const sock of open) sock.destroy()
    await new Promise((resolve) => (s.listening ? s.close(() => resolve()) : resolve()))
  }

  close() {
    this.wanted = 'off'
    this.wantedKey = 'off#'
    this.queue = this.queue.then(() => {
      this.mode = 'off'
      this.modeKey = 'off#'
      return this.closeServer()
    })
    return this.queue
  }
}

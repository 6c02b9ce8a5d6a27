// The Simulator: nodes, etcd, faults, calls log, the node API listeners and the Kubernetes
// listeners (each control plane's <ip>:6443 once its API server is up, and the VIP).
import https from 'node:https'
import { existsSync, appendFileSync, writeFileSync, mkdirSync } from 'node:fs'
import { join, resolve, dirname } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { createClock } from './clock.js'
import { createFaults, FAULT_KINDS } from './faults.js'
import { generatePki } from './pki.js'
import { writeClusterDir } from './writer.js'
import { observe as observeEvents } from './talos/events.js'
import { startChartRepo } from './charts/repo.js'
import { Node, memberId } from './node.js'
import { NodeServer } from './talos/server.js'
import { kubeconfigYaml } from './talos/methods.js'
import { networkOf } from './talos/network.js'

const here = dirname(fileURLToPath(import.meta.url))
export const KUBE_PORT = 6443
const CALL_FAULTS = ['refused', 'unreachable', 'timeout', 'unavailable']

export class Simulator {
  constructor(scenario, { dir = '.sim', log } = {}) {
    this.scenario = scenario
    this.dir = resolve(dir)
    this.talosMinor = scenario.talosMinor
    this.timings = scenario.timings
    this.log = log ?? (() => {})
    this.stopped = false
    this.callsLog = []
    this.etcdClusters = [] // [{id, members: Map<member id, member>}] (see etcdClusterOf)
    this.kubeListeners = new Map() // address -> https.Server
    this.pendingKubelet = new Set()
    this.waiters = new Set()
    this.certWaiters = new Set() // workers whose apid waits for a certificate from trustd
  }

  async start() {
    const s = this.scenario
    this.clock = createClock(s.speed)
    this.faults = createFaults(s.faults)
    this.pki = await generatePki({ nodes: s.nodes, vip: s.cluster.vip?.address ?? null, role: s.cluster.talosconfigRole })
    // the chart repository real helm installs the CNI from (any free port on 127.0.0.1)
    this.chartRepo = await startChartRepo({ cert: this.pki.charts.server.cert, key: this.pki.charts.server.key })
    const written = await writeClusterDir(this.dir, s, this.pki, { chartRepo: this.chartRepo.url })
    this.clusterDir = written.clusterDir
    this.env = written.env
    this.binDir = written.binDir // <dir>/bin (sim/writer.js)
    this.callsFile = join(this.dir, 'calls.jsonl')
    writeFileSync(this.callsFile, '')
    this.kube = await this.loadKube()
    this.nodes = s.nodes.map((spec) => new Node(spec, this))
    this.byName = new Map(this.nodes.map((n) => [n.name, n]))
    this.byIp = new Map(this.nodes.map((n) => [n.ip, n]))
    this.servers = new Map(this.nodes.map((n) => [n.name, new NodeServer(this, n)]))
    for (const n of this.nodes) n.powerOn()
    await this.waitFor(() => this.nodes.every((n) => n.stage === 'maintenance' || n.configured))
    await this.settle()
    // a node whose address is taken (another simulator on this range?) must fail the start
    const failed = [...this.servers.values()].find((sv) => sv.lastError)
    if (failed) {
      const e = failed.lastError
      throw new Error(`cannot listen on ${failed.node.ip}:50000: ${e.code === 'EADDRINUSE' ? 'address already in use (another simulator on these addresses? stop it: node sim/cli.js down --dir <its dir>)' : e.message}`)
    }
    return this
  }

  /** sim/kube is another engineer's module: until it exists (or if it fails to load) serve 503 */
  async loadKube() {
    const file = join(here, 'kube', 'index.js')
    if (!existsSync(file)) return null
    try {
      const mod = await import(pathToFileURL(file).href)
      const faults = { has: (node, kind) => this.faults.has(node, kind), message: (kind) => this.faults.message(kind) }
      return mod.createKube({ clock: this.clock, kubernetesVersion: this.scenario.cluster.kubernetesVersion, timings: this.timings,
        faults, flux: this.scenario.flux, record: (r) => this.record(r), network: { of: (name) => networkOf(this.lookup(name)?.config) } })
    } catch (e) {
      this.log(`sim/kube failed to load, Kubernetes API answers 503: ${e.message}`)
      return null
    }
  }

  // ---- views ----
  allNodes() { return this.nodes }
  lookup(s) { return this.byIp.get(s) ?? this.byName.get(s) ?? null }
  node(name) { return this.lookup(name)?.view() ?? null }
  calls() { return this.callsLog.slice() }
  criticalPathSeconds() {
    const t = this.timings
    const iso = this.nodes.some((n) => n.image === 'iso')
    return ((iso ? t.install + t.reboot : 0) + t.boot + t.etcd + t.kubelet + t.cni) / this.scenario.speed
  }
  /** a simulated instant as clients should see it: wall-clock now minus its simulated age
   *  (so "5m ago" reads in simulated time, never in the future) */
  displayTime(t) {
    const sim = new Date(t).getTime()
    return new Date(Date.now() - Math.max(0, this.clock.now().getTime() - sim))
  }
  kubeconfigYaml() { return kubeconfigYaml(this.scenario, this.pki) }
  isClusterCA(b64) {
    if (!b64) return false
    return Buffer.from(String(b64), 'base64').toString().trim() === this.pki.talos.ca.cert.trim()
  }
  kubeNodeReady(name) { try { return !!this.kube?.nodeReady?.(name) } catch { return false } }

  record(r) {
    this.callsLog.push(r)
    try { appendFileSync(this.callsFile, `${JSON.stringify(r)}\n`) } catch { /* dir removed under us */ }
  }

  // ---- faults ----
  /** the listener a node really has, after `on: any` faults */
  listenerMode(n) {
    const base = n.listener
    if (base === 'off') return 'off'
    const any = this.faults.find(n.name, { on: 'any' }).filter((f) => f.times == null)
    if (any.some((f) => f.kind === 'unreachable' || f.kind === 'refused')) return 'off'
    if (any.some((f) => f.kind === 'timeout')) return 'hang'
    if (base === 'secure' && (n.foreignCA || this.faults.find(n.name, { kind: 'pki-mismatch' }).length)) return 'pki'
    return base
  }
  /** a call-scoped transport fault for this call (on: <kind>, or on: any with times), counted */
  takeCallFault(name, kind) {
    for (const k of CALL_FAULTS) { const f = this.faults.take(name, { on: kind, kind: k }); if (f) return f }
    for (const k of CALL_FAULTS) {
      if (this.faults.find(name, { on: 'any', kind: k }).some((f) => f.times != null)) return this.faults.take(name, { on: 'any', kind: k })
    }
    return null
  }
  /** a fault that starts now (tests: a failure that begins mid-run); the same fields as `faults:` */
  addFault(fault) {
    const spec = FAULT_KINDS[fault.kind]
    const on = fault.on ?? spec?.def
    if (!spec || !spec.on.includes(on)) throw new Error(`addFault: ${fault.kind} on ${on} is not a fault kind`)
    this.faults.add({ node: fault.node ?? null, on, kind: fault.kind, times: fault.times ?? null, ms: fault.ms ?? null, message: fault.message ?? null, ...(fault.path != null ? { path: fault.path } : {}) })
    for (const n of this.nodes) this.changed(n)
  }
  clearFault(node, kind) {
    this.faults.clear(node, kind)
    for (const n of this.nodes) this.changed(n)
  }

  // ---- node hooks ----
  changed(n) {
    if (this.stopped) return
    if (n) observeEvents(n) // machined's event stream (sim/talos/events.js)
    this.issueApiCerts()
    this.servers?.get(n.name)?.setMode(this.listenerMode(n))
    this.reconcileKube()
    for (const w of this.waiters) w()
    for (const w of this.watchers ?? []) w(n)
  }
  /** call fn(nodeView) on every node change; returns an unsubscribe function */
  watch(fn) {
    const w = (n) => { if (n) fn(n.view()) }
    this.watchers ??= new Set()
    this.watchers.add(w)
    return () => this.watchers.delete(w)
  }
  /** resolves once every listener switch asked for so far has happened */
  async settle() {
    for (let i = 0; i < 3; i++) {
      await Promise.all([...this.servers.values()].map((sv) => sv.queue))
      await Promise.all([...this.kubeListeners.values()].map((srv) => srv.ready))
    }
  }
  /** resolves when pred() holds (checked on every node change), then lets listeners settle */
  async until(pred, timeoutMs = 30000) {
    let timer
    await Promise.race([this.waitFor(pred), new Promise((_, rej) => { timer = setTimeout(() => rej(new Error('timed out waiting for the simulator')), timeoutMs) })])
      .finally(() => clearTimeout(timer))
    await this.settle()
  }
  waitFor(pred) {
    return new Promise((resolvePromise) => {
      const check = () => { if (pred()) { this.waiters.delete(check); resolvePromise() } }
      this.waiters.add(check)
      check()
    })
  }

  // ---- a worker's API certificate (secrets/api.go generateJoin) ----
  /** a worker asks trustd on a control plane for its apid certificate (every boot: it is kept in memory) */
  requestApiCert(n) {
    n.wantsCert = true
    this.certWaiters.add(n)
    this.issueApiCerts()
  }
  /**
   * The control plane whose trustd a worker can reach, or null. The worker dials the addresses of
   * ControlPlaneEndpoints: the cluster endpoint's host (k8s/static_endpoint.go) and, with discovery,
   * every control plane member. trustd runs from StartAllServices, before etcd; a VIP is up only
   * once etcd is (network/operator/vip.go campaigns through etcd), on a control plane running etcd.
   */
  trustdFor() {
    const host = new URL(this.scenario.cluster.endpoint).hostname
    const down = (cp) => this.faults.find(cp.name, { on: 'any' }).some((f) => f.times == null && ['unreachable', 'timeout'].includes(f.kind))
    const cps = this.nodes.filter((cp) => cp.role === 'controlplane' && cp.configured && cp.trustdUp && !down(cp))
    const direct = cps.find((cp) => cp.ip === host)
    if (direct) return direct
    if (this.scenario.cluster.discovery === 'enabled' && cps.length) return cps[0]
    const vip = this.scenario.cluster.vip
    if (vip && vip.address === host && vip.up === 'after-bootstrap') return cps.find((cp) => cp.etcdHealthy && cp.apiServerUp) ?? null
    return null
  }
  issueApiCerts() {
    if (!this.certWaiters.size) return
    for (const w of [...this.certWaiters]) {
      if (!w.wantsCert) { this.certWaiters.delete(w); continue }
      if (!this.trustdFor()) return
      this.certWaiters.delete(w)
      w.after(0.01, () => w.apiCertIssued())
    }
  }

  // ---- etcd: clusters of members (more than one after a bootstrap on a control plane not joined yet) ----
  // A member is {id (16 hex digits), name, ip, peerUrls, clientUrls, isLearner, started}: a joining one
  // is added as a learner and promoted later (internal/pkg/etcd/etcd.go MemberAddAsLearner); until it
  // starts, its name and client URLs are empty, as etcd's member list says.
  etcdClusterOf(n) { return n.etcdMember ? this.etcdClusters.find((c) => c.members.has(n.etcdMember)) ?? null : null }
  etcdMemberOf(n) { return this.etcdClusterOf(n)?.members.get(n.etcdMember) ?? null }
  /** the members of the cluster this node belongs to (empty when it belongs to none) */
  etcdMembers(n) { return [...(this.etcdClusterOf(n)?.members.values() ?? [])] }
  etcdHealthyMembers() { return this.nodes.filter((n) => n.etcdHealthy && this.etcdMemberOf(n)?.started) }
  /** etcd's data directory holds data: the member started at least once (the Bootstrap RPC's only check) */
  etcdHasData(n) { return !!this.etcdMemberOf(n)?.started }
  newMember(n, { learner }) {
    const started = !learner
    return { id: memberId(), name: started ? n.name : '', ip: n.ip, peerUrls: [`https://${n.ip}:2380`], clientUrls: started ? [`https://${n.ip}:2379`] : [], isLearner: learner, started }
  }
  startMember(n) {
    const m = this.etcdMemberOf(n)
    if (m) Object.assign(m, { started: true, name: n.name, clientUrls: [`https://${n.ip}:2379`] })
  }

  /** the Bootstrap RPC: a new etcd cluster of this one member, whatever other control planes run */
  etcdBootstrap(n) {
    this.etcdStartedAt = this.clock.now().getTime()
    n.joining = false; n.joinGen = (n.joinGen ?? 0) + 1 // a pending join is abandoned: this etcd bootstraps
    const member = this.newMember(n, { learner: false })
    this.etcdClusters.push({ id: memberId(), members: new Map([[member.id, member]]) })
    n.etcdMember = member.id
    n.etcdRunning = true
    n.svc('etcd', 'Finished', 'Bootstrap requested')
    n.startService('etcd', { healthy: false })
    n.talosLog('bootstrap request received')
    n.after(this.timings.etcd, () => n.etcdUp())
    n.changed()
  }
  /** a control plane whose CRI is up joins once a cluster has a healthy etcd: learner, started, promoted */
  maybeJoin(n) {
    if (!n.criUp || this.etcdHasData(n) || n.joining) return
    const target = this.etcdClusters.find((c) => this.etcdHealthyMembers().some((h) => c.members.has(h.etcdMember)))
    if (!target) return
    n.joining = true
    if (this.faults.has(n.name, 'etcd-join')) {
      n.svc('etcd', 'Preparing', 'Running pre state')
      n.talosLog('etcd: failed to join the cluster: etcdserver: re-configuration failed due to not enough started members')
      return
    }
    // a member with this node's name is removed first (services/etcd.go addMember: a stale entry)
    for (const [id, m] of target.members) if (m.name === n.name) target.members.delete(id)
    const learner = this.newMember(n, { learner: true })
    target.members.set(learner.id, learner)
    n.etcdMember = learner.id
    // a joining control plane takes the same `etcd` time, counted from when it could start: the
    // bootstrap call, or its own CRI if that came later (so joins run alongside the first member)
    const now = this.clock.now().getTime()
    const from = Math.max(this.etcdStartedAt ?? now, n.criUpAt ?? now)
    // at least a short learner time once added: start, catch up, be promoted (never instant on a real cluster)
    const delay = Math.max((from - now) / 1000 + this.timings.etcd, Math.min(2, this.timings.etcd / 10))
    const gen = n.joinGen = (n.joinGen ?? 0) + 1
    n.after(delay / 2, () => {
      if (gen !== n.joinGen || !target.members.has(learner.id)) return
      this.startMember(n)
      n.etcdRunning = true
      n.startService('etcd', { healthy: false })
      n.changed()
    })
    n.after(delay, () => {
      if (gen !== n.joinGen || !target.members.has(learner.id)) return
      n.joining = false
      learner.isLearner = false // promoted once caught up
      n.etcdUp()
    })
  }
  etcdRestart(n) {
    n.after(this.timings.etcd, () => {
      if (this.etcdHasData(n)) { n.etcdRunning = true; n.startService('etcd', { healthy: false }); n.etcdUp() } else { n.etcdMember = null; this.maybeJoin(n) }
    })
  }
  /**
   * Why etcd refuses this node's leave (MemberRemove), or null: strict reconfiguration wants a
   * quorum of the remaining voters started (etcd server.go mayRemoveMember); learners do not vote.
   * Talos retries it, then aborts the reset (internal/pkg/etcd/etcd.go, v1alpha1_sequencer_tasks.go LeaveEtcd).
   */
  etcdLeaveRefusal(n) {
    if (this.faults.take(n.name, { kind: 'etcd-leave' })) return 'etcdserver: re-configuration failed due to not enough started members'
    const me = this.etcdMemberOf(n)
    if (!me || me.isLearner) return null
    const others = this.etcdMembers(n).filter((m) => !m.isLearner && m !== me)
    const running = others.filter((m) => this.nodes.some((x) => x.etcdMember === m.id && x.etcdRunning)).length
    if (others.length && running < Math.floor(others.length / 2) + 1) return 'etcdserver: re-configuration failed due to not enough started members'
    return null
  }
  etcdRemove(id) {
    for (const c of this.etcdClusters) c.members.delete(id)
    for (const n of this.nodes) if (n.etcdMember === id) { n.etcdMember = null; n.etcdHealthy = false; n.etcdRunning = false; n.apiServerUp = false; n.joining = false; n.changed() }
  }
  /**
   * etcd's client on this node waits for a connection to the local etcd (clientv3, no deadline from
   * talosctl): resolves once it runs, or rejects when the caller goes away.
   */
  etcdReachable(n, signal) {
    if (n.etcdRunning) return Promise.resolve()
    return new Promise((resolvePromise, reject) => {
      const check = () => { if (n.etcdRunning) { this.waiters.delete(check); resolvePromise() } }
      this.waiters.add(check)
      signal?.addEventListener('abort', () => { this.waiters.delete(check); reject(new Error('client went away')) }, { once: true })
    })
  }
  apiServerUp(n) {
    if (!this.kubeBootstrapped) { this.kubeBootstrapped = true; try { this.kube?.bootstrap?.() } catch (e) { this.log(`kube.bootstrap: ${e.message}`) } }
    for (const other of this.nodes) if (other !== n && other.role === 'controlplane') this.maybeJoin(other)
    for (const p of this.pendingKubelet) this.scheduleKubelet(p)
    this.pendingKubelet.clear()
  }
  nodeRunning(n) {
    if (n.kubeletFailed || n.registered) return
    if (this.etcdHealthyMembers().some((m) => m.apiServerUp)) this.scheduleKubelet(n)
    else this.pendingKubelet.add(n)
  }
  scheduleKubelet(n) {
    n.after(this.timings.kubelet, () => {
      if (n.kubeletFailed || n.registered) return
      n.registered = true
      try {
        // the same name as before a reset: the kubelet takes the existing Node over with this boot's ID
        this.kube?.registerNode?.({ name: n.name, ip: n.ip, role: n.role, kubeletVersion: this.scenario.cluster.kubernetesVersion, osImage: `Talos (${this.scenario.cluster.talosVersion})`, bootId: n.bootId })
        // booting/running: NodeCordonedSpecController drops the cordon, NodeApplyController uncordons a node it cordoned
        this.kube?.uncordon?.(n.name)
      } catch (e) { this.log(`kube.registerNode: ${e.message}`) }
      n.talosLog(`kubelet: node "${n.name}" registered`)
      n.changed()
    })
  }
  nodeReset(n, { graceful }) {
    // LeaveEtcd (v1alpha1_sequencer_tasks.go) leaves only while the etcd service runs: a stopped
    // etcd leaves its member behind, stale, until the rejoin removes it by name
    if (graceful && n.etcdMember && n.etcdRunning) for (const c of this.etcdClusters) c.members.delete(n.etcdMember)
    n.etcdMember = null; n.etcdHealthy = false; n.etcdRunning = false; n.apiServerUp = false; n.joining = false
    this.pendingKubelet.delete(n)
    // the Kubernetes Node stays (cordoned, going Unknown): its kubelet registers it again after the reset
    n.registered = false
    n.changed() // its API server is gone: close 6443 (and the VIP if it was the last)
  }
  /** stage resetting: NodeCordonedSpecController asks for the cordon, NodeApplyController applies it */
  kubeCordon(n) { if (n.registered) try { this.kube?.cordon?.(n.name) } catch (e) { this.log(`kube.cordon: ${e.message}`) } }
  /** Talos's drain of this node: { evicted, blocked } (nothing when the kubelet never registered) */
  kubeDrain(n, { blocked }) {
    if (!n.registered) return { evicted: 0, blocked: [] }
    try { return this.kube?.drain?.(n.name, { blocked }) ?? { evicted: 0, blocked: [] } } catch (e) { this.log(`kube.drain: ${e.message}`); return { evicted: 0, blocked: [] } }
  }
  /**
   * the reset's cleanup stopped the kubelet: a Node whose kubelet stopped posting keeps its last
   * status for kube-controller-manager's --node-monitor-grace-period (timings.nodeMonitorGrace,
   * default 50 s since Kubernetes v1.32), then reads Ready=Unknown
   */
  kubeletStopped(n) { if (n.registered) try { this.kube?.kubeletStopped?.(n.name, this.timings.nodeMonitorGrace) } catch (e) { this.log(`kube.kubeletStopped: ${e.message}`) } }

  // ---- Kubernetes listeners ----
  reconcileKube() {
    const want = new Set(this.nodes.filter((n) => n.apiServerUp && n.role === 'controlplane').map((n) => n.ip))
    const vip = this.scenario.cluster.vip
    if (vip && vip.up === 'after-bootstrap' && want.size) want.add(vip.address)
    for (const addr of want) if (!this.kubeListeners.has(addr)) this.openKube(addr)
    for (const [addr, srv] of this.kubeListeners) if (!want.has(addr)) { this.kubeListeners.delete(addr); closeServer(srv) }
  }
  openKube(addr) {
    const { pki } = this
    const srv = https.createServer({ cert: pki.kube.server.cert, key: pki.kube.server.key, ca: pki.kube.ca.cert,
      requestCert: true, rejectUnauthorized: false }, (req, res) => {
      if (!req.socket.authorized) {
        res.writeHead(401, { 'content-type': 'application/json' })
        return res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'Unauthorized', reason: 'Unauthorized', code: 401 }))
      }
      if (!this.kube) { res.writeHead(503, { 'content-type': 'text/plain' }); return res.end('the Kubernetes API is not simulated yet (sim/kube missing)\n') }
      this.kubeRequestFault(addr, req, res, () => this.kube.handle(req, res))
    })
    srv.sockets = new Set()
    srv.on('connection', (s) => {
      // on: kube, refused: the API server is restarting; the connection is reset before TLS
      if (this.faults.takeKube(this.kubeNodeAt(addr), ['refused'], null)) return s.resetAndDestroy()
      srv.sockets.add(s); s.on('close', () => srv.sockets.delete(s))
    })
    srv.on('error', (e) => this.log(`kube listener ${addr}: ${e.message}`))
    srv.on('tlsClientError', () => {})
    this.kubeListeners.set(addr, srv)
    srv.ready = new Promise((r) => { srv.once('listening', r); srv.once('error', r) })
    srv.listen(KUBE_PORT, addr)
  }

  /** the control plane a Kubernetes listener belongs to (null for the VIP: every node's kube faults) */
  kubeNodeAt(addr) { return this.nodes.find((n) => n.ip === addr)?.name ?? null }
  /**
   * on: kube faults acting on one request: unavailable answers 503 with the Status a kube-apiserver
   * gives while its storage is unavailable (reason and message as k8s.io/apimachinery
   * pkg/api/errors/errors.go names StatusServiceUnavailable); timeout never answers; latency delays the answer by ms.
   */
  kubeRequestFault(addr, req, res, handle) {
    const path = (req.url ?? '/').split('?')[0]
    const f = this.faults.takeKube(this.kubeNodeAt(addr), ['unavailable', 'timeout', 'latency'], path)
    if (!f) return handle()
    this.record({ time: this.clock.now().toISOString(), node: this.kubeNodeAt(addr), ip: addr, tool: 'kube', call: 'kube', command: `${req.method} ${path}`, args: [], outcome: `fault ${f.kind}` })
    if (f.kind === 'timeout') return
    if (f.kind === 'latency') return void setTimeout(handle, f.ms ?? 0)
    res.writeHead(503, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'the server is currently unable to handle the request', reason: 'ServiceUnavailable', details: { causes: [{ reason: 'UnexpectedServerResponse', message: 'etcdserver: leader changed' }] }, code: 503 }))
  }

  async stop() {
    if (this.stopped) return
    this.stopped = true
    this.clock?.stop()
    for (const n of this.nodes ?? []) n.newLifecycle()
    await Promise.all([...(this.servers?.values() ?? [])].map((s) => s.close()))
    await Promise.all([...this.kubeListeners.values()].map(closeServer))
    this.kubeListeners.clear()
    try { await this.kube?.stop?.() } catch { /* ignore */ }
    await this.chartRepo?.close()
  }
}

function closeServer(srv) {
  for (const s of srv.sockets ?? []) s.destroy()
  return new Promise((r) => srv.close(() => r()))
}

// The Simulator wires the parts: the nodes (sim/node.js), the real etcd members (sim/etcd.js), trustd
// (sim/trustd.js), the listeners (sim/listeners.js: each node's API, the Kubernetes API), faults,
// the calls log, and the Kubernetes side (sim/kube) as the nodes' kubelets and API servers reach it.
import { existsSync, appendFileSync, rmSync, writeFileSync } from 'node:fs'
import { join, resolve, dirname } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { createClock } from './clock.js'
import { createFaults } from './faults.js'
import { checkFault } from './scenario.js'
import { createHealthFaults, servingCsrName } from './health-faults.js'
import { generatePki } from './pki.js'
import { realTools, writeClusterDir } from './writer.js'
import { observe as observeEvents } from './talos/events.js'
import { startChartRepo } from './charts/repo.js'
import { Node } from './node.js'
import { criticalPathSeconds } from './critical-path.js'
import { Etcd } from './etcd.js'
import { RealKube } from './kube-real.js'
import { Trustd } from './trustd.js'
import { Listeners } from './listeners.js'
import { kubeconfigYaml } from './talos/methods.js'
import { networkOf } from './talos/network.js'

const here = dirname(fileURLToPath(import.meta.url))
const CALL_FAULTS = ['refused', 'unreachable', 'timeout', 'unavailable']

export class Simulator {
  constructor(scenario, { dir = '.sim', log, kube = process.env.SIM_KUBE ?? 'model', talosctl } = {}) {
    this.scenario = scenario
    this.talosctl = talosctl
    this.dir = resolve(dir)
    this.talosMinor = scenario.talosMinor
    this.timings = scenario.timings
    this.log =
      log ?? (process.env.SIM_DEBUG_LOG ? (m) => appendFileSync(process.env.SIM_DEBUG_LOG, `${new Date().toISOString()} ${m}\n`) : () => {})
    this.stopped = false
    this.callsLog = []
    this.nodes = []
    this.pendingKubelet = new Set()
    this.waiters = new Set() // checks run on every node change (waitFor, etcd's local client)
    // a real etcd member per control plane (sim/etcd.js)
    this.etcd = new Etcd(this)
    // SIM_KUBE=real (or kube: 'real'): the real kube-apiserver, controller-manager and scheduler
    // (sim/kube-real.js) and the simulator's kubelets (sim/kubelet.js) instead of sim/kube; not the
    // default while the suite on it needs twice the CPU of CI's 30 minutes (docs/real-control-plane.md)
    if (!['real', 'model'].includes(kube)) throw new Error(`SIM_KUBE must be real or model, got ${JSON.stringify(kube)}`)
    this.realKube = kube === 'real' ? new RealKube(this) : null
    this.trustd = new Trustd(this)
    this.listeners = new Listeners(this)
  }

  async start() {
    const s = this.scenario
    // a simulator before this one in the same directory that never stopped (a reboot, a kill -9) left
    // its etcd members' data and its control plane's files: they belong to a cluster whose PKI is gone,
    // and a member's data would make this cluster's fresh control planes look bootstrapped
    for (const left of ['etcd', 'kube']) rmSync(join(this.dir, left), { recursive: true, force: true })
    this.clock = createClock(s.speed)
    this.faults = createFaults(s.faults)
    // issue 30's faults (static pods, image pulls, CoreDNS, serving CSRs, node IPs): sim/health-faults.js
    this.health = createHealthFaults(
      this.faults,
      () => this.nodes.filter((n) => n.role === 'controlplane').map((n) => n.name),
      s.cluster.kubernetesVersion,
      // the image a control plane's static pod runs (its config's: sim/talos/k8s.js)
      (name, c) =>
        this.nodes
          .find((n) => n.name === name)
          ?.staticPods()
          .find((p) => p.id === c)?.image ?? `registry.k8s.io/${c}:${s.cluster.kubernetesVersion}`,
    )
    /** running nodes whose kubelet waits for its client certificate (no kube-controller-manager signs it) */
    this.csrWaiting = new Set()
    this.pki = await generatePki({ nodes: s.nodes, vip: s.cluster.vip?.address ?? null, role: s.cluster.talosconfigRole })
    // the chart repository real helm installs the CNI from (any free port on 127.0.0.1)
    // and its OCI registry of every simulated chart
    this.chartRepo = await startChartRepo({ cert: this.pki.charts.server.cert, key: this.pki.charts.server.key })
    const written = await writeClusterDir(this.dir, s, this.pki, {
      chartRepo: this.chartRepo.url,
      registry: this.chartRepo.registry,
      ...(this.talosctl ? { tools: { ...realTools(), talosctl: this.talosctl } } : {}),
    })
    this.clusterDir = written.clusterDir
    this.env = written.env
    this.binDir = written.binDir // <dir>/bin (sim/writer.js)
    this.callsFile = join(this.dir, 'calls.jsonl')
    writeFileSync(this.callsFile, '')
    this.kube = this.realKube ? null : await this.loadKube()
    this.nodes = s.nodes.map((spec) => new Node(spec, this))
    this.byName = new Map(this.nodes.map((n) => [n.name, n]))
    this.byIp = new Map(this.nodes.map((n) => [n.ip, n]))
    this.listeners.createNodeServers(this.nodes)
    for (const n of this.nodes) n.powerOn()
    await this.waitFor(() => this.nodes.every((n) => n.stage === 'maintenance' || n.configured))
    await this.settle()
    // a node whose address is taken (another simulator on this range?) must fail the start
    const failed = this.listeners.failed()
    if (failed) {
      const e = failed.lastError
      throw new Error(
        `cannot listen on ${failed.node.ip}:50000: ${e.code === 'EADDRINUSE' ? 'address already in use (another simulator on these addresses? stop it: node sim/cli.js down --dir <its dir>)' : e.message}`,
      )
    }
    return this
  }

  /** sim/kube is another engineer's module: until it exists (or if it fails to load) serve 503 */
  async loadKube() {
    const file = join(here, 'kube', 'index.js')
    if (!existsSync(file)) return null
    try {
      const mod = await import(pathToFileURL(file).href)
      const faults = {
        has: (node, kind) => this.faults.has(node, kind),
        message: (kind) => this.faults.message(kind),
        // a scenario `chart` fault: the crash message of that chart's pods while it lasts
        chartCrash: (chart) => {
          const f = this.faults.find(null, { kind: 'chart' }).find((x) => x.chart === chart)
          return f ? (f.message ?? `Error: ${chart} failed to start: the simulated chart fault`) : undefined
        },
        health: this.health,
      }
      return mod.createKube({
        clock: this.clock,
        kubernetesVersion: this.scenario.cluster.kubernetesVersion,
        timings: this.timings,
        faults,
        flux: this.scenario.flux,
        record: (r) => this.record(r),
        network: { of: (name) => networkOf(this.lookup(name)?.config) },
      })
    } catch (e) {
      this.log(`sim/kube failed to load, Kubernetes API answers 503: ${e.message}`)
      return null
    }
  }

  // ---- views ----
  allNodes() {
    return this.nodes
  }
  lookup(s) {
    return this.byIp.get(s) ?? this.byName.get(s) ?? null
  }
  node(name) {
    return this.lookup(name)?.view() ?? null
  }
  calls() {
    return this.callsLog.slice()
  }
  /** the critical path in real seconds, with what this run measured of the joins and the real API server's start */
  criticalPathSeconds() {
    const k = this.realKube
    const since = (at) => (k?.t0 && at ? (at - k.t0) / 1000 : 0)
    return criticalPathSeconds({ timings: this.timings, nodes: this.nodes }, this.scenario.speed, {
      joinsS: this.etcd.joinsSeconds(),
      apiAnsweringS: since(k?.answeringAt),
      apiReadyS: since(k?.readyAt),
    })
  }
  /** a simulated instant as clients should see it: wall-clock now minus its simulated age
   *  (so "5m ago" reads in simulated time, never in the future) */
  displayTime(t) {
    const sim = new Date(t).getTime()
    return new Date(Date.now() - Math.max(0, this.clock.now().getTime() - sim))
  }
  kubeconfigYaml() {
    return kubeconfigYaml(this.scenario, this.pki)
  }
  /** scenario cluster.configs: external: the cluster's PKI is taken from the applied configs, one at a time;
   *  resolves false for a config of another cluster */
  adoptConfig(cfg) {
    const next = (this.adoption ?? Promise.resolve()).then(() => this.pki.adopt(cfg))
    this.adoption = next.catch(() => false)
    return next
  }
  isClusterCA(b64) {
    if (!b64) return false
    return Buffer.from(String(b64), 'base64').toString().trim() === this.pki.talos.ca.cert.trim()
  }
  kubeNodeReady(name) {
    if (this.realKube) return this.realKube.nodeReady(name)
    try {
      return !!this.kube?.nodeReady?.(name)
    } catch {
      return false
    }
  }

  record(r) {
    this.callsLog.push(r)
    try {
      appendFileSync(this.callsFile, `${JSON.stringify(r)}\n`)
    } catch {
      /* dir removed under us */
    }
  }

  // ---- faults ----
  /** a call-scoped transport fault for this call (on: <kind>, or on: any with times), counted */
  takeCallFault(name, kind) {
    for (const k of CALL_FAULTS) {
      const f = this.faults.take(name, { on: kind, kind: k })
      if (f) return f
    }
    for (const k of CALL_FAULTS) {
      if (this.faults.find(name, { on: 'any', kind: k }).some((f) => f.times != null)) return this.faults.take(name, { on: 'any', kind: k })
    }
    return null
  }
  /** a fault that starts now (tests: a failure that begins mid-run); the same fields as `faults:` */
  addFault(fault) {
    // checked as a scenario's fault is: a kind's fields, its node, its trigger
    this.faults.add(checkFault(fault, this.nodes))
    for (const n of this.nodes) this.changed(n)
    this.healthFaultsChanged()
  }
  /** tests: what an upgrade to its schematic's installer does to a node: it runs these extensions */
  setExtensions(name, extensions) {
    const node = this.lookup(name)
    node.spec.extensions = [...extensions]
    this.changed(node)
  }

  /** tests: another etcd session holds Talos's upgrade mutex (an upgrade in flight elsewhere); resolves with its release */
  holdUpgradeMutex(name) {
    return this.etcd.tryLockUpgradeMutex(this.lookup(name))
  }
  /** tests: a learner added through `name`'s member that never starts (etcd lists it without a name); resolves with its hex ID */
  addUnstartedMember(name, peerUrl) {
    return this.etcd.addLearner(this.lookup(name), peerUrl)
  }

  /** tests: a VIP that never came up (`vip: {up: never}`) is fixed: it comes up once etcd and an API server run */
  fixVip() {
    if (this.scenario.cluster.vip) this.scenario.cluster.vip.up = 'after-bootstrap'
    for (const n of this.nodes) this.changed(n)
    for (const n of this.nodes) if (n.role === 'controlplane') this.etcd.maybeJoin(n)
  }

  /** tests: the VIP goes down (nobody answers at its address) while the control planes' own API servers run on */
  breakVip() {
    if (this.scenario.cluster.vip) this.scenario.cluster.vip.up = 'never'
    for (const n of this.nodes) this.changed(n)
  }

  clearFault(node, kind) {
    this.faults.clear(node, kind)
    for (const n of this.nodes) this.changed(n)
    this.healthFaultsChanged()
  }

  // ---- node hooks ----
  changed(n) {
    if (this.stopped) return
    if (n) observeEvents(n) // machined's event stream (sim/talos/events.js)
    this.etcd.sync(n)
    this.trustd.issue()
    this.listeners.sync(n)
    for (const w of this.waiters) w()
    for (const w of this.watchers ?? []) w(n)
  }
  /** call fn(nodeView) on every node change; returns an unsubscribe function */
  watch(fn) {
    const w = (n) => {
      if (n) fn(n.view())
    }
    this.watchers ??= new Set()
    this.watchers.add(w)
    return () => this.watchers.delete(w)
  }
  /** resolves once every listener switch asked for so far has happened */
  settle() {
    return this.listeners.settle()
  }
  /** resolves when pred() holds (checked on every node change), then lets listeners settle */
  async until(pred, timeoutMs = 30000) {
    let timer
    await Promise.race([
      this.waitFor(pred),
      new Promise((_, rej) => {
        timer = setTimeout(() => rej(new Error('timed out waiting for the simulator')), timeoutMs)
      }),
    ]).finally(() => clearTimeout(timer))
    await this.settle()
  }
  waitFor(pred) {
    return new Promise((resolvePromise) => {
      const check = () => {
        if (pred()) {
          this.waiters.delete(check)
          resolvePromise()
        }
      }
      this.waiters.add(check)
      check()
    })
  }

  // ---- the Kubernetes side: API servers, kubelets, the reset's cordon and drain ----
  apiServerUp(n) {
    if (this.realKube) {
      // the real control plane starts with the first healthy member; each control plane's Talos applies its manifests
      const k = this.realKube
      if (k.started) k.started.then(() => k.controlPlaneUp(n))
      else k.start(n)
    } else if (!this.kubeBootstrapped) {
      this.kubeBootstrapped = true
      try {
        // a config with cluster.coreDNS.disabled gets no CoreDNS from Talos (the operator's helmfile installs it)
        this.kube?.bootstrap?.({ coreDNS: n.config?.cluster?.coreDNS?.disabled !== true })
      } catch (e) {
        this.log(`kube.bootstrap: ${e.message}`)
      }
    }
    for (const other of this.nodes) if (other !== n && other.role === 'controlplane') this.etcd.maybeJoin(other)
    for (const p of this.pendingKubelet) this.scheduleKubelet(p)
    this.pendingKubelet.clear()
  }
  nodeRunning(n) {
    if (n.kubeletFailed || n.registered) return
    if (this.etcd.healthyMembers().some((m) => m.apiServerUp)) this.scheduleKubelet(n)
    else this.pendingKubelet.add(n)
  }
  /**
   * A fault of sim/health-faults.js started or cleared: kubelets waiting for a certificate try
   * again, Nodes take the address their kubelet now reports, the Kubernetes controllers look again.
   */
  /** Talos's kubelet-csr diagnostic holds: the node's serving CSR (fault kubelet-serving-csr) is not approved */
  kubeletCsrPending(n) {
    return this.pendingServingCsrs(n).length > 0
  }
  /**
   * the names of the node's serving CSRs nobody approved (fault kubelet-serving-csr), as Talos's
   * diagnostic lists them: from the store, or (the real API) as the node's kubelet last listed them
   */
  pendingServingCsrs(n) {
    if (!n.registered || !this.health.servingCsrPending(n.name)) return []
    if (this.realKube) return this.realKube.kubelets.pendingServingCsrs(n.name)
    try {
      return this.kube?.pendingServingCsrs?.(n.name) ?? []
    } catch {
      return []
    }
  }
  /** the kubelet of a registered node under kubelet-serving-csr asks for its serving certificate */
  requestServingCsr(n) {
    if (n.registered && this.health.servingCsrPending(n.name))
      try {
        this.kube?.servingCsr?.(n.name, servingCsrName(n.name))
      } catch (e) {
        this.log(`kube.servingCsr: ${e.message}`)
      }
  }
  kubeletCannotRegister() {
    const served = this.nodes.some((m) => m.role === 'controlplane' && m.apiServerUp && !this.health.apiServerDown(m.name))
    return !served || this.health.controllerManagerDown()
  }
  healthFaultsChanged() {
    if (!this.kubeletCannotRegister()) {
      const waiting = [...this.csrWaiting]
      this.csrWaiting.clear()
      for (const n of waiting) if (!n.registered && !n.kubeletFailed && n.stage === 'running') this.scheduleKubelet(n)
    }
    for (const n of this.nodes) this.requestServingCsr(n)
    for (const n of this.nodes)
      if (n.registered)
        try {
          this.kube?.setInternalIP?.(n.name, this.health.nodeIp(n.name) ?? n.ip)
        } catch (e) {
          this.log(`kube.setInternalIP: ${e.message}`)
        }
    this.kube?.reconcile?.()
  }
  scheduleKubelet(n) {
    n.after(this.timings.kubelet, () => {
      if (n.kubeletFailed || n.registered) return
      // the real API: the kubelet registers through its CSR and marks the node registered itself (sim/kubelet.js)
      if (this.realKube) return this.realKube.kubelets.run(n)
      // the kubelet's client certificate is a CSR kube-controller-manager approves and signs: without
      // one running (or without any kube-apiserver), the kubelet never gets a certificate and registers nothing
      if (this.kubeletCannotRegister()) {
        this.csrWaiting.add(n)
        return
      }
      n.registered = true
      try {
        // the same name as before a reset: the kubelet takes the existing Node over with this boot's ID
        this.kube?.registerNode?.({
          name: n.name,
          ip: this.health.nodeIp(n.name) ?? n.ip,
          role: n.role,
          kubeletVersion: n.kubeletVersion,
          staticPods: n.staticPods(),
          osImage: `Talos (${n.talosVersion})`,
          bootId: n.bootId,
        })
        // booting/running: NodeCordonedSpecController drops the cordon, NodeApplyController uncordons a node it cordoned
        this.kube?.uncordon?.(n.name)
      } catch (e) {
        this.log(`kube.registerNode: ${e.message}`)
      }
      this.requestServingCsr(n)
      n.talosLog(`kubelet: node "${n.name}" registered`)
      n.changed()
    })
  }
  /**
   * A control plane's static pods changed (sim/talos/k8s.js): its kubelet replaces their mirror pods
   * (sim/kube here; the real API's kubelet does it in its own loop, sim/kubelet.js mirrorPods)
   */
  staticPodsChanged(n, ids) {
    if (this.realKube) return
    try {
      for (const p of n.staticPods().filter((x) => ids.includes(x.id))) this.kube?.replaceMirrorPod?.(n.name, p)
    } catch (e) {
      this.log(`kube.replaceMirrorPod: ${e.message}`)
    }
  }
  /** the kubelet started again for a new KubeletSpec: it posts its Node with the new version (sim/kubelet.js does on the real API) */
  kubeletRestarted(n) {
    if (this.realKube || !n.registered) return
    try {
      this.kube?.setKubeletVersion?.(n.name, n.kubeletVersion)
    } catch (e) {
      this.log(`kube.setKubeletVersion: ${e.message}`)
    }
  }
  /**
   * a registered node's kubelet in a crash loop no longer posts its Node: Ready=Unknown once the
   * grace period has passed (sim/kube; on the real API sim/kubelet.js's kubelet stops posting itself)
   */
  kubeletCrashing(n) {
    if (!this.realKube) this.kubeletStopped(n)
  }
  /**
   * a registered node's kubelet runs again after a crash loop (sim/kube; sim/kubelet.js's kubelets
   * post again on their own on the real API): it posts the Node once more, at the version it runs now
   * (kubelet_node_status.go setNodeStatus), NotReady until its CNI pod has restarted
   */
  kubeletBack(n) {
    if (this.realKube || !n.registered) return
    n.registered = false
    this.scheduleKubelet(n)
  }
  nodeReset(n, { graceful }) {
    this.etcd.nodeReset(n, { graceful })
    this.pendingKubelet.delete(n)
    this.realKube?.kubelets.wiped(n)
    this.csrWaiting.delete(n)
    // the Kubernetes Node stays (cordoned, going Unknown): its kubelet registers it again after the reset
    n.registered = false
    n.changed() // its API server is gone: close 6443 (and the VIP if it was the last)
  }
  /** stage resetting: NodeCordonedSpecController asks for the cordon, NodeApplyController applies it */
  kubeCordon(n) {
    if (this.realKube) {
      if (n.registered) this.realKube.kubelets.cordon(n).catch((e) => this.log(`cordon: ${e.message}`))
      return
    }
    if (n.registered)
      try {
        this.kube?.cordon?.(n.name)
      } catch (e) {
        this.log(`kube.cordon: ${e.message}`)
      }
  }
  /** Talos's drain of this node: { evicted, blocked } (nothing when the kubelet never registered) */
  kubeDrain(n, { blocked }) {
    if (!n.registered) return { evicted: 0, blocked: [] }
    // through pods/eviction, retried until Talos's drain timeout (5 min)
    if (this.realKube) return this.realKube.kubelets.drain(n, { blocked, timeoutMs: Math.max(5000, this.clock.realMs(300)) })
    try {
      return this.kube?.drain?.(n.name, { blocked }) ?? { evicted: 0, blocked: [] }
    } catch (e) {
      this.log(`kube.drain: ${e.message}`)
      return { evicted: 0, blocked: [] }
    }
  }
  /**
   * the reset's cleanup stopped the kubelet: a Node whose kubelet stopped posting keeps its last
   * status for kube-controller-manager's --node-monitor-grace-period (timings.nodeMonitorGrace,
   * default 50 s since Kubernetes v1.32), then reads Ready=Unknown
   */
  kubeletStopped(n) {
    if (this.realKube) return this.realKube.kubelets.stopped(n)
    if (n.registered)
      try {
        this.kube?.kubeletStopped?.(n.name, this.timings.nodeMonitorGrace)
      } catch (e) {
        this.log(`kube.kubeletStopped: ${e.message}`)
      }
  }

  async stop() {
    if (this.stopped) return
    this.stopped = true
    this.clock?.stop()
    for (const n of this.nodes ?? []) n.newLifecycle()
    await this.listeners.close()
    await this.realKube?.stop()
    await this.etcd.stop()
    try {
      await this.kube?.stop?.()
    } catch {
      /* ignore */
    }
    await this.chartRepo?.close()
  }
}

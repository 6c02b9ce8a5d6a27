// The real Kubernetes control plane (SIM_KUBE=real): one kube-apiserver per
// simulated cluster on a loopback address of its own, against the cluster's real etcd members, with
// the real kube-controller-manager and kube-scheduler beside it (`task tools`: .tools/bin). Started at
// the cluster's bootstrap, once its first etcd member is healthy, as a real control plane starts.
// Flags and certificates follow Talos v1.12 (internal/app/machined/pkg/controllers/k8s/
// control_plane_static_pod.go, secrets/kubernetes.go); the bootstrap manifests follow
// controllers/k8s/manifest.go and internal/k8stemplates (sim/README.md "Real Kubernetes").
// Each control plane's :6443 and the VIP stay the simulator's (sim/listeners.js): they forward to
// this API server as an authenticating front proxy, so `on: kube` faults stay per control plane.
// The kubelets are the simulator's (sim/kubelet.js), and so are Flux's controllers (sim/flux-controller.js).
import { spawn } from 'node:child_process'
import { createPublicKey } from 'node:crypto'
import { appendFileSync, createWriteStream, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import https from 'node:https'
import { join } from 'node:path'
import { parseAllDocuments } from 'yaml'
import { KubeClient } from './lib-kubeclient.js'
import { REAL_BIN_DIR, isElf } from './writer.js'
import { networkOf } from './talos/network.js'
import { Kubelets } from './kubelet.js'
import { FluxControllers } from './flux-controller.js'
import { kubeWriteRecord } from './kube-rules.js'
import { nthIp, talosManifests } from './kube-manifests.js'

const COMPONENTS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']
// the real programs run in real time: the controller-manager's clocks are the scenario's scaled
// to its speed, never below these floors (a loaded 2-core machine must not flap Nodes)
const MIN_GRACE_S = 10 // --node-monitor-grace-period (Kubernetes' default 50 s since v1.32)
const READY_TIMEOUT_MS = 180_000
// the kubelet restarts a static pod's container that exited after its back-off: 10 s, doubled at each
// exit up to 5 min, back to 10 s once a run lasted 10 min (pkg/kubelet/kubelet.go backOffPeriod,
// MaxContainerBackOff; simulated seconds, as the kubelets' other clocks)
const RESTART_BACKOFF_S = 10
const MAX_BACKOFF_S = 300
// kube-controller-manager's controllers left out of Talos's `*,tokencleaner`: each watches (and resyncs)
// kinds of which the simulated cluster has no object (the product's workloads are Deployments,
// DaemonSets and StatefulSets, lib/phases/shared/releases.ts; Jobs stay for charts' hooks)
export const UNUSED_CONTROLLERS = [
  'resourcequota-controller',
  'horizontal-pod-autoscaler-controller',
  'cronjob-controller',
  'replicationcontroller-controller',
  'persistentvolume-binder-controller',
  'persistentvolume-attach-detach-controller',
  'persistentvolume-expander-controller',
  'persistentvolume-protection-controller',
  'persistentvolumeclaim-protection-controller',
  'ephemeral-volume-controller',
  'volumeattributesclass-protection-controller',
  'resourceclaim-controller',
  'device-taint-eviction-controller',
  'endpointslice-mirroring-controller',
  'validatingadmissionpolicy-status-controller',
]

export class KubeMissingError extends Error {
  constructor(name) {
    super(`${name} not found: the real control plane (SIM_KUBE=real) needs it (fix: run \`task tools\`, which builds it into .tools/bin)`)
    this.exitCode = 3
  }
}

const b64 = (s) => Buffer.from(s).toString('base64')

/** a kubeconfig with inline certificates for one client of the API server at `server` */
export function kubeconfigFor(server, ca, { cert, key, token }, name = 'sim') {
  const user = token ? { token } : { 'client-certificate-data': b64(cert), 'client-key-data': b64(key) }
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'certificate-authority-data': b64(ca) } }],
    users: [{ name, user }],
    contexts: [{ name, context: { cluster: name, user: name } }],
    'current-context': name,
  })
}

export class RealKube {
  /** ctx = the Simulator: scenario, nodes, pki, dir, clock, faults, log, record */
  constructor(ctx) {
    this.ctx = ctx
    for (const c of COMPONENTS) if (!isElf(join(REAL_BIN_DIR, c))) throw new KubeMissingError(c)
    this.procs = new Map() // component -> { child, exited }
    this.held = new Set() // components a test stopped (stopComponent)
    this.exitedAt = new Map() // component -> when its process last exited (simulated ms)
    this.backoffS = new Map() // component -> its back-off before the next start (simulated s)
    this.serving = false
    this.stopping = false
    this.started = null
    this.kubelets = new Kubelets(ctx, this)
    this.flux = new FluxControllers(ctx, this) // Flux's controllers' status writes (sim/flux-controller.js)
    this.cpu0 = process.cpuUsage() // the simulator's process (SIM_KUBE_CPU_LOG)
  }

  /** the API server's own loopback address: the first .254, .253 … of the first control plane's /24 that no node or VIP uses */
  get address() {
    if (this.addr) return this.addr
    const { nodes, scenario } = this.ctx
    const taken = new Set([...nodes.map((n) => n.ip), scenario.cluster.vip?.address].filter(Boolean))
    const base = nodes
      .find((n) => n.role === 'controlplane')
      .ip.split('.')
      .slice(0, 3)
      .join('.')
    for (let h = 254; h > 0; h--) if (!taken.has(`${base}.${h}`)) return (this.addr = `${base}.${h}`)
    throw new Error(`no free address for the API server in ${base}.0/24`)
  }
  /** the `kubernetes` Service's address (the first of the service range) */
  get serviceIp() {
    return this.net ? nthIp(this.net.serviceCIDRs[0]) : '127.96.0.1'
  }
  /** kube-controller-manager's --node-monitor-grace-period (s): the scenario's, scaled to its speed, with a floor */
  get graceS() {
    const { scenario, clock } = this.ctx
    return Math.max(MIN_GRACE_S, Math.round(scenario.timings.nodeMonitorGrace / clock.speed))
  }
  get url() {
    return `https://${this.address}:6443`
  }
  dirOf(...p) {
    return join(this.ctx.dir, 'kube', ...p)
  }

  /** the simulated cluster's network settings from the bootstrapping control plane's config */
  network(config) {
    const c = config?.cluster?.network ?? {}
    return {
      // a config without them (an operator's own) gets the simulator's loopback ranges (sim/writer.js),
      // not Talos's 10.244.0.0/16 and 10.96.0.0/12: nothing in the test bed may point outside 127/8
      podCIDRs: c.podSubnets ?? ['127.244.0.0/16'],
      serviceCIDRs: c.serviceSubnets ?? ['127.96.0.0/12'],
      dnsDomain: c.dnsDomain ?? 'cluster.local',
    }
  }

  // ---- start ----
  /** the bootstrap made the first etcd member healthy: the control plane starts (once) */
  start(n) {
    this.started ??= this.startAll(n).catch((e) => {
      this.ctx.log(`real control plane: ${e.message}`)
      this.error = e
    })
    return this.started
  }

  async writePki() {
    const { pki } = this.ctx
    const cps = this.ctx.nodes.filter((n) => n.role === 'controlplane')
    const vip = this.ctx.scenario.cluster.vip?.address
    const svcIp = nthIp(this.net.serviceCIDRs[0])
    const ip = (value) => ({ type: 'ip', value })
    const dns = (value) => ({ type: 'dns', value })
    const [apiserver, frontProxy, etcdClient, kubeletClient, cm, scheduler, admin] = await Promise.all([
      pki.leaf.kube({
        subject: 'CN=kube-apiserver',
        usages: ['server'],
        sans: [
          ...[
            'kubernetes',
            'kubernetes.default',
            'kubernetes.default.svc',
            `kubernetes.default.svc.${this.net.dnsDomain}`,
            'localhost',
          ].map(dns),
          ...[this.address, '127.0.0.1', svcIp, ...cps.map((n) => n.ip), ...(vip ? [vip] : [])].map(ip),
        ],
      }),
      pki.leaf.aggregator({ subject: 'CN=front-proxy-client', usages: ['client'] }),
      pki.leaf.etcd({ subject: 'CN=kube-apiserver', usages: ['client'] }),
      pki.leaf.kube({ subject: 'CN=apiserver-kubelet-client, O=system:masters', usages: ['client'] }),
      pki.leaf.kube({ subject: 'CN=system:kube-controller-manager', usages: ['client'] }),
      pki.leaf.kube({ subject: 'CN=system:kube-scheduler', usages: ['client'] }),
      pki.leaf.kube({ subject: 'CN=talos:sim, O=system:masters', usages: ['client'] }),
    ])
    const dir = this.dirOf('pki')
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const sa = pki.serviceAccount.key
    const files = {
      'ca.crt': pki.kube.ca.cert,
      'ca.key': pki.kube.ca.key,
      'apiserver.crt': apiserver.cert,
      'apiserver.key': apiserver.key,
      'aggregator-ca.crt': pki.aggregator.ca.cert,
      'front-proxy-client.crt': frontProxy.cert,
      'front-proxy-client.key': frontProxy.key,
      'etcd-ca.crt': pki.etcd.ca.cert,
      'etcd-client.crt': etcdClient.cert,
      'etcd-client.key': etcdClient.key,
      'apiserver-kubelet-client.crt': kubeletClient.cert,
      'apiserver-kubelet-client.key': kubeletClient.key,
      'service-account.key': sa,
      'service-account.pub': createPublicKey(sa).export({ type: 'spki', format: 'pem' }).toString(),
      'kube-controller-manager.kubeconfig': kubeconfigFor(this.url, pki.kube.ca.cert, cm),
      'kube-scheduler.kubeconfig': kubeconfigFor(this.url, pki.kube.ca.cert, scheduler),
    }
    for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text, { mode: 0o600 })
    this.frontProxy = frontProxy
    this.admin = new KubeClient({ server: this.url, ca: pki.kube.ca.cert, cert: admin.cert, key: admin.key }, { userAgent: 'talos' })
    return dir
  }

  /** the flags Talos v1.12 gives each component (control_plane_static_pod.go), on this address */
  args(pki, n) {
    const f = (x) => join(pki, x)
    const { scenario, nodes } = this.ctx
    const cps = nodes.filter((x) => x.role === 'controlplane')
    const grace = this.graceS
    const endpointHost = new URL(scenario.cluster.endpoint).hostname
    const common = ['--profiling=false', '--tls-min-version=VersionTLS13', `--bind-address=${this.address}`]
    return {
      'kube-apiserver': [
        ...common,
        `--advertise-address=${this.address}`,
        '--secure-port=6443',
        '--allow-privileged=true',
        '--anonymous-auth=false',
        '--authorization-mode=Node,RBAC',
        '--enable-admission-plugins=NodeRestriction',
        '--enable-bootstrap-token-auth=true',
        `--api-audiences=https://${endpointHost}:6443`,
        `--service-account-issuer=https://${endpointHost}:6443`,
        `--service-account-key-file=${f('service-account.pub')}`,
        `--service-account-signing-key-file=${f('service-account.key')}`,
        `--service-cluster-ip-range=${this.net.serviceCIDRs.join(',')}`,
        `--client-ca-file=${f('ca.crt')}`,
        `--tls-cert-file=${f('apiserver.crt')}`,
        `--tls-private-key-file=${f('apiserver.key')}`,
        `--requestheader-client-ca-file=${f('aggregator-ca.crt')}`,
        '--requestheader-allowed-names=front-proxy-client',
        '--requestheader-extra-headers-prefix=X-Remote-Extra-',
        '--requestheader-group-headers=X-Remote-Group',
        '--requestheader-username-headers=X-Remote-User',
        `--proxy-client-cert-file=${f('front-proxy-client.crt')}`,
        `--proxy-client-key-file=${f('front-proxy-client.key')}`,
        `--kubelet-client-certificate=${f('apiserver-kubelet-client.crt')}`,
        `--kubelet-client-key=${f('apiserver-kubelet-client.key')}`,
        '--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname',
        `--etcd-servers=${cps.map((x) => `https://${x.ip}:2379`).join(',')}`,
        `--etcd-cafile=${f('etcd-ca.crt')}`,
        `--etcd-certfile=${f('etcd-client.crt')}`,
        `--etcd-keyfile=${f('etcd-client.key')}`,
        // CPU (docs/real-control-plane.md "CPU"): no API Priority and Fairness (its config controller
        // writes and keeps the FlowSchemas and priority levels; nothing here reads them); the
        // max-in-flight limits guard the API server instead, as before APF
        '--enable-priority-and-fairness=false',
        // nothing here can reach a Service's loopback endpoints: the `kubernetes` Endpoints of a loopback address are invalid anyway
        '--endpoint-reconciler-type=none',
        `--cert-dir=${this.dirOf('run', 'apiserver')}`,
      ],
      'kube-controller-manager': [
        ...common,
        '--secure-port=10257',
        '--allocate-node-cidrs=true',
        `--cluster-cidr=${this.net.podCIDRs.join(',')}`,
        `--service-cluster-ip-range=${this.net.serviceCIDRs.join(',')}`,
        `--cluster-signing-cert-file=${f('ca.crt')}`,
        `--cluster-signing-key-file=${f('ca.key')}`,
        // Talos's `*,tokencleaner` less the controllers nothing in the simulation has objects for
        // (CPU: docs/real-control-plane.md "CPU"): no volumes, quotas, autoscalers, CronJobs,
        // ReplicationControllers, DRA claims or admission policies exist here
        `--controllers=${['*', 'tokencleaner', ...UNUSED_CONTROLLERS.map((c) => `-${c}`)].join(',')}`,
        '--configure-cloud-routes=false',
        `--kubeconfig=${f('kube-controller-manager.kubeconfig')}`,
        `--authentication-kubeconfig=${f('kube-controller-manager.kubeconfig')}`,
        `--authorization-kubeconfig=${f('kube-controller-manager.kubeconfig')}`,
        '--leader-elect=true',
        `--root-ca-file=${f('ca.crt')}`,
        `--service-account-private-key-file=${f('service-account.key')}`,
        '--terminated-pod-gc-threshold=100',
        '--use-service-account-credentials=true',
        // the node lifecycle's clocks at the scenario's speed (with a floor: real processes, real time)
        `--node-monitor-grace-period=${grace}s`,
        '--node-monitor-period=1s',
        `--cert-dir=${this.dirOf('run', 'controller-manager')}`,
      ],
      'kube-scheduler': [
        ...common,
        '--secure-port=10259',
        `--kubeconfig=${f('kube-scheduler.kubeconfig')}`,
        `--authentication-kubeconfig=${f('kube-scheduler.kubeconfig')}`,
        `--authorization-kubeconfig=${f('kube-scheduler.kubeconfig')}`,
        '--authentication-tolerate-lookup-failure=false',
        '--leader-elect=true',
        `--cert-dir=${this.dirOf('run', 'scheduler')}`,
      ],
    }[n]
  }

  spawnComponent(name, args) {
    const log = createWriteStream(this.dirOf(`${name}.log`), { flags: 'a' })
    // setpriv --pdeathsig: the process dies with the simulator's, even when that one is killed
    const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', join(REAL_BIN_DIR, name), ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout.pipe(log)
    child.stderr.pipe(log)
    const exited = new Promise((r) => child.once('exit', r))
    const proc = { child, exited, startedAt: Date.now(), startedSim: this.ctx.clock.now().getTime() }
    this.procs.set(name, proc)
    exited.then(() => {
      if (this.procs.get(name) === proc) this.procs.delete(name)
      const now = this.ctx.clock.now().getTime()
      const before = this.backoffS.get(name)
      const ranLong = now - proc.startedSim >= 2 * MAX_BACKOFF_S * 1000
      this.backoffS.set(name, before === undefined || ranLong ? RESTART_BACKOFF_S : Math.min(2 * before, MAX_BACKOFF_S))
      this.exitedAt.set(name, now)
      log.end()
    })
    return proc
  }

  async startAll(n) {
    this.t0 = Date.now()
    this.net = this.network(n.config)
    mkdirSync(this.dirOf('run'), { recursive: true })
    const pki = await this.writePki()
    if (this.stopping) return
    this.pkiDir = pki
    this.spawnComponent('kube-apiserver', this.args(pki, 'kube-apiserver'))
    this.spawnedAt = Date.now()
    // each control plane's :6443 answers once the API server listens, as a real one does: its
    // /readyz fails until it is ready (clients such as the product's endpoint check wait for that)
    await this.waitReady({ answering: true })
    if (this.stopping) return
    this.answeringAt = Date.now()
    this.serving = true
    for (const x of this.ctx.nodes) this.ctx.changed(x)
    // a joining control plane reads the etcd endpoints through it (sim/node.js etcdEndpointsKnown)
    for (const x of this.ctx.nodes) if (x.role === 'controlplane') this.ctx.etcd.maybeJoin(x)
    await this.waitReady()
    if (this.stopping) return
    this.readyAt = Date.now()
    this.cpuAtReady = this.cpu()
    this.ctx.log(`real kube-apiserver ready in ${this.readyAt - this.t0} ms`)
    for (const c of COMPONENTS.slice(1)) this.spawnComponent(c, this.args(pki, c))
    this.kubelets.start() // they retry until the manifests below let them register
    this.flux.start()
    await this.applyManifests(n)
    this.applied = true
  }

  /** the API server's verbose answer of /healthz, /livez or /readyz (`query`: the client's, e.g. its `exclude`), whatever its status */
  async healthText(kind, query = '') {
    const q = new URLSearchParams(query)
    q.set('verbose', '')
    return String((await this.admin.request('GET', `/${kind}`, undefined, { query: q, raw: true })).body ?? '')
  }

  /** GET /readyz until the API server answers 200 (its etcd reachable, its post-start hooks done), or any answer at all */
  async waitReady({ answering = false } = {}) {
    const deadline = Date.now() + READY_TIMEOUT_MS
    for (;;) {
      if (this.stopping) return
      if (!this.procs.has('kube-apiserver')) throw new Error(`kube-apiserver exited (its log: ${this.dirOf('kube-apiserver.log')})`)
      try {
        const r = await this.admin.request('GET', '/readyz')
        if (r.status === 200 || answering) return
      } catch {
        /* not listening yet */
      }
      if (Date.now() > deadline) throw new Error(`kube-apiserver not ready after ${READY_TIMEOUT_MS} ms`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }

  // ---- Talos's manifests ----
  /** what Talos applies through the API once it answers (controllers/k8s/manifest_apply.go): create what is missing */
  async applyManifests(n) {
    const objects = talosManifests({
      config: n.config,
      network: networkOf(n.config),
      net: this.net,
      kubernetesVersion: this.ctx.scenario.cluster.kubernetesVersion,
      bootstrapToken: n.config?.cluster?.token ?? this.ctx.pki.secrets.bootstrapToken,
    })
    for (const m of networkOf(n.config)?.inlineManifests ?? [])
      for (const doc of parseAllDocuments(m.contents)) {
        const o = doc.errors.length === 0 ? doc.toJS() : null
        if (o?.kind && o.metadata?.name) objects.push(o)
      }
    for (const o of objects) await this.createIfMissing(o)
  }
  /** another control plane's Talos applies its config's manifests too (the same objects: only what is missing) */
  controlPlaneUp(n) {
    if (this.applied && n.config) this.applyManifests(n).catch((e) => this.ctx.log(`manifests: ${e.message}`))
  }

  async resourceOf(apiVersion, kind) {
    this.discovery ??= new Map()
    const key = `${apiVersion}/${kind}`
    if (!this.discovery.has(key)) {
      const path = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`
      const list = await this.admin.call('GET', path).catch(() => ({ resources: [] }))
      for (const r of list.resources ?? [])
        if (!r.name.includes('/')) this.discovery.set(`${apiVersion}/${r.kind}`, { path, plural: r.name, namespaced: r.namespaced })
    }
    return this.discovery.get(key) ?? null
  }
  async createIfMissing(o) {
    const r = await this.resourceOf(o.apiVersion, o.kind)
    if (!r) return this.ctx.log(`manifests: ${o.apiVersion} ${o.kind} is not served, ${o.metadata.name} skipped`)
    const ns = r.namespaced ? (o.metadata.namespace ?? 'default') : null
    const base = `${r.path}${ns ? `/namespaces/${ns}` : ''}/${r.plural}`
    // what exists is left as it is (a Service's POST would name its clusterIP taken before its name)
    if ((await this.admin.request('GET', `${base}/${o.metadata.name}`)).status === 200) return
    const res = await this.admin.request('POST', base, { ...o, metadata: { ...o.metadata, ...(ns ? { namespace: ns } : {}) } })
    if (res.status >= 300 && res.status !== 409) this.ctx.log(`manifests: ${o.kind} ${o.metadata.name}: ${res.body?.message ?? res.status}`)
  }

  // ---- the front proxy (sim/listeners.js hands each :6443 request here) ----
  /**
   * Forward one request the listener authenticated: a client certificate becomes X-Remote-User (its
   * CN) and X-Remote-Group (its O), sent with the front proxy's certificate as the aggregator sends
   * them (--requestheader-*); a bearer token goes through for the API server to check.
   */
  proxy(req, res) {
    const headers = {}
    for (const [k, v] of Object.entries(req.headers)) if (!/^(x-remote-|connection$|keep-alive$|host$)/i.test(k)) headers[k] = v
    const peer = req.socket.authorized ? req.socket.getPeerCertificate() : null
    if (peer?.subject) {
      headers['X-Remote-User'] = peer.subject.CN ?? ''
      const o = peer.subject.O
      if (o) headers['X-Remote-Group'] = Array.isArray(o) ? o : [o]
    }
    const path = (req.url ?? '/').split('?')[0]
    const write = !['GET', 'HEAD', 'OPTIONS'].includes(req.method)
    this.agent ??= new https.Agent({ keepAlive: true, ca: this.ctx.pki.kube.ca.cert, cert: this.frontProxy.cert, key: this.frontProxy.key })
    const up = https.request(`${this.url}${req.url}`, { method: req.method, headers, agent: this.agent }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers)
      // at once, as the API server flushed them: a watch's headers come before its first event (Node
      // would hold them until the first body chunk, and a watch on an object that does not change
      // then answers only when the API server ends it)
      res.flushHeaders()
      ur.pipe(res)
      if (write) this.recordWrite(req, path, ur)
    })
    up.on('error', (e) => {
      if (!res.headersSent) {
        // the API server itself is not listening (stopped, restarting): the client sees its connection cut
        res.socket?.destroy()
      }
      this.ctx.log(`kube proxy ${req.method} ${path}: ${e.message}`)
    })
    req.on('aborted', () => up.destroy())
    req.pipe(up)
  }

  /** writes are recorded as the simulated API recorded them (tool from the User-Agent) */
  recordWrite(req, path, ur) {
    const done = (message) =>
      this.ctx.record(
        kubeWriteRecord(req, path, this.ctx.clock.now().toISOString(), ur.statusCode < 400 ? 'ok' : `error: ${message || ur.statusCode}`),
      )
    if (ur.statusCode < 400) return done()
    let text = ''
    ur.on('data', (c) => (text += c))
    ur.on('end', () => {
      let msg
      try {
        msg = JSON.parse(text).message
      } catch {
        msg = text.trim()
      }
      done(msg)
    })
  }

  // ---- the controller-manager and scheduler at run time ----
  /**
   * A leader-elected component runs while some control plane runs it: fault `static-pod` on every
   * control plane stops it (issue 30's rule), and so does stopComponent (tests); otherwise it runs,
   * started again when it exited, as the kubelet restarts a static pod. Called on every kubelet tick.
   */
  reconcileComponents(rules) {
    if (!this.serving || this.stopping) return
    const cps = this.ctx.nodes.filter((n) => n.role === 'controlplane' && n.configured).map((n) => n.name)
    for (const c of COMPONENTS.slice(1)) {
      const down = this.held.has(c) || (cps.length > 0 && cps.every((cp) => rules.staticPod(cp, c)))
      const proc = this.procs.get(c)
      if (down && proc && !proc.stopping) {
        proc.stopping = true
        proc.child.kill('SIGTERM')
      } else if (!down && !proc && this.backedOff(c)) this.spawnComponent(c, this.args(this.pkiDir, c))
    }
    // the API server that exited unasked (killed, crashed) comes back the same way: the kubelets
    // keep running while it is down, so their ticks still get here
    const api = COMPONENTS[0]
    if (!this.procs.has(api) && !this.held.has(api) && !this.apiStarting && this.backedOff(api)) {
      this.apiStarting = true
      this.spawnComponent(api, this.args(this.pkiDir, api))
      this.waitReady()
        .catch((e) => this.ctx.log(`kube-apiserver restarted, not ready: ${e.message}`))
        .finally(() => (this.apiStarting = false))
    }
  }
  /** the kubelet's back-off since the component last exited has passed */
  backedOff(name) {
    const at = this.exitedAt.get(name)
    return at === undefined || this.ctx.clock.now().getTime() - at >= (this.backoffS.get(name) ?? RESTART_BACKOFF_S) * 1000
  }
  /** tests: stop one of the real components (kube-apiserver, kube-controller-manager, kube-scheduler) until startComponent */
  async stopComponent(name) {
    if (!COMPONENTS.includes(name)) throw new Error(`stopComponent: ${name} is not one of ${COMPONENTS.join(', ')}`)
    this.held.add(name)
    const proc = this.procs.get(name)
    if (!proc) return
    proc.stopping = true
    proc.child.kill('SIGTERM')
    await proc.exited
  }
  /** tests: start it again (the API server: with the same flags, then ready) */
  async startComponent(name) {
    this.held.delete(name)
    if (this.procs.has(name) || !this.pkiDir) return
    this.spawnComponent(name, this.args(this.pkiDir, name))
    if (name === 'kube-apiserver') await this.waitReady()
  }

  // ---- what the node model asks (sim/cluster.js) ----
  nodeReady(name) {
    return this.kubelets.nodeReady(name)
  }

  /** every process's resident memory (kB from /proc), for the measurements: the control plane's and the etcd members' */
  rss() {
    const out = {}
    for (const [name, p] of this.procs) out[name] = rssKb(p.child.pid)
    // and the real etcd members beside it (sim/etcd.js)
    for (const [name, p] of this.ctx.etcd.procs ?? []) if (p.child.pid) out[`etcd-${name}`] = rssKb(p.child.pid)
    return out
  }
  pids() {
    return [...this.procs.values()].map((p) => p.child.pid)
  }
  /** every running process's CPU time so far (ms, user + system from /proc), the control plane's and the etcd members' */
  cpu() {
    const out = {}
    for (const [name, p] of this.procs) out[name] = cpuMs(p.child.pid)
    for (const [name, p] of this.ctx.etcd.procs ?? []) if (p.child.pid) out[`etcd-${name}`] = cpuMs(p.child.pid)
    return out
  }
  /** SIM_KUBE_CPU_LOG=<file>: one JSON line per cluster at its stop, what its processes cost (bench/kube-cpu.ts reads it) */
  logCpu() {
    const file = process.env.SIM_KUBE_CPU_LOG
    if (!file || !this.t0) return
    const line = {
      dir: this.ctx.dir,
      nodes: this.ctx.nodes.length,
      controlPlanes: this.ctx.nodes.filter((n) => n.role === 'controlplane').length,
      wallMs: Date.now() - this.t0,
      readyMs: this.readyAt ? this.readyAt - this.t0 : null,
      atReady: this.cpuAtReady ?? null,
      atStop: this.cpu(),
      // the whole process the simulator runs in (a test file's worker: other clusters of it too)
      process: Math.round(((u) => (u.user + u.system) / 1000)(process.cpuUsage(this.cpu0))),
    }
    appendFileSync(file, `${JSON.stringify(line)}\n`)
  }

  async stop() {
    this.logCpu()
    this.stopping = true
    this.kubelets.stop()
    this.flux.stop()
    this.agent?.destroy()
    this.admin?.close()
    await Promise.all(
      [...this.procs.values()].map(async (p) => {
        p.child.kill('SIGKILL')
        await p.exited
      }),
    )
  }
}

/** user + system CPU of a process (ms; /proc/<pid>/stat's utime and stime, in clock ticks of 10 ms) */
function cpuMs(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
    return (Number(f[11]) + Number(f[12])) * 10
  } catch {
    return 0
  }
}

function rssKb(pid) {
  try {
    // setpriv execs the program: the child's pid is the program's
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0)
  } catch {
    return 0
  }
}

// Real etcd: each control plane's etcd is the real etcd program (`task tools`: .tools/bin/etcd, the
// version Talos v1.12 runs), one process per member, its data under <sim dir>/etcd/<node>, its peer
// and client URLs on the node's own address, TLS from the cluster's etcd CA as Talos makes it.
// What Talos does around it follows internal/app/machined/pkg/system/services/etcd.go (the flags, the
// bootstrap, the join as a learner and its promotion, the health check) and internal/pkg/etcd
// (the member removal a reset's leave retries); what etcd answers (member lists, refusals, quorum
// loss) is etcd's own. The simulator talks to the members through etcd's JSON gateway on the client
// port (/v3/...: the same gRPC services talosctl's etcd calls reach through machined). The nodes keep
// their own side (etcdMember, etcdRunning, etcdHealthy, joining; sim/node.js).
import { spawn } from 'node:child_process'
import { Agent, request } from 'node:https'
import { createWriteStream, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { constants as osConstants } from 'node:os'
import { join } from 'node:path'
import { rpc } from './talos/errors.js'
import { REAL_BIN_DIR, isElf } from './writer.js'

const NOT_ENOUGH_STARTED = 'etcdserver: re-configuration failed due to not enough started members'
// services/etcd.go: buildInitialCluster retries every 3 s, promoteMember every 15 s; the health
// check (HealthSettings) waits 5 s, then checks a quorum read; LeaveCluster retries every 10 s (simulated seconds)
const JOIN_RETRY_S = 3
const PROMOTE_RETRY_S = 15
const HEALTH_DELAY_S = 5
const LEAVE_RETRY_S = 10
// the real processes run in real time: a retry is never sooner than this, whatever the scenario's speed
const MIN_RETRY_MS = 200
const CALL_TIMEOUT_MS = 5000
// the upgrade mutex's key and session TTL (pkg/machinery/constants EtcdTalosEtcdUpgradeMutex; v1alpha1_server.go MinimumEtcdUpgradeLeaseLockSeconds)
const UPGRADE_MUTEX = 'talos:v1:etcdUpgradeMutex'
const UPGRADE_MUTEX_TTL_S = 60
// internal/pkg/etcd QuorumCheckTimeout
const QUORUM_CHECK_TIMEOUT_S = 15
const ETCD_HEALTH_INTERVAL_MS = 5000
// services/etcd.go HealthSettings: the health check runs every 20 s once it passed (simulated seconds,
// never more often than once a real second: each check is a quorum read on the real member)
const HEALTH_INTERVAL_S = 20
const HEALTH_MIN_INTERVAL_MS = 1000
// services/etcd.go runs etcd under restart.Forever: a member process that exits unasked is started
// again RestartInterval later (runner/restart/restart.go, 5 s)
const RESTART_INTERVAL_S = 5
// fault etcd-crash without a message: what the member's last log line says
const CRASH_LOG = 'failed to open backend: open /var/lib/etcd/member/snap/db: input/output error'

export const hexId = (decimal) => BigInt(decimal).toString(16).padStart(16, '0')
const decimalId = (hex) => BigInt(`0x${hex}`).toString(10)

/** etcd's error in a gateway answer: {error: text} or a stream's {error: {message}} */
const etcdError = (doc) =>
  Object.assign(new Error(typeof doc.error === 'string' ? doc.error : (doc.error?.message ?? doc.message ?? 'etcd error')), { etcd: true })

export class EtcdMissingError extends Error {
  constructor() {
    super('etcd not found: the simulator runs the real etcd program (fix: run `task tools`, which builds it into .tools/bin)')
    this.exitCode = 3
  }
}

export class Etcd {
  /** ctx = the Simulator: clock, faults, nodes, pki, dir, waiters */
  constructor(ctx) {
    this.ctx = ctx
    this.binary = join(REAL_BIN_DIR, 'etcd')
    if (!isElf(this.binary)) throw new EtcdMissingError()
    this.procs = new Map() // node name -> { child, exited: Promise }
    this.healthWatch = new Map() // node name -> the token of its current health check
    this.apiChecks = new Map() // node name -> { at, ok }: its kube-apiserver's last etcd check
    this.bootstrapping = new Map() // node name -> the boot (gen) whose accepted bootstrap has not started etcd yet
    this.cut = new Set() // nodes whose member was stopped by a network cut (fault unreachable)
    this.stopping = false
    // the control planes' joins in real time, as Talos and etcd take them (the critical path's share
    // no orchestrator shortens): the first join's first attempt, the last promotion
    this.joins = { firstAttemptAt: null, lastPromotedAt: null, promoted: new Set() }
  }

  /**
   * Seconds from the first join's first attempt to the last promotion, once every control plane
   * but one has joined (Talos adds one learner at a time; etcd adds none until its members have been
   * connected its HealthInterval): null before that, or with one control plane
   */
  joinsSeconds() {
    const cps = this.ctx.nodes.filter((n) => n.role === 'controlplane')
    const { firstAttemptAt, lastPromotedAt, promoted } = this.joins
    if (cps.length < 2 || firstAttemptAt === null || lastPromotedAt === null || promoted.size < cps.length - 1) return null
    return (lastPromotedAt - firstAttemptAt) / 1000
  }

  dataDir(n) {
    return join(this.ctx.dir, 'etcd', n.name, 'data')
  }
  clientUrl(n) {
    return `https://${n.ip}:2379`
  }
  peerUrl(n) {
    return `https://${n.ip}:2380`
  }

  /** the data directory holds a member (services/etcd.go IsDirEmpty), or one is starting on it */
  hasData(n) {
    if (this.procs.get(n.name)?.wiping) return false
    return this.bootstrapping.get(n.name) === n.gen || this.procs.has(n.name) || existsSync(join(this.dataDir(n), 'member'))
  }
  healthyMembers() {
    return this.ctx.nodes.filter((n) => n.etcdHealthy)
  }

  // ---- the gateway client (machined's etcd client) ----
  async tls() {
    this.clientCert ??= await this.ctx.pki.etcd.client()
    // one kept-alive connection per member, as machined's etcd client keeps its gRPC connection
    this.agent ??= new Agent({ keepAlive: true, maxSockets: 4 })
    return { ca: this.ctx.pki.etcd.ca.cert, cert: this.clientCert.cert, key: this.clientCert.key, agent: this.agent }
  }
  /** POST one gateway call to a member: its body as text, or a rejection with etcd's own error text */
  async post(n, path, body = {}, timeout = CALL_TIMEOUT_MS) {
    const tls = await this.tls()
    return new Promise((resolvePromise, reject) => {
      const req = request(
        `${this.clientUrl(n)}${path}`,
        { method: 'POST', ...tls, headers: { 'content-type': 'application/json' }, timeout },
        (res) => {
          let text = ''
          res.setEncoding('utf8')
          res.on('data', (c) => (text += c))
          res.on('end', () => {
            if (res.statusCode === 200) return resolvePromise(text)
            let doc = {}
            try {
              doc = JSON.parse(text)
            } catch {
              /* an empty or non-JSON answer */
            }
            reject(
              doc.error || doc.message ? etcdError({ error: doc.message ?? doc.error }) : etcdError({ error: `HTTP ${res.statusCode}` }),
            )
          })
          res.on('error', reject)
        },
      )
      req.on('timeout', () => req.destroy(new Error('context deadline exceeded')))
      req.on('error', reject)
      req.end(JSON.stringify(body))
    })
  }
  /** one unary gateway call: the answer as JSON; an error in a 200 answer rejects as etcd's */
  async call(n, path, body = {}) {
    const text = await this.post(n, path, body)
    let doc = {}
    try {
      doc = JSON.parse(text)
    } catch {
      /* an empty answer */
    }
    if (doc.error) throw etcdError(doc)
    return doc
  }
  /**
   * a call on the node's local member (machined's NewLocalClient): while it does not run the client
   * keeps dialing (talosctl sets no deadline) until the caller goes away; etcd's own refusal is the answer
   */
  async local(n, signal, fn, { retryRefusals = false } = {}) {
    for (;;) {
      if (signal?.aborted) throw new Error('client went away')
      if (this.procs.has(n.name)) {
        try {
          return await fn()
        } catch (e) {
          if (e.etcd && !retryRefusals) throw e
          /* starting: machined's client keeps dialing */
        }
      }
      await new Promise((r) => setTimeout(r, MIN_RETRY_MS))
    }
  }
  /**
   * the first member (other than `except`) that answers, among the control planes whose API server
   * is up: machined's client finds the other members' etcd through the control plane endpoints,
   * which it reads from the Kubernetes API (internal/pkg/etcd: NewClientFromControlPlaneIPs)
   */
  async anyMember(path, body, except = null) {
    let last = new Error('no etcd member reachable')
    for (const m of this.ctx.nodes) {
      if (m === except || !m.apiServerUp || !this.procs.has(m.name)) continue
      try {
        return await this.call(m, path, body)
      } catch (e) {
        last = e
      }
    }
    throw last
  }
  /**
   * The cluster's alarms, read from the real etcd through the node's member (EtcdAlarmList: clientv3
   * AlarmList). Fault `etcd-nospace` stands for a backend over its quota: etcd's quota check would
   * raise NOSPACE on that member, here raised with the Alarm API's ACTIVATE while the fault lasts.
   */
  async alarms(n, signal) {
    try {
      return await this.local(n, signal, () => this.readAlarms(n))
    } catch (e) {
      throw e.etcd ? rpc('Unknown', `failed to list etcd alarms: ${e.message}`) : e
    }
  }
  async readAlarms(n) {
    for (const x of this.ctx.nodes) {
      if (!x.etcdMember || !this.procs.has(x.name) || this.ctx.faults.find(x.name, { kind: 'etcd-nospace' }).length === 0) continue
      await this.call(n, '/v3/maintenance/alarm', { action: 'ACTIVATE', memberID: decimalId(x.etcdMember), alarm: 'NOSPACE' })
    }
    const doc = await this.call(n, '/v3/maintenance/alarm', { action: 'GET' })
    return (doc.alarms ?? []).map((a) => ({ memberId: hexId(a.memberID ?? 0), alarm: a.alarm ?? 'NONE' }))
  }
  /** EtcdAlarmDisarm: every alarm deactivated, the ones disarmed answered (a lasting fault raises it again on the next read) */
  async disarmAlarms(n, signal) {
    try {
      return await this.local(n, signal, async () => {
        const alarms = await this.readAlarms(n)
        for (const a of alarms)
          await this.call(n, '/v3/maintenance/alarm', { action: 'DEACTIVATE', memberID: decimalId(a.memberId), alarm: a.alarm })
        return alarms
      })
    } catch (e) {
      throw e.etcd ? rpc('Unknown', `failed to disarm etcd alarm: ${e.message}`) : e
    }
  }
  async listMembers(via) {
    const doc = via ? await this.call(via, '/v3/cluster/member/list') : await this.anyMember('/v3/cluster/member/list')
    return (doc.members ?? []).map((m) => ({
      id: hexId(m.ID),
      name: m.name ?? '',
      peerUrls: m.peerURLs ?? [],
      clientUrls: m.clientURLs ?? [],
      isLearner: !!m.isLearner,
    }))
  }

  // ---- processes ----
  async writePki(n) {
    const dir = join(this.ctx.dir, 'etcd', n.name, 'pki')
    const { server, peer } = await this.ctx.pki.etcd.etcdFor(n)
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const files = {
      'ca.crt': this.ctx.pki.etcd.ca.cert,
      'server.crt': server.cert,
      'server.key': server.key,
      'peer.crt': peer.cert,
      'peer.key': peer.key,
    }
    for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text, { mode: 0o600 })
    return dir
  }

  /** start this node's member: Talos's flags (services/etcd.go argsForControlPlane); initial only on an empty data dir */
  async startProcess(n, initial = null) {
    const gen = n.gen
    await this.stopProcess(n)
    const pki = await this.writePki(n)
    // the node rebooted or was reset meanwhile (or the simulator stops): nothing starts
    if (this.stopping || gen !== n.gen) return false
    // cut off the network: it starts once the fault clears (sync)
    if (this.cutOff(n)) {
      this.cut.add(n.name)
      return false
    }
    mkdirSync(this.dataDir(n), { recursive: true, mode: 0o700 })
    const args = [
      `--name=${n.name}`,
      `--data-dir=${this.dataDir(n)}`,
      '--auto-tls=false',
      '--peer-auto-tls=false',
      `--listen-peer-urls=${this.peerUrl(n)}`,
      `--listen-client-urls=${this.clientUrl(n)}`,
      `--advertise-client-urls=${this.clientUrl(n)}`,
      `--initial-advertise-peer-urls=${this.peerUrl(n)}`,
      '--client-cert-auth=true',
      `--cert-file=${join(pki, 'server.crt')}`,
      `--key-file=${join(pki, 'server.key')}`,
      `--trusted-ca-file=${join(pki, 'ca.crt')}`,
      '--peer-client-cert-auth=true',
      `--peer-cert-file=${join(pki, 'peer.crt')}`,
      `--peer-key-file=${join(pki, 'peer.key')}`,
      `--peer-trusted-ca-file=${join(pki, 'ca.crt')}`,
      '--experimental-initial-corrupt-check=true',
      '--experimental-watch-progress-notify-interval=5s',
      '--experimental-compact-hash-check-enabled=true',
      ...(initial ? [`--initial-cluster=${initial.cluster}`, `--initial-cluster-state=${initial.state}`] : []),
    ]
    const log = createWriteStream(join(this.ctx.dir, 'etcd', `${n.name}.log`), { flags: 'a' })
    // setpriv --pdeathsig: the member dies with the simulator's process, even when that one is killed
    const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', this.binary, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout.pipe(log)
    child.stderr.pipe(log)
    const exited = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })))
    // asked: stopped by the node (a stop, a reboot, a cut); otherwise its exit is a crash, reported
    // with its last log line as containerd's runner keeps it
    const proc = { child, exited, asked: false, lastLog: '' }
    const keep = (chunk) => {
      const line = chunk.toString().trimEnd().split('\n').pop()
      if (line) proc.lastLog = line
    }
    child.stdout.on('data', keep)
    child.stderr.on('data', keep)
    this.procs.set(n.name, proc)
    exited.then(({ code, signal }) => {
      if (this.procs.get(n.name) === proc) this.procs.delete(n.name)
      log.end()
      if (proc.asked || this.stopping || gen !== n.gen || !n.etcdRunning) return
      // containerd's exit code of a task killed by a signal is 128 + the signal's number
      const exitCode = code ?? 128 + (osConstants.signals[signal] ?? 0)
      this.crashed(n, gen, exitCode, proc.lastLog)
    })
    n.etcdRunning = true
    return true
  }
  /** SIGTERM as containerd stops a task (etcd then leaves gracefully), SIGKILL when the simulator itself stops */
  async stopProcess(n, signal = 'SIGTERM') {
    const proc = this.procs.get(n.name)
    if (!proc) return
    proc.asked = true
    proc.child.kill(signal)
    const killer = setTimeout(() => proc.child.kill('SIGKILL'), 3000)
    await proc.exited
    clearTimeout(killer)
  }

  /** a retry in simulated seconds, never sooner than MIN_RETRY_MS of real time; dropped when the node's lifecycle moves on */
  later(n, simSeconds, fn) {
    n.after(Math.max(simSeconds, (MIN_RETRY_MS / 1000) * this.ctx.clock.speed), fn)
  }

  /**
   * services/etcd.go HealthFunc: a quorum read on the local member (ValidateQuorum), every so often
   * until it passes; the first check waits `delayS` (at least HealthSettings' 5 s): the scenario's
   * etcd time stays a lower bound of a member's way to healthy, as in the model
   */
  watchHealth(n, gen, delayS) {
    // one health check per node: a restarted service's check replaces the one before
    const token = {}
    this.healthWatch.set(n.name, token)
    const current = () => gen === n.gen && n.etcdRunning && this.healthWatch.get(n.name) === token && !this.stopping
    const check = async () => {
      if (!current()) return
      let why = null
      try {
        if (!this.procs.has(n.name)) throw new Error(`dial tcp ${n.ip}:2379: connect: connection refused`)
        await this.call(n, '/v3/kv/range', { key: Buffer.from('health').toString('base64') })
        if (!n.etcdMember) n.etcdMember = (await this.listMembers(n)).find((m) => m.name === n.name)?.id ?? null
      } catch (e) {
        why = e.message
      }
      if (!current()) return
      if (why === null) {
        n.joining = false
        if (!n.etcdHealthy) n.etcdUp()
      } else if (n.etcdHealthy) {
        // the member lost its quorum, or its process is gone: the service stays Running, unhealthy
        n.etcdHealthy = false
        n.svc('etcd', 'Running', `Health check failed: ${why}`, false)
        n.talosLog(`service[etcd](Running): Health check failed: ${why}`)
        n.changed()
      }
      // until it first passes it is checked every second, then every 20 s (HealthSettings)
      const everyS = n.etcdHealthy || why === null ? HEALTH_INTERVAL_S : 1
      this.later(n, Math.max(everyS, (HEALTH_MIN_INTERVAL_MS / 1000) * this.ctx.clock.speed), check)
    }
    this.later(n, Math.max(HEALTH_DELAY_S, delayS), check)
  }

  /** `Get "health"` on the node's member: linearizable, so it answers only with a quorum (the health checks' read) */
  getHealth(n, timeout = CALL_TIMEOUT_MS) {
    return this.post(n, '/v3/kv/range', { key: Buffer.from('health').toString('base64') }, timeout)
  }

  /**
   * the etcd check of the node's own kube-apiserver (Talos points it at this member alone): a
   * linearizable read with its 2 s timeout, at most once a second (k8s.io/apiserver
   * pkg/storage/storagebackend/factory/etcd3.go; --etcd-healthcheck-timeout): true while it answers
   */
  async apiServerCheck(n) {
    const last = this.apiChecks.get(n.name)
    if (last && Date.now() - last.at < 1000) return last.ok
    const ok =
      this.procs.has(n.name) &&
      (await this.getHealth(n, 2000).then(
        () => true,
        () => false,
      ))
    this.apiChecks.set(n.name, { at: Date.now(), ok })
    return ok
  }

  /**
   * the node is cut off the network (fault `unreachable` on any, until cleared): its peers and
   * clients lose it as they would a powered-off machine; its member is stopped (quorum loss is real)
   * and started again from its data once the fault clears, the service Running throughout
   */
  cutOff(n) {
    return this.ctx.faults.find(n.name, { on: 'any', kind: 'unreachable' }).some((f) => f.times == null)
  }

  // ---- what the node model asks ----

  /** the Bootstrap RPC: this node's etcd starts a new cluster of one (services/etcd.go BootstrapEtcd) */
  bootstrap(n) {
    n.joining = false
    n.joinGen = (n.joinGen ?? 0) + 1
    // BootstrapEtcd stops the waiting service and starts it again: `Finished` "Bootstrap requested",
    // then `Preparing` (pre state, runner) from 10 % of the scenario's `etcd` time, the container at
    // 40 % (`Running`), healthy once the quorum read answers (at the earliest after the whole `etcd`
    // time): for seconds after an accepted bootstrap the service reads neither Waiting nor Running
    n.svc('etcd', 'Finished', 'Bootstrap requested')
    n.talosLog('bootstrap request received')
    const gen = n.gen
    const { etcd } = this.ctx.timings
    // from the request on the data directory is taken: another bootstrap on this boot is refused
    this.bootstrapping.set(n.name, gen)
    n.after(etcd * 0.1, () => {
      n.svc('etcd', 'Preparing', 'Running pre state')
      n.svc('etcd', 'Preparing', 'Creating service runner')
      n.changed()
    })
    n.after(etcd * 0.4, () =>
      this.startProcess(n, { cluster: `${n.name}=${this.peerUrl(n)}`, state: 'new' }).then((started) => {
        if (this.bootstrapping.get(n.name) === gen) this.bootstrapping.delete(n.name)
        if (!started || gen !== n.gen) return
        n.taskStarted('etcd', { pid: this.procs.get(n.name)?.child.pid, healthy: null })
        n.changed()
        this.watchHealth(n, gen, etcd * 0.6)
      }),
    )
    n.changed()
  }

  /**
   * a control plane whose CRI is up and whose data directory is empty joins: services/etcd.go
   * buildInitialCluster (a stale member of its name removed, then MemberAddAsLearner, retried every
   * 3 s: etcd admits one learner at a time), the member started with the returned cluster, then
   * promoteMember every 15 s until the learner has caught up
   */
  maybeJoin(n) {
    if (!n.criUp || this.hasData(n) || n.joining) return
    // no control plane endpoint known yet: asked again when an API server comes up (sim/cluster.js apiServerUp)
    if (!this.ctx.nodes.some((m) => m !== n && m.apiServerUp && this.procs.has(m.name))) return
    // the peers are learnt through the endpoint or discovery (node.js etcdEndpointsKnown), as in the model
    if (!n.etcdEndpointsKnown()) return n.talosLog('retrying error: no controlplane endpoints discovered yet')
    n.joining = true
    const gen = n.gen
    const joinGen = (n.joinGen = (n.joinGen ?? 0) + 1)
    const current = () => gen === n.gen && joinGen === n.joinGen && !this.stopping
    if (this.ctx.faults.has(n.name, 'etcd-join')) {
      n.svc('etcd', 'Preparing', 'Running pre state')
      n.talosLog(`etcd: failed to join the cluster: ${NOT_ENOUGH_STARTED}`)
      return
    }
    const attempt = async () => {
      if (!current()) return
      this.joins.firstAttemptAt ??= Date.now()
      let learnerId
      let members
      try {
        for (const m of await this.listMembers(null)) {
          if (m.name === n.name) await this.anyMember('/v3/cluster/member/remove', { ID: decimalId(m.id) }, n)
        }
        const added = await this.anyMember('/v3/cluster/member/add', { peerURLs: [this.peerUrl(n)], isLearner: true }, n)
        learnerId = hexId(added.member.ID)
        members = (added.members ?? []).map((m) => ({ id: hexId(m.ID), name: m.name, peerUrls: m.peerURLs ?? [] }))
      } catch (e) {
        if (!current()) return
        // no member to ask yet (nothing bootstrapped), or etcd refused the add: retried as Talos does
        if (e.etcd) n.talosLog(`retrying error: error adding member: ${e.message}`)
        this.later(n, JOIN_RETRY_S, attempt)
        return
      }
      if (!current()) return
      const cluster = members.flatMap((m) => m.peerUrls.map((u) => `${m.id === learnerId ? n.name : m.name}=${u}`)).join(',')
      n.etcdMember = learnerId
      n.changed()
      // the service's runner then starts the container: until it has, the data directory is still
      // empty (half the scenario's etcd time, as the model has it), so a bootstrap there is accepted
      await new Promise((r) => this.later(n, this.ctx.timings.etcd / 2, r))
      if (!current() || !(await this.startProcess(n, { cluster, state: 'existing' })) || !current()) return
      n.startService('etcd', { healthy: false })
      n.changed()
      this.promote(n, learnerId, current)
      this.watchHealth(n, gen, this.ctx.timings.etcd / 2)
    }
    attempt()
  }

  promote(n, learnerId, current) {
    const attempt = async () => {
      if (!current()) return
      try {
        await this.anyMember('/v3/cluster/member/promote', { ID: decimalId(learnerId) }, n)
        n.talosLog('successfully promoted etcd member')
        this.joins.lastPromotedAt = Date.now()
        this.joins.promoted.add(n.name)
        // the next control plane waiting may add itself now
        for (const other of this.ctx.nodes) if (other !== n && other.role === 'controlplane') this.maybeJoin(other)
      } catch (e) {
        if (!current()) return
        if (/not found/.test(e.message)) return // removed meanwhile
        this.later(n, PROMOTE_RETRY_S, attempt)
      }
    }
    attempt()
  }

  /** fault etcd-crash on this control plane: its member's process exits as soon as it runs */
  crashFault(n) {
    return this.ctx.faults.find(n.name, { kind: 'etcd-crash' })[0] ?? null
  }

  /**
   * The member's process exited unasked (killed, or fault etcd-crash): the service goes Waiting with
   * the restart runner's message and the task's exit (runner/restart/restart.go, runner/containerd),
   * unhealthy, and starts again RestartInterval later; while the fault holds, each start exits at once.
   */
  crashed(n, gen, exitCode, lastLog) {
    n.etcdHealthy = false
    const why = `Error running Containerd(etcd), going to restart forever: task "etcd" failed: exit code ${exitCode} (last log ${JSON.stringify(lastLog)})`
    n.svc('etcd', 'Waiting', why)
    // its health check, next time it runs, finds nothing listening
    Object.assign(n.service('etcd'), { healthy: false, lastMessage: `dial tcp ${n.ip}:2379: connect: connection refused` })
    n.talosLog(`service[etcd](Waiting): ${why}`)
    n.changed()
    this.later(n, RESTART_INTERVAL_S, () => {
      if (gen !== n.gen || !n.etcdRunning || this.stopping || this.procs.has(n.name)) return
      const fault = this.crashFault(n)
      if (!fault) return this.restart(n)
      n.taskStarted('etcd', { healthy: null })
      this.crashed(n, gen, 1, etcdFatalLine(fault.message, this.ctx.displayTime(this.ctx.clock.now())))
    })
  }

  /** etcd starts again (a boot, or its restart runner after a crash): from its data, or it joins anew */
  restart(n) {
    if (!existsSync(join(this.dataDir(n), 'member'))) {
      n.etcdMember = null
      // a join whose member never wrote its data starts over (its stale member is removed first)
      n.joining = false
      this.maybeJoin(n)
      return
    }
    const gen = n.gen
    this.startProcess(n).then((started) => {
      // a node cut off the network runs its service; its member starts once the cut is over
      if (gen !== n.gen || (!started && !this.cut.has(n.name))) return
      n.startService('etcd', { healthy: false })
      n.changed()
      this.watchHealth(n, gen, this.ctx.timings.etcd)
    })
  }

  /**
   * every node change: a member whose node no longer runs etcd (down, rebooting, reset, its etcd left
   * the cluster) or is cut off the network stops; a member cut off starts again once it is back
   */
  sync(n) {
    if (!n) return
    const cut = this.cutOff(n)
    // fault etcd-crash: a member that runs exits, once its WAL is written (a learner's first start is
    // left to write it: its restart then runs from it). Not at its `member/` directory: etcd makes that
    // first and the WAL only after reading the cluster from its peers (etcdserver/bootstrap.go); killed
    // in between, the directory is not empty, so Talos starts it with no cluster flags
    // (argsForControlPlane) and it bootstraps a cluster of its own, the learner added for it never running
    const proc = this.procs.get(n.name)
    if (proc && !proc.asked && n.etcdRunning && !cut && existsSync(join(this.dataDir(n), 'member', 'wal')) && this.crashFault(n)) {
      proc.child.kill('SIGKILL')
      return
    }
    if (this.procs.has(n.name) && (!n.etcdRunning || cut)) {
      // a cut is abrupt (no leadership transfer, no goodbye to the peers): killed, not stopped
      if (cut && n.etcdRunning) this.cut.add(n.name)
      this.stopProcess(n, cut ? 'SIGKILL' : 'SIGTERM')
    } else if (!cut && this.cut.delete(n.name) && n.etcdRunning && this.hasData(n)) {
      const gen = n.gen
      this.startProcess(n).then((started) => {
        if (started && gen === n.gen) n.changed()
      })
    }
  }

  /**
   * the reset's LeaveEtcd (v1alpha1_sequencer_tasks.go; internal/pkg/etcd/etcd.go LeaveCluster):
   * MemberRemove of its own member through the control planes' etcd, retried every 10 s for up to
   * `windowS` while etcd answers `unhealthy cluster` or `server stopped` (or none answers); a member
   * already gone counts as left; any other refusal fails at once. Resolves null once it left, else the error.
   */
  leave(n, windowS) {
    // etcd's own clocks are real: it refuses a removal until its peers have been connected for its
    // HealthInterval (5 s, etcdserver/server.go mayRemoveMember), so a window scaled down by the
    // scenario's speed never ends before twice that in real time
    const until = this.ctx.clock.now().getTime() + windowS * 1000
    const untilReal = Date.now() + 2 * ETCD_HEALTH_INTERVAL_MS
    return new Promise((resolvePromise) => {
      // the etcd-leave fault: refused for the whole retry window, as the model has it
      if (this.ctx.faults.take(n.name, { kind: 'etcd-leave' }))
        return this.ctx.clock.after(windowS, () => resolvePromise(NOT_ENOUGH_STARTED))
      const attempt = async () => {
        try {
          const id = n.etcdMember ?? (await this.listMembers(n)).find((m) => m.name === n.name)?.id
          if (id) await this.anyMember('/v3/cluster/member/remove', { ID: decimalId(id) }, n)
          resolvePromise(null)
        } catch (e) {
          if (/member not found/.test(e.message)) return resolvePromise(null)
          const retried = !e.etcd || /unhealthy cluster|server stopped/.test(e.message)
          const over = this.ctx.clock.now().getTime() >= until && Date.now() >= untilReal
          if (!retried || over || this.stopping) return resolvePromise(e.message)
          n.talosLog(`retrying error: ${e.message}`)
          this.ctx.clock.after(Math.max(LEAVE_RETRY_S, (MIN_RETRY_MS / 1000) * this.ctx.clock.speed), attempt)
        }
      }
      attempt()
    })
  }

  /**
   * The upgrade mutex (v1alpha1_server.go tryLockUpgradeMutex): an etcd concurrency session with a
   * 60 s lease (MinimumEtcdUpgradeLeaseLockSeconds) and Mutex.TryLock on `talos:v1:etcdUpgradeMutex`
   * (constants.EtcdTalosEtcdUpgradeMutex), in the real etcd through `via`'s member: our key is
   * `<prefix>/<lease hex>`, the owner the prefix's key with the lowest create revision
   * (client/v3/concurrency/mutex.go); not ours: our key is deleted, the session closed, and the
   * refusal is etcd's ErrLocked. Resolves with the unlock (Unlock, then the session's lease revoked).
   */
  async tryLockUpgradeMutex(via) {
    const b64 = (s) => Buffer.from(s).toString('base64')
    const prefix = `${UPGRADE_MUTEX}/`
    const { ID: lease } = await this.call(via, '/v3/lease/grant', { TTL: UPGRADE_MUTEX_TTL_S })
    const key = `${prefix}${BigInt(lease).toString(16)}`
    const release = async () => {
      await this.call(via, '/v3/kv/deleterange', { key: b64(key) }).catch(() => {})
      await this.call(via, '/v3/lease/revoke', { ID: lease }).catch(() => {})
    }
    try {
      await this.call(via, '/v3/kv/put', { key: b64(key), value: '', lease })
      const end = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1)
      const owner = await this.call(via, '/v3/kv/range', {
        key: b64(prefix),
        range_end: b64(end),
        sort_order: 'ASCEND',
        sort_target: 'CREATE',
        limit: 1,
      })
      const first = owner.kvs?.[0]?.key
      if (first && Buffer.from(first, 'base64').toString() !== key) {
        await release()
        throw Object.assign(new Error('mutex: Locked by another session'), { etcd: true })
      }
    } catch (e) {
      if (!e.etcd) await release()
      throw e
    }
    return release
  }

  /**
   * ValidateForUpgrade (internal/pkg/etcd/etcd.go; workers skip it): the member list through `via`,
   * then exactly two members refused, a member without a name (never started) refused, and per
   * member a quorum read (`Get "health"`) through its own client URLs with QuorumCheckTimeout (15 s,
   * simulated); a member that does not answer fails when that deadline passes. Resolves null or the refusal.
   */
  async validateForUpgrade(via) {
    const members = await this.listMembers(via)
    if (members.length === 2) return `etcd member count(${members.length}) is insufficient to maintain quorum if upgrade commences`
    for (const m of members) {
      if (!m.name) return `etcd member ${m.id} is not started, all members must be running to perform an upgrade`
      const err = await this.quorumRead(m)
      if (err) return `etcd member ${m.id} is not healthy; all members must be healthy to perform an upgrade: ${err}`
    }
    return null
  }
  /** a `Get "health"` through a member's client URL: null, or etcd's error, or `context deadline exceeded` after 15 simulated seconds */
  async quorumRead(member) {
    const node = this.ctx.nodes.find((n) => member.clientUrls.includes(this.clientUrl(n)))
    const started = Date.now()
    const deadlineMs = (QUORUM_CHECK_TIMEOUT_S * 1000) / this.ctx.clock.speed
    if (node && this.procs.has(node.name) && !this.cut.has(node.name)) {
      try {
        // a member without quorum holds the linearizable read until the deadline
        await this.getHealth(node, Math.max(deadlineMs, 50))
        return null
      } catch (e) {
        if (e.etcd && e.message !== 'context deadline exceeded') return e.message
      }
    }
    // the client keeps dialing a member that does not answer until its deadline
    await new Promise((r) => setTimeout(r, Math.max(0, deadlineMs - (Date.now() - started))))
    return 'context deadline exceeded'
  }

  /** a learner added to the cluster through `via` (MemberAddAsLearner) that nothing starts: its hex ID */
  async addLearner(via, peerUrl) {
    const doc = await this.call(via, '/v3/cluster/member/add', { peerURLs: [peerUrl], isLearner: true })
    return hexId(doc.member.ID)
  }

  /** talosctl etcd members: the local member's list (queryLocal), once it answers */
  async memberList(n, signal) {
    return this.local(n, signal, () => this.listMembers(n), { retryRefusals: true })
  }

  /** talosctl etcd status: the local member's maintenance Status (v1alpha1_server.go EtcdStatus) */
  async status(n, signal) {
    let doc
    try {
      doc = await this.local(n, signal, () => this.call(n, '/v3/maintenance/status'))
    } catch (e) {
      throw e.etcd ? rpc('Unknown', `failed to query etcd status: ${e.message}`) : e
    }
    return {
      memberId: hexId(doc.header?.member_id ?? 0),
      protocolVersion: doc.version ?? '',
      dbSize: doc.dbSize ?? '0',
      dbSizeInUse: doc.dbSizeInUse ?? '0',
      leader: hexId(doc.leader ?? 0),
      raftIndex: doc.raftIndex ?? '0',
      raftTerm: doc.raftTerm ?? '0',
      raftAppliedIndex: doc.raftAppliedIndex ?? '0',
      storageVersion: doc.storageVersion ?? '',
      errors: doc.errors ?? [],
      isLearner: !!doc.isLearner,
    }
  }

  /**
   * talosctl etcd snapshot: the local member's Snapshot stream (v1alpha1_server.go EtcdSnapshot), the
   * database as etcd sends it, its sha256 appended (the real talosctl checks it and reads the file)
   */
  async snapshot(n, signal) {
    let text
    try {
      text = await this.local(n, signal, () => this.post(n, '/v3/maintenance/snapshot', {}, 10 * 60_000))
    } catch (e) {
      throw e.etcd ? rpc('Unknown', `failed reading etcd snapshot: ${e.message}`) : e
    }
    const parts = []
    for (const line of text.split('\n')) {
      if (!line.trim()) continue
      const doc = JSON.parse(line)
      if (doc.error) throw rpc('Unknown', `failed reading etcd snapshot: ${etcdError(doc).message}`)
      if (doc.result?.blob) parts.push(Buffer.from(doc.result.blob, 'base64'))
    }
    return Buffer.concat(parts)
  }

  /**
   * talosctl etcd leave (v1alpha1_server.go EtcdLeaveCluster, internal/pkg/etcd LeaveCluster): the
   * local member removed through the control planes' etcd (`unhealthy cluster` retried for 5 min),
   * then the etcd service stopped and its data directory emptied
   */
  async leaveCluster(n, windowS) {
    if (!n.etcdMember) throw rpc('Unknown', 'failed to leave cluster: etcd member ID not found')
    const id = n.etcdMember
    const refused = await this.leave(n, windowS)
    if (refused) throw rpc('Unknown', `failed to leave cluster: failed to remove member ${decimalId(id)}: ${refused}`)
    Object.assign(n, { etcdMember: null, etcdHealthy: false, etcdRunning: false, apiServerUp: false, joining: false })
    n.svc('etcd', 'Finished', 'Service finished successfully', null)
    await this.stopProcess(n)
    rmSync(this.dataDir(n), { recursive: true, force: true })
    n.changed()
  }

  /**
   * talosctl etcd remove-member: MemberRemove through the local member; etcd's refusal is the answer,
   * wrapped as machined wraps it (internal/pkg/etcd RemoveMemberByMemberID: `failed to remove member
   * <decimal ID>: …`; v1alpha1_server.go EtcdRemoveMemberByID: ErrMemberNotFound as NotFound, any other
   * error `failed to remove member: …`, which reaches the client as Unknown)
   */
  async removeMember(n, id) {
    try {
      await this.call(n, '/v3/cluster/member/remove', { ID: decimalId(id) })
    } catch (e) {
      const inner = `failed to remove member ${decimalId(id)}: ${e.message}`
      if (/member not found/.test(e.message)) throw rpc('NotFound', inner)
      throw rpc('Unknown', `failed to remove member: ${inner}`)
    }
    // the removed member's etcd stops; its node has no etcd any more
    for (const m of this.ctx.nodes) {
      if (m.etcdMember !== id) continue
      Object.assign(m, { etcdMember: null, etcdHealthy: false, etcdRunning: false, apiServerUp: false, joining: false })
      this.stopProcess(m).then(() => rmSync(this.dataDir(m), { recursive: true, force: true }))
      m.changed()
    }
  }

  /** the node was reset: its etcd stops and its data directory is wiped */
  nodeReset(n) {
    Object.assign(n, { etcdMember: null, etcdHealthy: false, etcdRunning: false, apiServerUp: false, joining: false })
    const dir = this.dataDir(n)
    const wiped = this.stopProcess(n).then(() => rmSync(dir, { recursive: true, force: true }))
    // the data directory reads empty at once (the reset's wipe is over before the node boots again):
    // a join may begin meanwhile, its member starts once the old one has stopped and the data is gone
    this.procs.set(n.name, { child: { kill() {}, pid: 0 }, exited: wiped, wiping: true })
    wiped.then(() => {
      if (this.procs.get(n.name)?.wiping) this.procs.delete(n.name)
    })
  }

  async stop() {
    this.stopping = true
    await Promise.all(this.ctx.nodes.map((n) => this.stopProcess(n, 'SIGKILL')))
    this.agent?.destroy()
  }
}

/** the line a member's process ends with under fault etcd-crash (etcd logs JSON; a fatal entry exits 1) */
export function etcdFatalLine(message, at) {
  return JSON.stringify({ level: 'fatal', ts: at.toISOString(), caller: 'etcdmain/etcd.go:204', msg: message ?? CRASH_LOG })
}

// The etcd model: clusters of members (more than one after a bootstrap on a control plane that had
// not joined yet), the Bootstrap RPC's cluster, joins as learners and their promotion, restarts, the
// quorum a leave needs, member removal, and the local client that waits for a connection.
// A member is {id (16 hex digits), name, ip, peerUrls, clientUrls, isLearner, started}: a joining one
// is added as a learner and promoted later (internal/pkg/etcd/etcd.go MemberAddAsLearner); until it
// starts, its name and client URLs are empty, as etcd's member list says.
// The nodes keep their own side (etcdMember, etcdRunning, etcdHealthy, joining; sim/node.js).
import { randomBytes } from 'node:crypto'
import { rpc } from './talos/errors.js'

export const memberId = () => randomBytes(8).toString('hex')
const NOT_ENOUGH_STARTED = 'etcdserver: re-configuration failed due to not enough started members'

const JOIN_RETRY_S = 3

export class Etcd {
  /** ctx = the Simulator: clock, faults, timings, nodes, waitFor */
  constructor(ctx) {
    this.ctx = ctx
    this.clusters = [] // [{id, members: Map<member id, member>}]
    this.startedAt = null // the first Bootstrap call (a join's etcd time counts from it)
    this.raised = new Set() // member ids with a NOSPACE alarm raised (kept until disarmed)
  }

  clusterOf(n) {
    return n.etcdMember ? (this.clusters.find((c) => c.members.has(n.etcdMember)) ?? null) : null
  }
  memberOf(n) {
    return this.clusterOf(n)?.members.get(n.etcdMember) ?? null
  }
  /** the members of the cluster this node belongs to (empty when it belongs to none) */
  members(n) {
    return [...(this.clusterOf(n)?.members.values() ?? [])]
  }
  healthyMembers() {
    return this.ctx.nodes.filter((n) => n.etcdHealthy && this.memberOf(n)?.started)
  }
  /** etcd's data directory holds data: the member started at least once (the Bootstrap RPC's only check) */
  hasData(n) {
    return !!this.memberOf(n)?.started
  }

  newMember(n, { learner }) {
    const started = !learner
    return {
      id: memberId(),
      name: started ? n.name : '',
      ip: n.ip,
      peerUrls: [`https://${n.ip}:2380`],
      clientUrls: started ? [`https://${n.ip}:2379`] : [],
      isLearner: learner,
      started,
    }
  }
  startMember(n) {
    const m = this.memberOf(n)
    if (m) Object.assign(m, { started: true, name: n.name, clientUrls: [`https://${n.ip}:2379`] })
  }

  /** the Bootstrap RPC: a new etcd cluster of this one member, whatever other control planes run */
  bootstrap(n) {
    this.startedAt = this.ctx.clock.now().getTime()
    n.joining = false
    n.joinGen = (n.joinGen ?? 0) + 1 // a pending join is abandoned: this etcd bootstraps
    const member = this.newMember(n, { learner: false })
    this.clusters.push({ id: memberId(), members: new Map([[member.id, member]]) })
    n.etcdMember = member.id
    n.etcdRunning = true
    // BootstrapEtcd (internal/app/machined/pkg/system/services/etcd.go, system.Services().Stop then
    // Start): the waiting service is stopped, `Finished` "Bootstrap requested", then started again:
    // `Preparing` (pre state, runner) for a while before `Running`, so for seconds after an accepted
    // bootstrap the node's etcd service reads neither Waiting nor Running
    n.svc('etcd', 'Finished', 'Bootstrap requested')
    const { etcd } = this.ctx.timings
    n.after(etcd * 0.1, () => {
      n.svc('etcd', 'Preparing', 'Running pre state')
      n.svc('etcd', 'Preparing', 'Creating service runner')
      n.changed()
    })
    n.after(etcd * 0.4, () => {
      n.svc('etcd', 'Running', `Started task etcd (PID ${1000 + Math.floor(Math.random() * 9000)}) for container etcd`, null)
      n.changed()
    })
    n.talosLog('bootstrap request received')
    n.after(this.ctx.timings.etcd, () => n.etcdUp())
    n.changed()
  }

  /** a control plane whose CRI is up joins once a cluster has a healthy etcd: learner, started, promoted */
  maybeJoin(n) {
    if (!n.criUp || this.hasData(n) || n.joining) return
    const healthy = this.healthyMembers()
    const target = this.clusters.find((c) => healthy.some((h) => c.members.has(h.etcdMember)))
    if (!target) return
    // the peers are learnt through the endpoint or discovery (node.js etcdEndpointsKnown); asked again when an API server comes up
    if (!n.etcdEndpointsKnown()) return n.talosLog('retrying error: no controlplane endpoints discovered yet')
    n.joining = true
    if (this.ctx.faults.has(n.name, 'etcd-join')) {
      n.svc('etcd', 'Preparing', 'Running pre state')
      n.talosLog(`etcd: failed to join the cluster: ${NOT_ENOUGH_STARTED}`)
      return
    }
    // a member with this node's name is removed first (services/etcd.go addMember: a stale entry)
    for (const [id, m] of target.members) if (m.name === n.name) target.members.delete(id)
    // etcd admits one learner at a time (server.go: --max-learners, default 1): a second add is refused
    // and Talos retries it (services/etcd.go buildInitialCluster: retry.Constant every 3 s), so
    // control planes join one after another
    if ([...target.members.values()].some((m) => m.isLearner)) {
      n.joining = false
      n.talosLog('retrying error: etcdserver: too many learner members in cluster')
      n.after(JOIN_RETRY_S, () => this.maybeJoin(n))
      return
    }
    const learner = this.newMember(n, { learner: true })
    target.members.set(learner.id, learner)
    n.etcdMember = learner.id
    // a joining control plane takes the same `etcd` time, counted from when it could start: the
    // bootstrap call, or its own CRI if that came later (so joins run alongside the first member)
    const { timings } = this.ctx
    const now = this.ctx.clock.now().getTime()
    const from = Math.max(this.startedAt ?? now, n.criUpAt ?? now, this.lastPromotedAt ?? now)
    // at least a short learner time once added: start, catch up, be promoted (never instant on a real cluster)
    const delay = Math.max((from - now) / 1000 + timings.etcd, Math.min(2, timings.etcd / 10))
    const gen = (n.joinGen = (n.joinGen ?? 0) + 1)
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
      this.lastPromotedAt = this.ctx.clock.now().getTime()
      n.etcdUp()
      // the next control plane waiting may add itself now
      for (const other of this.ctx.nodes ?? []) if (other !== n && other.role === 'controlplane') this.maybeJoin(other)
    })
  }

  /** etcd starts again (a boot, `service etcd start|restart`): from its data, or it joins anew */
  restart(n) {
    n.after(this.ctx.timings.etcd, () => {
      if (this.hasData(n)) {
        n.etcdRunning = true
        n.startService('etcd', { healthy: false })
        n.etcdUp()
      } else {
        n.etcdMember = null
        this.maybeJoin(n)
      }
    })
  }

  /**
   * Why etcd refuses this node's leave (MemberRemove), or null: strict reconfiguration wants a
   * quorum of the remaining voters started (etcd server.go mayRemoveMember); learners do not vote.
   * Talos retries it, then aborts the reset (internal/pkg/etcd/etcd.go, v1alpha1_sequencer_tasks.go LeaveEtcd).
   */
  leaveRefusal(n) {
    if (this.ctx.faults.take(n.name, { kind: 'etcd-leave' })) return NOT_ENOUGH_STARTED
    const me = this.memberOf(n)
    if (!me || me.isLearner) return null
    const others = this.members(n).filter((m) => !m.isLearner && m !== me)
    const running = others.filter((m) => this.ctx.nodes.some((x) => x.etcdMember === m.id && x.etcdRunning)).length
    if (others.length && running < Math.floor(others.length / 2) + 1) return NOT_ENOUGH_STARTED
    return null
  }

  /**
   * The cluster's alarms as etcd's AlarmList answers them (every member's, raft-replicated):
   * {memberId, alarm}. A started member whose node is under fault `etcd-nospace` is over its backend
   * quota: NOSPACE is raised, and stays until disarmed, as etcd keeps an alarm (the next write raises
   * it again while the fault lasts).
   */
  alarms(n) {
    const c = this.clusterOf(n)
    if (!c) return []
    for (const x of this.ctx.nodes)
      if (c.members.get(x.etcdMember)?.started && this.ctx.faults.find(x.name, { kind: 'etcd-nospace' }).length > 0)
        this.raised.add(x.etcdMember)
    return [...this.raised].filter((id) => c.members.has(id)).map((id) => ({ memberId: id, alarm: 'NOSPACE' }))
  }

  /** EtcdAlarmDisarm: every alarm deactivated, the disarmed ones answered */
  disarmAlarms(n) {
    const disarmed = this.alarms(n)
    for (const a of disarmed) this.raised.delete(a.memberId)
    return disarmed
  }

  /**
   * the reset's LeaveEtcd: resolves null once it left, else (after Talos's retries for `windowS`)
   * the refusal; the member itself goes in nodeReset
   */
  leave(n, windowS) {
    const refused = this.leaveRefusal(n)
    return new Promise((resolvePromise) => (refused ? this.ctx.clock.after(windowS, () => resolvePromise(refused)) : resolvePromise(null)))
  }

  /** talosctl etcd members (queryLocal): the local etcd's list, once its client connects */
  async memberList(n, signal) {
    await this.reachable(n, signal)
    return this.members(n).map((m) => ({ id: m.id, name: m.name, peerUrls: m.peerUrls, clientUrls: m.clientUrls, isLearner: m.isLearner }))
  }

  /** talosctl etcd remove-member */
  async removeMember(n, id) {
    // an unknown ID is etcd's ErrMemberNotFound, answered as NotFound (v1alpha1_server.go EtcdRemoveMemberByID)
    if (!this.members(n).some((m) => m.id === id))
      throw rpc('NotFound', `failed to remove member ${BigInt(`0x${id}`).toString(10)}: etcdserver: member not found`)
    this.remove(id)
  }

  /** the model has no processes: nothing to follow on a node change, nothing to stop */
  sync() {}
  async stop() {}

  /** a member removed (etcd remove-member): the node it was loses its etcd */
  remove(id) {
    for (const c of this.clusters) c.members.delete(id)
    for (const n of this.ctx.nodes) {
      if (n.etcdMember === id) {
        n.etcdMember = null
        n.etcdHealthy = false
        n.etcdRunning = false
        n.apiServerUp = false
        n.joining = false
        n.changed()
      }
    }
  }

  /**
   * The reset's LeaveEtcd (v1alpha1_sequencer_tasks.go) leaves only while the etcd service runs: a
   * stopped etcd leaves its member behind, stale, until the rejoin removes it by name. The node's etcd is gone either way.
   */
  nodeReset(n, { graceful }) {
    if (graceful && n.etcdMember && n.etcdRunning) for (const c of this.clusters) c.members.delete(n.etcdMember)
    n.etcdMember = null
    n.etcdHealthy = false
    n.etcdRunning = false
    n.apiServerUp = false
    n.joining = false
  }

  /**
   * etcd's client on this node waits for a connection to the local etcd (clientv3, no deadline from
   * talosctl): resolves once it runs, or rejects when the caller goes away.
   */
  reachable(n, signal) {
    if (n.etcdRunning) return Promise.resolve()
    return new Promise((resolvePromise, reject) => {
      const { waiters } = this.ctx
      const check = () => {
        if (n.etcdRunning) {
          waiters.delete(check)
          resolvePromise()
        }
      }
      waiters.add(check)
      signal?.addEventListener(
        'abort',
        () => {
          waiters.delete(check)
          reject(new Error('client went away'))
        },
        { once: true },
      )
    })
  }
}

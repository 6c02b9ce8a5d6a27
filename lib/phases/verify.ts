import { existsSync } from 'node:fs'
import { NodeError } from '../classify.js'
import { formatDuration } from '../duration.js'
import { hintFor } from '../hints.js'
import type { ClusterNode } from '../inventory.js'
import type { NodeOutcome, Phase, StepReporter } from '../phase.js'
import { pollUntil, PollTimeout, type PollAnswer } from '../poll.js'
import type { Run } from '../run.js'
import { BatchedReading, SharedReading } from '../shared-reading.js'
import type { MachineStatus, NodeAnswer } from '../tools/talosctl.js'
import { bootstrapNode } from './bootstrap.js'

/** Kinds that mean "not up yet" while a node installs and reboots: keep waiting. */
const WAITABLE = new Set(['unreachable', 'timeout'])
const BOOT_LOOP_REBOOTS = 2

/** Watches one node's stages: how long in each, and whether it keeps rebooting. */
class StageWatch {
  stage = 'not answering'
  since = 0
  rebootsAfterBoot = 0
  maintenanceSightings = 0
  answered = false
  /** stopped answering at some point (installing, rebooting) */
  wentDown = false

  see(stage: string, elapsed: number): void {
    if (stage === this.stage) return
    const leftBooting = this.stage === 'booting' && (stage === 'rebooting' || stage === 'not answering')
    if (leftBooting) this.rebootsAfterBoot++
    this.stage = stage
    this.since = elapsed
  }

  /** `booting for 12s`; no duration before a second reading could tell one (`not answering`, not `… for 0ms`) */
  describe(elapsed: number): string {
    const lasted = elapsed - this.since
    return lasted >= 1000 ? `${this.stage} for ${formatDuration(lasted)}` : this.stage
  }
}

/**
 * Why a worker's authenticated API cannot answer yet by Talos's design, or undefined. Its apid starts
 * once trustd on a control plane signs its certificate (secrets/api.go), dialled at the endpoint's
 * host or, with discovery, at any control plane: behind a VIP with discovery off, that is only once
 * the VIP is up, after the etcd bootstrap.
 */
export function waitsForControlPlane(node: ClusterNode, run: Run): string | undefined {
  const vip = run.inventory.vip
  if (node.role !== 'worker' || !vip || node.discovery === true) return undefined
  return `authenticated API starts once a control plane's trustd is reachable through ${vip} (the endpoint's VIP, up after the etcd bootstrap; cluster discovery is disabled)`
}

/** The endpoint's API answers (a kubeconfig exists and /readyz is ok there): the VIP is up. */
export function endpointReading(run: Run): SharedReading<boolean> {
  return new SharedReading(async () => {
    if (!existsSync(run.kubeconfig)) return false
    return run.kubectl.readyz(run.inventory.endpoint).catch(() => false)
  }, run.settings.pollIntervalMs / 2)
}

/**
 * A node that does not answer but took its config in an earlier run, and whose API waits for the
 * control plane (the endpoint does not answer yet): why, else undefined. Not down, just not up yet.
 */
export async function appliedAndWaiting(node: ClusterNode, run: Run, endpoint: SharedReading<boolean> = endpointReading(run)): Promise<string | undefined> {
  const waits = waitsForControlPlane(node, run)
  if (!waits || !run.journal.done(node.name, 'apply') || run.options.reset) return undefined
  return (await endpoint.get()) ? undefined : waits
}

/**
 * The authenticated MachineStatus reads of a wait: the nodes that ask together go out as one
 * batched `talosctl get machinestatus -n …` through a control plane that answered (apid proxies to
 * the others; a worker cannot forward). Each node's own error in the batch is that node's (a
 * rebooting node refuses, the others carry on). Until a control plane has answered, and when a
 * batch fails whole (its endpoint went down), each node is read alone, as before.
 *
 * talosctl resolves the type through the batch's first node, so a batch starts with a node that
 * answers; when none of the nodes asking does, one is borrowed, and read with them. A node is
 * borrowed only when that costs no read beyond one an interval: not read for an interval, or still
 * polling (the borrowed answer then serves its own next poll).
 */
export class StatusReads {
  /** the endpoint of the batches: the control plane that answered last */
  private via: ClusterNode | undefined
  /** per node: when it was last read and last asked, and whether it answered */
  private readonly seen = new Map<string, { node: ClusterNode; readAt: number; askedAt: number; up: boolean }>()
  /** a borrowed node's answer, kept for its own next poll */
  private readonly spare = new Map<string, { status: MachineStatus; at: number }>()
  /** the seed failed a batch: only a control plane that answers again becomes the endpoint */
  private seedDown = false
  private readonly batch: BatchedReading<ClusterNode, NodeAnswer<MachineStatus>>

  /**
   * `seed`: a control plane known to answer before any read here (after the bootstrap: the bootstrap
   * node); `spared`: the node to borrow last (the bootstrap node: etcd's reads go through it too).
   */
  constructor(
    private readonly run: Run,
    private readonly seed: () => ClusterNode | undefined = () => undefined,
    private readonly spared: () => ClusterNode | undefined = () => undefined,
  ) {
    // a round's nodes ask within a few ms of each other (the same poll tick), more under load
    this.batch = new BatchedReading((nodes) => this.readBatch(nodes), Math.min(100, run.settings.pollIntervalMs / 8))
  }

  async read(node: ClusterNode): Promise<MachineStatus> {
    const now = performance.now()
    const entry = this.seen.get(node.name)
    if (entry) entry.askedAt = now
    else this.seen.set(node.name, { node, readAt: 0, askedAt: now, up: false })
    const spare = this.spare.get(node.name)
    this.spare.delete(node.name)
    if (spare && now - spare.at < this.run.settings.pollIntervalMs) return spare.status
    if (this.endpoint()) {
      const answer = await this.batch.get(node)
      if (answer) return this.saw(node, answer)
    }
    try {
      return this.saw(node, { value: await this.run.talosctl.machineStatus(node) })
    } catch (err) {
      if (err instanceof NodeError) this.saw(node, { error: err })
      throw err
    }
  }

  private endpoint(): ClusterNode | undefined {
    if (this.via && this.run.failed.has(this.via.name)) this.via = undefined
    const seed = this.seed()
    if (!this.via && seed && !this.seedDown) this.via = seed
    return this.via
  }

  /** The node's status, or its error thrown; either way, whether it answers is noted. */
  private saw(node: ClusterNode, answer: NodeAnswer<MachineStatus>): MachineStatus {
    this.note(node, answer)
    if (answer.error) throw answer.error
    return answer.value
  }

  private note(node: ClusterNode, answer: NodeAnswer<MachineStatus>): void {
    const entry = this.seen.get(node.name) ?? { node, readAt: 0, askedAt: 0, up: false }
    entry.readAt = performance.now()
    entry.up = !answer.error
    this.seen.set(node.name, entry)
    if (!answer.error && node.role === 'controlplane') this.via = node
  }

  /** A node that answers to resolve the type for `nodes`: one of them, else one to borrow (see above). */
  private resolver(nodes: ClusterNode[], via: ClusterNode): ClusterNode | undefined {
    const asking = nodes.find((n) => this.seen.get(n.name)?.up)
    if (asking) return asking
    const now = performance.now()
    const interval = this.run.settings.pollIntervalMs
    const free = (name: string): boolean => {
      const entry = this.seen.get(name)
      if (!entry) return true
      return now - entry.readAt >= interval || (now - entry.askedAt < interval && !this.spare.has(name))
    }
    // the spared node and the endpoint last: other reads of the run go through them
    const spared = this.spared()
    const rank = (n: ClusterNode): number => (n === spared ? 2 : n === via ? 1 : 0)
    const borrowable = [...this.seen.values()]
      .filter((e) => e.up && !this.run.failed.has(e.node.name) && !nodes.includes(e.node) && free(e.node.name))
      .sort((a, b) => rank(a.node) - rank(b.node) || a.readAt - b.readAt)
    return borrowable[0]?.node ?? (free(via.name) && !nodes.includes(via) ? via : undefined)
  }

  private async readBatch(nodes: ClusterNode[]): Promise<Map<ClusterNode, NodeAnswer<MachineStatus>>> {
    const via = this.endpoint()
    const first = via && this.resolver(nodes, via)
    // nobody to resolve the type through without reading a node twice an interval: each alone
    if (!via || !first) return new Map()
    const order = [first, ...nodes.filter((n) => n !== first)]
    const answers = await this.run.talosctl.machineStatuses(order, via)
    if (answers.size === 0) {
      // failed whole (the endpoint, or the node that resolves the type, is down): read alone this time
      const entry = this.seen.get(first.name)
      if (entry) entry.up = false
      if (via === this.seed()) this.seedDown = true
      if (this.via === via) this.via = undefined
      return new Map()
    }
    const borrowed = answers.get(first.ip)
    if (borrowed && !nodes.includes(first)) {
      this.note(first, borrowed)
      if (borrowed.value) this.spare.set(first.name, { status: borrowed.value, at: performance.now() })
    }
    return new Map(nodes.flatMap((n) => {
      const answer = answers.get(n.ip)
      return answer ? [[n, answer] as const] : []
    }))
  }
}

/** The node took its config: applied in this run or an earlier one. */
const configAccepted = (node: ClusterNode, run: Run): boolean => run.facts.of(node.name).applied === true || run.journal.done(node.name, 'apply')

/** Verified: a worker running; a control plane running, or booting with etcd waiting for its bootstrap. */
async function verified(node: ClusterNode, run: Run, status: MachineStatus): Promise<string | undefined> {
  if (status.stage === 'running') return status.ready ? 'running, ready' : 'running'
  if (node.role !== 'controlplane' || status.stage !== 'booting') return undefined
  let etcd
  try {
    etcd = await run.talosctl.serviceStatus(node, 'etcd')
  } catch (err) {
    // etcd is registered only once the boot reaches StartAllServices: not yet, as any transient error
    if (err instanceof NodeError && err.transient) return undefined
    throw err
  }
  run.facts.of(node.name).etcd = etcd.state
  if (etcd.state === 'Preparing' || etcd.state === 'Waiting') return 'booting, etcd waiting for bootstrap'
  return undefined
}

/**
 * Polls the node until it is verified. `endpoint`: verify's own run, where a worker whose API waits
 * for the control plane (waitsForControlPlane) is done once it took its config and left maintenance;
 * without it (after the bootstrap) that worker must answer like any other node.
 */
async function verifyNode(node: ClusterNode, run: Run, report: StepReporter, reads: StatusReads, endpoint?: SharedReading<boolean>): Promise<NodeOutcome> {
  const watch = new StageWatch()
  const waits = waitsForControlPlane(node, run)
  let silentPolls = 0
  const check = async (elapsed: number): Promise<PollAnswer<string>> => {
    let status: MachineStatus
    try {
      status = await reads.read(node)
    } catch (err) {
      if (!(err instanceof NodeError)) throw err
      if (WAITABLE.has(err.kind)) {
        watch.wentDown = true
        watch.see('not answering', elapsed)
        // out of maintenance (nothing answers there) twice a poll apart, and the VIP is not up yet
        if (waits && endpoint && configAccepted(node, run) && ++silentPolls >= 2 && !(await endpoint.get())) {
          run.facts.of(node.name).awaitingControlPlane = waits
          return { done: true, value: `config accepted, out of maintenance; waiting for the control plane: ${waits}` }
        }
      } else if (err.kind === 'maintenance') {
        silentPolls = 0
        // seen twice a poll apart: the node is really in maintenance (crashed back or never applied)
        if (++watch.maintenanceSightings >= 2) {
          const wasApplied = watch.answered || watch.wentDown || run.facts.of(node.name).applied === true
          const why = wasApplied ? 'dropped back to maintenance mode after its config was applied (crashed during install?)' : 'is in maintenance mode: its config was never applied'
          throw new NodeError('maintenance', `${node.name} ${why}`, hintFor('maintenance', node))
        }
        watch.see('maintenance', elapsed)
      } else {
        throw err
      }
      if (watch.rebootsAfterBoot >= BOOT_LOOP_REBOOTS) throw bootLoop(node, watch)
      return { done: false, state: watch.describe(elapsed) }
    }
    watch.answered = true
    watch.maintenanceSightings = 0
    watch.see(status.stage, elapsed)
    // re-applied with a reboot: an answer from before it went down is not the new config running
    if (run.facts.of(node.name).rebootAfterApply) {
      if (!watch.wentDown && status.stage !== 'rebooting') return { done: false, state: `${status.stage}, waiting for the reboot that applies its config` }
      if (status.stage === 'rebooting') watch.wentDown = true
    }
    if (watch.rebootsAfterBoot >= BOOT_LOOP_REBOOTS) throw bootLoop(node, watch)
    const done = await verified(node, run, status)
    if (done) {
      delete run.facts.of(node.name).rebootAfterApply
      return { done: true, value: done }
    }
    const unmet = status.unmetConditions.map((c) => `${c.name}: ${c.reason}`).join('; ')
    return { done: false, state: `${watch.describe(elapsed)}${unmet ? ` (${unmet})` : ''}` }
  }
  try {
    const detail = await pollUntil(check, {
      intervalMs: run.settings.pollIntervalMs,
      timeoutMs: run.settings.verifyTimeoutMs,
      signal: run.signal,
      onState: (state) => report.progress(state),
    })
    return { status: 'ok', detail }
  } catch (err) {
    if (!(err instanceof PollTimeout)) throw err
    const kind = watch.answered ? 'stuck' : 'unreachable'
    const after = run.facts.of(node.name).awaitingControlPlane
    const message = watch.answered
      ? `not verified within ${formatDuration(run.settings.verifyTimeoutMs)}: ${err.lastState}`
      : `never answered on the authenticated API within ${formatDuration(run.settings.verifyTimeoutMs)}${after ? ` after the bootstrap; its ${after}` : ''}`
    throw new NodeError(kind, message, hintFor(kind, node))
  }
}

function bootLoop(node: ClusterNode, watch: StageWatch): NodeError {
  return new NodeError('stuck', `boot-looping: rebooted ${watch.rebootsAfterBoot} times after booting and never reached running`, hintFor('stuck', node))
}

/** After the bootstrap: a worker verify left waiting for the control plane answers and runs. */
export async function completeVerification(node: ClusterNode, run: Run, report: StepReporter, reads: StatusReads): Promise<NodeOutcome> {
  const outcome = await verifyNode(node, run, report, reads)
  delete run.facts.of(node.name).awaitingControlPlane
  return { ...outcome, detail: `${outcome.detail ?? 'running'} (authenticated API up after the bootstrap)` }
}

/** The bootstrap node, or undefined when the bootstrapNode setting names no control plane (the bootstrap phase says so). */
export function bootstrapNodeIfAny(run: Run): ClusterNode | undefined {
  try {
    return bootstrapNode(run)
  } catch {
    return undefined
  }
}

export const verify: Phase = {
  name: 'verify',
  title: 'Verify nodes left maintenance and are up',
  steps: (run) => {
    const endpoint = endpointReading(run)
    const reads = new StatusReads(run, undefined, () => bootstrapNodeIfAny(run))
    return [{ kind: 'node', title: 'Verify nodes', readOnly: true, would: 'would wait until it is up on the authenticated API', run: (node, r, report) => verifyNode(node, r, report, reads, endpoint) }]
  },
}

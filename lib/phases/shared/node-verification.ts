import { NodeError } from '../../core/errors.ts'
import { formatDuration } from '../../core/duration.ts'
import { hintFor, hintForEtcdCrash, hintForInstall } from '../../cli/hints.ts'
import { MachineConfig } from '../../input/machine-config.ts'
import type { ClusterNode } from '../../core/model.ts'
import { lastErrorNote, PollTimeout, type PollAnswer } from '../../wait/poll.ts'
import type { Run } from '../../engine/run.ts'
import { SharedReading } from '../../wait/shared-reading.ts'
import type { StatusReads } from '../../wait/status-reads.ts'
import type { MachineStatus } from '../../tools/talosctl.ts'
import type { NodeOutcome, StepReporter } from '../../engine/phase.ts'
import { waitsForControlPlane } from './endpoint.ts'

/** Kinds that mean "not up yet" while a node installs and reboots: keep waiting. */
const WAITABLE = new Set(['unreachable', 'timeout'])
const BOOT_LOOP_REBOOTS = 2
/** a worker's second silent read, after which it is taken to wait for the control plane: a blip is over by then */
const SECOND_SILENT_READ_MS = 500
/** nothing listens or nothing answers: what a node shows while it installs or reboots */
const SILENT = /^timeout: |connection refused|i\/o timeout|deadline exceeded/

/** Watches one node's stages: how long in each, and whether it keeps rebooting. */
class StageWatch {
  stage = 'not answering'
  since = 0
  rebootsAfterBoot = 0
  maintenanceSightings = 0
  answered = false
  /** stopped answering at some point (installing, rebooting) */
  wentDown = false
  /** the last read that failed as "not up yet", and how many did */
  lastError: { text: string; count: number } | undefined

  /** the last failed read found nothing answering (refused, timed out): down, installing or rebooting, not erring */
  silent(): boolean {
    return this.lastError !== undefined && SILENT.test(this.lastError.text)
  }

  failed(err: NodeError): void {
    this.lastError = { text: `${err.kind}: ${err.message}`, count: (this.lastError?.count ?? 0) + 1 }
  }

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

/** The node took its config: applied in this run or an earlier one (or sent when that run stopped). */
const configAccepted = (node: ClusterNode, run: Run): boolean =>
  run.facts.of(node.name).applied === true || run.facts.of(node.name).tookConfigElsewhere !== undefined || run.journal.tookConfig(node.name)

// the restart runner's event after its process exited (runner/restart/restart.go)
const RESTARTING = /going to restart (forever|it|until it succeeds)/

/** Verified: a worker running; a control plane running, or booting with etcd waiting for its bootstrap. */
async function verified(node: ClusterNode, run: Run, status: MachineStatus): Promise<string | undefined> {
  if (status.stage === 'running') return status.ready ? 'running, ready' : 'running'
  if (node.role !== 'controlplane' || status.stage !== 'booting') return undefined
  return (await etcdWhileBooting(node, run)) === 'waiting' ? bootingVerified(node, run) : undefined
}

/**
 * A booting control plane whose etcd waits: for the bootstrap, or first for time sync (etcd's
 * service waits for it: machined system/services/etcd.go, timeresource.NewSyncCondition).
 */
function bootingVerified(node: ClusterNode, run: Run): string {
  return /time sync/.test(run.facts.of(node.name).etcdEvent ?? '')
    ? 'booting, etcd waiting for time sync'
    : 'booting, etcd waiting for bootstrap'
}

/**
 * A booting control plane's etcd service: waiting for the bootstrap, not registered yet (it answered:
 * etcd is registered at StartAllServices), crashing (its process exits and Talos's runner starts it
 * again: `Waiting` too, so told by its event), or something else (another state, down): its status
 * read tells. A failure that is not transient is thrown.
 */
async function etcdWhileBooting(node: ClusterNode, run: Run): Promise<'waiting' | 'crashing' | 'not registered' | 'other'> {
  try {
    const etcd = await run.talosctl.serviceStatus(node, 'etcd')
    run.facts.of(node.name).etcd = etcd.state
    run.facts.of(node.name).etcdEvent = etcd.lastEvent
    if (etcd.state === 'Waiting' && RESTARTING.test(etcd.lastEvent ?? '')) return 'crashing'
    return etcd.state === 'Preparing' || etcd.state === 'Waiting' ? 'waiting' : 'other'
  } catch (err) {
    if (!(err instanceof NodeError) || !err.transient) throw err
    return err.kind === 'not-ready-yet' ? 'not registered' : 'other'
  }
}

/**
 * The control planes whose verify is in flight in this phase. A worker that waits for the control
 * plane is silent whether it installs, reboots, waits for trustd or is rebooting back into
 * maintenance after a failed install (machined's handle(): `rebooting in 10 seconds`, then the ISO
 * boots without a config): silence alone cannot tell them apart. The control planes install and
 * reboot as long as it does, so while one of them is still verified the worker is not concluded
 * waiting, and a worker that crashed back to maintenance by then is named here, not after the bootstrap.
 */
export class ControlPlaneVerifications {
  private readonly inFlight = new Set<string>()

  /** runs a control plane's verify as in flight (a worker's as is) */
  async track<T>(node: ClusterNode, verify: () => Promise<T>): Promise<T> {
    if (node.role !== 'controlplane') return verify()
    this.inFlight.add(node.name)
    try {
      return await verify()
    } finally {
      this.inFlight.delete(node.name)
    }
  }

  /** a control plane's verify is still in flight */
  busy(): boolean {
    return this.inFlight.size > 0
  }
}

/**
 * Polls the node until it is verified. `endpoint`: verify's own run, where a worker whose API waits
 * for the control plane (waitsForControlPlane) is done once it took its config and left maintenance
 * (and no control plane of `controlPlanes` is still being verified); without it (after the
 * bootstrap) that worker must answer like any other node.
 */
export async function verifyNode(
  node: ClusterNode,
  run: Run,
  report: StepReporter,
  reads: StatusReads,
  endpoint?: SharedReading<boolean>,
  controlPlanes?: ControlPlaneVerifications,
): Promise<NodeOutcome> {
  if (!controlPlanes) return pollVerified(node, run, report, reads, endpoint, () => false)
  return controlPlanes.track(node, () => pollVerified(node, run, report, reads, endpoint, () => controlPlanes.busy()))
}

async function pollVerified(
  node: ClusterNode,
  run: Run,
  report: StepReporter,
  reads: StatusReads,
  endpoint: SharedReading<boolean> | undefined,
  controlPlanesBusy: () => boolean,
): Promise<NodeOutcome> {
  const watch = new StageWatch()
  const waits = waitsForControlPlane(node, run)
  let silentPolls = 0
  const check = async (elapsed: number): Promise<PollAnswer<string>> => {
    // a control plane seen booting: its etcd service alone says whether it waits for the bootstrap,
    // one read a round instead of its status and then its etcd
    if (node.role === 'controlplane' && watch.stage === 'booting' && !run.facts.of(node.name).rebootAfterApply) {
      // any failure here is for its status read to classify (maintenance twice, a reboot, …)
      const etcd = await etcdWhileBooting(node, run).catch((err: unknown) => {
        if (err instanceof NodeError) return 'other' as const
        throw err
      })
      if (etcd === 'waiting') return { done: true, value: bootingVerified(node, run) }
      if (etcd === 'not registered') return { done: false, state: watch.describe(elapsed) }
      // bootstrapped before (its data is there) and its etcd exits at each start: nothing to verify
      // until it runs; the deadline names it (crashLooping)
      if (etcd === 'crashing')
        return { done: false, state: `${watch.describe(elapsed)}, etcd crashing (${run.facts.of(node.name).etcdEvent ?? ''})` }
    }
    let status: MachineStatus
    let secondSilentReadInMs: number | undefined
    try {
      status = await reads.read(node)
    } catch (err) {
      if (!(err instanceof NodeError)) throw err
      if (WAITABLE.has(err.kind)) {
        watch.failed(err)
        watch.wentDown = true
        watch.see('not answering', elapsed)
        // out of maintenance (nothing answers there) at two reads, no control plane still installing
        // or rebooting beside it (ControlPlaneVerifications), and the VIP is not up yet
        if (waits && endpoint && configAccepted(node, run) && ++silentPolls >= 2 && !controlPlanesBusy() && !(await endpoint.get())) {
          run.facts.of(node.name).awaitingControlPlane = waits
          return { done: true, value: `config accepted, out of maintenance; waiting for the control plane: ${waits}` }
        }
        // its first silent read once the control planes are verified: the second comes a moment later,
        // not a whole interval (a worker verified after them held its slot an interval for nothing:
        // 300 nodes at CONCURRENCY 16 spent 50 s so)
        if (silentPolls === 1 && !controlPlanesBusy()) secondSilentReadInMs = SECOND_SILENT_READ_MS
      } else if (err.kind === 'maintenance') {
        silentPolls = 0
        // seen twice a poll apart: the node is really in maintenance (crashed back or never applied)
        if (++watch.maintenanceSightings >= 2) {
          const wasApplied = watch.answered || watch.wentDown || run.facts.of(node.name).applied === true
          const why = wasApplied
            ? 'dropped back to maintenance mode after its config was applied (crashed during install?)'
            : 'is in maintenance mode: its config was never applied'
          throw new NodeError('maintenance', `${node.name} ${why}`, hintFor('maintenance', node))
        }
        watch.see('maintenance', elapsed)
      } else {
        throw err
      }
      if (watch.rebootsAfterBoot >= BOOT_LOOP_REBOOTS) throw bootLoop(node, watch)
      const last = watch.stage === 'not answering' && watch.lastError ? ` (${watch.lastError.text})` : ''
      // took its config and went silent: an ISO node installs (pulling its installer), then reboots
      const installing =
        watch.stage === 'not answering' && !watch.answered && watch.silent() && configAccepted(node, run)
          ? 'installing: took its config, '
          : ''
      const state = `${installing}${watch.describe(elapsed)}${last}`
      return secondSilentReadInMs === undefined ? { done: false, state } : { done: false, state, againInMs: secondSilentReadInMs }
    }
    watch.answered = true
    watch.maintenanceSightings = 0
    watch.see(status.stage, elapsed)
    // re-applied with a reboot: an answer from before it went down is not the new config running
    if (run.facts.of(node.name).rebootAfterApply) {
      if (!watch.wentDown && status.stage !== 'rebooting')
        return { done: false, state: `${status.stage}, waiting for the reboot that applies its config` }
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
    const detail = await report.poll(check, run.settings.verifyTimeoutMs)
    return run.facts.of(node.name).awaitingControlPlane === undefined
      ? { status: 'ok', detail }
      : { status: 'ok', detail, provisional: true }
  } catch (err) {
    if (!(err instanceof PollTimeout)) throw err
    const after = run.facts.of(node.name).awaitingControlPlane
    // silent after taking its config: installing; behind the VIP only once the VIP answers (else it waits for a certificate)
    const vipUp = after !== undefined && (await run.kubectl.readyz(run.inventory.endpoint).catch(() => false))
    if (!watch.answered && (!after || vipUp) && configAccepted(node, run) && watch.silent()) throw installNeverEnded(node, run, err, watch)
    if (watch.answered && RESTARTING.test(run.facts.of(node.name).etcdEvent ?? '')) throw crashLooping(node, run)
    const kind = watch.answered ? 'stuck' : 'unreachable'
    const message = watch.answered
      ? `not verified within ${formatDuration(run.settings.verifyTimeoutMs)}: ${err.lastState}`
      : `never answered on the authenticated API within ${formatDuration(run.settings.verifyTimeoutMs)}${after ? ` after the bootstrap; its ${after}` : ''}${lastErrorNote(watch.lastError ?? err.lastError)}`
    throw new NodeError(kind, message, hintFor(kind, node))
  }
}

/** Took its config, then silence to the deadline: the install did not finish; name its installer image. */
function installNeverEnded(node: ClusterNode, run: Run, err: PollTimeout, watch: StageWatch): NodeError {
  const configured = MachineConfig.of(node.configFile).installImage()
  const version = run.inventory.talosVersion
  const image = configured ?? (version ? `ghcr.io/siderolabs/installer:${version}` : undefined)
  const which = image
    ? `${image}${configured ? ' (machine.install.image)' : ' (the default, no machine.install.image)'}`
    : 'machine.install.image'
  return new NodeError(
    'install',
    `took its config but never answered on the authenticated API within ${formatDuration(run.settings.verifyTimeoutMs)}: its install did not finish (installer image ${which}; the console has the install's errors)${lastErrorNote(watch.lastError ?? err.lastError)}`,
    hintForInstall(node, image),
  )
}

/** A control plane kept booting because its etcd exits at each start (Talos restarts it every 5 s). */
function crashLooping(node: ClusterNode, run: Run): NodeError {
  return new NodeError(
    'etcd',
    `not verified within ${formatDuration(run.settings.verifyTimeoutMs)}: booting, its etcd keeps crashing: ${run.facts.of(node.name).etcdEvent ?? ''}`,
    hintForEtcdCrash(node),
  )
}

function bootLoop(node: ClusterNode, watch: StageWatch): NodeError {
  return new NodeError(
    'stuck',
    `boot-looping: rebooted ${watch.rebootsAfterBoot} times after booting and never reached running`,
    hintFor('stuck', node),
  )
}

/** After the bootstrap: a worker verify left waiting for the control plane answers and runs. */
export async function completeVerification(node: ClusterNode, run: Run, report: StepReporter, reads: StatusReads): Promise<NodeOutcome> {
  const outcome = await verifyNode(node, run, report, reads)
  delete run.facts.of(node.name).awaitingControlPlane
  return { ...outcome, detail: `${outcome.detail ?? 'running'} (authenticated API up after the bootstrap)` }
}

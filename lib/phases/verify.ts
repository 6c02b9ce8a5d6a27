import { NodeError } from '../classify.js'
import { formatDuration } from '../duration.js'
import { hintFor } from '../hints.js'
import type { ClusterNode } from '../inventory.js'
import type { NodeOutcome, Phase, StepReporter } from '../phase.js'
import { pollUntil, PollTimeout, type PollAnswer } from '../poll.js'
import type { Run } from '../run.js'
import type { MachineStatus } from '../tools/talosctl.js'

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

/** Verified: a worker running; a control plane running, or booting with etcd waiting for its bootstrap. */
async function verified(node: ClusterNode, run: Run, status: MachineStatus): Promise<string | undefined> {
  if (status.stage === 'running') return status.ready ? 'running, ready' : 'running'
  if (node.role !== 'controlplane' || status.stage !== 'booting') return undefined
  const etcd = await run.talosctl.serviceStatus(node, 'etcd')
  run.facts.of(node.name).etcd = etcd.state
  if (etcd.state === 'Preparing' || etcd.state === 'Waiting') return 'booting, etcd waiting for bootstrap'
  return undefined
}

async function verifyNode(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  const watch = new StageWatch()
  const check = async (elapsed: number): Promise<PollAnswer<string>> => {
    let status: MachineStatus
    try {
      status = await run.talosctl.machineStatus(node)
    } catch (err) {
      if (!(err instanceof NodeError)) throw err
      if (WAITABLE.has(err.kind)) {
        watch.wentDown = true
        watch.see('not answering', elapsed)
      } else if (err.kind === 'maintenance') {
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
    if (watch.rebootsAfterBoot >= BOOT_LOOP_REBOOTS) throw bootLoop(node, watch)
    const done = await verified(node, run, status)
    if (done) return { done: true, value: done }
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
    const message = watch.answered
      ? `not verified within ${formatDuration(run.settings.verifyTimeoutMs)}: ${err.lastState}`
      : `never answered on the authenticated API within ${formatDuration(run.settings.verifyTimeoutMs)}`
    throw new NodeError(kind, message, hintFor(kind, node))
  }
}

function bootLoop(node: ClusterNode, watch: StageWatch): NodeError {
  return new NodeError('stuck', `boot-looping: rebooted ${watch.rebootsAfterBoot} times after booting and never reached running`, hintFor('stuck', node))
}

export const verify: Phase = {
  name: 'verify',
  title: 'Verify nodes left maintenance and are up',
  steps: () => [{ kind: 'node', title: 'Verify nodes', readOnly: true, would: 'would wait until it is up on the authenticated API', run: verifyNode }],
}

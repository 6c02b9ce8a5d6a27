// The per-node rolling machinery of day 2 (docs/day2-design.md 2.4), shared by cluster:apply (changes
// that reboot) and upgrade:talos: the etcd quorum gate before a control plane, the cordon marked as
// ours, the PDB-respecting drain with its timeout, the action (marked `sent` in the journal before it
// goes), the reboot seen by the boot ID, running and ready, the action's own check of what runs, the
// kubelet healthy and the Node Ready on the new boot (a control plane's static pods Ready too),
// the uncordon only if we cordoned it, then the operator's gate command. The caller gives the action
// and its check; the order and the waits are here.
import { NodeError } from '../../core/errors.ts'
import { hintFor, hintForNotStarted, kubectlCommand, taskCommand } from '../../cli/hints.ts'
import { kubeNodeName, type ClusterNode } from '../../core/model.ts'
import type { PhaseName } from '../../core/results.ts'
import type { StepReporter } from '../../engine/phase.ts'
import type { Run } from '../../engine/run.ts'
import { bootIdOf, condition, type KubeObject, type Kubectl } from '../../tools/kubectl.ts'
import { PollTimeout, type PollAnswer } from '../../wait/poll.ts'
import { blockedEvictions, describeBlocked } from './drain.ts'
import { runGateCommand } from './gate-command.ts'
import { CONTROL_PLANE_COMPONENTS, podWhy } from './health.ts'
import { waitForOwnMember, waitForQuorum } from './quorum.ts'
import { RollingReads } from './rolling-reads.ts'

/** The day-2 commands that roll nodes: the cordon's owner, and the task a hint reruns. */
export type RollingCommand = 'cluster:apply' | 'upgrade:talos'

/** kubectl, its failures' hints naming the command */
export function kubectlFor(run: Run, command: RollingCommand): Kubectl {
  return run.kubectl.withRecovery(command)
}

/** report.poll, its timeout a NodeError of `kind` naming what was still awaited. */
export async function waitFor<T>(
  report: StepReporter,
  run: Run,
  node: ClusterNode,
  what: string,
  kind: 'node-not-ready' | 'control-plane' | 'timeout',
  check: () => Promise<PollAnswer<T>>,
  timeoutMs: number = run.settings.readyTimeoutMs,
): Promise<T> {
  try {
    return await report.poll(check, timeoutMs)
  } catch (err) {
    if (!(err instanceof PollTimeout)) throw err
    throw new NodeError(kind, `${what} not seen within ${Math.round(err.waitedMs / 1000)}s: ${err.lastState}`, hintFor(kind, node))
  }
}

/** Kubelet Running and healthy, and the Node Ready (with the boot ID given, when one is): the Node as read. */
export async function kubeletAndNodeReady(reads: RollingReads, node: ClusterNode, bootId?: string): Promise<PollAnswer<KubeObject>> {
  // both read at once (one round trip, not two, between the node's return and its uncordon)
  const [kubelet, kube] = await Promise.all([reads.kubelet(node), reads.node(kubeNodeName(node))])
  if (kubelet.state !== 'Running' || kubelet.health !== 'OK')
    return { done: false, state: `kubelet ${kubelet.state}, health ${kubelet.health}` }
  if (!kube) return { done: false, state: `no Node ${kubeNodeName(node)}` }
  if (bootId !== undefined && bootIdOf(kube) !== bootId) return { done: false, state: 'the Node still shows the boot before the reboot' }
  const ready = condition(kube, 'Ready')
  if (ready?.status !== 'True') return { done: false, state: `Node not Ready${ready?.reason ? ` (${ready.reason})` : ''}` }
  return { done: true, value: kube }
}

/** The control plane's static pods Ready, each (in `versions`) at the config version given. */
export async function staticPodsReady(kubectl: Kubectl, node: ClusterNode, versions: Map<string, string>): Promise<PollAnswer<true>> {
  const waiting: string[] = []
  // the three in one kubectl call
  const name = (component: string): string => `${component}-${kubeNodeName(node)}`
  const pods = await kubectl.getMany('pod', CONTROL_PLANE_COMPONENTS.map(name), 'kube-system')
  for (const component of CONTROL_PLANE_COMPONENTS) {
    const pod = pods.get(name(component))
    if (!pod) {
      waiting.push(`${component}: no mirror pod`)
      continue
    }
    const want = versions.get(component)
    const has = pod.metadata.annotations?.['talos.dev/config-version']
    if (want !== undefined && has !== want) waiting.push(`${component}: config version ${has ?? 'none'}, expected ${want}`)
    else if (condition(pod, 'Ready')?.status !== 'True') waiting.push(`${component}: ${podWhy(pod).why}`)
  }
  return waiting.length === 0 ? { done: true, value: true } : { done: false, state: waiting.join('; ') }
}

/** The node's boot ID, or undefined while it does not answer (it is down). */
export async function bootIdNow(run: Run, node: ClusterNode): Promise<string | undefined> {
  try {
    return await run.talosctl.bootId(node)
  } catch (err) {
    if (err instanceof NodeError && err.transient) return undefined
    throw err
  }
}

/** the reboot wait's state while the node still answers on the boot it had before the action */
const NOT_REBOOTED = 'not rebooted yet (same boot ID)'

/** What a rolling step does to one node, between the drain and the reboot's end. */
export interface RollingAction {
  command: RollingCommand
  /** the journal's phase whose `sent` mark covers the action */
  phase: PhaseName
  /** the progress line while it is sent (`apply-config --mode reboot`) */
  what: string
  /** sends it; a refusal (nothing changed on the node) is thrown */
  send: () => Promise<void>
  /**
   * the send returns once the node is back (`talosctl upgrade --wait`): the first read after it takes
   * the boot ID and the machine status side by side, not one after the other
   */
  sendWaits?: boolean
  /** how long the reboot may take from the send to running and ready (default readyTimeout) */
  rebootTimeoutMs?: number
  /** the message's start when the reboot is not seen in time (`down: `) */
  downPrefix?: string
  /**
   * More than one reboot (`upgrade --stage`: the first boot still runs the old version while it
   * installs, then reboots again): given a new boot ID, what keeps it from being the last boot (a
   * state, the poll goes on) or undefined (the last one). When the last boot is not seen in time,
   * `unfinished` names the failure.
   */
  lastBoot?: {
    pending: (bootId: string) => Promise<string | undefined>
    unfinished: (waitedS: number, lastState: string, bootsSeen: number) => NodeError
  }
  /**
   * After the reboot, running and ready: whether what runs is what was sent. A `failure` (a rollback)
   * lets the node finish (ready, uncordoned: it serves again) and is thrown then, before the gate command.
   */
  verify: (bootId: string) => Promise<{ failure?: NodeError }>
  /**
   * The node took the action in an earlier run that stopped before its end (a rerun found it at its
   * target): no gate, cordon, drain or send; the waits, the uncordon and the gate command.
   */
  resumed?: boolean
  /** the quorum gate lets a single etcd member go down (the cluster's API goes with it) */
  acceptDowntime?: boolean
  /** the reads of the node, batched with the step's other nodes in flight (default: each alone) */
  reads?: RollingReads
}

/**
 * One node through the rolling states: gated (control planes), cordoned, drained, sent, rebooted,
 * verified, ready, uncordoned (if ours), gate passed. Returns the notes for the node's detail.
 */
export async function rollNode(node: ClusterNode, run: Run, report: StepReporter, action: RollingAction): Promise<string[]> {
  const kubectl = kubectlFor(run, action.command)
  const reads = action.reads ?? new RollingReads(run, kubectl)
  const rerun = taskCommand(action.command, { NODES: node.name })
  const notes: string[] = []
  const kubeName = kubeNodeName(node)
  /** the cordon is ours (this run's, or an earlier run's mark) */
  let ours = false
  let bootId: string
  if (!action.resumed) {
    if (node.role === 'controlplane') {
      report.progress('etcd quorum gate')
      const workers = run.nodes.filter((n) => n.role === 'worker').map((n) => n.name)
      const instead = {
        ...(workers.length > 0 ? { workersAlone: taskCommand(action.command, { NODES: workers.join(',') }) } : {}),
        acceptDowntime: taskCommand(action.command, { NODES: node.name }, ['--accept-downtime']),
      }
      const target = { node, instead, ...(action.acceptDowntime ? { acceptDowntime: true } : {}) }
      notes.push(`gate: ${await waitForQuorum(report, run, target, rerun)}`)
    }
    // the boot ID and the Node the cordon decides on, read at once
    const [from, seen] = await Promise.all([report.retry(() => run.talosctl.bootId(node)), report.retry(() => reads.node(kubeName))])
    report.progress('cordon')
    ours = await report.retry(() => kubectl.cordonOwned(kubeName, action.command, seen))
    report.progress(`drain (timeout ${Math.round(run.settings.drainTimeoutMs / 1000)}s)`)
    try {
      await kubectl.drain(kubeName, run.settings.drainTimeoutMs)
    } catch (err) {
      if (!(err instanceof NodeError) || err.kind !== 'drain-blocked') throw err
      const blocked = await blockedEvictions(run.kubectl, kubeName).catch(() => [])
      throw new NodeError(
        'drain-blocked',
        `drain not done within ${Math.round(run.settings.drainTimeoutMs / 1000)}s${blocked.length > 0 ? `: ${describeBlocked(blocked)}` : `: ${err.message}`}; nothing applied, the node stays cordoned`,
        // the command last: a hint is run as printed
        `see the budgets (\`${kubectlCommand('get pdb -A')}\`), let the pods move (scale the workload up or relax the budget; a rerun drains it again and goes on), then run again: ${rerun}`,
      )
    }
    report.progress(action.what)
    run.journal.sending(node.name, action.phase)
    const sentAt = performance.now()
    try {
      await action.send()
    } catch (err) {
      // refused: nothing changed on the node, whose outcome is known
      if (err instanceof NodeError && !run.signal.aborted) run.journal.settled(node.name, action.phase)
      throw err
    }
    report.progress('waiting for the reboot (boot ID)')
    /** the boots seen that were not the last one (a staged upgrade's install boot) */
    const firstBoots = new Set<string>()
    // down: no new boot ID within what is left of the action's time (talosctl upgrade's own wait may have used it all)
    const timeoutMs = Math.max(1_000, (action.rebootTimeoutMs ?? run.settings.readyTimeoutMs) - (performance.now() - sentAt))
    /** a send that waited for the node's return: its first read takes the machine status beside the boot ID */
    let readStatus = action.sendWaits === true
    let upAlready = false
    try {
      bootId = await report.poll(async () => {
        const withStatus = readStatus
        readStatus = false
        const [id, status] = await Promise.all([
          bootIdNow(run, node),
          withStatus ? reads.machineStatus(node).catch(() => undefined) : undefined,
        ])
        if (id === undefined) return { done: false, state: 'down' }
        if (id === from) return { done: false, state: NOT_REBOOTED }
        const pending = action.lastBoot ? await action.lastBoot.pending(id) : undefined
        if (pending !== undefined) {
          firstBoots.add(id)
          return { done: false, state: pending }
        }
        // both read while the new boot ID answers (a reboot keeps the API down for seconds: no old boot's status)
        upAlready = status?.stage === 'running' && status.ready
        return { done: true, value: id }
      }, timeoutMs)
    } catch (err) {
      if (!(err instanceof PollTimeout)) throw err
      if (action.lastBoot) throw action.lastBoot.unfinished(Math.round(err.waitedMs / 1000), err.lastState, firstBoots.size)
      // up all along on the boot it had: not a node that went down, one whose sequence never ran
      if (err.lastState === NOT_REBOOTED)
        throw new NodeError(
          'not-started',
          `${action.what} was taken, but ${node.name} kept answering on the boot it had for ${Math.round((performance.now() - sentAt) / 1000)}s: its sequence never started (nothing changed on it; it stays cordoned)`,
          hintForNotStarted(node, rerun),
        )
      throw new NodeError(
        'timeout',
        `${action.downPrefix ?? ''}the reboot (a new boot ID) not seen within ${Math.round(err.waitedMs / 1000)}s: ${err.lastState}`,
        hintFor('timeout', node),
      )
    }
    // back on a new boot: running and ready within readyTimeout (a slow start is not a node that stayed down)
    if (!upAlready)
      await waitFor(report, run, node, 'the node running and ready after its reboot', 'node-not-ready', async () => {
        const status = await reads.machineStatus(node)
        if (status.stage !== 'running' || !status.ready)
          return { done: false, state: `rebooted, ${status.stage}${status.ready ? '' : ', not ready'}` }
        return { done: true, value: true }
      })
    run.journal.settled(node.name, action.phase)
  } else {
    report.progress('resumed: waiting for the node running and ready')
    bootId = await waitFor(report, run, node, 'the node running and ready', 'timeout', async () => {
      const id = await bootIdNow(run, node)
      if (id === undefined) return { done: false, state: 'down' }
      const status = await reads.machineStatus(node)
      if (status.stage !== 'running' || !status.ready) return { done: false, state: `${status.stage}${status.ready ? '' : ', not ready'}` }
      return { done: true, value: id }
    })
    run.journal.settled(node.name, action.phase)
  }
  report.progress('waiting for the kubelet and the Node')
  // the wait's first read goes beside the action's check (one round trip less); it answers the wait's first poll
  let first: Promise<PollAnswer<KubeObject>> | undefined = kubeletAndNodeReady(reads, node, bootId)
  void first.catch(() => undefined)
  const { failure } = await action.verify(bootId)
  const ready = await waitFor(report, run, node, 'the kubelet healthy and the Node Ready after the reboot', 'node-not-ready', () => {
    const read = first ?? kubeletAndNodeReady(reads, node, bootId)
    first = undefined
    return read
  })
  if (node.role === 'controlplane') {
    report.progress('waiting for the static pods')
    await waitFor(report, run, node, 'the static pods Ready', 'control-plane', () => staticPodsReady(kubectl, node, new Map()))
    report.progress('waiting for its etcd member healthy and caught up')
    notes.push(await waitForOwnMember(report, run, node, taskCommand(action.command)))
  }
  // only our own mark is taken off (uncordonOwned reads it): a node the operator cordoned stays so
  // decided on the Node the wait read last (no read of its own: a Node changed since answers Conflict and is read again)
  const uncordoned = await report.retry(() => kubectl.uncordonOwned(kubeName, ready))
  if (failure) throw failure
  notes.push(
    action.resumed
      ? `finished after an interrupted run${uncordoned ? ', uncordoned' : ''}`
      : ours
        ? 'rebooted, uncordoned'
        : 'rebooted; left cordoned (it was cordoned before this run)',
  )
  // the operator's own check before the next node (its failure stops the step: no further node starts)
  const gate = await gateAfter(run, report, node, action.phase, action.command)
  if (gate) notes.push(gate)
  return notes
}

/**
 * GATE_COMMAND after `node` was changed (`rebooted`, or a `live` change applied and waited for): its
 * detail, or undefined without one. A gate that keeps failing fails the node (kind `gate-command`),
 * which is done. After a reboot the rerun runs the gate after it again; a live change is not redone,
 * so its hint asks for the gate to pass first.
 */
export async function gateAfter(
  run: Run,
  report: StepReporter,
  node: ClusterNode,
  phase: PhaseName,
  command: RollingCommand,
  change: 'rebooted' | 'live' = 'rebooted',
): Promise<string | undefined> {
  try {
    return await runGateCommand(run, report, node, phase)
  } catch (err) {
    if (!(err instanceof NodeError) || err.kind !== 'gate-command') throw err
    throw new NodeError(
      'gate-command',
      err.message,
      change === 'live'
        ? `the gate command (GATE_COMMAND) kept failing after ${node.name}'s live change: see its output in the message and fix what it checks; the change is applied and stays (a rerun does not apply it again), so once the gate passes, run again: ${taskCommand(command)}`
        : `the gate command (GATE_COMMAND) kept failing after ${node.name} was done: see its output in the message, fix what it checks; the node is done, and a rerun runs the gate after it, then the nodes still to do, so then run again: ${taskCommand(command)}`,
    )
  }
}

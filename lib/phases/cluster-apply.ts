// cluster:apply (issue 31, docs/day2-design.md 2.5): re-apply the generated machine configs to a
// running cluster. A plan per node from the node's own dry run (always `--mode try`: any other mode
// cancels a pending try revert), printed with the redacted diff; DRY_RUN stops there. Live changes
// go out within CONCURRENCY and are waited for; changes that need a reboot go node by node through a
// rolling reboot (cordon, PDB-respecting drain, apply, the boot ID changed, running and ready, the
// config active, Node Ready, uncordon only if we cordoned), control planes one at a time behind the
// etcd quorum gate. A rerun plans again from the live state: what was applied shows no change.
import { readFileSync } from 'node:fs'
import { isDeepStrictEqual } from 'node:util'
import { parseAllDocuments } from 'yaml'
import { InputError, NodeError } from '../core/errors.js'
import { hintFor, kubectlCommand, talosctlCommand, taskCommand } from '../cli/hints.js'
import { output } from '../cli/output.js'
import { kubeNodeName, type ClusterNode } from '../core/model.js'
import type { NodeOutcome, NodeStep, Phase, StepReporter } from '../engine/phase.js'
import type { Run } from '../engine/run.js'
import { bootIdOf, condition, CORDONED_BY, type Kubectl } from '../tools/kubectl.js'
import { APPLY_MODES, type ApplyMode } from '../tools/talosctl.js'
import { PollTimeout, type PollAnswer } from '../wait/poll.js'
import { blockedEvictions, describeBlocked } from './shared/drain.js'
import { CONTROL_PLANE_COMPONENTS, podWhy } from './shared/health.js'
import { runGateCommand } from './shared/gate-command.js'
import { waitForQuorum } from './shared/quorum.js'

/**
 * What the plan found on a node:
 * - none: the node runs the config (and nothing else is pending);
 * - live: a change Talos applies without a reboot;
 * - reboot: a change that needs one (the node's try refused it, with the diff of what needs it);
 * - staged-pending: `persistent` holds the desired config and the active one differs: a reboot takes it;
 * - try-in-effect: the active config is the desired one from a try, `persistent` still the old one
 *   (its revert timer, if any, still runs): an apply commits it.
 */
export type PlanClass = 'none' | 'live' | 'reboot' | 'staged-pending' | 'try-in-effect'

/** What the apply steps do to a node. */
type Action =
  | { kind: 'nothing' }
  | { kind: 'apply'; mode: 'no-reboot' | 'try' | 'staged' }
  | { kind: 'rolling'; how: 'apply' | 'reboot' }
  | { kind: 'already-staged' }

interface NodePlan {
  class: PlanClass
  action: Action
  /** the redacted diff the plan shows */
  diff?: string
  /** a note on the config pending on the node (staged elsewhere, a try in effect) */
  note?: string
  /** the Node carries our cordon mark (an earlier run stopped before its uncordon) */
  cordonedByUs: boolean
}

const plans = new WeakMap<Run, Map<string, NodePlan>>()

/** kubectl, its failures' hints naming this command */
function kubectl(run: Run): Kubectl {
  return run.kubectl.withRecovery('cluster:apply')
}

function planOf(run: Run, node: ClusterNode): NodePlan | undefined {
  return plans.get(run)?.get(node.name)
}

function modeOf(run: Run): ApplyMode {
  return (run.options.mode ?? 'auto') as ApplyMode
}

/** The v1alpha1 document of a machine config file (the one without `kind`). */
function desiredConfig(file: string): unknown {
  for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
    const value = doc.toJS() as { kind?: unknown } | null
    if (value && typeof value === 'object' && value.kind === undefined) return value
  }
  return undefined
}

/** Values of lines that carry key material, masked on top of the run's redactor (certificates, keys, tokens, secrets). */
export function redactDiff(diff: string, redact: (text: string) => string): string {
  return redact(diff)
    .split('\n')
    .map((line) => line.replace(/^([-+ ]\s*(?:[\w.-]*?)(?:crt|key|token|secret)\s*:\s*)(\S.*)$/i, '$1***'))
    .join('\n')
}

function lineCount(diff: string): string {
  const changed = diff.split('\n').filter((l) => /^[-+](?![-+]{2} )/.test(l)).length
  return `${changed} line(s) changed`
}

/** MODE against the class (2.5): which action, or why the node is refused. */
function decide(node: ClusterNode, mode: ApplyMode, cls: PlanClass, liveAnyway: boolean): Action {
  if (cls === 'none') return { kind: 'nothing' }
  switch (mode) {
    case 'auto':
      if (cls === 'live' || cls === 'try-in-effect') return { kind: 'apply', mode: 'no-reboot' }
      return { kind: 'rolling', how: cls === 'staged-pending' ? 'reboot' : 'apply' }
    case 'reboot':
      return { kind: 'rolling', how: cls === 'staged-pending' ? 'reboot' : 'apply' }
    case 'staged':
      return cls === 'staged-pending' ? { kind: 'already-staged' } : { kind: 'apply', mode: 'staged' }
    case 'no-reboot':
    case 'try':
      // a staged config the node could also take live: applied live; anything needing a reboot is refused
      if (cls === 'live' || cls === 'try-in-effect' || (cls === 'staged-pending' && liveAnyway))
        return { kind: 'apply', mode: mode === 'try' ? 'try' : 'no-reboot' }
      throw new NodeError('needs-reboot', `${node.name}: the change needs a reboot; refused in ${mode} mode`, hintFor('needs-reboot', node))
  }
}

async function planNode(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  report.progress('reading its machine configs')
  const configs = await report.retry(() => run.talosctl.machineConfigs(node))
  const desired = desiredConfig(node.configFile)
  report.progress('dry run (mode try)')
  const dry = await report.retry(() => run.talosctl.applyDryRun(node, node.configFile))
  if (dry.class === 'invalid')
    throw new NodeError('config-invalid', `the node refuses ${node.configFile}: ${dry.text}`, hintFor('config-invalid', node))
  const pending = configs.persistent !== undefined && !isDeepStrictEqual(configs.persistent, configs.active)
  let cls: PlanClass = dry.class
  let note: string | undefined
  if (pending && isDeepStrictEqual(configs.persistent, desired)) {
    cls = 'staged-pending'
    note = 'staged config pending: the desired config is staged, a reboot applies it'
  } else if (pending && isDeepStrictEqual(configs.active, desired)) {
    cls = 'try-in-effect'
    note = 'try in effect: the desired config runs from a try and the next reboot would revert it; applying commits it'
  } else if (pending) {
    note = 'another config is staged on the node (neither the active nor the desired one): the apply replaces it'
  }
  const diff = 'diff' in dry ? redactDiff(dry.diff, (t) => run.redactor.redact(t)) : undefined
  const kube = planKube(run) ? await report.retry(() => kubectl(run).get('node', kubeNodeName(node))) : undefined
  const cordonedByUs = kube?.metadata.annotations?.[CORDONED_BY] !== undefined
  const action = decide(node, modeOf(run), cls, dry.class === 'live')
  let byNode = plans.get(run)
  if (!byNode) plans.set(run, (byNode = new Map()))
  byNode.set(node.name, { class: cls, action, ...(diff ? { diff } : {}), ...(note ? { note } : {}), cordonedByUs })
  const what: Record<PlanClass, string> = {
    none: 'no change',
    live: `live change, ${diff ? lineCount(diff) : ''}`,
    reboot: `needs a reboot, ${diff ? lineCount(diff) : ''}`,
    'staged-pending': 'staged config pending (a reboot applies it)',
    'try-in-effect': 'try in effect (an apply commits it)',
  }
  return { status: 'ok', detail: `${what[cls]}${cordonedByUs ? '; cordoned by an earlier run' : ''}` }
}

/** The plan reads each Node for our cordon mark, except in a dry run that runs no call at all (cluster:apply's DRY_RUN runs the plan). */
function planKube(run: Run): boolean {
  return run.options.dryRun !== true
}

/** The plan, per node, with its redacted diff (stdout, after the plan step). */
function printPlan(run: Run): string {
  const lines: string[] = []
  let changed = 0
  for (const node of run.nodes) {
    const plan = planOf(run, node)
    if (!plan) continue
    const action = describeAction(plan.action)
    if (plan.class !== 'none') changed++
    lines.push(`${node.name} (${node.address}): ${plan.class}${action ? ` -> ${action}` : ''}${plan.note ? ` (${plan.note})` : ''}`)
    if (plan.diff) lines.push(...plan.diff.split('\n').map((l) => `    ${l}`))
  }
  if (lines.length > 0) output.info(['PLAN (cluster:apply)', ...lines].join('\n'))
  return `${changed} of ${run.nodes.length} node(s) to change${run.options.planOnly ? ' (DRY_RUN: nothing applied)' : ''}`
}

function describeAction(action: Action): string {
  switch (action.kind) {
    case 'nothing':
      return ''
    case 'apply':
      return `apply --mode ${action.mode}`
    case 'rolling':
      return action.how === 'apply' ? 'rolling: apply --mode reboot' : 'rolling: reboot into the staged config'
    case 'already-staged':
      return 'already staged (reboot pending)'
  }
}

/** Kubelet Running and healthy, and the Node Ready (with the boot ID given, when one is). */
async function kubeletAndNodeReady(run: Run, node: ClusterNode, bootId?: string): Promise<PollAnswer<true>> {
  const kubelet = await run.talosctl.serviceStatus(node, 'kubelet')
  if (kubelet.state !== 'Running' || kubelet.health !== 'OK')
    return { done: false, state: `kubelet ${kubelet.state}, health ${kubelet.health}` }
  const kube = await kubectl(run).get('node', kubeNodeName(node))
  if (!kube) return { done: false, state: `no Node ${kubeNodeName(node)}` }
  if (bootId !== undefined && bootIdOf(kube) !== bootId) return { done: false, state: 'the Node still shows the boot before the reboot' }
  const ready = condition(kube, 'Ready')
  if (ready?.status !== 'True') return { done: false, state: `Node not Ready${ready?.reason ? ` (${ready.reason})` : ''}` }
  return { done: true, value: true }
}

/** The control plane's static pods Ready, each (in `versions`) at the config version given. */
async function staticPodsReady(run: Run, node: ClusterNode, versions: Map<string, string>): Promise<PollAnswer<true>> {
  const waiting: string[] = []
  for (const component of CONTROL_PLANE_COMPONENTS) {
    const pod = await kubectl(run).get('pod', `${component}-${kubeNodeName(node)}`, 'kube-system')
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

/** report.poll, its timeout a NodeError of `kind` naming what was still awaited. */
async function waitFor<T>(
  report: StepReporter,
  run: Run,
  node: ClusterNode,
  what: string,
  kind: 'node-not-ready' | 'control-plane' | 'timeout',
  check: () => Promise<PollAnswer<T>>,
): Promise<T> {
  try {
    return await report.poll(check, run.settings.readyTimeoutMs)
  } catch (err) {
    if (!(err instanceof PollTimeout)) throw err
    throw new NodeError(kind, `${what} not seen within ${Math.round(err.waitedMs / 1000)}s: ${err.lastState}`, hintFor(kind, node))
  }
}

/** A live change (or try, or staged): sent within CONCURRENCY; live ones waited for. */
async function applyLive(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  const plan = planOf(run, node) as NodePlan
  if (plan.action.kind === 'already-staged') return { status: 'skipped', detail: 'staged (reboot pending)' }
  if (plan.action.kind !== 'apply') {
    // an earlier run cordoned it and stopped before the uncordon: the node runs the config, so finish
    await waitFor(report, run, node, 'the kubelet healthy and the Node Ready', 'node-not-ready', () => kubeletAndNodeReady(run, node))
    await report.retry(() => kubectl(run).uncordonOwned(kubeNodeName(node)))
    return { status: 'ok', detail: 'no change; uncordoned (cordoned by an earlier run)' }
  }
  const mode = plan.action.mode
  const cp = node.role === 'controlplane' && mode !== 'staged'
  const before = cp ? await report.retry(() => run.talosctl.controlPlaneConfigVersions(node)) : undefined
  report.progress(`apply-config --mode ${mode}`)
  run.journal.sending(node.name, 'cluster-apply')
  let answer: string
  try {
    answer = await report.retry(() => run.talosctl.apply(node, node.configFile, mode))
  } finally {
    if (!run.signal.aborted) run.journal.settled(node.name, 'cluster-apply')
  }
  if (mode === 'staged') return { status: 'ok', detail: 'staged (reboot pending)' }
  report.progress('waiting for the kubelet and the Node')
  await waitFor(report, run, node, 'the kubelet healthy and the Node Ready', 'node-not-ready', () => kubeletAndNodeReady(run, node))
  let unversioned = false
  if (cp) {
    const after = before && (await report.retry(() => run.talosctl.controlPlaneConfigVersions(node)))
    // without the typed configs (a node that does not serve them) only readiness can be checked: said in the detail
    unversioned = !after
    const changed = new Map([...(after ?? [])].filter(([component, version]) => before?.get(component) !== version))
    report.progress('waiting for the static pods')
    await waitFor(report, run, node, 'the static pods at the new config version and Ready', 'control-plane', () =>
      staticPodsReady(run, node, changed),
    )
  }
  const revert = /reverted back in (\S+)/.exec(answer)?.[1]
  const applied = mode === 'try' ? `applied in try mode: reverted in ${revert ?? '?'} unless committed` : 'applied live'
  const note = unversioned ? ' (the node serves no APIServerConfigs: its static pods were checked Ready, not their config version)' : ''
  return { status: 'ok', detail: `${applied}${note}` }
}

/** The node's boot ID, or undefined while it does not answer (it is down). */
async function bootIdNow(run: Run, node: ClusterNode): Promise<string | undefined> {
  try {
    return await run.talosctl.bootId(node)
  } catch (err) {
    if (err instanceof NodeError && err.transient) return undefined
    throw err
  }
}

/**
 * A change that needs a reboot (docs/day2-design.md 2.4's states for apply): gated (control planes),
 * cordoned, drained, sent, rebooted (boot ID), running and ready, the config active, Node Ready (and
 * the static pods on a control plane), uncordoned if ours.
 */
async function rollNode(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  const plan = planOf(run, node) as NodePlan
  if (plan.action.kind !== 'rolling') return { status: 'skipped' }
  const how = plan.action.how
  const notes: string[] = []
  if (node.role === 'controlplane') {
    report.progress('etcd quorum gate')
    notes.push(`gate: ${await waitForQuorum(report, run, { node })}`)
  }
  const from = await report.retry(() => run.talosctl.bootId(node))
  const kubeName = kubeNodeName(node)
  report.progress('cordon')
  const ours = await report.retry(() => kubectl(run).cordonOwned(kubeName, 'cluster:apply'))
  report.progress(`drain (timeout ${Math.round(run.settings.drainTimeoutMs / 1000)}s)`)
  try {
    await kubectl(run).drain(kubeName, run.settings.drainTimeoutMs)
  } catch (err) {
    if (!(err instanceof NodeError) || err.kind !== 'drain-blocked') throw err
    const blocked = await blockedEvictions(run.kubectl, kubeName).catch(() => [])
    throw new NodeError(
      'drain-blocked',
      `drain not done within ${Math.round(run.settings.drainTimeoutMs / 1000)}s${blocked.length > 0 ? `: ${describeBlocked(blocked)}` : `: ${err.message}`}; nothing applied, the node stays cordoned`,
      `see the budgets (\`${kubectlCommand('get pdb -A')}\`), let the pods move (scale the workload up or relax the budget), then run again: ${taskCommand('cluster:apply', { NODES: node.name })} (it drains again and goes on)`,
    )
  }
  report.progress(how === 'apply' ? 'apply-config --mode reboot' : 'reboot into the staged config')
  run.journal.sending(node.name, 'cluster-apply')
  // only the apply mutex is retried: a lost answer may have started the reboot, and a second apply would reboot it again
  await report.retry(
    async () => {
      if (how === 'apply') await run.talosctl.apply(node, node.configFile, 'reboot')
      else await run.talosctl.reboot(node)
    },
    {
      retries: (e) => e.kind === 'busy' && /another apply configuration is already in progress/.test(e.message),
    },
  )
  report.progress('waiting for the reboot (boot ID)')
  const bootId = await waitFor(report, run, node, 'the reboot (a new boot ID) and the node running and ready', 'timeout', async () => {
    const id = await bootIdNow(run, node)
    if (id === undefined) return { done: false, state: 'down' }
    if (id === from) return { done: false, state: 'not rebooted yet (same boot ID)' }
    const status = await run.talosctl.machineStatus(node)
    if (status.stage !== 'running' || !status.ready)
      return { done: false, state: `rebooted, ${status.stage}${status.ready ? '' : ', not ready'}` }
    return { done: true, value: id }
  })
  run.journal.settled(node.name, 'cluster-apply')
  const configs = await report.retry(() => run.talosctl.machineConfigs(node))
  if (!isDeepStrictEqual(configs.active, desiredConfig(node.configFile))) {
    throw new NodeError(
      'unknown',
      `rebooted (boot ID changed) but the active config is not ${node.configFile}: the node did not keep the change`,
      `compare \`${talosctlCommand(node, 'get mc v1alpha1 -o yaml')}\` with ${node.configFile}; the node's log names why (\`${talosctlCommand(node, 'dmesg')}\`), then run again: ${taskCommand('cluster:apply', { NODES: node.name })}`,
    )
  }
  report.progress('waiting for the kubelet and the Node')
  await waitFor(report, run, node, 'the kubelet healthy and the Node Ready after the reboot', 'node-not-ready', () =>
    kubeletAndNodeReady(run, node, bootId),
  )
  if (node.role === 'controlplane') {
    report.progress('waiting for the static pods')
    await waitFor(report, run, node, 'the static pods Ready', 'control-plane', () => staticPodsReady(run, node, new Map()))
  }
  if (ours) {
    report.progress('uncordon')
    await report.retry(() => kubectl(run).uncordonOwned(kubeName))
  }
  notes.push(ours ? 'rebooted, uncordoned' : 'rebooted; left cordoned (it was cordoned before this run)')
  // the operator's own check before the next node (its failure stops the step: no further node starts)
  const gate = await runGateCommand(run, report, node, 'cluster-apply')
  if (gate) notes.push(gate)
  return { status: 'ok', detail: notes.join('; ') }
}

/** Steps after the plan: none in a plan-only dry run. */
function acts(run: Run): boolean {
  return run.options.planOnly !== true
}

const rolling = (role: ClusterNode['role']): Pick<NodeStep, 'applies'> => ({
  applies: (node, run) => acts(run) && node.role === role && planOf(run, node)?.action.kind === 'rolling',
})

export const clusterApply: Phase = {
  name: 'cluster-apply',
  title: 'Apply the machine configs to the running cluster',
  check: (run) => {
    const mode = run.options.mode ?? 'auto'
    if (!(APPLY_MODES as readonly string[]).includes(mode))
      throw new InputError(`MODE must be one of ${APPLY_MODES.join(', ')}, got ${JSON.stringify(mode)}`, {
        fix: `write MODE=auto (or ${APPLY_MODES.filter((m) => m !== 'auto').join(', ')})`,
      })
    return Promise.resolve()
  },
  steps: () => [
    {
      kind: 'node',
      title: 'Plan (dry run per node)',
      readOnly: true,
      would: 'would read its configs and dry-run the apply',
      run: planNode,
    },
    {
      kind: 'cluster',
      name: 'plan',
      title: 'The plan',
      run: (run) => Promise.resolve(printPlan(run)),
    },
    {
      kind: 'node',
      title: 'Apply live changes',
      would: 'would apply the live change and wait for the kubelet and the Node',
      applies: (node, run) => {
        const plan = planOf(run, node)
        return (
          acts(run) &&
          plan !== undefined &&
          (plan.action.kind === 'apply' || plan.action.kind === 'already-staged' || (plan.action.kind === 'nothing' && plan.cordonedByUs))
        )
      },
      run: applyLive,
    },
    {
      kind: 'node',
      title: 'Rolling reboot: control planes, one at a time behind the quorum gate',
      would: 'would pass the quorum gate, drain, apply with a reboot and wait for it',
      ...rolling('controlplane'),
      concurrency: () => 1,
      stopOnFailure: true,
      run: rollNode,
    },
    {
      kind: 'node',
      title: 'Rolling reboot: workers',
      would: 'would cordon, drain, apply with a reboot and wait for it',
      ...rolling('worker'),
      stopOnFailure: true,
      run: rollNode,
    },
  ],
}

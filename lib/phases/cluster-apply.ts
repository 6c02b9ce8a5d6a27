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
import { InputError, NodeError } from '../core/errors.ts'
import { hintFor, setRerunArgs, talosctlCommand, taskCommand } from '../cli/hints.ts'
import { output } from '../cli/output.ts'
import { kubeNodeName, type ClusterNode } from '../core/model.ts'
import type { NodeOutcome, NodeStep, Phase, StepReporter } from '../engine/phase.ts'
import type { Run } from '../engine/run.ts'
import { CORDONED_BY, type Kubectl } from '../tools/kubectl.ts'
import { APPLY_MODES, type ApplyMode } from '../tools/talosctl.ts'
import { gateAfter, kubectlFor, kubeletAndNodeReady, rollNode as roll, staticPodsReady, waitFor } from './shared/rolling.ts'
import { RollingReads } from './shared/rolling-reads.ts'
import { snapshotBeforeDowntime, takesOnlyControlPlaneDown } from './shared/downtime-snapshot.ts'
import { versionsStep } from './shared/versions.ts'
import { acts, perRun } from './shared/per-run.ts'
import { compareCore, parseVersion, tagOf } from '../input/versions.ts'

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

const plans = perRun(() => new Map<string, NodePlan>())

/** kubectl, its failures' hints naming this command */
const kubectl = (run: Run): Kubectl => kubectlFor(run, 'cluster:apply')

function planOf(run: Run, node: ClusterNode): NodePlan | undefined {
  return plans(run).get(node.name)
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

/** The Kubernetes images a v1alpha1 config names: the kubelet, and on a control plane its components. */
const KUBERNETES_IMAGES: Array<[string, (c: ConfigImages) => string | undefined]> = [
  ['machine.kubelet.image', (c) => c.machine?.kubelet?.image],
  ['cluster.apiServer.image', (c) => c.cluster?.apiServer?.image],
  ['cluster.controllerManager.image', (c) => c.cluster?.controllerManager?.image],
  ['cluster.scheduler.image', (c) => c.cluster?.scheduler?.image],
  ['cluster.proxy.image', (c) => c.cluster?.proxy?.image],
]
interface ConfigImages {
  machine?: { kubelet?: { image?: string } }
  cluster?: Record<'apiServer' | 'controllerManager' | 'scheduler' | 'proxy', { image?: string } | undefined>
}

/**
 * Each Kubernetes image whose tag the desired config lowers against the active one: the configs were
 * not generated again after upgrade:k8s, and applying them would take Kubernetes back.
 */
export function kubernetesDowngrades(active: unknown, desired: unknown): Array<{ field: string; from: string; to: string }> {
  const out: Array<{ field: string; from: string; to: string }> = []
  for (const [field, image] of KUBERNETES_IMAGES) {
    const from = tagOf(image((active ?? {}) as ConfigImages))
    const to = tagOf(image((desired ?? {}) as ConfigImages))
    const [f, t] = [parseVersion(from ?? ''), parseVersion(to ?? '')]
    if (from && to && f && t && compareCore(t, f) < 0) out.push({ field, from, to })
  }
  return out
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
  const lowered = kubernetesDowngrades(configs.active, desired)
  if (lowered.length > 0 && !run.options.allowK8sDowngrade) {
    const kubelet = lowered.find((l) => l.field === 'machine.kubelet.image') ?? lowered[0]
    throw new NodeError(
      'version-skew',
      `${node.configFile} carries Kubernetes ${kubelet?.to} (${lowered.map((l) => `${l.field} ${l.to}`).join(', ')}), the node runs ${kubelet?.from}: applying it would downgrade Kubernetes, so nothing was applied`,
      `the configs were not generated again after upgrade:k8s: set kubernetesVersion: ${kubelet?.from} in talconfig.yaml (or topf.yaml), generate the configs again (to go back on purpose instead, add -- --allow-k8s-downgrade), then run: ${taskCommand('cluster:apply', { NODES: node.name })}`,
    )
  }
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
  plans(run).set(node.name, { class: cls, action, ...(diff ? { diff } : {}), ...(note ? { note } : {}), cordonedByUs })
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

/** A live change (or try, or staged): sent within CONCURRENCY; live ones waited for. */
async function applyLive(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  const plan = planOf(run, node) as NodePlan
  if (plan.action.kind === 'already-staged') return { status: 'skipped', detail: 'staged (reboot pending)' }
  if (plan.action.kind !== 'apply') {
    // an earlier run cordoned it and stopped before the uncordon: the node runs the config, so finish
    const reads = new RollingReads(run, kubectl(run))
    await waitFor(report, run, node, 'the kubelet healthy and the Node Ready', 'node-not-ready', () => kubeletAndNodeReady(reads, node))
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
  const reads = new RollingReads(run, kubectl(run))
  await waitFor(report, run, node, 'the kubelet healthy and the Node Ready', 'node-not-ready', () => kubeletAndNodeReady(reads, node))
  let unversioned = false
  if (cp) {
    const after = before && (await report.retry(() => run.talosctl.controlPlaneConfigVersions(node)))
    // without the typed configs (a node that does not serve them) only readiness can be checked: said in the detail
    unversioned = !after
    const changed = new Map([...(after ?? [])].filter(([component, version]) => before?.get(component) !== version))
    report.progress('waiting for the static pods')
    await waitFor(report, run, node, 'the static pods at the new config version and Ready', 'control-plane', () =>
      staticPodsReady(kubectl(run), node, changed),
    )
  }
  const revert = /reverted back in (\S+)/.exec(answer)?.[1]
  const applied = mode === 'try' ? `applied in try mode: reverted in ${revert ?? '?'} unless committed` : 'applied live'
  const note = unversioned ? ' (the node serves no APIServerConfigs: its static pods were checked Ready, not their config version)' : ''
  // the operator's own check after each changed node, as after a reboot
  const gate = await gateAfter(run, report, node, 'cluster-apply', 'cluster:apply', 'live')
  return { status: 'ok', detail: `${applied}${note}${gate ? `; ${gate}` : ''}` }
}

/**
 * A change that needs a reboot, through the rolling states (shared/rolling.ts): the action is
 * `apply-config --mode reboot` (or a reboot into the staged config), its check the config active.
 */
async function rollNode(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  const plan = planOf(run, node) as NodePlan
  if (plan.action.kind !== 'rolling') return { status: 'skipped' }
  const how = plan.action.how
  const snapshot = takesOnlyControlPlaneDown(run, node) ? await snapshotBeforeDowntime(run, node, report, 'reboot') : undefined
  const notes = await roll(node, run, report, {
    command: 'cluster:apply',
    phase: 'cluster-apply',
    acceptDowntime: run.options.acceptDowntime === true,
    what: how === 'apply' ? 'apply-config --mode reboot' : 'reboot into the staged config',
    // only the apply mutex is retried: a lost answer may have started the reboot, and a second apply would reboot it again
    send: () =>
      report.retry(
        async () => {
          if (how === 'apply') await run.talosctl.apply(node, node.configFile, 'reboot')
          else await run.talosctl.reboot(node)
        },
        { retries: (e) => e.kind === 'busy' && /another apply configuration is already in progress/.test(e.message) },
      ),
    verify: async () => {
      const configs = await report.retry(() => run.talosctl.machineConfigs(node))
      if (!isDeepStrictEqual(configs.active, desiredConfig(node.configFile))) {
        throw new NodeError(
          'unknown',
          `rebooted (boot ID changed) but the active config is not ${node.configFile}: the node did not keep the change`,
          `compare \`${talosctlCommand(node, 'get mc v1alpha1 -o yaml')}\` with ${node.configFile}; the node's log names why (\`${talosctlCommand(node, 'dmesg')}\`), then run again: ${taskCommand('cluster:apply', { NODES: node.name })}`,
        )
      }
      return {}
    },
  })
  return { status: 'ok', detail: [...notes, ...(snapshot ? [`etcd snapshot: ${snapshot}`] : [])].join('; ') }
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
    // every hint naming cluster:apply repeats what this run was asked (a rerun without MODE or the
    // gate command would be another apply); it takes the only control plane down again only if this
    // run was allowed to
    setRerunArgs(
      'cluster:apply',
      {
        ...(mode !== 'auto' ? { MODE: mode } : {}),
        ...(run.nodes.length < run.inventory.nodes.length ? { NODES: run.nodes.map((n) => n.name).join(',') } : {}),
        ...(run.settings.gateCommand ? { GATE_COMMAND: run.settings.gateCommand } : {}),
      },
      [...(run.options.acceptDowntime ? ['--accept-downtime'] : []), ...(run.options.allowK8sDowngrade ? ['--allow-k8s-downgrade'] : [])],
    )
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
    versionsStep(),
  ],
}

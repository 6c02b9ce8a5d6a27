// upgrade:talos (issue 31 item 2, docs/day2-design.md 2.6): upgrade Talos node by node. A plan per
// node from the live state (its version, its schematic, its Kubernetes) against the target image
// (TALOS_VERSION in the node's own installer repository, keeping its schematic; or IMAGE), checked
// against Talos's compatibility table: a refusal (the installer's own text, a downgrade, Kubernetes
// outside the target's range) touches nothing. Then control planes strictly one at a time behind the
// etcd quorum gate, the leader last, and workers CONCURRENCY at a time, each through the rolling
// states (shared/rolling.ts) with `talosctl upgrade` as the action and, as its check, the version
// and schematic actually running: talosctl's own wait passes a node that rolled back. The first
// failure starts no further node. A rerun plans again from the live versions: upgraded nodes are
// already at target, a node an interrupted run sent (the journal's `sent` mark) is finished.
import { InputError, NodeError } from '../core/errors.ts'
import { hintFor, setRerunArgs, talosctlCommand, taskCommand } from '../cli/hints.ts'
import { output } from '../cli/output.ts'
import { controlPlanes, kubeNodeName, type ClusterNode } from '../core/model.ts'
import type { Day2Node } from '../core/results.ts'
import type { NodeOutcome, Phase, StepReporter } from '../engine/phase.ts'
import type { Run } from '../engine/run.ts'
import { MachineConfig } from '../input/machine-config.ts'
import {
  compareCore,
  installerImage,
  kubernetesSupported,
  parseVersion,
  schematicOfImage,
  tagOf,
  upgradeableFrom,
  versionText,
  type InstallerAsk,
  type Version,
} from '../input/versions.ts'
import { CORDONED_BY, kubeletVersionOf, type KubeObject } from '../tools/kubectl.ts'
import { extensionOf, secureBootOf } from '../tools/talosctl.ts'
import { PollTimeout } from '../wait/poll.ts'
import { kubectlFor, rollNode } from './shared/rolling.ts'
import { RollingReads, type Extension } from './shared/rolling-reads.ts'
import { snapshotBeforeDowntime, takesOnlyControlPlaneDown } from './shared/downtime-snapshot.ts'
import { mirrorPods, podImage, readNodesAtOnce, versionsStep } from './shared/versions.ts'
import { waitForGates } from './shared/gates.ts'
import { runGateCommand } from './shared/gate-command.ts'
import { acts, perRun } from './shared/per-run.ts'

/** What the plan found on a node. */
interface UpgradePlan {
  /** the Talos version it runs (`Tag`) */
  from: string
  /** the Image Factory schematic it runs, when any */
  schematic?: string
  /** the installer image its upgrade sends */
  image: string
  /** the version that image installs */
  target: Version
  /** the schematic the node runs after it (the image's; none for a plain installer) */
  targetSchematic?: string
  /** the kubelet's version (the Node's) */
  kubernetes?: string
  /** nothing to do: version and schematic at the target */
  atTarget: boolean
  /** at the target, but an earlier run sent the upgrade or cordoned it and stopped before the end */
  resume: boolean
  /** why the target is refused for this node (Talos's text, or the tool's) */
  refusal?: string
  /** the installer image that would do, when the refusal is of the installer and the node's schematic tells it */
  suggest?: string
}

interface RunPlan {
  byNode: Map<string, UpgradePlan>
  /** the control plane etcd's leader is on when the plan was made: upgraded last */
  leader?: string
}

const planOf = perRun<RunPlan>(() => ({ byNode: new Map() }))

function nodePlan(run: Run, node: ClusterNode): UpgradePlan | undefined {
  return planOf(run).byNode.get(node.name)
}

const ask = (run: Run): NonNullable<Run['options']['upgrade']> =>
  run.options.upgrade ?? {
    allowDowngrade: false,
    preserve: false,
    force: false,
    stage: false,
    rebootMode: 'default',
  }

/** The target version: TALOS_VERSION, or the tag of IMAGE. */
function targetVersion(run: Run): Version {
  const { talosVersion, image } = ask(run)
  const text = talosVersion ?? /:(v?\d+\.\d+\.\d+[^@/]*)(?:@.*)?$/.exec(image ?? '')?.[1]
  const version = text ? parseVersion(text) : undefined
  if (!version) throw new Error('unchecked target') // check() refused it before any step
  return version
}

/** machine.install.image of the node's config file, when it names one */
function installImageOf(node: ClusterNode): string | undefined {
  const value = MachineConfig.of(node.configFile).v1alpha1?.getIn(['machine', 'install', 'image'])
  return typeof value === 'string' && value ? value : undefined
}

/** The node's version (Tag). */
async function versionOf(run: Run, node: ClusterNode, report: StepReporter): Promise<string> {
  return report.retry(async () => {
    const answer = (await run.talosctl.versions([node], node)).get(node.address)
    if (!answer || answer.error)
      throw answer?.error ?? new NodeError('unknown', 'talosctl version printed no Tag for the node', hintFor('unknown', node))
    return answer.value
  })
}

/**
 * An earlier run sent this node its upgrade and never learned the outcome (killed with it in flight):
 * the node may be upgrading, rebooting or booting. Waited for until it runs and is ready again (up
 * to upgradeTimeout), so the plan reads the version it ends up with, not the one it is leaving.
 */
async function settleSent(run: Run, node: ClusterNode, report: StepReporter): Promise<void> {
  report.progress('an earlier run sent its upgrade: waiting for the node running and ready')
  try {
    await report.poll(async () => {
      try {
        const status = await run.talosctl.machineStatus(node)
        if (status.stage === 'running' && status.ready) return { done: true, value: true }
        return { done: false, state: `${status.stage}${status.ready ? '' : ', not ready'}` }
      } catch (err) {
        if (err instanceof NodeError && err.transient) return { done: false, state: `down (${err.message})` }
        throw err
      }
    }, run.settings.upgradeTimeoutMs)
  } catch (err) {
    if (!(err instanceof PollTimeout)) throw err
    throw new NodeError(
      'timeout',
      `down: an earlier run sent its upgrade and the node is not running and ready within ${Math.round(err.waitedMs / 1000)}s: ${err.lastState}`,
      hintFor('timeout', node),
    )
  }
}

/** The schematic the node runs (Image Factory's virtual `schematic` extension) and its other extensions, from its extensions read. */
function schematicOf(all: Array<Pick<Extension, 'name' | 'version'>>): { schematic?: string; extensions: string[] } {
  const schematic = all.find((e) => e.name === 'schematic')?.version
  return { ...(schematic ? { schematic } : {}), extensions: all.filter((e) => e.name !== 'schematic').map((e) => e.name) }
}

/**
 * Why the upgrade of a node running Talos `from` (and Kubernetes `kubernetes`, its kubelet's) to
 * `target` is refused, or undefined: a downgrade without --allow-downgrade; the target installer's
 * own refusal (its compatibility table, its text); a Kubernetes outside the target's range, naming the
 * step that fixes it when one does (`task upgrade:k8s TO=…`, one minor at a time).
 */
export function refusalOf(from: string, target: Version, kubernetes: string | undefined, allowDowngrade: boolean): string | undefined {
  const host = parseVersion(from)
  if (!host) return `the node runs ${from}, which is no version this tool can compare`
  if (compareCore(target, host) < 0 && !allowDowngrade)
    return `${versionText(target)} is older than the ${from} the node runs: a downgrade (give --allow-downgrade to do it)`
  const path = compareCore(target, host) !== 0 ? upgradeableFrom(host, target) : undefined
  if (path) return path.text
  return kubernetes ? kubernetesRefusal(kubernetes, target) : undefined
}

/** Why Kubernetes `kubernetes` keeps a node off Talos `target` (outside its range), naming what fixes it; undefined when it fits. */
function kubernetesRefusal(kubernetes: string, target: Version): string | undefined {
  const k8s = parseVersion(kubernetes)
  const k = k8s ? kubernetesSupported(k8s, target) : undefined
  if (!k || !k8s) return undefined
  return /too old/.test(k.text)
    ? `${k.text}: upgrade Kubernetes first, one minor at a time (${taskCommand('upgrade:k8s', { TO: `v${k8s.major}.${k8s.minor + 1}.x` })} first)`
    : `${k.text}: Kubernetes is never downgraded; pick a Talos version that runs it`
}

/**
 * A control plane's static pods against the target's Kubernetes range: after an upgrade:k8s that
 * stopped part-way they may run another version than the kubelet (the control plane goes first).
 */
async function staticPodRefusal(run: Run, node: ClusterNode, report: StepReporter, target: Version): Promise<string | undefined> {
  if (node.role !== 'controlplane') return undefined
  for (const [component, pod] of await report.retry(() => mirrorPods(run, node))) {
    const version = tagOf(podImage(pod))
    const refused = version ? kubernetesRefusal(version, target) : undefined
    if (refused) return `${component} on ${node.name} runs ${version}: ${refused}`
  }
  return undefined
}

/** Every node's version, extensions, Node and secure boot, each one call for all nodes. */
async function readPlanOnce(run: Run) {
  const first = controlPlanes(run.inventory)[0] ?? run.nodes[0]
  const [nodes, security] = await Promise.all([
    readNodesAtOnce(run, run.nodes),
    first
      ? run.talosctl.resources([first, ...run.nodes.filter((n) => n !== first)], first, 'securitystate').catch(() => undefined)
      : undefined,
  ])
  return { ...nodes, security }
}

/** The plan's reads of every node at once (four calls, not four per node), started by the first node's plan. */
const planReads = new WeakMap<Run, ReturnType<typeof readPlanOnce>>()

/**
 * The node's version, extensions, Node and secure boot as the plan reads them: from the reads of
 * every node at once, or (a node they could not tell, one an earlier run sent its upgrade: read after
 * it settled) on its own, each retried.
 */
async function planInputs(
  run: Run,
  node: ClusterNode,
  report: StepReporter,
  sent: boolean,
): Promise<{ from: string; extensions: Array<{ name: string; version: string }>; kube: KubeObject | undefined; secureBoot: boolean }> {
  let reads = planReads.get(run)
  if (!reads && !sent) planReads.set(run, (reads = readPlanOnce(run)))
  const at = sent ? undefined : await reads
  const version = at?.talos.get(node.address)?.value
  const docs = at?.extensions.get(node.address)?.value
  const security = at?.security?.get(node.address)?.value
  const from = version ?? (await versionOf(run, node, report))
  const extensions = docs?.map(extensionOf) ?? (await report.retry(() => run.talosctl.extensions(node)))
  const kube = at?.kube
    ? at.kube.get(kubeNodeName(node))
    : await report.retry(() => kubectlFor(run, 'upgrade:talos').get('node', kubeNodeName(node)))
  const secureBoot = security ? secureBootOf(security[0]) : await report.retry(() => run.talosctl.secureBoot(node))
  return { from, extensions, kube, secureBoot }
}

async function planNode(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  const sent = run.journal.sentAt(node.name, 'upgrade-talos')
  if (sent) await settleSent(run, node, report)
  report.progress('reading its version and schematic')
  const read = await planInputs(run, node, report, sent !== undefined)
  const from = read.from
  const host = parseVersion(from)
  const { schematic, extensions } = schematicOf(read.extensions)
  const target = targetVersion(run)
  const installer = installerImage(
    {
      ...(installImageOf(node) ? { installImage: installImageOf(node) } : {}),
      ...(schematic ? { schematic } : {}),
      extensions,
      secureBoot: read.secureBoot,
    },
    ask(run),
  )
  const kube = read.kube
  const kubernetes = kubeletVersionOf(kube)
  const image = 'image' in installer ? installer.image : ''
  const targetSchematic = schematicOfImage(image)
  const atTarget = host !== undefined && compareCore(host, target) === 0 && host.pre === target.pre && targetSchematic === schematic
  const cordonedByUs = kube?.metadata.annotations?.[CORDONED_BY] !== undefined
  const refusal =
    'refused' in installer
      ? installer.refused
      : atTarget
        ? undefined
        : (refusalOf(from, target, kubernetes, ask(run).allowDowngrade) ?? (await staticPodRefusal(run, node, report, target)))
  planOf(run).byNode.set(node.name, {
    from,
    ...(schematic ? { schematic } : {}),
    image,
    target,
    ...(targetSchematic ? { targetSchematic } : {}),
    ...(kubernetes ? { kubernetes } : {}),
    atTarget,
    resume: atTarget && (sent !== undefined || cordonedByUs),
    ...(refusal ? { refusal } : {}),
    ...('suggest' in installer && installer.suggest ? { suggest: installer.suggest } : {}),
  })
  run.facts.of(node.name).day2 = {
    state: refusal ? 'refused' : atTarget && !(sent !== undefined || cordonedByUs) ? 'already at target' : 'not started',
    from: { talos: from, ...(schematic ? { schematic } : {}) },
    to: { talos: `v${versionText(target)}`, ...(targetSchematic ? { schematic: targetSchematic } : {}), image },
  }
  const k8sNote = kubernetes ? `, Kubernetes ${kubernetes}` : ''
  if (refusal) return { status: 'ok', detail: `${from}${k8sNote}: refused: ${refusal}` }
  if (atTarget && !(sent !== undefined || cordonedByUs)) return { status: 'skipped', detail: `already at target (${from})` }
  if (atTarget) return { status: 'ok', detail: `${from}: at target, an earlier run stopped before its end: finishing it` }
  return { status: 'ok', detail: `${from}${schematic ? ` (schematic ${schematic.slice(0, 12)}…)` : ''}${k8sNote} -> ${image}` }
}

/** etcd's leader among the control planes (read once, for the order): the one upgraded last. */
async function leaderOf(run: Run): Promise<string | undefined> {
  const cps = controlPlanes(run.inventory)
  const via = cps[0]
  if (!via) return undefined
  const status = await run.talosctl.etcdStatus(cps, via).catch(() => new Map())
  const rows = [...status.values()].flatMap((a: { value?: { memberId: string; leader: string; node: string } }) =>
    a.value ? [a.value] : [],
  )
  const leaderId = rows.find((r) => r.leader && /[1-9a-f]/.test(r.leader))?.leader
  const address = rows.find((r) => r.memberId === leaderId)?.node
  return cps.find((cp) => cp.address === address)?.name
}

/**
 * What fixes the plan's refusals, ending with the command to run then: the same target once
 * Kubernetes is inside its range (upgraded first) or with --allow-downgrade when the only refusal is
 * a downgrade the table allows; otherwise another target.
 */
function skewHint(refusals: string[], suggested: Map<string, string[]>, others: string[], asked: InstallerAsk): string {
  // every refusal an installer that would not boot, each with the one that would: that one, per node
  const bySuggestion = [...suggested].reduce((n, [, nodes]) => n + nodes.length, 0)
  if (bySuggestion === refusals.length && bySuggestion > 0) {
    const runs = [...suggested].map(([image, nodes]) =>
      taskCommand('upgrade:talos', {
        // IMAGE in place of TALOS_VERSION (both are refused)
        ...(asked.talosVersion ? { TALOS_VERSION: '' } : {}),
        IMAGE: image,
        NODES: nodes.join(','),
      }),
    )
    if (others.length > 0) runs.push(taskCommand('upgrade:talos', { NODES: others.join(',') }))
    return `nothing was touched: run: ${runs.join('; then run: ')}`
  }
  const k8sFirst = refusals.every((r) => /upgrade Kubernetes first/.test(r))
  const downgrade = refusals.every((r) => /a downgrade \(give --allow-downgrade/.test(r))
  if (k8sFirst)
    return `nothing was touched: upgrade Kubernetes first as named above, one minor at a time; then, for the same upgrade, run: ${taskCommand('upgrade:talos')}`
  if (downgrade)
    return `nothing was touched: to downgrade on purpose (the table allows it), run: ${taskCommand('upgrade:talos', {}, ['--allow-downgrade'])}`
  return `nothing was touched: pick a target the compatibility table allows (one minor at a time from the oldest node; Kubernetes inside the target's range first), and put it in place of the refused one in: ${taskCommand('upgrade:talos')}`
}

/** The plan printed; any refusal fails the step (kind version-skew) and no node is touched. */
async function decidePlan(run: Run): Promise<string> {
  const plan = planOf(run)
  plan.leader = await leaderOf(run)
  const lines: string[] = []
  const refusals: string[] = []
  const suggested = new Map<string, string[]>()
  let toDo = 0
  for (const node of run.nodes) {
    const p = plan.byNode.get(node.name)
    if (!p) continue
    const what = p.refusal
      ? `refused: ${p.refusal}`
      : p.atTarget
        ? p.resume
          ? 'at target: finishing what an earlier run started'
          : 'already at target'
        : `${p.from} -> ${p.image}`
    lines.push(`${node.name} (${node.address}, ${node.role}${plan.leader === node.name ? ', etcd leader: last' : ''}): ${what}`)
    if (p.refusal) {
      refusals.push(`${node.name}: ${p.refusal}`)
      if (p.suggest) suggested.set(p.suggest, [...(suggested.get(p.suggest) ?? []), node.name])
    } else if (!p.atTarget || p.resume) toDo++
  }
  if (lines.length > 0) output.info(['PLAN (upgrade:talos)', ...lines].join('\n'))
  if (refusals.length > 0)
    throw new NodeError(
      'version-skew',
      `the upgrade is refused, nothing was touched: ${refusals.join('; ')}`,
      skewHint(
        refusals,
        suggested,
        run.nodes.filter((n) => !plan.byNode.get(n.name)?.refusal).map((n) => n.name),
        ask(run),
      ),
    )
  return `${toDo} of ${run.nodes.length} node(s) to upgrade${run.options.planOnly ? ' (DRY_RUN: nothing changed)' : ''}`
}

/** Where a node whose upgrade step failed ended, from its error (docs/report.md NodeResult.day2). */
function endedIn(err: unknown): Day2Node['state'] {
  if (!(err instanceof NodeError)) return 'failed'
  if (['upgrade-refused', 'image-missing', 'busy', 'drain-blocked', 'not-started'].includes(err.kind)) return 'cordoned'
  if (err.kind === 'rolled-back') return 'rolled back'
  // the gate command after it failed: the node itself is done
  if (err.kind === 'gate-command') return 'upgraded'
  // the quorum gate did not let it go: nothing was done to it
  if (err.kind === 'quorum') return 'not started'
  if (err.kind === 'timeout' && err.message.startsWith('down: ')) return 'down'
  return 'failed'
}

/**
 * `upgrade --stage` (v1alpha1_sequencer.go StageUpgrade, then Install on the next boot): the first
 * new boot still runs the old version while the staged install runs, then it reboots again. A boot
 * is the last one once the target version runs on it, or once it is running on another version: the
 * staged install runs before the boot gets there, so that boot is past it (a failed install, or a
 * new image the bootloader went back from), which the check after it names. A stage that never gets
 * there is `down`, named.
 */
function stagedLastBoot(run: Run, node: ClusterNode, target: string) {
  return {
    pending: async (bootId: string): Promise<string | undefined> => {
      const [answers, status] = await Promise.all([
        run.talosctl.versions([node], node).catch(() => new Map()),
        run.talosctl.machineStatus(node).catch(() => undefined),
      ])
      const running = (answers.get(node.address) as { value?: string; error?: unknown } | undefined)?.value
      if (running === undefined) return `staged: boot ${bootId.slice(0, 8)} does not answer its version yet`
      if (running === target || status?.stage === 'running') return undefined
      return `staged: boot ${bootId.slice(0, 8)} still runs ${running}${status ? `, ${status.stage}` : ''} (the staged install reboots it into ${target})`
    },
    unfinished: (waitedS: number, lastState: string, bootsSeen: number): NodeError =>
      new NodeError(
        'timeout',
        `down: the staged upgrade to ${target} did not complete within ${waitedS}s (${bootsSeen > 0 ? 'the node rebooted but does not run the new version' : 'the node did not come back'}): ${lastState}`,
        `see what the node does (\`${talosctlCommand(node, 'dmesg')}\`: the staged install runs on the boot after the first reboot; \`${talosctlCommand(node, 'get machinestatus')}\`); an install that keeps failing is sent without STAGE; a rerun finishes a node that got there, so then run again: ${taskCommand('upgrade:talos', { NODES: node.name })}`,
      ),
  }
}

/**
 * The workers' reads, batched across the workers in flight when more than one is (one batched call
 * where CONCURRENCY workers made one each: their round trips share 2 cores in the benchmark).
 */
const workerReads = perRun(
  (run) =>
    new RollingReads(
      run,
      kubectlFor(run, 'upgrade:talos'),
      run.settings.concurrency > 1 && run.nodes.filter((n) => upgrading('worker')(n, run)).length > 1,
    ),
)

async function upgradeNode(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  const plan = nodePlan(run, node) as UpgradePlan
  // control planes go one at a time: each read alone
  const reads = node.role === 'worker' ? workerReads(run) : new RollingReads(run, kubectlFor(run, 'upgrade:talos'))
  const { preserve, force, stage, rebootMode } = ask(run)
  const day2 = run.facts.of(node.name).day2
  const target = `v${versionText(plan.target)}`
  /** the version and the schematic the node runs, read at once */
  const runningNow = async (): Promise<{ running: string; schematic: string | undefined }> => {
    const [running, extensions] = await Promise.all([
      reads.version(node, () => versionOf(run, node, report)),
      reads.extensions(node, () => report.retry(() => run.talosctl.extensions(node))),
    ])
    return { running, schematic: schematicOf(extensions).schematic }
  }
  if (!plan.resume) {
    // the plan is minutes old by this node's turn: another client may have upgraded it since, and a
    // second send would take it down again for nothing
    const { running, schematic } = await runningNow()
    if (running === target && schematic === plan.targetSchematic) {
      if (day2) day2.state = 'already at target'
      return { status: 'skipped', detail: `already at target (${running}): upgraded since the plan, not by this run` }
    }
  }
  const snapshot =
    takesOnlyControlPlaneDown(run, node) && !plan.resume ? await snapshotBeforeDowntime(run, node, report, 'upgrade') : undefined
  if (day2 && snapshot) day2.snapshot = snapshot
  let sequenceError: string | undefined
  try {
    const notes = await rollNode(node, run, report, {
      command: 'upgrade:talos',
      phase: 'upgrade-talos',
      what: `talosctl upgrade --image ${plan.image}${stage ? ' --stage' : ''}${rebootMode === 'powercycle' ? ' --reboot-mode powercycle' : ''}`,
      resumed: plan.resume,
      acceptDowntime: run.options.acceptDowntime === true,
      rebootTimeoutMs: run.settings.upgradeTimeoutMs,
      sendWaits: true,
      downPrefix: 'down: ',
      reads,
      ...(stage ? { lastBoot: stagedLastBoot(run, node, target) } : {}),
      send: async () => {
        // only the busy refusals are retried (the etcd upgrade mutex, the lifecycle lock): any other
        // failure may have started the sequence, and the check after it says what runs
        const sent = await report.retry(
          () =>
            run.talosctl.upgrade(
              node,
              plan.image,
              { timeoutMs: run.settings.upgradeTimeoutMs, preserve, force, stage, rebootMode },
              (line) => report.progress(line),
            ),
          { retries: (e) => e.kind === 'busy' },
        )
        sequenceError = sent.sequenceError
      },
      verify: async () => {
        // the schematic matters only at the target version
        const { running, schematic } = await runningNow()
        if (running !== target && running === plan.from)
          return {
            failure: new NodeError(
              'rolled-back',
              `rolled back: the node rebooted (a new boot ID) but runs ${running}, not ${target}: ${sequenceError ?? (stage ? 'the staged install did not complete (it failed, or the bootloader went back from the new image)' : 'the new image did not boot (the bootloader went back)')}`,
              hintFor('rolled-back', node),
            ),
          }
        if (running !== target)
          throw new NodeError('unknown', `the node runs ${running} after its upgrade to ${target}`, hintFor('unknown', node))
        if (schematic !== plan.targetSchematic)
          return {
            failure: new NodeError(
              'extensions',
              `upgraded to ${running}, but it runs schematic ${schematic ?? 'none'}, not ${plan.targetSchematic ?? 'none'} (the image ${plan.image})`,
              hintFor('extensions', node),
            ),
          }
        return {}
      },
    })
    if (day2) day2.state = 'upgraded'
    return {
      status: 'ok',
      detail: [
        plan.resume ? `at ${target}: ${notes[0] ?? ''}` : `upgraded ${plan.from} -> ${target}`,
        ...notes.slice(plan.resume ? 1 : 0),
        ...(snapshot ? [`etcd snapshot: ${snapshot}`] : []),
      ].join('; '),
    }
  } catch (err) {
    if (day2) day2.state = endedIn(err)
    if (!(err instanceof NodeError)) throw err
    // the snapshot taken before it stays named in the report whatever happened next
    const withSnapshot = snapshot ? `; etcd snapshot: ${snapshot}` : ''
    // a refusal after the cordon: nothing changed on the node, which stays cordoned (a rerun resumes at the drain)
    if (err.kind === 'upgrade-refused' || err.kind === 'image-missing' || err.kind === 'busy')
      throw new NodeError(err.kind, `cordoned: ${err.message}${withSnapshot}`, hintFor(err.kind, node))
    if (snapshot) throw new NodeError(err.kind, `${err.message}${withSnapshot}`, err.hint)
    throw err
  }
}

/**
 * Every hint naming upgrade:talos repeats what this run was asked: its target, SCHEMATIC, the gate
 * command, and the flags that change what is allowed or sent (a rerun without them is bad input,
 * or another upgrade).
 */
function rememberRerun(run: Run): void {
  const { talosVersion, image, schematic, allowDowngrade, preserve, force, stage, rebootMode } = ask(run)
  setRerunArgs(
    'upgrade:talos',
    {
      ...(talosVersion ? { TALOS_VERSION: talosVersion } : {}),
      ...(image ? { IMAGE: image } : {}),
      ...(schematic ? { SCHEMATIC: schematic } : {}),
      // the nodes this run was given (a node's own hint names that node instead)
      ...(run.nodes.length < run.inventory.nodes.length ? { NODES: run.nodes.map((n) => n.name).join(',') } : {}),
      ...(run.settings.gateCommand ? { GATE_COMMAND: run.settings.gateCommand } : {}),
      ...(stage ? { STAGE: 'true' } : {}),
      ...(rebootMode !== 'default' ? { REBOOT_MODE: rebootMode } : {}),
    },
    [
      ...(allowDowngrade ? ['--allow-downgrade'] : []),
      ...(run.options.acceptDowntime ? ['--accept-downtime'] : []),
      ...(preserve ? ['--preserve'] : []),
      ...(force ? ['--force'] : []),
    ],
  )
}

/**
 * Before the first node goes down (docs/day2-design.md 2.6 Order 1): the cluster as the operator
 * wants it to be before any node is taken out: the readiness gates (settings) Ready, then the gate
 * command (GATE_COMMAND) passing; the same gate then runs after each node.
 */
async function beforeFirstNode(run: Run, report: StepReporter): Promise<string> {
  const gates = await waitForGates(run, run.settings.readinessGates, report, 'upgrade:talos')
  const command = await runGateCommand(
    run,
    report,
    undefined,
    'upgrade-talos',
    `see its output in the message, fix what it checks (no node was touched), then run again: ${taskCommand('upgrade:talos')}`,
  )
  return [gates, command ?? 'no gate command'].join('; ')
}

const upgrading =
  (role: ClusterNode['role']) =>
  (node: ClusterNode, run: Run): boolean => {
    const plan = nodePlan(run, node)
    return acts(run) && node.role === role && plan !== undefined && !plan.refusal && (!plan.atTarget || plan.resume)
  }

export const upgradeTalos: Phase = {
  name: 'upgrade-talos',
  title: 'Upgrade Talos, node by node',
  check: (run) => {
    const { talosVersion, image } = ask(run)
    if (!talosVersion && !image)
      throw new InputError('upgrade:talos needs a target: TALOS_VERSION (like v1.13.9) or IMAGE (an installer image)', {
        fix: 'write TALOS_VERSION=v1.13.9 (each node keeps its installer repository and schematic), or IMAGE=<installer image>',
      })
    if (talosVersion && image)
      throw new InputError('give TALOS_VERSION or IMAGE, not both', {
        fix: "write one of them: IMAGE is sent as it is, TALOS_VERSION picks each node's installer",
      })
    if (talosVersion && !parseVersion(talosVersion))
      throw new InputError(`TALOS_VERSION ${JSON.stringify(talosVersion)} is not a version like v1.13.9`, {
        fix: 'write TALOS_VERSION=v1.13.9',
      })
    if (image && !/:(v?\d+\.\d+\.\d+[^@/]*)(?:@.*)?$/.test(image))
      throw new InputError(`IMAGE ${JSON.stringify(image)} carries no Talos version tag (the upgrade is checked against it)`, {
        fix: 'write IMAGE=<repository>:v1.13.9 (a digest may follow the tag: @sha256:…)',
      })
    rememberRerun(run)
    return Promise.resolve()
  },
  steps: () => [
    {
      kind: 'node',
      title: 'Plan (version, schematic and Kubernetes per node)',
      readOnly: true,
      would: 'would read its version, schematic and Kubernetes',
      run: planNode,
    },
    {
      kind: 'cluster',
      name: 'plan',
      title: 'The plan, against the compatibility table',
      blocks: () => true,
      run: decidePlan,
    },
    {
      kind: 'cluster',
      name: 'before-first-node',
      title: 'Before the first node: the readiness gates and the gate command',
      would: 'would wait for the readiness gates and run the gate command',
      blocks: () => true,
      ready: (run) => {
        if (!acts(run)) return { skip: 'DRY_RUN: nothing changed' }
        if (!run.nodes.some((n) => upgrading(n.role)(n, run))) return { skip: 'no node to upgrade' }
        if (run.settings.readinessGates.length === 0 && !run.settings.gateCommand) return { skip: 'no readiness gates, no gate command' }
        return true
      },
      run: beforeFirstNode,
    },
    {
      kind: 'node',
      title: 'Control planes, one at a time behind the quorum gate (the etcd leader last)',
      would: 'would pass the quorum gate, drain, upgrade and wait for it',
      applies: upgrading('controlplane'),
      concurrency: () => 1,
      stopOnFailure: 'phase',
      order: (nodes, run) => {
        const leader = planOf(run).leader
        return [...nodes.filter((n) => n.name !== leader), ...nodes.filter((n) => n.name === leader)]
      },
      run: upgradeNode,
    },
    {
      kind: 'node',
      title: 'Workers, CONCURRENCY at a time',
      would: 'would cordon, drain, upgrade and wait for it',
      applies: upgrading('worker'),
      stopOnFailure: 'phase',
      run: upgradeNode,
    },
    versionsStep(),
  ],
}

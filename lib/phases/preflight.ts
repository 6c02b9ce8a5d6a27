import { availableParallelism } from 'node:os'
import { NodeError } from '../core/errors.ts'
import { checkCni } from '../input/cni-compat.ts'
import { helmfileInstallers, loadReleasePlan } from './shared/releases.ts'
import { InputError, InputErrors } from '../core/errors.ts'
import { hintFor, taskCommand } from '../cli/hints.ts'
import { shellWord } from '../core/shell.ts'
import { MachineConfig } from '../input/machine-config.ts'
import { isSecureBootInstaller } from '../input/versions.ts'
import { describeDisk, describeTarget, diskRisks, findInstallDisk, installTarget, matchingDisks } from '../input/install-disk.ts'
import type { ClusterNode } from '../core/model.ts'
import { mapLimit } from '../wait/map-limit.ts'
import type { NodeOutcome, Phase, StepReporter } from '../engine/phase.ts'
import type { Run } from '../engine/run.ts'
import { SharedReading } from '../wait/shared-reading.ts'
import type { Disk, MachineStatus, NodeAnswer } from '../tools/talosctl.ts'
import { appliedAndWaiting, endpointReading, INSTALLING_SINCE_EARLIER_RUN, installingSinceEarlierRun } from './shared/endpoint.ts'
import {
  configContradictions,
  controlPlaneOnlyScheduling,
  needsReportedNetwork,
  networkContradiction,
} from '../input/config-contradictions.ts'

/** Validations at a time per CPU: each is mostly a process start and a file read, a fraction of a core. */
const VALIDATIONS_PER_CPU = 4

/**
 * Every machine config passes `talosctl validate --mode metal`, or the run stops with exit 2.
 * Local work, bounded by the CPUs (one at a time took minutes at 300 nodes).
 */
async function validateConfigs(run: Run): Promise<void> {
  const errors: InputError[] = []
  const problems = await mapLimit(run.nodes, availableParallelism() * VALIDATIONS_PER_CPU, (node) => run.talosctl.validate(node.configFile))
  const failed = problems.filter((p): p is string => p !== undefined)
  // a document kind or field talosctl does not know, while the cluster's Talos is newer: the client is the cause
  const tooOld = failed.some(isUnknownToClient) ? await talosctlOlderThanCluster(run) : undefined
  for (const [i, node] of run.nodes.entries()) {
    const detail = problems[i]
    if (!detail) continue
    errors.push(
      tooOld && isUnknownToClient(detail)
        ? new InputError(
            `machine config of ${node.name} uses what talosctl ${tooOld.talosctl} does not know (${detail}); the configs are for Talos ${tooOld.cluster}`,
            {
              file: node.configFile,
              fix: `use talosctl ${tooOld.minor}.x, the cluster's Talos minor (put it on PATH or point TALOSCTL at it), then run the same command again`,
            },
          )
        : new InputError(`machine config of ${node.name} is invalid: ${detail}`, {
            file: node.configFile,
            fix: 'correct the config (or its talhelper patches) and regenerate it',
          }),
    )
  }
  if (errors.length === 1) throw errors[0]
  if (errors.length > 1) throw new InputErrors(errors)
}

/** talosctl's answer to a document kind or a field that its version of the config schema lacks. */
function isUnknownToClient(detail: string): boolean {
  return /": not registered|unknown keys found during decoding/.test(detail)
}

const minorOf = (version: string): number[] | undefined => {
  const m = /^v?(\d+)\.(\d+)/.exec(version)
  return m ? [Number(m[1]), Number(m[2])] : undefined
}

/** The versions when the cluster's Talos minor (talconfig's talosVersion, or the installer image's tag) is newer than talosctl's. */
async function talosctlOlderThanCluster(run: Run): Promise<{ talosctl: string; cluster: string; minor: string } | undefined> {
  const cluster = run.inventory.talosVersion
  if (!cluster) return undefined
  const talosctl = await run.talosctl.clientVersion()
  const [want, have] = [minorOf(cluster), minorOf(talosctl)]
  if (!want || !have) return undefined
  const newer = want[0]! > have[0]! || (want[0] === have[0] && want[1]! > have[1]!)
  return newer ? { talosctl, cluster, minor: `v${want[0]}.${want[1]}` } : undefined
}

/** Nodes verified in an earlier run, each confirmed by one authenticated read (a rerun, a day-2 task). */
function confirmsVerified(node: ClusterNode, run: Run): boolean {
  return run.journal.verified(node.name) && !run.options.reset
}

/**
 * The verified nodes' MachineStatus in one batched read through a verified control plane (apid
 * proxies to the others; the control plane first resolves the type): a day-2 task on 33 nodes made
 * 33 processes of it. A node the batch did not answer is read alone; one it answered with an error
 * goes to the full probe, as a failed read alone would.
 */
function verifiedStatusesReading(run: Run): SharedReading<Map<string, NodeAnswer<MachineStatus>>> {
  const verified = run.nodes.filter((node) => confirmsVerified(node, run))
  const via = verified.find((node) => node.role === 'controlplane')
  return new SharedReading(async () => {
    if (!via || verified.length < 2) return new Map()
    return run.talosctl.machineStatuses([via, ...verified.filter((node) => node !== via)], via).catch(() => new Map())
  }, Number.POSITIVE_INFINITY)
}

/** Reachability and state of one node, retried while it does not answer. */
async function probeNode(
  node: ClusterNode,
  run: Run,
  report: StepReporter,
  endpoint: SharedReading<boolean>,
  verifiedStatuses: SharedReading<Map<string, NodeAnswer<MachineStatus>>>,
): Promise<NodeOutcome> {
  const facts = run.facts.of(node.name)
  // verified in an earlier run: one authenticated read confirms it; if it disagrees, the full probe decides
  if (confirmsVerified(node, run)) {
    const batched = (await verifiedStatuses.get()).get(node.address)
    const status = batched ? batched.value : await run.talosctl.machineStatus(node).catch(() => undefined)
    if (status) {
      facts.state = 'configured'
      return { status: 'ok', detail: `configured, ${status.stage}${status.ready ? ', ready' : ''} (verified before)` }
    }
  }
  let disks: Disk[] = []
  const tookConfig = installingSinceEarlierRun(node, run)
  try {
    // one process a node: the disks read is the probe (at 300 nodes a second call was seconds of CPU on the critical path)
    const value = await report.retry(() => run.talosctl.probeDisks(node), tookConfig ? { retries: () => false } : undefined)
    facts.state = value.state
    if (value.state === 'maintenance') disks = value.disks
  } catch (err) {
    if (err instanceof NodeError && (err.kind === 'unreachable' || err.kind === 'timeout')) {
      // applied before, and its API waits for the control plane (the VIP is not up): configured, not down
      const waits = await appliedAndWaiting(node, run, endpoint)
      if (waits) {
        facts.state = 'configured'
        return { status: 'ok', detail: `configured before, not answering: ${waits}` }
      }
      if (tookConfig) {
        // an ISO install takes minutes: verify waits for it with its own timeout, not preflight's retries
        facts.state = 'configured'
        return { status: 'ok', detail: INSTALLING_SINCE_EARLIER_RUN }
      }
      if (run.journal.sentAt(node.name, 'upgrade-talos') !== undefined) {
        // killed with its upgrade in flight: the node reboots into the new version; upgrade:talos's plan waits for it (upgradeTimeout)
        facts.state = 'configured'
        return { status: 'ok', detail: UPGRADING_SINCE_EARLIER_RUN }
      }
      facts.state = 'unreachable'
      // a node about to be reset may well be down or boot-looping: the reset decides
      if (run.options.reset) return { status: 'ok', detail: `not answering (${err.kind}); the reset follows` }
    }
    throw err
  }
  if (facts.state === 'configured') {
    const value = await report.retry(() => run.talosctl.machineStatus(node))
    return { status: 'ok', detail: `configured, ${value.stage}${value.ready ? ', ready' : ''}` }
  }
  if (run.options.dryRun) return { status: 'ok', detail: 'maintenance' }
  if (needsReportedNetwork(node)) {
    const network = await report.retry(() => run.talosctl.maintenanceNetwork(node))
    const problem = networkContradiction(node, network)
    if (problem)
      throw new NodeError(
        'config-invalid',
        problem,
        `see the node's links and addresses (\`talosctl get links --insecure -n ${node.address}\`, \`talosctl get addresses --insecure -n ${node.address}\`), correct the interface name (or select it with a deviceSelector) or the subnets in the config's source and regenerate it, then run: ${taskCommand('bootstrap:node', { NODE: node.name })}`,
      )
  }
  // after the probe, not beside it: a fault or a hang meets the probe first, whose retries decide reachability
  const boot = await report.retry(() => run.talosctl.maintenanceBoot(node))
  if (boot.systemDisk) {
    // META found: Talos takes the node as installed and skips its install (v1alpha1_state.go Installed,
    // v1alpha1_sequencer.go Install); the apply configures it where it is (the selector is still
    // checked: the apply's validation matches it against the disks)
    const note = `the node already has a Talos system disk (${boot.systemDisk}: a written disk image or an earlier install): Talos takes it as installed and skips machine.install (disk, image, extensions)`
    run.warn(`${node.name}: ${note}; to install afresh, wipe ${boot.systemDisk} first: check ${node.configFile}`)
    checkInstallDisk(node, run, disks, { quiet: true })
    return { status: 'ok', detail: `maintenance, installed on its system disk ${boot.systemDisk}; warning: ${note}` }
  }
  // only for a node about to install: the installer's variant matters then
  const notes = checkSecureBoot(node, run, boot.secureBoot)
  const outcome = checkInstallDisk(node, run, disks)
  return notes.length === 0 ? outcome : { ...outcome, detail: `${outcome.detail ?? 'maintenance'}; warning: ${notes.join('; ')}` }
}

/**
 * The installer image must match the machine's secure boot: a plain installer writes a boot loader
 * the machine's keys do not sign, so with secure boot on the installed system never boots. A
 * secure-boot installer on a machine that reports it off is worth a word only: in setup mode (keys
 * not enrolled yet) SecurityState says off too (controllers/runtime/security_state.go).
 */
function checkSecureBoot(node: ClusterNode, run: Run, secureBoot: boolean): string[] {
  const image = MachineConfig.of(node.configFile).installImage()
  if (!image) return []
  if (secureBoot && !isSecureBootInstaller(image)) {
    throw new NodeError(
      'config-invalid',
      `the node boots with secure boot on (talosctl get securitystate: secureBoot true), but machine.install.image ${image} is not a secure-boot installer: the installed system would not boot (its boot loader is not signed for secure boot)`,
      `set machine.install.image in ${shellWord(node.configFile)} to the secure-boot installer of the node's schematic (e.g. factory.talos.dev/installer-secureboot/<schematic>:${run.inventory.talosVersion ?? '<version>'}; talhelper: talosImageURL) and regenerate the config, check with \`talosctl get securitystate --insecure -n ${node.address}\`, then run: ${taskCommand('bootstrap:node', { NODE: node.name })}`,
    )
  }
  if (!secureBoot && isSecureBootInstaller(image)) {
    const note = `machine.install.image ${image} is a secure-boot installer, but the node reports secure boot off (or in setup mode)`
    run.warn(`${node.name}: ${note}: check the firmware's secure boot setting and ${node.configFile}`)
    return [note]
  }
  return []
}

/** On a node in maintenance, the install disk (or selector) must match one of its disks. */
function checkInstallDisk(node: ClusterNode, run: Run, disks: Disk[], { quiet = false } = {}): NodeOutcome {
  const target = installTarget(node)
  if (!target.disk && !target.selector) {
    // a disk-image node may have no install section; the node decides (v1.12 metal requires one)
    return { status: 'ok', detail: 'maintenance, no install disk configured' }
  }
  const disk = findInstallDisk(target, disks)
  if (!disk) {
    const available = disks
      .filter((d) => !d.cdrom && !d.readonly)
      .map((d) => `${d.devPath} ${Math.round(d.sizeBytes / 1e9)}GB ${d.model}`.trim())
    throw new NodeError(
      'disk-mismatch',
      `${describeTarget(target)} matches none of the node's disks (${available.join(', ') || 'none found'})`,
      hintFor('disk-mismatch', node),
    )
  }
  // a selector never matches these (Talos adds !disk.readonly && !disk.cdrom); a disk named by its
  // path is taken as it is, and the install could not write to it
  if (!target.selector && (disk.readonly || disk.cdrom))
    throw new NodeError(
      'disk-mismatch',
      `install disk ${target.disk ?? disk.devPath} is ${disk.cdrom ? 'a CD-ROM' : 'read-only'} on this node (${describeDisk(disk)}): the install cannot write to it`,
      hintFor('disk-mismatch', node),
    )
  const notes: string[] = []
  const matching = target.selector ? matchingDisks(target, disks) : [disk]
  if (matching.length > 1)
    notes.push(`the selector matches ${matching.length} disks (${matching.map(describeDisk).join(', ')}): Talos installs to the first`)
  const risks = diskRisks(disk)
  if (risks.length > 0) notes.push(`the install disk is ${risks.join(' and ')}`)
  // the install wipes the disk: say which one before anything is applied
  if (!quiet)
    for (const note of notes) run.warn(`${node.name}: ${note}; it will be wiped: check ${describeTarget(target)} in ${node.configFile}`)
  return {
    status: 'ok',
    detail: `maintenance, installs to ${describeDisk(disk)}${notes.length > 0 ? `; warning: ${notes.join('; ')}` : ''}`,
  }
}

/** preflight's detail for a silent node an earlier upgrade:talos run sent its upgrade */
export const UPGRADING_SINCE_EARLIER_RUN =
  'an earlier upgrade:talos run sent its upgrade and it does not answer yet (rebooting): the upgrade waits for it'

export const preflight: Phase = {
  name: 'preflight',
  title: 'Preflight: configs, reachability, node state, install disks',
  check: async (run) => {
    if (run.inventory.vip) {
      run.warn(
        `endpoint ${run.inventory.endpoint} is not a node address (a VIP): bootstrap and the kubeconfig use a control plane's own address until it answers`,
      )
    }
    // both offline; the CNI check reads the configs while the validations' processes run (the
    // bootstrap helmfile rendered first: its CNI release stands for a missing cni section)
    const [cni, valid] = await Promise.allSettled([
      loadReleasePlan(run).then(() => checkCni(run, helmfileInstallers(run))),
      validateConfigs(run),
    ])
    for (const outcome of [cni, valid]) if (outcome.status === 'rejected') throw outcome.reason
    const { errors, warnings } = configContradictions({ ...run.inventory, nodes: run.nodes })
    if (errors.length === 1) throw errors[0]
    if (errors.length > 1) throw new InputErrors(errors)
    for (const warning of warnings) run.warn(warning)
    const untolerated = controlPlaneOnlyScheduling(run.inventory)
    if (untolerated) run.warn(untolerated)
  },
  steps: (run) => {
    const endpoint = endpointReading(run)
    const verifiedStatuses = verifiedStatusesReading(run)
    return [
      {
        kind: 'node',
        title: 'Probe nodes',
        readOnly: true,
        would: 'would probe its state and install disk',
        run: (node, r, report) => probeNode(node, r, report, endpoint, verifiedStatuses),
      },
    ]
  },
}

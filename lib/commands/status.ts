// task bootstrap:status: one table of every node's live state and its last run's result.
// Read-only (no lock, no command log). Few calls: one batched MachineStatus read and one batched
// kubelet read through a control plane, one etcd member list, one `kubectl get nodes`; only nodes
// the batch could not read are asked one by one. Every call has a short deadline, so an
// unreachable or hung node costs seconds, not the 30 s callTimeout.
import { existsSync } from 'node:fs'
import { NodeError } from '../core/errors.ts'
import { controlPlanes, kubeNodeName, type ClusterNode, type Inventory } from '../core/model.ts'
import { mapLimit } from '../wait/map-limit.ts'
import type { ClusterVersions, Report } from '../core/results.ts'
import { groupVersions } from '../report/versions.ts'
import { statePaths } from '../state/paths.ts'
import { recentRunFiles, tryReadReport } from '../state/report-store.ts'
import { formatTable } from '../cli/table.ts'
import { buildTimeline, type Lane } from '../report/timeline.ts'
import type { ToolRunner } from '../tools/exec.ts'
import { condition, kubeletVersionOf, type Kubectl } from '../tools/kubectl.ts'
import type { EtcdMember, MachineStatus, Talosctl } from '../tools/talosctl.ts'
import { describeElsewhere, isMemberOf, namedElsewhere } from '../phases/shared/etcd-members.ts'
import { HEALTH_CHECKS, HealthReads } from '../phases/shared/health.ts'
import { readConfigNetwork } from '../input/cni-compat.ts'

/** Deadline of one status call (capped by callTimeout): long enough for a loaded node, short enough to stay live. */
export const STATUS_DEADLINE_MS = 3_000
/** Nodes asked one by one at a time when the batch had no row for them. */
const PARALLEL = 8

export interface StatusTools {
  inventory: Inventory
  runner: ToolRunner
  talosctl: Talosctl
  kubectl: Kubectl
  /** absolute kubeconfig path; Kubernetes is not asked while it does not exist */
  kubeconfig: string
  /** the deadline every call runs with */
  deadlineMs: number
}

/** What the node API said about a node. */
export type MachineReading =
  { state: 'status'; status: MachineStatus } | { state: 'maintenance' } | { state: 'error'; kind: string; message: string }

export interface NodeRow {
  node: ClusterNode
  /** the Talos version it runs (`talosctl version` Tag); `-` not answering, `?` not read */
  talos: string
  /** MachineStatus stage, or maintenance / unreachable / timeout / error (<kind>) */
  stage: string
  ready: string
  etcd: string
  kubelet: string
  /** the kubelet's version its Node reports; `-` no kubeconfig or no Node, `?` the API did not answer */
  k8sVersion: string
  /** its Node's readiness (Ready, NotReady, Unknown, not registered) */
  kubernetes: string
  lastRun: string
  lastError: string
  note: string
  /** running, Ready on the node API and in Kubernetes */
  healthy: boolean
}

export interface StatusTable {
  rows: NodeRow[]
  /** whether Flux was handed over (its root Kustomization Ready), when the settings name Flux and the API answers */
  flux?: string
  /** "last run: talos of <time>: failed", one line per run the rows come from; undefined when none was recorded */
  lastRun: string | undefined
  /** cluster-wide readings that failed (etcd members, Kubernetes API) */
  warnings: string[]
  /** the control plane that answered the batched reads */
  via?: ClusterNode
  /** the versions the selected nodes run, when asked for */
  versions?: ClusterVersions
}

const failure = (err: unknown): { state: 'error'; kind: string; message: string } =>
  err instanceof NodeError
    ? { state: 'error', kind: err.kind, message: err.message }
    : { state: 'error', kind: 'unknown', message: err instanceof Error ? err.message : String(err) }

/** One node on its own: the authenticated read, then (unless it hung) the insecure probe to tell maintenance from unreachable. */
async function readOne(tools: StatusTools, node: ClusterNode): Promise<MachineReading> {
  let secure: MachineReading
  try {
    return { state: 'status', status: await tools.talosctl.machineStatus(node) }
  } catch (err) {
    secure = failure(err)
  }
  // a hung node would hang the probe too: say so now rather than wait a second deadline
  if (secure.state === 'error' && secure.kind === 'timeout') return secure
  try {
    const probe = await tools.talosctl.probe(node)
    // configured but the authenticated read failed (e.g. pki-mismatch): the secure error says why
    return probe.state === 'maintenance' ? { state: 'maintenance' } : secure
  } catch (err) {
    const probed = failure(err)
    return probed.kind === 'unreachable' || probed.kind === 'timeout' ? probed : secure
  }
}

/**
 * Every node's MachineStatus: one batched call through a control plane (listed first: a batched
 * `get` fails whole when its first node fails), trying the next control plane when one gives no
 * row; nodes without a row are asked one by one. Returns the readings and the control plane that answered.
 */
export async function machineReadings(
  tools: StatusTools,
  nodes: ClusterNode[],
): Promise<{ readings: Map<string, MachineReading>; via: ClusterNode | undefined }> {
  const readings = new Map<string, MachineReading>()
  let via: ClusterNode | undefined
  const cps = controlPlanes(tools.inventory)
  for (const cp of cps.slice(0, 3)) {
    const ordered = [cp, ...nodes.filter((n) => n.address !== cp.address)]
    const statuses = await tools.talosctl.machineStatuses(ordered, cp)
    const got = [...statuses.values()].filter((s) => s.value !== undefined).length
    if (got === 0) continue
    via = cp
    for (const node of nodes) {
      const status = statuses.get(node.address)?.value
      if (status) readings.set(node.name, { state: 'status', status })
    }
    break
  }
  const missing = nodes.filter((n) => !readings.has(n.name))
  const singles = await mapLimit(missing, PARALLEL, (node) => readOne(tools, node))
  missing.forEach((node, i) => readings.set(node.name, singles[i] as MachineReading))
  if (!via) {
    via = cps.find((cp) => readings.get(cp.name)?.state === 'status')
  }
  return { readings, via }
}

export interface KubeletReading {
  running: boolean
  healthy: boolean
  unknown: boolean
}

/** Each node's kubelet as its Service resource says, by node name: one read for many nodes. */
export async function kubeletReadings(tools: StatusTools, nodes: ClusterNode[], via: ClusterNode): Promise<Map<string, KubeletReading>> {
  const byIp = await tools.talosctl.serviceResources(nodes, via, 'kubelet')
  return new Map(nodes.flatMap((n) => (byIp.has(n.address) ? [[n.name, byIp.get(n.address) as KubeletReading]] : [])))
}

export interface KubeNode {
  ready: 'Ready' | 'NotReady' | 'Unknown'
  reason?: string
  /** status.nodeInfo.kubeletVersion */
  version?: string
}

/** `kubectl get nodes -o json`, by node name and by InternalIP. */
export async function kubeNodes(tools: StatusTools): Promise<Map<string, KubeNode>> {
  const out = new Map<string, KubeNode>()
  for (const obj of await tools.kubectl.list('nodes')) {
    const c = condition(obj, 'Ready')
    const reading: KubeNode = {
      ready: c?.status === 'True' ? 'Ready' : c?.status === 'False' ? 'NotReady' : 'Unknown',
      ...(c?.message ? { reason: c.message } : {}),
      ...(kubeletVersionOf(obj) ? { version: kubeletVersionOf(obj) } : {}),
    }
    out.set(obj.metadata.name, reading)
    const addresses = (obj.status?.addresses ?? []) as Array<{ type: string; address: string }>
    for (const a of addresses) if (a.type === 'InternalIP') out.set(a.address, reading)
  }
  return out
}

/** How many recent reports to look through for nodes the last run did not select. */
const RUNS_SCANNED = 30

/**
 * Each node's latest result: last-run.json, and for nodes it did not select (a bootstrap:node
 * run names one node) the newest report in runs/ that has them. Dry runs do not count.
 */
export function latestResults(
  clusterDir: string,
  names: string[],
): { lanes: Map<string, Lane>; used: Array<{ report: Report; nodes: string[] }> } {
  const lanes = new Map<string, Lane>()
  const used: Array<{ report: Report; nodes: string[] }> = []
  const seen = new Set<string>()
  for (const file of [statePaths(clusterDir).lastRun, ...recentRunFiles(clusterDir, RUNS_SCANNED)]) {
    if (names.every((n) => lanes.has(n))) break
    const report = tryReadReport(file)
    // dry runs do not count; last-run.json is also in runs/: count each run once
    if (!report || report.dryRun || seen.has(`${report.startedAt} ${report.command}`)) continue
    seen.add(`${report.startedAt} ${report.command}`)
    const nodes: string[] = []
    for (const lane of buildTimeline(report).lanes) {
      if (!names.includes(lane.name) || lanes.has(lane.name)) continue
      lanes.set(lane.name, lane)
      nodes.push(lane.name)
    }
    if (nodes.length > 0) used.push({ report, nodes })
  }
  return { lanes, used }
}

function etcdCell(node: ClusterNode, members: EtcdMember[] | undefined): string {
  if (node.role !== 'controlplane') return '-'
  if (!members) return '?'
  const member = members.find((m) => isMemberOf(node, m))
  if (!member) return namedElsewhere(node, members) ? 'elsewhere' : 'no'
  return member.isLearner ? 'learner' : 'member'
}

function kubeletCell(reading: KubeletReading | undefined, machine: MachineReading | undefined): string {
  if (machine?.state !== 'status') return '-'
  if (!reading) return '?'
  if (!reading.running) return 'not running'
  return reading.healthy || reading.unknown ? 'running' : 'unhealthy'
}

function stageCell(reading: MachineReading | undefined): string {
  if (!reading) return '?'
  if (reading.state === 'status') return reading.status.stage
  if (reading.state === 'maintenance') return 'maintenance'
  if (reading.kind === 'unreachable' || reading.kind === 'timeout') return reading.kind
  return `error (${reading.kind})`
}

const KUSTOMIZATIONS = 'kustomizations.kustomize.toolkit.fluxcd.io'

/**
 * `flux: handed over (…)`, `flux: not handed over: …` or `flux: not installed` from the root
 * Kustomization's Ready condition at its current generation; undefined when the API cannot tell.
 */
async function fluxLine(kubectl: Kubectl, root: { namespace: string; name: string }): Promise<string | undefined> {
  const items = await kubectl.listServed(KUSTOMIZATIONS, { namespace: root.namespace }).catch(() => null)
  if (items === null) return undefined
  const ks = items?.find((o) => o.metadata.name === root.name)
  if (!ks) return `flux: not installed (no Kustomization ${root.namespace}/${root.name})`
  const ready = condition(ks, 'Ready')
  const current = ks.status?.observedGeneration === ks.metadata.generation
  const what = `Kustomization ${root.namespace}/${root.name}: ${ready ? `${ready.reason ?? ready.status}: ${ready.message ?? ''}` : 'not reconciled yet'}`
  return current && ready?.status === 'True' ? `flux: handed over (${what})` : `flux: not handed over (${what})`
}

/**
 * Reads everything and builds the rows: `nodes` are the selected nodes, in inventory order; `flux`:
 * the root Kustomization Flux syncs from; `versions`: also read the Talos version of every node
 * that answers (one batched `talosctl version`; the kubelet's comes with the Nodes).
 */
export async function readStatus(
  tools: StatusTools,
  nodes: ClusterNode[],
  flux?: { namespace: string; name: string },
  options: { versions?: boolean } = {},
): Promise<StatusTable> {
  const warnings: string[] = []
  const kube = existsSync(tools.kubeconfig)
    ? kubeNodes(tools).catch((err: unknown) => {
        warnings.push(`Kubernetes API: ${failure(err).message}`)
        return undefined
      })
    : Promise.resolve(undefined)
  const { readings, via } = await machineReadings(tools, nodes)

  const answering = nodes.filter((n) => readings.get(n.name)?.state === 'status')
  const etcdVia = via && readings.get(via.name)?.state === 'status' ? via : undefined
  const [members, kubelets, kubeByName, fluxState, talosVersions] = await Promise.all([
    etcdVia && nodes.some((n) => n.role === 'controlplane')
      ? tools.talosctl.etcdMembers(etcdVia).catch((err: unknown) => {
          warnings.push(`etcd members (via ${etcdVia.name}): ${failure(err).message}`)
          return undefined
        })
      : Promise.resolve(undefined),
    via && answering.length > 0 ? kubeletReadings(tools, answering, via) : Promise.resolve(new Map<string, KubeletReading>()),
    kube,
    flux && existsSync(tools.kubeconfig) ? fluxLine(tools.kubectl, flux) : Promise.resolve(undefined),
    options.versions && via && answering.length > 0
      ? tools.talosctl.versions(answering, via).catch((err: unknown) => {
          warnings.push(`Talos versions (via ${via.name}): ${failure(err).message}`)
          return new Map<string, never>()
        })
      : Promise.resolve(undefined),
  ])
  if (!etcdVia && nodes.some((n) => n.role === 'controlplane')) warnings.push('etcd members: no control plane answered')

  const { lanes, used } = latestResults(
    tools.inventory.clusterDir,
    nodes.map((n) => n.name),
  )

  const rows = nodes.map((node): NodeRow => {
    const machine = readings.get(node.name)
    const status = machine?.state === 'status' ? machine.status : undefined
    const k8s = kubeByName?.get(kubeNodeName(node)) ?? kubeByName?.get(node.address)
    const kubernetes = !existsSync(tools.kubeconfig) ? '-' : !kubeByName ? '?' : k8s ? k8s.ready : 'not registered'
    const lane = lanes.get(node.name)
    const notes: string[] = []
    if (status && status.unmetConditions.length > 0)
      notes.push(`unmet: ${status.unmetConditions.map((c) => `${c.name} (${c.reason})`).join(', ')}`)
    if (machine?.state === 'error' && !['unreachable', 'timeout'].includes(machine.kind)) notes.push(machine.message)
    const elsewhere = node.role === 'controlplane' && members ? namedElsewhere(node, members) : undefined
    if (elsewhere && !members?.some((m) => isMemberOf(node, m))) notes.push(describeElsewhere(node, elsewhere))
    if (machine?.state === 'error' && machine.kind === 'timeout') notes.push(`no answer within ${Math.round(tools.deadlineMs / 1000)}s`)
    if (machine?.state === 'error' && machine.kind === 'unreachable')
      notes.push(/connect: ([^"]+)/.exec(machine.message)?.[1] ?? 'no connection')
    const talos = talosVersions?.get(node.address)
    return {
      node,
      talos: talos?.value ?? (machine?.state === 'status' ? '?' : '-'),
      stage: stageCell(machine),
      ready: status ? (status.ready ? 'yes' : 'no') : '-',
      etcd: etcdCell(node, members),
      kubelet: kubeletCell(kubelets.get(node.name), machine),
      k8sVersion: !existsSync(tools.kubeconfig) ? '-' : !kubeByName ? '?' : (k8s?.version ?? '-'),
      kubernetes,
      lastRun: lane ? lane.result.replace(/ \([^)]*\)$/, '') : '-',
      lastError: lane?.failed?.kind ?? '-',
      note: notes.join('; '),
      healthy: status?.stage === 'running' && status.ready && kubernetes === 'Ready',
    }
  })
  const versions = options.versions
    ? groupVersions(
        rows.map((r) => ({
          name: r.node.name,
          ...(/^v?\d/.test(r.talos) ? { talos: r.talos } : {}),
          ...(/^v?\d/.test(r.k8sVersion) ? { kubernetes: r.k8sVersion } : {}),
        })),
      )
    : undefined
  return {
    rows,
    lastRun: lastRunLines(used),
    warnings,
    ...(fluxState ? { flux: fluxState } : {}),
    ...(etcdVia ? { via: etcdVia } : {}),
    ...(versions ? { versions } : {}),
  }
}

/**
 * One line per run the LAST RUN column comes from: its outcome names what failed in it (nodes, or
 * cluster steps), never the nodes that succeeded; with several runs, which rows each one gave.
 */
export function lastRunLines(used: Array<{ report: Report; nodes: string[] }>): string | undefined {
  if (used.length === 0) return undefined
  const outcome = (r: Report): string => {
    if (r.interrupted) return 'interrupted'
    if (r.ok) return 'ok'
    const nodes = [...new Set(r.phases.flatMap((p) => p.nodes.filter((n) => n.status === 'failed').map((n) => n.name)))]
    const steps = r.phases.flatMap((p) => p.steps.filter((s) => s.status === 'failed').map((s) => `${p.name}/${s.name}`))
    const checked = (r.finalCheck ?? []).map((p) => `${p.node} (final check)`)
    const what = nodes.length > 0 ? nodes : steps.length > 0 ? steps : checked
    return what.length > 0 ? `failed: ${what.join(', ')}` : 'failed'
  }
  return used
    .map(
      (u) =>
        `last run: ${u.report.command} of ${u.report.startedAt}: ${outcome(u.report)}${used.length > 1 ? ` (the LAST RUN of ${u.nodes.join(', ')})` : ''}`,
    )
    .join('\n')
}

export function statusTable(table: StatusTable): string {
  const header = ['NODE', 'IP', 'ROLE', 'TALOS', 'STAGE', 'READY', 'ETCD', 'KUBELET', 'K8S', 'K8S NODE', 'LAST RUN', 'ERROR', 'NOTE']
  const rows = table.rows.map((r) => [
    r.node.name,
    r.node.address,
    r.node.role,
    r.talos,
    r.stage,
    r.ready,
    r.etcd,
    r.kubelet,
    r.k8sVersion,
    r.kubernetes,
    r.lastRun,
    r.lastError,
    r.note,
  ])
  return formatTable(header, rows)
}

/** One check of wait-ready's health steps as bootstrap:status read it once. */
export interface CheckLine {
  name: string
  title: string
  status: 'ok' | 'failed' | 'skipped' | 'unreadable'
  /** per node, or why it failed / was skipped */
  detail: string
}

/**
 * The checks wait-ready ends with (`talosctl health`'s and the product's own), each read once
 * through `via` (a control plane that answered) and the kubeconfig; reads shared between checks.
 * Not read without a kubeconfig or a control plane that answers.
 */
export async function readHealthChecks(tools: StatusTools, via: ClusterNode | undefined): Promise<CheckLine[]> {
  if (!via || !existsSync(tools.kubeconfig)) return []
  const nodes = tools.inventory.nodes
  const reads = new HealthReads({
    talosctl: tools.talosctl,
    kubectl: tools.kubectl,
    nodes,
    controlPlanes: nodes.filter((n) => n.role === 'controlplane'),
    allNodes: true,
    via: () => via,
    maxAgeMs: 60_000,
    coreDnsAbsentByConfig: nodes.some((n) => n.role === 'controlplane' && readConfigNetwork(n)?.coreDnsDisabled.value === true),
  })
  const lines: CheckLine[] = []
  for (const check of HEALTH_CHECKS) {
    try {
      const result = await check.run(reads)
      if (result.skip) lines.push({ name: check.name, title: check.title, status: 'skipped', detail: result.skip })
      else if (result.failures.length > 0)
        lines.push({ name: check.name, title: check.title, status: 'failed', detail: result.failures.map((f) => f.message).join('; ') })
      else {
        const wrong = result.results.filter((r) => !r.ok)
        const detail =
          result.results.length > 12
            ? `${result.results.length - wrong.length}/${result.results.length} ok`
            : result.results.map((r) => `${r.node}: ${r.text}`).join('; ')
        lines.push({ name: check.name, title: check.title, status: 'ok', detail })
      }
    } catch (err) {
      lines.push({ name: check.name, title: check.title, status: 'unreadable', detail: failure(err).message })
    }
  }
  return lines
}

/** `health: <check>: <status> (<detail>)`, one line per check */
export function checkLines(lines: CheckLine[]): string {
  return lines.map((l) => `health: ${l.title}: ${l.status}${l.detail ? ` (${l.detail})` : ''}`).join('\n')
}

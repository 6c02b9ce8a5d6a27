import type { ErrorKind } from './errors.ts'
import type { ClusterNode, Role } from './model.ts'

// 'reset' runs only in bootstrap:node RESET=true
export const PHASE_NAMES = [
  'preflight',
  'reset',
  'apply',
  'verify',
  'bootstrap',
  'wait-ready',
  'flux',
  'cluster-apply',
  'upgrade-talos',
  'upgrade-k8s',
] as const
export type PhaseName = (typeof PHASE_NAMES)[number]

export type NodeStatus = 'ok' | 'skipped' | 'failed' | 'not-run'

export interface ErrorRecord {
  kind: ErrorKind
  message: string
  hint: string
}

export interface NodeResult {
  name: string
  ip: string
  role: Role
  status: NodeStatus
  attempts: number
  durationMs: number
  /** what was found or done, e.g. "maintenance", "running", "already configured" */
  detail?: string
  error?: ErrorRecord
  /** ms since the run started, for the timeline */
  startedAtMs?: number
  /** every failed attempt that was retried; atMs: when it failed, ms since the run started */
  retries?: Array<{ attempt: number; kind: ErrorKind; message: string; delayMs: number; atMs?: number }>
  /** upgrade:talos: where the node ended and what it ran before and was sent (docs/report.md) */
  day2?: Day2Node
}

/** A node's part of an upgrade:talos run, as far as the run knows it. */
export interface Day2Node {
  /**
   * upgraded (it runs the target; a gate command that failed after it is the node's error), already
   * at target, refused (the plan), not started, cordoned (refused or not drained: nothing changed on
   * it), rolled back (rebooted into its old version), down (its reboot not seen in time), failed
   * (anything else: its error says what)
   */
  state: 'upgraded' | 'already at target' | 'refused' | 'not started' | 'cordoned' | 'rolled back' | 'down' | 'failed'
  from: { talos: string; schematic?: string }
  to: { talos: string; schematic?: string; image: string }
  /** the etcd snapshot taken before it went down (the only control plane, --accept-downtime) */
  snapshot?: string
}

/** A cluster-wide step of a phase (etcd bootstrap, CNI install, Flux). */
export interface StepResult {
  name: string
  status: NodeStatus
  durationMs: number
  /** ms since the run started, for the timeline */
  startedAtMs?: number
  detail?: string
  /** a step left to another command (not run or skipped by the node selection): the command that runs it */
  next?: string
  error?: ErrorRecord
}

export interface PhaseResult {
  name: PhaseName
  ok: boolean
  durationMs: number
  nodes: NodeResult[]
  steps: StepResult[]
}

export function newNodeResult(node: ClusterNode, status: NodeStatus = 'not-run'): NodeResult {
  return { name: node.name, ip: node.address, role: node.role, status, attempts: 0, durationMs: 0 }
}

export function phaseOk(phase: Pick<PhaseResult, 'nodes' | 'steps'>): boolean {
  const good = (s: NodeStatus): boolean => s === 'ok' || s === 'skipped'
  return phase.nodes.every((n) => good(n.status)) && phase.steps.every((s) => good(s.status))
}

/**
 * The versions the cluster's nodes run, read at the end of a day-2 command (docs/day2-design.md 2.8):
 * each map from a version to the nodes (inventory order) that run it; a node whose version could not
 * be read is under `unknown`, one running no Image Factory schematic under `none`.
 */
export interface ClusterVersions {
  /** the Talos version (`talosctl version` Tag) */
  talos: Record<string, string[]>
  /** the kubelet's version (the Node's status.nodeInfo.kubeletVersion) */
  kubernetes: Record<string, string[]>
  /** the Image Factory schematic ID (the `schematic` extension) */
  schematics: Record<string, string[]>
  /** more than one Talos or Kubernetes version among the nodes read (schematics may differ by design) */
  mixed: boolean
}

/** A run's report (.bootstrap/runs/<time>-<command>.json, docs/report.md). */
export interface Report {
  version: 1
  command: string
  ok: boolean
  interrupted?: boolean
  dryRun?: boolean
  startedAt: string
  finishedAt: string
  settings: Record<string, unknown>
  phases: PhaseResult[]
  plan?: Array<{ node?: string; command: string }>
  /** what the check at the end of a multi-phase command found wrong (the phases all ended ok) */
  finalCheck?: Array<{ node: string; message: string; hint: string }>
  /** day-2 commands: the versions every node runs at the end */
  versions?: ClusterVersions
}

/** How an interrupted step's error message starts when a changing call was cut short in flight (it may have taken effect). */
export const UNKNOWN_OUTCOME = 'unknown outcome'

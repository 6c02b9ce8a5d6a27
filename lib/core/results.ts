import type { ErrorKind } from './errors.js'
import type { ClusterNode, Role } from './model.js'

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
}

/** How an interrupted step's error message starts when a changing call was cut short in flight (it may have taken effect). */
export const UNKNOWN_OUTCOME = 'unknown outcome'

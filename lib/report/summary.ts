import type { ClusterNode } from '../core/model.ts'
import { UNKNOWN_OUTCOME, type NodeResult, type PhaseResult } from '../core/results.ts'
import { formatTable } from '../cli/table.ts'
import { taskCommand } from '../cli/hints.ts'

/** An interruption that cut a changing call short: whether it took effect is unknown. */
const unknownOutcome = (r: NodeResult): boolean => r.error?.kind === 'interrupted' && r.error.message.startsWith(UNKNOWN_OUTCOME)

function overall(results: NodeResult[], ok: string): string {
  const failed = results.find((r) => r.status === 'failed')
  if (failed && unknownOutcome(failed)) return `interrupted (${UNKNOWN_OUTCOME})`
  if (failed?.error?.kind === 'interrupted') return 'interrupted'
  if (failed) return `failed: ${failed.error ? failed.error.kind : 'unknown'}`
  if (results.some((r) => r.status === 'not-run')) return 'not run'
  if (results.length > 0 && results.every((r) => r.status === 'skipped')) return 'skipped'
  return ok
}

/** A node's status in one phase: an interruption reads as such, not as a failure or a success. */
function cell(r: NodeResult, ok: string): string {
  if (r.status === 'failed' && unknownOutcome(r)) return UNKNOWN_OUTCOME
  if (r.status === 'failed' && r.error?.kind === 'interrupted') return 'interrupted'
  if (r.status === 'failed' && r.error) return `failed (${r.error.kind})`
  if (r.status === 'not-run' && r.detail === 'interrupted before it ran') return 'not-run (interrupted)'
  return r.status === 'ok' ? ok : r.status
}

/** One row per node (name first), a column per phase, then the overall result; a dry run's "ok" reads "would run". */
export function summaryTable(nodes: ClusterNode[], phases: PhaseResult[], dryRun = false): string {
  const ok = dryRun ? 'would run' : 'ok'
  const header = ['NODE', 'IP', 'ROLE', ...phases.map((p) => p.name.toUpperCase()), dryRun ? 'RESULT (DRY RUN)' : 'RESULT']
  const rows = nodes.map((node) => {
    const perPhase = phases.map((p) => p.nodes.find((n) => n.name === node.name))
    const cells = perPhase.map((r) => (r ? cell(r, ok) : '-'))
    return [
      node.name,
      node.address,
      node.role,
      ...cells,
      overall(
        perPhase.filter((r): r is NodeResult => r !== undefined),
        ok,
      ),
    ]
  })
  return formatTable(header, rows)
}

/** For stderr: each failed node with its cause and the command that recovers it. */
export function failureDetails(phases: PhaseResult[]): string[] {
  const lines: string[] = []
  for (const phase of phases) {
    for (const step of phase.steps) {
      if (step.status === 'failed' && step.error) {
        lines.push(`${phase.name}/${step.name}: ${step.error.kind}: ${step.error.message}`, `  next: ${step.error.hint}`)
      }
    }
    for (const node of phase.nodes) {
      if (node.status === 'failed' && node.error) {
        lines.push(
          `${node.name} (${node.ip}) failed in ${phase.name}: ${node.error.kind}: ${node.error.message}`,
          `  next: ${node.error.hint}`,
        )
      }
    }
  }
  const failed = lines.length > 0
  // a step the node selection left to another command says so, and which command, failures or not
  // (the steps waiting on it need no line of their own: that command runs them too)
  for (const phase of phases) {
    for (const step of phase.steps) {
      if (step.status === 'not-run' && step.next)
        lines.push(`${phase.name}/${step.name}: not run${step.detail ? ` (${step.detail})` : ''}`, `  next: ${step.next}`)
    }
  }
  // a step the failures left undone gets its own way to finish it: following a node's hint alone
  // (bootstrap:node) never runs a later phase's cluster steps (the CNI, Flux)
  if (failed) {
    for (const phase of phases) {
      for (const step of phase.steps) {
        if (step.status !== 'not-run' || step.next) continue
        lines.push(
          `${phase.name}/${step.name}: not run${step.detail ? ` (${step.detail})` : ''}`,
          `  next: once the failures above are recovered, run: ${taskCommand(PHASE_TASK[phase.name])}`,
        )
      }
    }
  }
  return lines
}

/** For stdout after the table: each cluster-wide step the node selection skipped, and the command that runs it. */
export function selectionNotes(phases: PhaseResult[]): string[] {
  return phases.flatMap((phase) =>
    phase.steps
      .filter((step) => step.status === 'skipped' && step.next)
      .flatMap((step) => [`${phase.name}/${step.name}: skipped (${step.detail ?? ''})`, `  to run it: ${step.next ?? ''}`]),
  )
}

/** The task that runs one phase alone. */
const PHASE_TASK: Record<PhaseResult['name'], string> = {
  preflight: 'bootstrap:preflight',
  reset: 'bootstrap:talos',
  apply: 'bootstrap:apply',
  verify: 'bootstrap:verify',
  bootstrap: 'bootstrap:etcd',
  'wait-ready': 'bootstrap:wait-ready',
  flux: 'bootstrap:flux',
  'cluster-apply': 'cluster:apply',
  'upgrade-talos': 'upgrade:talos',
  'upgrade-k8s': 'upgrade:k8s',
}

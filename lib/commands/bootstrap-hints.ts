// Hints while etcd was never bootstrapped in this run: `bootstrap:node` recovers a node of a running
// cluster and by design never bootstraps (recover mode), so a failure that left the bootstrap undone
// points at the command that does it.
import { phaseTask, taskCommand } from '../cli/hints.ts'
import type { PhaseResult } from '../core/results.ts'

/**
 * When the run has a bootstrap phase whose etcd-bootstrap step did not end ok, every failure in the
 * phases up to it (a node, or the step itself) that hints `bootstrap:node NODE=<node>` hints
 * `bootstrap:talos` instead (`bootstrap:etcd` when that was the command). A hint that resets
 * (RESET=true) keeps its command: it is a node's own recovery.
 */
export function retargetBootstrapHints(results: PhaseResult[], command: string, recover: boolean): void {
  if (recover) return
  const at = results.findIndex((p) => p.name === 'bootstrap')
  const step = results[at]?.steps.find((s) => s.name === 'etcd-bootstrap')
  if (at < 0 || !step || step.status === 'ok' || step.status === 'skipped') return
  const retarget = retargeter(results, taskCommand(command === 'bootstrap' ? 'bootstrap:etcd' : 'bootstrap:talos'))
  for (const phase of results.slice(0, at + 1)) {
    for (const node of phase.nodes) if (node.error) node.error.hint = retarget(node.error.hint)
    for (const s of phase.steps) if (s.error) s.error.hint = retarget(s.error.hint)
  }
}

/**
 * A cluster step (the kubeconfig, the API, the CNI) fails for every node it blocks, though its cause
 * came from one node's call (the kubeconfig fetched from the bootstrap node): its hint, and the
 * blocked nodes' copies of it, name the command that was run (`bootstrap:talos`, the phase's task),
 * which waits for every node again, not `bootstrap:node` for that one node.
 */
export function retargetClusterStepHints(results: PhaseResult[], command: string, recover: boolean): void {
  if (recover) return
  const retarget = retargeter(results, taskCommand(commandTask(command)))
  for (const phase of results) {
    for (const step of phase.steps) {
      if (step.status !== 'failed' || !step.error) continue
      step.error.hint = retarget(step.error.hint)
      for (const node of phase.nodes) if (node.error?.message.startsWith(`${step.name}: `)) node.error.hint = retarget(node.error.hint)
    }
  }
}

/** The task of a run's command (a report's `command`: a phase name, talos or all). */
function commandTask(command: string): string {
  return command === 'talos' || command === 'all' ? `bootstrap:${command}` : phaseTask(command)
}

/** Replaces the plain `bootstrap:node NODE=<node>` of a hint with `target`; a reset's command (`… RESET=true`) stays. */
function retargeter(results: PhaseResult[], target: string): (hint: string) => string {
  const names = new Set(results.flatMap((p) => p.nodes.map((n) => n.name)))
  return (hint) => {
    let out = hint
    for (const name of names) {
      const plain = taskCommand('bootstrap:node', { NODE: name })
      out = out.split(plain).reduce((acc, part, i) => (i === 0 ? part : acc + (part.startsWith(' RESET=') ? plain : target) + part), '')
    }
    return out
  }
}

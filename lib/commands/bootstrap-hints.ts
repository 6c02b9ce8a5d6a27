// Hints while etcd was never bootstrapped in this run: `bootstrap:node` recovers a node of a running
// cluster and by design never bootstraps (recover mode), so a failure that left the bootstrap undone
// points at the command that does it.
import { taskCommand } from '../cli/hints.js'
import type { PhaseResult } from '../core/results.js'

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
  const target = taskCommand(command === 'bootstrap' ? 'bootstrap:etcd' : 'bootstrap:talos')
  const names = new Set(results.flatMap((p) => p.nodes.map((n) => n.name)))
  const retarget = (hint: string): string => {
    let out = hint
    for (const name of names) {
      const plain = taskCommand('bootstrap:node', { NODE: name })
      // the plain rejoin only, never a reset's command (`… NODE=x RESET=true`)
      out = out.split(plain).reduce((acc, part, i) => (i === 0 ? part : acc + (part.startsWith(' RESET=') ? plain : target) + part), '')
    }
    return out
  }
  for (const phase of results.slice(0, at + 1)) {
    for (const node of phase.nodes) if (node.error) node.error.hint = retarget(node.error.hint)
    for (const s of phase.steps) if (s.error) s.error.hint = retarget(s.error.hint)
  }
}

// The operator's gate command (GATE_COMMAND, docs/day2-design.md 2.2): after a node is done, a check
// of the operator's own (storage healthy, an application answering) must exit 0 before the next node
// starts. It runs as `sh -c <command>`, the one documented exception to argument arrays, with the
// node in its environment; attempts are gateInterval apart through the run's one poller, each with
// what is left of gateTimeout as its deadline.
import { NodeError } from '../../core/errors.ts'
import { hintFor } from '../../cli/hints.ts'
import type { ClusterNode } from '../../core/model.ts'
import type { StepReporter } from '../../engine/phase.ts'
import type { Run } from '../../engine/run.ts'
import type { PhaseName } from '../../core/results.ts'
import { PollTimeout } from '../../wait/poll.ts'

/** The last lines of an attempt's output, redacted, on one line. */
function tail(run: Run, stdout: string, stderr: string): string {
  const lines = run.redactor
    .redact(`${stdout}\n${stderr}`)
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
  return lines.slice(-5).join(' | ').slice(0, 500)
}

/**
 * Runs the gate command after `node` (undefined: before the first node, with NODE, NODE_IP and
 * NODE_ROLE empty) until it exits 0; a detail (`gate command passed after 2 attempts`), or
 * undefined without one. `hint`: what a failure says to do (default: the kind's hint for the node).
 */
export async function runGateCommand(
  run: Run,
  report: StepReporter,
  node: ClusterNode | undefined,
  phase: PhaseName,
  hint?: string,
): Promise<string | undefined> {
  const command = run.settings.gateCommand
  if (!command) return undefined
  const started = performance.now()
  let attempts = 0
  let lastAt = -Infinity
  /** the last attempt's failure, kept across the waits between attempts */
  let failure = ''
  report.progress('gate command')
  try {
    await report.poll(async () => {
      const now = performance.now()
      if (now - lastAt < run.settings.gateIntervalMs)
        return { done: false, state: `gate command: next attempt in ${Math.ceil((lastAt + run.settings.gateIntervalMs - now) / 1000)}s` }
      lastAt = now
      attempts++
      const result = await run.tools.run({
        tool: 'sh',
        args: ['-c', command],
        ...(node ? { node: node.name } : {}),
        env: {
          NODE: node?.name ?? '',
          NODE_IP: node?.address ?? '',
          NODE_ROLE: node?.role ?? '',
          PHASE: phase,
          KUBECONFIG: run.kubeconfig,
          TALOSCONFIG: run.inventory.talosconfig,
        },
        timeoutMs: Math.max(1_000, Math.round(run.settings.gateTimeoutMs - (now - started))),
      })
      if (result.ok) return { done: true, value: true }
      const why = result.timedOut ? 'did not finish in time' : `exit ${String(result.exitCode)}`
      failure = `gate command attempt ${attempts}: ${why}: ${tail(run, result.stdout, result.stderr)}`
      return { done: false, state: failure }
    }, run.settings.gateTimeoutMs)
  } catch (err) {
    if (!(err instanceof PollTimeout)) throw err
    const what = node
      ? `${node.name} is done, but the gate command after it`
      : 'the gate command before the first node (nothing was touched)'
    throw new NodeError(
      'gate-command',
      `${what} did not pass within ${Math.round(err.waitedMs / 1000)}s (${attempts} attempts): ${failure || err.lastState}`,
      hint ?? (node ? hintFor('gate-command', node) : 'see its output in the message, fix what it checks, then run the command again'),
    )
  }
  return `gate command passed${attempts > 1 ? ` after ${attempts} attempts` : ''}`
}

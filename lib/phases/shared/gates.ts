import { NodeError } from '../../core/errors.ts'
import { kubectlCommand, taskCommand } from '../../cli/hints.ts'
import type { StepReporter } from '../../engine/phase.ts'
import type { Run } from '../../engine/run.ts'
import type { ReadinessGate } from '../../input/settings.ts'
import { condition } from '../../tools/kubectl.ts'
import { podWhy } from './health.ts'
import { PollTimeout, type PollAnswer } from '../../wait/poll.ts'

/** Every gate's pods exist and are Ready, or the deadline; `recoveryTask` is the task the hint names. */
export async function waitForGates(run: Run, gates: ReadinessGate[], report: StepReporter, recoveryTask: string): Promise<string> {
  if (gates.length === 0) return 'no readiness gates'
  try {
    await report.poll(async (): Promise<PollAnswer<true>> => {
      const waiting: string[] = []
      for (const gate of gates) {
        const pods = await run.kubectl.list('pods', { namespace: gate.namespace, selector: gate.selector })
        const notReady = pods.filter((p) => condition(p, 'Ready')?.status !== 'True')
        if (pods.length === 0) waiting.push(`${gate.name}: no pods match ${gate.selector} in ${gate.namespace}`)
        // each pod with its own reason (a waiting container's, the scheduler's, its newest Warning event)
        else if (notReady.length > 0)
          waiting.push(`${gate.name}: ${notReady.map((p) => `${p.metadata.name} not ready (${podWhy(p).why})`).join(', ')}`)
      }
      return waiting.length === 0 ? { done: true, value: true } : { done: false, state: waiting.join('; ') }
    }, run.settings.readyTimeoutMs)
  } catch (err) {
    if (err instanceof PollTimeout)
      throw new NodeError(
        'node-not-ready',
        `readiness gates not satisfied: ${err.lastState}`,
        `see the pods named above (\`${kubectlCommand('get pods -A')}\`), then run: ${taskCommand(recoveryTask)}`,
      )
    throw err
  }
  return `${gates.length} gate(s) satisfied`
}

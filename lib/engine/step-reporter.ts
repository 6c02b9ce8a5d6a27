import type { StepReporter } from './phase.ts'
import type { Run } from './run.ts'
import { pollUntil } from '../wait/poll.ts'
import { withRetry } from '../wait/retry.ts'

/** A step's reporter with the run's retry policy and poller bound to the run and to it. */
export function stepReporter(run: Run, report: Pick<StepReporter, 'progress' | 'retrying'>): StepReporter {
  return {
    progress: (text) => report.progress(text),
    retrying: (attempt, error, delayMs) => report.retrying(attempt, error, delayMs),
    retry: async (attempt, options = {}) => {
      const { value } = await withRetry(attempt, {
        settings: run.settings,
        signal: run.signal,
        onRetry: (e) => report.retrying(e.attempt, e.error, e.delayMs),
        ...options,
      })
      return value
    },
    poll: (check, timeoutMs) =>
      pollUntil(check, {
        intervalMs: run.settings.pollIntervalMs,
        timeoutMs,
        signal: run.signal,
        onState: (state) => report.progress(state),
      }),
  }
}

import { setTimeout as sleep } from 'node:timers/promises'
import { NodeError } from '../core/errors.ts'

/**
 * A check's answer. Not done yet may ask to be asked again sooner than the interval (`againInMs`,
 * never later): a check that needs two reads a moment apart (the quorum gate's catch-up) takes its
 * second read then instead of a whole interval later.
 */
export type PollAnswer<T> = { done: true; value: T } | { done: false; state: string; againInMs?: number }

export class PollTimeout extends Error {
  readonly lastState: string
  readonly waitedMs: number
  /** the last transient error the wait took as "not yet", and how many there were */
  readonly lastError: { text: string; count: number } | undefined
  constructor(lastState: string, waitedMs: number, lastError?: { text: string; count: number }) {
    super(`still ${lastState} after ${Math.round(waitedMs / 1000)}s`)
    this.lastState = lastState
    this.waitedMs = waitedMs
    this.lastError = lastError
    this.name = 'PollTimeout'
  }
}

/** `; <n> failed reads, the last: <error>` for a final message (nothing when no read failed) */
export function lastErrorNote(lastError: { text: string; count: number } | undefined): string {
  if (!lastError) return ''
  return `; ${lastError.count} ${lastError.count === 1 ? 'read' : 'reads'} failed, the last: ${lastError.text}`
}

export interface PollOptions {
  intervalMs: number
  timeoutMs: number
  signal: AbortSignal
  /** called with every answer that is not done yet (progress display) */
  onState?: (state: string, elapsedMs: number) => void
}

/**
 * The one waiting helper: asks `check` every interval until it is done, the deadline passes
 * (PollTimeout with the last state) or the run is aborted. `check` may throw to stop early; a
 * transient NodeError it throws (a refused or timed-out read, a 503) is "not yet": a wait fails
 * only at its deadline, never on one bad read shared by every node.
 */
export async function pollUntil<T>(check: (elapsedMs: number) => Promise<PollAnswer<T>>, options: PollOptions): Promise<T> {
  const started = performance.now()
  let lastState = 'not checked yet'
  let lastError: { text: string; count: number } | undefined
  for (;;) {
    options.signal.throwIfAborted()
    const elapsed = performance.now() - started
    const answer = await check(elapsed).catch((err: unknown): PollAnswer<T> => {
      if (err instanceof NodeError && err.transient && !options.signal.aborted) {
        lastError = { text: `${err.kind}: ${err.message}`, count: (lastError?.count ?? 0) + 1 }
        return { done: false, state: lastError.text }
      }
      throw err
    })
    if (answer.done) return answer.value
    lastState = answer.state
    options.onState?.(answer.state, elapsed)
    const remaining = options.timeoutMs - (performance.now() - started)
    if (remaining <= 0) throw new PollTimeout(lastState, performance.now() - started, lastError)
    await sleep(Math.min(options.intervalMs, answer.againInMs ?? options.intervalMs, remaining), undefined, { signal: options.signal })
  }
}

import pRetry from 'p-retry'
import { NodeError } from '../core/errors.ts'
import type { Settings } from '../input/settings.ts'

export interface RetryEvent {
  attempt: number
  error: NodeError
  /** ms until the next attempt */
  delayMs: number
}

export interface RetryOptions {
  settings: Pick<Settings, 'retries' | 'retryDelayMs' | 'retryMaxDelayMs'>
  signal: AbortSignal
  onRetry?: (event: RetryEvent) => void
  /** which transient errors are retried here (default: all); the others go back to the caller at once */
  retries?: (error: NodeError) => boolean
}

/**
 * The one retry policy: exponential backoff with jitter, only for transient kinds
 * (unreachable, timeout, not-ready-yet); anything else fails at once.
 * Resolves with the value and the number of attempts it took.
 */
export async function withRetry<T>(attempt: (n: number) => Promise<T>, options: RetryOptions): Promise<{ value: T; attempts: number }> {
  let attempts = 0
  const value = await pRetry(
    async (n) => {
      attempts = n
      return attempt(n)
    },
    {
      retries: options.settings.retries,
      // p-retry's backoff: retryDelayMs x 2^(n-1), jittered by 1-2x (randomize), capped at retryMaxDelayMs
      minTimeout: options.settings.retryDelayMs,
      factor: 2,
      maxTimeout: options.settings.retryMaxDelayMs,
      randomize: true,
      signal: options.signal,
      shouldRetry: ({ error }) => retried(error, options),
      // called before shouldRetry, so only a transient error with retries left is reported; retryDelay
      // is the delay p-retry then waits (no maxRetryTime shortens it)
      onFailedAttempt: ({ error, attemptNumber, retriesLeft, retryDelay }) => {
        if (!retried(error, options) || retriesLeft === 0 || !(error instanceof NodeError)) return
        options.onRetry?.({ attempt: attemptNumber, error, delayMs: retryDelay })
      },
    },
  ).catch((err: unknown) => {
    if (err instanceof NodeError) Object.assign(err, { attempts })
    throw err
  })
  return { value, attempts }
}

function retried(error: unknown, options: RetryOptions): boolean {
  return error instanceof NodeError && error.transient && (options.retries?.(error) ?? true)
}

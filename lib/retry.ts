import pRetry from 'p-retry'
import { NodeError } from './classify.js'
import type { Settings } from './settings.js'

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
}

const FACTOR = 2

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
      factor: FACTOR,
      minTimeout: options.settings.retryDelayMs,
      maxTimeout: options.settings.retryMaxDelayMs,
      randomize: true,
      signal: options.signal,
      shouldRetry: ({ error }) => error instanceof NodeError && error.transient,
      onFailedAttempt: ({ error, attemptNumber, retriesLeft }) => {
        if (!(error instanceof NodeError) || !error.transient || retriesLeft === 0) return
        const base = Math.min(options.settings.retryDelayMs * FACTOR ** (attemptNumber - 1), options.settings.retryMaxDelayMs)
        options.onRetry?.({ attempt: attemptNumber, error, delayMs: base })
      },
    },
  ).catch((err: unknown) => {
    if (err instanceof NodeError) Object.assign(err, { attempts })
    throw err
  })
  return { value, attempts }
}

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

/** Resolves after ms; rejects with the signal's reason when the run is aborted. */
function wait(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    signal.throwIfAborted()
    const onAbort = (): void => {
      clearTimeout(timer)
      reject(signal.reason)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/** Exponential backoff with full-range jitter (x1 to x2), capped at the max delay: the delay before attempt n+1. */
export function backoffDelay(attempt: number, settings: RetryOptions['settings']): number {
  const jitter = 1 + Math.random()
  return Math.min(Math.round(jitter * settings.retryDelayMs * FACTOR ** (attempt - 1)), settings.retryMaxDelayMs)
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
      // the backoff is waited here, in onFailedAttempt, so the delay reported is the one waited
      minTimeout: 0,
      signal: options.signal,
      shouldRetry: ({ error }) => error instanceof NodeError && error.transient,
      onFailedAttempt: async ({ error, attemptNumber, retriesLeft }) => {
        if (!(error instanceof NodeError) || !error.transient || retriesLeft === 0) return
        const delayMs = backoffDelay(attemptNumber, options.settings)
        options.onRetry?.({ attempt: attemptNumber, error, delayMs })
        await wait(delayMs, options.signal)
      },
    },
  ).catch((err: unknown) => {
    if (err instanceof NodeError) Object.assign(err, { attempts })
    throw err
  })
  return { value, attempts }
}

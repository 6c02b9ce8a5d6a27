import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { NodeError } from '../../lib/core/errors.js'
import { withRetry, type RetryEvent } from '../../lib/wait/retry.js'

const settings = { retries: 3, retryDelayMs: 1000, retryMaxDelayMs: 3000 }

describe('withRetry', () => {
  beforeEach(() => {
    vi.useFakeTimers()
    vi.spyOn(Math, 'random').mockReturnValue(0.5) // the jitter multiplies by 1 + random
  })
  afterEach(() => vi.useRealTimers())

  it('retries transient failures with exponential backoff and records each attempt', async () => {
    const events: RetryEvent[] = []
    let calls = 0
    const promise = withRetry(
      async () => {
        calls++
        if (calls < 3) throw new NodeError('unreachable', 'connection refused', 'hint')
        return 'ok'
      },
      { settings, signal: new AbortController().signal, onRetry: (e) => events.push(e) },
    )
    await vi.advanceTimersByTimeAsync(1499)
    expect(calls).toBe(1)
    await vi.advanceTimersByTimeAsync(1)
    expect(calls).toBe(2)
    await vi.advanceTimersByTimeAsync(3000)
    await expect(promise).resolves.toEqual({ value: 'ok', attempts: 3 })
    // the jittered delays actually waited (1000 x 1.5, then 2000 x 1.5), not the base ones
    expect(events.map((e) => [e.attempt, e.error.kind, e.delayMs])).toEqual([
      [1, 'unreachable', 1500],
      [2, 'unreachable', 3000],
    ])
  })

  it('`retries` keeps a transient kind for the caller: not-ready-yet goes back at once, unreachable is retried', async () => {
    const errors = [
      new NodeError('unreachable', 'connection refused', 'hint'),
      new NodeError('not-ready-yet', 'bootstrap is not available yet', 'hint'),
    ]
    let calls = 0
    const promise = withRetry(
      async () => {
        throw errors[calls++] ?? new Error('called too often')
      },
      { settings, signal: new AbortController().signal, retries: (e) => e.kind !== 'not-ready-yet' },
    )
    const settled = expect(promise).rejects.toMatchObject({ kind: 'not-ready-yet', attempts: 2 })
    await vi.advanceTimersByTimeAsync(1500)
    await settled
    expect(calls).toBe(2)
  })

  it('reports the delay it waits, whatever the jitter draws', async () => {
    const draws = [0.1, 0.9]
    vi.spyOn(Math, 'random').mockImplementation(() => draws.shift() ?? 0)
    const events: RetryEvent[] = []
    let calls = 0
    const promise = withRetry(
      async () => {
        calls++
        if (calls < 3) throw new NodeError('timeout', 'slow', 'hint')
        return calls
      },
      {
        settings: { retries: 3, retryDelayMs: 1000, retryMaxDelayMs: 10_000 },
        signal: new AbortController().signal,
        onRetry: (e) => events.push(e),
      },
    )
    await vi.advanceTimersByTimeAsync(0)
    expect(events.map((e) => e.delayMs)).toEqual([1100])
    await vi.advanceTimersByTimeAsync(1099)
    expect(calls).toBe(1)
    await vi.advanceTimersByTimeAsync(1)
    expect(calls).toBe(2)
    expect(events.map((e) => e.delayMs)).toEqual([1100, 3800])
    await vi.advanceTimersByTimeAsync(3799)
    expect(calls).toBe(2)
    await vi.advanceTimersByTimeAsync(1)
    await expect(promise).resolves.toEqual({ value: 3, attempts: 3 })
  })

  it('never retries a permanent kind', async () => {
    let calls = 0
    const promise = withRetry(
      async () => {
        calls++
        throw new NodeError('pki-mismatch', 'unknown authority', 'hint')
      },
      { settings, signal: new AbortController().signal },
    )
    await expect(promise).rejects.toMatchObject({ kind: 'pki-mismatch', attempts: 1 })
    expect(calls).toBe(1)
  })

  it('gives up after the configured retries with the last error and the attempt count', async () => {
    let calls = 0
    const promise = withRetry(
      async () => {
        calls++
        throw new NodeError('timeout', `attempt ${calls}`, 'hint')
      },
      { settings, signal: new AbortController().signal },
    )
    const assertion = expect(promise).rejects.toMatchObject({ kind: 'timeout', message: 'attempt 4', attempts: 4 })
    await vi.advanceTimersByTimeAsync(60_000)
    await assertion
    expect(calls).toBe(4)
  })

  it('stops waiting when the run is aborted', async () => {
    const controller = new AbortController()
    const promise = withRetry(
      async () => {
        throw new NodeError('unreachable', 'refused', 'hint')
      },
      { settings, signal: controller.signal },
    )
    const assertion = expect(promise).rejects.toThrow('stop')
    await vi.advanceTimersByTimeAsync(10)
    controller.abort(new Error('stop'))
    await assertion
  })
})

// Issue 12 item 2: a transient error in a wait is "not yet"; only the deadline fails the wait.
import { describe, expect, it } from 'vitest'
import { NodeError } from '../../lib/core/errors.js'
import { pollUntil, PollTimeout } from '../../lib/wait/poll.js'

const options = { intervalMs: 1, timeoutMs: 2000, signal: new AbortController().signal }

describe('pollUntil', () => {
  it('waits on through transient errors (refused, timed out, 503) and returns once done', async () => {
    const errors = [
      new NodeError('unreachable', 'connection refused', 'h'),
      new NodeError('timeout', 'i/o timeout', 'h'),
      new NodeError('unreachable', 'ServiceUnavailable', 'h'),
    ]
    const states: string[] = []
    let calls = 0
    const value = await pollUntil(
      async () => {
        calls++
        const err = errors.shift()
        if (err) throw err
        return { done: true, value: 'ready' }
      },
      { ...options, onState: (s) => states.push(s) },
    )
    expect(value).toBe('ready')
    expect(calls).toBe(4)
    expect(states).toEqual(['unreachable: connection refused', 'timeout: i/o timeout', 'unreachable: ServiceUnavailable'])
  })

  it('fails at the deadline with the last error as its state', async () => {
    const wait = pollUntil(
      async () => {
        throw new NodeError('unreachable', 'connection refused', 'h')
      },
      { ...options, timeoutMs: 20 },
    )
    await expect(wait).rejects.toBeInstanceOf(PollTimeout)
    await expect(wait).rejects.toMatchObject({ lastState: 'unreachable: connection refused' })
  })

  it('a permanent error still stops the wait at once', async () => {
    let calls = 0
    const wait = pollUntil(async () => {
      calls++
      throw new NodeError('pki-mismatch', 'unknown authority', 'h')
    }, options)
    await expect(wait).rejects.toMatchObject({ kind: 'pki-mismatch' })
    expect(calls).toBe(1)
  })

  it('asks again sooner when the answer says so, never later than the interval', async () => {
    const at: number[] = []
    const started = performance.now()
    await pollUntil(
      async () => {
        at.push(performance.now() - started)
        if (at.length === 1) return { done: false, state: 'first read', againInMs: 20 }
        if (at.length === 2) return { done: false, state: 'second read', againInMs: 60_000 }
        return { done: true, value: undefined }
      },
      { ...options, intervalMs: 1500 },
    )
    expect(at).toHaveLength(3)
    // the second read after the asked 20 ms, not the 1.5 s interval (half of it leaves room for a loaded machine)
    expect(at[1]! - at[0]!).toBeLessThan(750)
    // the third after the interval: a longer ask does not stretch it
    expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(1490)
    expect(at[2]! - at[1]!).toBeLessThan(30_000)
  })
})

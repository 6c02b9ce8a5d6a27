// SharedReading: one read serves every caller while it is in flight and for maxAgeMs after it answered.
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { SharedReading } from '../../lib/wait/shared-reading.js'

describe('SharedReading', () => {
  it('shares a read slower than maxAgeMs with every caller that asks while it is in flight', async () => {
    let reads = 0
    let answer: (n: number) => void = () => {}
    const reading = new SharedReading(() => {
      reads++
      return new Promise<number>((resolve) => (answer = resolve))
    }, 200)
    const first = reading.get()
    await sleep(250) // past maxAgeMs, the read still in flight
    const second = reading.get()
    expect(reads).toBe(1)
    answer(1)
    expect(await Promise.all([first, second])).toEqual([1, 1])
    expect(reads).toBe(1)
    const fresh = reading.get() // answered just now: no new read
    expect(reads).toBe(1)
    expect(await fresh).toBe(1)
    await sleep(250) // older than maxAgeMs since it answered: read again
    const again = reading.get()
    answer(2)
    expect(await again).toBe(2)
    expect(reads).toBe(2)
  })

  it('does not reuse a failed read', async () => {
    let reads = 0
    const reading = new SharedReading(async () => {
      reads++
      if (reads === 1) throw new Error('refused')
      return reads
    }, 1000)
    await expect(reading.get()).rejects.toThrow('refused')
    expect(await reading.get()).toBe(2)
  })
})

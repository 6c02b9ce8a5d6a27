// Issue 15 item 6: read-only work (probes, status reads) runs for every selected node at once, while
// CONCURRENCY keeps bounding what changes nodes. Every node is refused twice (so each probe spends a
// while in its retries); with CONCURRENCY=1 the probes must still overlap, and the applies must not.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Report } from '../../lib/core/results.js'
import { E2eCluster } from './harness.js'

const NODES = ['cp-1', 'wrkr-1', 'wrkr-2']
let cluster: E2eCluster
beforeAll(async () => {
  cluster = await E2eCluster.start('127.97.6', {
    cps: 1,
    workers: 2,
    speed: 3000,
    faults: NODES.map((node) => ({ node, on: 'any', kind: 'unreachable', times: 2 })),
  })
})
afterAll(async () => {
  await cluster?.stop()
})

/** [start, end] in ms of each node's work in a phase */
function spans(report: Report, phase: string): Array<[string, number, number]> {
  const found = report.phases.find((p) => p.name === phase)
  if (!found) throw new Error(`no phase ${phase}`)
  return found.nodes.map((n) => {
    if (n.startedAtMs === undefined) throw new Error(`${n.name} has no start in ${phase}`)
    return [n.name, n.startedAtMs, n.startedAtMs + n.durationMs]
  })
}

describe('CONCURRENCY=1', () => {
  it('probes every node at once; applies one node after the other', async () => {
    const preflight = await cluster.task('bootstrap:preflight', { CONCURRENCY: '1' })
    expect(preflight.code, preflight.stderr + preflight.stdout).toBe(0)
    const report = cluster.report()
    expect(report.phases.find((p) => p.name === 'preflight')?.nodes.map((n) => n.attempts)).toEqual([3, 3, 3])

    // every probe started before any other ended: they ran side by side
    const probes = spans(report, 'preflight')
    const firstEnd = Math.min(...probes.map(([, , end]) => end))
    for (const [name, start] of probes) expect(start, `${name}'s probe started before the first probe ended`).toBeLessThan(firstEnd)

    // the applies: each starts after the one before it ended
    const apply = await cluster.task('bootstrap:apply', { CONCURRENCY: '1' })
    expect(apply.code, apply.stderr + apply.stdout).toBe(0)
    const applies = spans(cluster.report(), 'apply').sort((a, b) => a[1] - b[1])
    for (let i = 1; i < applies.length; i++) {
      const [name, start] = applies[i] as [string, number, number]
      const [before, , end] = applies[i - 1] as [string, number, number]
      expect(start, `${name}'s apply started after ${before}'s ended`).toBeGreaterThanOrEqual(end)
    }
  })
})

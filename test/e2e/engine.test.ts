// Issue: per-node engine, preflight / apply / verify through the real `task` against the simulator.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { Report } from '../../lib/core/results.js'
import { callsTo, E2eCluster, nodeIn, statuses } from './harness.js'

let cluster: E2eCluster | undefined
afterEach(async () => {
  await cluster?.stop()
  cluster = undefined
})

const PHASES = ['bootstrap:preflight', 'bootstrap:apply', 'bootstrap:verify'] as const

async function runThree(c: E2eCluster, vars: Record<string, string> = {}): Promise<number | null> {
  let last: number | null = 0
  for (const phase of PHASES) {
    const result = await c.task(phase, vars)
    last = result.code
    if (result.code !== 0) return result.code
  }
  return last
}

describe('preflight, apply, verify end to end', () => {
  it('takes a clean 6-node cluster out of maintenance, then a rerun touches nothing', async () => {
    cluster = await E2eCluster.start('127.60.1', { cps: 3, workers: 3 })
    expect(await runThree(cluster)).toBe(0)
    const report = cluster.report()
    expect(report.command).toBe('verify')
    expect(Object.values(statuses(report, 'verify'))).toEqual(Array(6).fill('ok'))
    for (const n of ['cp-1', 'cp-2', 'cp-3']) expect(nodeIn(report, 'verify', n).detail).toMatch(/running|etcd waiting for bootstrap/)
    // behind the VIP with discovery off a worker's API waits for the bootstrap (secrets/api.go): verify says so
    for (const n of ['wrkr-1', 'wrkr-2', 'wrkr-3'])
      expect(nodeIn(report, 'verify', n).detail).toMatch(/^config accepted, out of maintenance; waiting for the control plane: /)

    const before = cluster.calls().length
    const again = await cluster.task('bootstrap:apply')
    expect(again.code, again.stdout).toBe(0)
    const rerun = cluster.report()
    expect(Object.values(statuses(rerun, 'apply'))).toEqual(Array(6).fill('skipped'))
    expect(nodeIn(rerun, 'apply', 'wrkr-1').error?.kind).toBe('configured')
    const newCalls = cluster.calls().slice(before)
    expect(newCalls.filter((c) => c.call === 'apply')).toEqual([])
    expect(again.stdout).toMatch(/^wrkr-3\s+127\.60\.1\.23\s+worker\s+skipped\s+skipped$/m)
  })

  it('rides out transient faults and records the attempts', async () => {
    cluster = await E2eCluster.start('127.60.2', {
      faults: [
        { node: 'wrkr-1', on: 'apply', kind: 'refused', times: 2 },
        { node: 'wrkr-2', on: 'probe', kind: 'unavailable', times: 1 },
      ],
    })
    expect(await runThree(cluster)).toBe(0)
    expect(nodeIn(cluster.report(), 'verify', 'wrkr-1').status).toBe('ok')
    // the last report is verify's; the preflight and apply runs' reports are in runs/
    const reportOf = (command: string): Report => {
      const runs = join(cluster?.clusterDir ?? '', '.bootstrap', 'runs')
      const file = readdirSync(runs).find((f) => f.endsWith(`-${command}.json`))
      if (!file) throw new Error(`no ${command} report in ${runs}`)
      return JSON.parse(readFileSync(join(runs, file), 'utf8')) as Report
    }
    // wrkr-1: two refused applies retried, the third accepted; each retry with its kind and the delay waited
    const applied = nodeIn(reportOf('apply'), 'apply', 'wrkr-1')
    expect(applied).toMatchObject({ status: 'ok', attempts: 3 })
    expect(applied.retries?.map((r) => [r.attempt, r.kind])).toEqual([
      [1, 'unreachable'],
      [2, 'unreachable'],
    ])
    for (const retry of applied.retries ?? []) expect(retry.delayMs).toBeGreaterThan(0)
    // wrkr-2: one probe answered Unavailable, retried once
    const probed = nodeIn(reportOf('preflight'), 'preflight', 'wrkr-2')
    expect(probed).toMatchObject({ status: 'ok', attempts: 2 })
    expect(probed.retries?.map((r) => [r.attempt, r.kind])).toEqual([[1, 'unreachable']])
    // the untroubled nodes took one attempt
    expect(nodeIn(reportOf('apply'), 'apply', 'cp-1')).toMatchObject({ status: 'ok', attempts: 1 })
    const calls = cluster.calls()
    expect(callsTo(calls, 'wrkr-1', 'apply').map((c) => c.outcome.startsWith('ok'))).toEqual([false, false, true])
  })

  it('fails one unreachable node alone: exit 1, the others applied and verified', async () => {
    cluster = await E2eCluster.start('127.60.3', { workers: 2, faults: [{ node: 'wrkr-2', on: 'any', kind: 'unreachable' }] })
    const result = await cluster.task('bootstrap:talos', {}, ['--retries', '2'])
    expect(result.code).toBe(1)
    const report = cluster.report()
    expect(statuses(report, 'preflight')).toEqual({ 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'failed' })
    expect(nodeIn(report, 'preflight', 'wrkr-2')).toMatchObject({ attempts: 3, error: { kind: 'unreachable' } })
    expect(nodeIn(report, 'preflight', 'wrkr-2').error?.hint).toMatch(/task -d \S+ bootstrap:node CLUSTER_DIR=\S+ NODE=wrkr-2$/)
    expect(statuses(report, 'apply')).toEqual({ 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'not-run' })
    expect(statuses(report, 'verify')).toEqual({ 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'not-run' })
    expect(result.stderr).toMatch(/wrkr-2 \(127\.60\.3\.22\) failed in preflight: unreachable: .*connection refused/)
    expect(result.stdout).toMatch(/^wrkr-2\s+127\.60\.3\.22\s+worker\s+failed \(unreachable\)\s+not-run/m)
    expect(callsTo(cluster.calls(), 'wrkr-2', 'apply')).toEqual([])
  })

  it('refuses a bad inventory with exit 2, file and line, and no call to any node', async () => {
    cluster = await E2eCluster.start('127.60.4')
    const talconfig = join(cluster.clusterDir, 'talconfig.yaml')
    writeFileSync(talconfig, readFileSync(talconfig, 'utf8').replace('hostname: wrkr-2', 'hostname: wrkr-1'))
    const result = await cluster.task('bootstrap:apply')
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(
      new RegExp(
        `${talconfig.replace(/[.]/g, '\\.')}:\\d+: duplicate node name "wrkr-1" \\(also nodes\\[1\\]\\) \\(fix: give every node its own name\\)`,
      ),
    )
    expect(cluster.calls()).toEqual([])
  })

  it('never has more than CONCURRENCY=3 nodes in flight', async () => {
    const slow = ['cp-1', ...Array.from({ length: 6 }, (_, i) => `wrkr-${i + 1}`)].map((node) => ({
      node,
      on: 'apply',
      kind: 'latency',
      ms: 300,
    }))
    cluster = await E2eCluster.start('127.60.5', { cps: 1, workers: 6, faults: slow })
    const result = await cluster.task('bootstrap:apply', { CONCURRENCY: '3' })
    expect(result.code).toBe(0)
    const nodes = cluster.report().phases[0]?.nodes ?? []
    expect(nodes).toHaveLength(7)
    const intervals = nodes.map((n) => [n.startedAtMs ?? 0, (n.startedAtMs ?? 0) + n.durationMs] as const)
    const peak = Math.max(...intervals.map(([start]) => intervals.filter(([s, e]) => s <= start && start < e).length))
    expect(peak).toBe(3)
    expect(cluster.report().settings.concurrency).toBe(3)
  })
})

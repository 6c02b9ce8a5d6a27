// Nodes configured by a concurrent run (another copy of the cluster directory: the lock is per
// directory) are not reported unreachable (issue 26 item 14): a node that answered in maintenance and
// stops listening before this run's apply reaches it took a config elsewhere and installs; verify
// waits for it. Range 127.243.x.y.
import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { callsTo, E2eCluster, gatedTalosctl, nodeIn, processesMentioning, run, waitFor, type TaskResult } from './harness.js'
import { fastWith } from '../faults/helpers.js'
import type { Report } from '../../lib/core/results.js'

let cluster: E2eCluster | undefined
afterEach(async () => {
  await cluster?.stop()
  cluster = undefined
})

describe('two runs, two copies of the cluster directory', () => {
  it("a node the other run applied between this run's preflight and its apply: skipped as configured elsewhere, waited for, not unreachable", async () => {
    cluster = await E2eCluster.start('127.243.1', { workers: 1, timings: { install: 3000 } })
    const c = cluster
    const copy = join(c.dir, 'copy')
    cpSync(c.clusterDir, copy, { recursive: true })
    // this run's apply to wrkr-1 leaves only once the other run's apply was accepted
    const gate = join(c.dir, 'other-run-applied')
    const slow = gatedTalosctl(c, '127.243.1.21', gate)
    const args = ['-x', 'bootstrap:talos', `CLUSTER_DIR=${copy}`, `TALOSCTL=${slow}`, '--', ...fastWith('--verify-timeout', '60s')]
    const mine = run('task', args, c.env())
    let ended: TaskResult | undefined
    void mine.then((r) => (ended = r))
    try {
      await waitFor(
        () => {
          // a run that ended before its apply to wrkr-1 is the failure to show, not a timeout
          if (ended) throw new Error(`this run ended (exit ${ended.code}) before its apply to wrkr-1:\n${ended.stdout}\n${ended.stderr}`)
          return processesMentioning('apply-config --insecure -n 127.243.1.21').length > 0
        },
        120_000,
        "this run's apply to wrkr-1",
      )
      const other = await c.task('bootstrap:apply', { NODES: 'wrkr-1' })
      expect(other.code, other.stderr).toBe(0)
    } finally {
      // this run goes on (and ends) whatever happened above
      writeFileSync(gate, '')
    }

    const result = await mine
    expect(result.code, result.stderr).toBe(0)
    expect(existsSync(join(copy, '.bootstrap', 'last-run.json'))).toBe(true)
    const report = JSON.parse(readFileSync(join(copy, '.bootstrap', 'last-run.json'), 'utf8')) as Report
    const applied = nodeIn(report, 'apply', 'wrkr-1')
    expect(applied.status).toBe('skipped')
    expect(applied.detail).toMatch(
      /answered in maintenance, then stopped listening before the apply of this run reached it: another run or operator applied a config/,
    )
    expect(nodeIn(report, 'wait-ready', 'wrkr-1').status).toBe('ok')
    expect(callsTo(c.calls(), 'wrkr-1', 'apply').filter((call) => call.outcome.startsWith('ok'))).toHaveLength(1)
  }, 240_000)
})

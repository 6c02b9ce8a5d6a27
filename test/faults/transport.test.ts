// Fault matrix, transport rows: timeout, rpc Unavailable, latency, unreachable for good, PKI mismatch.
// Each row: `task bootstrap:talos` against a fresh simulated cluster (127.90.<row>.0/24).
import { describe, expect, it } from 'vitest'
import { callsTo, nodeIn } from '../e2e/harness.js'
import { expectPhase, FAST, fastWith, nodeRecovery, outcomes, stepIn, ROW_TIMEOUT, withCluster } from './helpers.js'
const ALL_OK = { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'ok' }

describe.concurrent('transport faults', () => {
  it(
    'network timeout on one node: the hung probe is cut at the call timeout and retried (recovered)',
    () =>
      withCluster('127.90.1', { faults: [{ node: 'wrkr-1', on: 'probe', kind: 'timeout', times: 1 }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, fastWith('--call-timeout', '3s'))
        expect(result.code, result.stderr).toBe(0)
        const report = cluster.report()
        for (const phase of ['preflight', 'apply', 'verify', 'wait-ready']) expectPhase(report, phase, ALL_OK)
        const wrkr1 = nodeIn(report, 'preflight', 'wrkr-1')
        expect(wrkr1.attempts).toBe(2)
        expect(wrkr1.retries?.map((r) => r.kind)).toEqual(['timeout'])
        // the others needed one attempt each
        for (const n of ['cp-1', 'wrkr-2']) expect(nodeIn(report, 'preflight', n).attempts).toBe(1)
        expect(outcomes(cluster.calls(), 'wrkr-1', 'apply')).toEqual(['ok'])
      }),
    ROW_TIMEOUT,
  )

  it(
    'transient rpc Unavailable on the bootstrap call: retried once, etcd bootstrapped once (recovered)',
    () =>
      withCluster(
        '127.90.2',
        { workers: 1, faults: [{ node: 'cp-1', on: 'bootstrap', kind: 'unavailable', times: 1 }] },
        async (cluster) => {
          const result = await cluster.task('bootstrap:talos', {}, FAST)
          expect(result.code, result.stderr).toBe(0)
          const report = cluster.report()
          expectPhase(report, 'bootstrap', { 'cp-1': 'ok', 'wrkr-1': 'skipped' })
          expectPhase(report, 'wait-ready', { 'cp-1': 'ok', 'wrkr-1': 'ok' })
          expect(stepIn(report, 'bootstrap', 'etcd-bootstrap')).toMatchObject({ status: 'ok', detail: 'bootstrapped on cp-1' })
          const bootstraps = callsTo(cluster.calls(), 'cp-1', 'bootstrap')
          expect(bootstraps.map((c) => c.outcome)).toEqual([
            'error: rpc error: code = Unavailable desc = error reading from server: EOF',
            'ok',
          ])
        },
      ),
    ROW_TIMEOUT,
  )

  it(
    'slow network, 300 ms on every call to every node: done within the timeouts, nothing retried',
    () =>
      withCluster(
        '127.90.3',
        { workers: 1, faults: ['cp-1', 'wrkr-1'].map((node) => ({ node, on: 'any', kind: 'latency', ms: 300 })) },
        async (cluster) => {
          const result = await cluster.task('bootstrap:talos', {}, FAST)
          expect(result.code, result.stderr).toBe(0)
          const report = cluster.report()
          for (const phase of ['preflight', 'apply', 'verify', 'wait-ready']) expectPhase(report, phase, { 'cp-1': 'ok', 'wrkr-1': 'ok' })
          for (const phase of report.phases)
            for (const node of phase.nodes) expect(node.retries ?? [], `${node.name} in ${phase.name}`).toEqual([])
          // the latency really acted: an apply took at least the added 300 ms
          expect(nodeIn(report, 'apply', 'wrkr-1').durationMs).toBeGreaterThanOrEqual(300)
        },
      ),
    ROW_TIMEOUT,
  )

  it(
    'a node unreachable for good fails alone: named in preflight, not-run after, no call but probes',
    () =>
      withCluster('127.90.4', { faults: [{ node: 'wrkr-2', on: 'any', kind: 'unreachable' }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, FAST)
        expect(result.code).toBe(1)
        const report = cluster.report()
        expectPhase(report, 'preflight', { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'failed:unreachable' }, nodeRecovery)
        expect(nodeIn(report, 'preflight', 'wrkr-2').attempts).toBe(3)
        for (const phase of ['apply', 'verify', 'wait-ready'])
          expectPhase(report, phase, { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'not-run' })
        expectPhase(report, 'bootstrap', { 'cp-1': 'ok', 'wrkr-1': 'skipped', 'wrkr-2': 'not-run' })
        expect(result.stderr).toMatch(/wrkr-2 \(127\.90\.4\.22\) failed in preflight: unreachable: .*connection refused/)
        expect(result.stdout).toMatch(/^wrkr-2\s+127\.90\.4\.22\s+worker\s+failed \(unreachable\)/m)
        expect(callsTo(cluster.calls(), 'wrkr-2').filter((c) => c.call !== 'probe')).toEqual([])
      }),
    ROW_TIMEOUT,
  )

  it(
    'PKI mismatch after regenerated secrets: named with the talosconfig hint, not retried',
    () =>
      // discovery on: the worker's apid answers before the bootstrap, with the foreign identity
      withCluster('127.90.5', { discovery: 'enabled', faults: [{ node: 'wrkr-1', on: 'any', kind: 'pki-mismatch' }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, FAST)
        expect(result.code).toBe(1)
        const report = cluster.report()
        expectPhase(report, 'apply', ALL_OK)
        expectPhase(
          report,
          'verify',
          { 'cp-1': 'ok', 'wrkr-1': 'failed:pki-mismatch', 'wrkr-2': 'ok' },
          (n) => `${nodeRecovery(n)} RESET=true`,
        )
        const failed = nodeIn(report, 'verify', 'wrkr-1')
        expect(failed.error?.hint).toMatch(/talosconfig/)
        expect(failed.error?.message).toMatch(/certificate/)
        expect(failed.attempts).toBe(1)
        expect(failed.retries ?? []).toEqual([])
        expectPhase(report, 'wait-ready', { 'cp-1': 'ok', 'wrkr-1': 'not-run', 'wrkr-2': 'ok' })

        // a rerun meets the configured node through its other CA: named the same way, still no retry
        const rerun = await cluster.task('bootstrap:verify', { NODES: 'wrkr-1' }, FAST)
        expect(rerun.code).toBe(1)
        const again = nodeIn(cluster.report(), 'verify', 'wrkr-1')
        expect(again).toMatchObject({ status: 'failed', attempts: 1, error: { kind: 'pki-mismatch' } })
      }),
    ROW_TIMEOUT,
  )
})

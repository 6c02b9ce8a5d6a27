// Fault matrix, time sync (issue 28, item 2): the bootstrap control plane's clock never syncs (NTP
// blocked or intercepted). Verify names etcd waiting for time sync; the bootstrap answers
// `FailedPrecondition time is not in sync yet` and is failed after a short grace with the time-server
// fix, not after the whole bootstrap timeout. 127.222.<row>.0/24.
import { describe, expect, it } from 'vitest'
import { nodeIn } from '../e2e/harness.js'
import { FAST, ROW_TIMEOUT, stepIn, withCluster } from './helpers.js'

describe.concurrent('time sync faults', () => {
  it(
    'time never in sync on the bootstrap node: "waiting for time sync", then time-sync with the machine.time.servers fix',
    () =>
      withCluster('127.222.1', { workers: 1, vip: false, faults: [{ node: 'cp-1', kind: 'time-sync' }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, FAST)
        expect(result.code).toBe(1)
        const report = cluster.report()
        expect(nodeIn(report, 'verify', 'cp-1').detail).toBe('booting, etcd waiting for time sync')
        const step = stepIn(report, 'bootstrap', 'etcd-bootstrap')
        expect(step.status).toBe('failed')
        expect(step.error?.kind, step.error?.message).toBe('time-sync')
        expect(step.error?.message).toMatch(/cp-1's time is not in sync after .*time is not in sync yet.*synced: false/)
        expect(step.error?.hint).toContain('machine.time.servers')
        expect(step.error?.hint).toContain('get timestatus')
        // a short grace (a quarter of the 20s bootstrap timeout), not the whole timeout
        expect(step.durationMs).toBeLessThan(20_000)
        // said while waiting
        expect(result.stdout + result.stderr).toContain('waiting for time sync on cp-1')
      }),
    ROW_TIMEOUT,
  )
})

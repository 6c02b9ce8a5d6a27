// A talosconfig without os:admin (machined.go rules): the bootstrap is refused with PermissionDenied;
// the product names it once (kind unauthorized, no retries) with the fix. Range 127.86.<row>.0/24.
import { describe, expect, it } from 'vitest'
import { callsTo } from '../e2e/harness.js'
import { FAST, ROW_TIMEOUT, stepIn, withCluster } from './helpers.js'

describe.concurrent('talosconfig role', () => {
  it(
    'os:reader: verify reads work, the bootstrap fails once as unauthorized, naming the os:admin fix',
    () =>
      withCluster('127.86.1', { cps: 1, workers: 1, vip: false, talosconfigRole: 'os:reader' }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, FAST)
        expect(result.code).toBe(1)
        const report = cluster.report()
        const step = stepIn(report, 'bootstrap', 'etcd-bootstrap')
        expect(step.status).toBe('failed')
        expect(step.error?.kind).toBe('unauthorized')
        expect(step.error?.hint).toMatch(/os:admin/)
        expect(callsTo(cluster.calls(), 'cp-1', 'bootstrap').map((c) => c.outcome)).toEqual([
          'error: rpc error: code = PermissionDenied desc = not authorized',
        ])
      }),
    ROW_TIMEOUT,
  )
})

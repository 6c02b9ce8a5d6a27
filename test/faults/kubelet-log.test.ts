// Fault matrix, a crash-looping kubelet (issue 28, item 7): machined restarts the kubelet forever and
// its own log (`talosctl logs kubelet`) names why it exits; the product reads it and names the cause
// instead of sending the operator to dmesg. 127.223.<row>.0/24.
import { describe, expect, it } from 'vitest'
import { nodeIn } from '../e2e/harness.js'
import { expectPhase, FAST, nodeRecovery, ROW_TIMEOUT, withCluster } from './helpers.js'

const LINE =
  'E1126 10:00:00.000000    2456 run.go:72] "command failed" err="failed to validate kubelet flags: bad --node-ip \\"127.223.1.10\\""'

describe.concurrent('kubelet crash loop', () => {
  it(
    'a kubelet that keeps restarting: failed as kubelet with its own log line, the fix from its log, before the timeout',
    () =>
      withCluster(
        '127.223.1',
        { workers: 1, vip: false, faults: [{ node: 'wrkr-1', kind: 'kubelet-crashloop', message: LINE }] },
        async (cluster) => {
          const result = await cluster.task('bootstrap:talos', {}, FAST)
          expect(result.code).toBe(1)
          const report = cluster.report()
          expectPhase(report, 'wait-ready', { 'cp-1': 'ok', 'wrkr-1': 'failed:kubelet' }, nodeRecovery)
          const wrkr1 = nodeIn(report, 'wait-ready', 'wrkr-1')
          expect(wrkr1.error?.message).toBe(`the kubelet keeps restarting; its log: ${LINE}`)
          expect(wrkr1.error?.hint).toContain('logs kubelet')
          expect(wrkr1.error?.hint).toContain('machine.kubelet.nodeIP.validSubnets')
          expect(wrkr1.error?.hint).not.toContain('dmesg')
          // named at once, not waited out to the ready timeout (20s)
          expect(wrkr1.durationMs).toBeLessThan(20_000)
        },
      ),
    ROW_TIMEOUT,
  )
})

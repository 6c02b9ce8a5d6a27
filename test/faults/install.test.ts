// Fault matrix, an install that never finishes (issue 28, item 3): the installer image cannot be
// pulled, so an ISO node that took its config goes silent for good. Verify says "installing" while it
// waits, and at the timeout names the installer image and the console to read, not a powered-off
// node. 127.224.<row>.0/24.
import { describe, expect, it } from 'vitest'
import { nodeIn } from '../e2e/harness.js'
import { expectPhase, fastWith, nodeRecovery, ROW_TIMEOUT, withCluster } from './helpers.js'

describe.concurrent('install faults', () => {
  it(
    'an installer image that cannot be pulled: "installing" while waiting, then install naming the image and the console',
    () =>
      withCluster('127.224.1', { workers: 1, vip: false, faults: [{ node: 'wrkr-1', kind: 'installer-pull' }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, fastWith('--verify-timeout', '8s'))
        expect(result.code).toBe(1)
        const report = cluster.report()
        expectPhase(report, 'verify', { 'cp-1': 'ok', 'wrkr-1': 'failed:install' }, nodeRecovery)
        const wrkr1 = nodeIn(report, 'verify', 'wrkr-1')
        expect(wrkr1.error?.message).toMatch(
          /^took its config but never answered on the authenticated API within 8\.0s: its install did not finish \(installer image ghcr\.io\/siderolabs\/installer:v1\.12\.11 \(machine\.install\.image\); the console has the install.s errors\)/,
        )
        expect(wrkr1.error?.message).toMatch(/reads? failed, the last: unreachable: .*connection refused/)
        expect(wrkr1.error?.hint).toContain("read the node's console")
        expect(wrkr1.error?.hint).toContain('machine.install.image')
        expect(wrkr1.error?.hint).not.toContain('powered on')
        // said while waiting
        expect(result.stdout + result.stderr).toContain('installing: took its config')
      }),
    ROW_TIMEOUT,
  )
})

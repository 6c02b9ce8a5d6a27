// Fault matrix, TLS rows (issue 28, item 1): a node whose clock is off (its certificate not yet valid
// or expired at the real time), a node whose certificate leaves out the inventory address, and a
// wait that ends on silence keeps the last error it saw. Each row on 127.221.<row>.0/24.
import { describe, expect, it } from 'vitest'
import { nodeIn } from '../e2e/harness.js'
import { expectPhase, FAST, fastWith, nodeRecovery, ROW_TIMEOUT, withCluster } from './helpers.js'

const SHAPE = { workers: 1, vip: false } as const
const DAY_S = 86400

describe.concurrent('TLS faults', () => {
  it(
    "a node's clock ahead: its certificate is not valid yet; named as the clock at once, not waited out",
    () =>
      withCluster('127.221.1', { ...SHAPE, faults: [{ node: 'wrkr-1', kind: 'clock', offsetS: 2 * 3600 }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, FAST)
        expect(result.code).toBe(1)
        const report = cluster.report()
        expectPhase(report, 'verify', { 'cp-1': 'ok', 'wrkr-1': 'failed:clock' }, nodeRecovery)
        const wrkr1 = nodeIn(report, 'verify', 'wrkr-1')
        expect(wrkr1.error?.message).toMatch(/x509: certificate has expired or is not yet valid: current time \S+ is before \S+/)
        expect(wrkr1.error?.message).toContain("the node's clock or this one is off")
        expect(wrkr1.error?.hint).toContain('date -u')
        expect(wrkr1.error?.hint).toContain('machine.time.servers')
        // not waited out to the verify timeout (20s): below it, however loaded the machine
        expect(wrkr1.durationMs).toBeLessThan(20_000)
      }),
    ROW_TIMEOUT,
  )

  it(
    "a node's clock years behind (no RTC): its certificate expired at the real time; named as the clock",
    () =>
      withCluster('127.221.2', { ...SHAPE, faults: [{ node: 'wrkr-1', kind: 'clock', offsetS: -400 * DAY_S }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, FAST)
        expect(result.code).toBe(1)
        const report = cluster.report()
        expectPhase(report, 'verify', { 'cp-1': 'ok', 'wrkr-1': 'failed:clock' }, nodeRecovery)
        expect(nodeIn(report, 'verify', 'wrkr-1').error?.message).toMatch(/current time \S+ is after \S+/)
      }),
    ROW_TIMEOUT,
  )

  it(
    "the inventory address is not in the node's certificate: named as cert-sans with the certSANs fix",
    () =>
      withCluster('127.221.3', { ...SHAPE, faults: [{ node: 'wrkr-1', kind: 'cert-sans' }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, FAST)
        expect(result.code).toBe(1)
        const report = cluster.report()
        expectPhase(report, 'verify', { 'cp-1': 'ok', 'wrkr-1': 'failed:cert-sans' }, nodeRecovery)
        const wrkr1 = nodeIn(report, 'verify', 'wrkr-1')
        expect(wrkr1.error?.message).toMatch(/x509: certificate is valid for 127\.255\.255\.21, not 127\.221\.3\.21/)
        expect(wrkr1.error?.hint).toContain('machine.certSANs')
        expect(wrkr1.error?.hint).toContain('127.221.3.21')
        expect(wrkr1.durationMs).toBeLessThan(20_000) // not waited out to the verify timeout (20s)
      }),
    ROW_TIMEOUT,
  )

  it(
    'a node that answers every read with Unavailable EOF: the final message keeps the last error and the count',
    () =>
      withCluster('127.221.4', { ...SHAPE, faults: [{ node: 'wrkr-1', on: 'get', kind: 'unavailable' }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, fastWith('--verify-timeout', '6s'))
        expect(result.code).toBe(1)
        const report = cluster.report()
        expectPhase(report, 'verify', { 'cp-1': 'ok', 'wrkr-1': 'failed:unreachable' }, nodeRecovery)
        expect(nodeIn(report, 'verify', 'wrkr-1').error?.message).toMatch(
          /never answered .*; \d+ reads failed, the last: unreachable: .*error reading from server: EOF/,
        )
      }),
    ROW_TIMEOUT,
  )
})

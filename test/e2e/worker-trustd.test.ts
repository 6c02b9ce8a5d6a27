// A worker's authenticated API waits for a control plane's trustd (secrets/api.go generateJoin):
// behind a VIP with discovery disabled it cannot answer before the bootstrap, and verify must not
// fail it for that. Range 127.94.<case>.0/24.
import { describe, expect, it } from 'vitest'
import { nodeIn } from './harness.js'
import { expectPhase, FAST, fastWith, nodeRecovery, ROW_TIMEOUT, withCluster } from '../faults/helpers.js'

const WAITING =
  /^config accepted, out of maintenance; waiting for the control plane: authenticated API starts once a control plane's trustd is reachable through 127\.94\.\d+\.10 /

describe.concurrent('workers waiting for the control plane', () => {
  it(
    'VIP endpoint, discovery disabled: bootstrap:talos verifies the workers after the bootstrap and exits 0',
    () =>
      withCluster('127.94.1', { cps: 3, workers: 2 }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, FAST)
        expect(result.code, result.stderr + result.stdout).toBe(0)
        const report = cluster.report()
        expectPhase(report, 'verify', { 'cp-1': 'ok', 'cp-2': 'ok', 'cp-3': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'ok' })
        for (const w of ['wrkr-1', 'wrkr-2']) expect(nodeIn(report, 'verify', w).detail).toMatch(WAITING)
        expectPhase(report, 'wait-ready', { 'cp-1': 'ok', 'cp-2': 'ok', 'cp-3': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'ok' })
        for (const n of ['cp-1', 'cp-2', 'cp-3', 'wrkr-1', 'wrkr-2'])
          expect(cluster.sim.node(n)).toMatchObject({ stage: 'running', ready: true })
      }),
    ROW_TIMEOUT,
  )

  it(
    'endpoint on a control plane: workers answer before the bootstrap and verify as running',
    () =>
      withCluster('127.94.2', { cps: 1, workers: 1, vip: false }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, FAST)
        expect(result.code, result.stderr).toBe(0)
        const report = cluster.report()
        expect(nodeIn(report, 'verify', 'wrkr-1').detail).toMatch(/^running/)
        expectPhase(report, 'wait-ready', { 'cp-1': 'ok', 'wrkr-1': 'ok' })
      }),
    ROW_TIMEOUT,
  )

  it(
    'bootstrap:verify alone before the bootstrap: exit 0 for waiting workers, says why; a worker back in maintenance fails',
    () =>
      withCluster(
        '127.94.3',
        { cps: 1, workers: 2, faults: [{ node: 'wrkr-2', on: 'install', kind: 'crash', times: 1 }] },
        async (cluster) => {
          expect((await cluster.task('bootstrap:apply', {}, FAST)).code).toBe(0)
          await cluster.sim.until(
            () => cluster.sim.node('wrkr-2')!.stage === 'maintenance' && cluster.sim.node('wrkr-1')!.installed,
            60_000,
          )
          const failing = await cluster.task('bootstrap:verify', {}, FAST)
          expect(failing.code).toBe(1)
          expectPhase(cluster.report(), 'verify', { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'failed:maintenance' }, nodeRecovery)
          expect(nodeIn(cluster.report(), 'verify', 'wrkr-1').detail).toMatch(WAITING)
          const alone = await cluster.task('bootstrap:verify', { NODES: 'cp-1,wrkr-1' }, FAST)
          expect(alone.code, alone.stderr).toBe(0)
          expect(alone.stdout + alone.stderr).toMatch(
            /waiting for the control plane: authenticated API starts once a control plane's trustd is reachable through 127\.94\.3\.10/,
          )
          expect(cluster.sim.node('cp-1')!.etcdMember).toBeNull() // nothing was bootstrapped
        },
      ),
    ROW_TIMEOUT,
  )

  it(
    'a waiting worker that stays silent is named once the VIP is up and the timeout runs out (install, as without a VIP)',
    () =>
      // every authenticated read of wrkr-2 is refused: down once its config is in
      withCluster('127.94.4', { cps: 1, workers: 2, faults: [{ node: 'wrkr-2', on: 'get', kind: 'refused' }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, fastWith('--verify-timeout', '8s'))
        expect(result.code).toBe(1)
        const report = cluster.report()
        expect(nodeIn(report, 'verify', 'wrkr-2').detail).toMatch(WAITING)
        // silent since it took its config while the VIP answers: its install did not finish (issue 28), as without a VIP
        expectPhase(report, 'wait-ready', { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'failed:install' }, nodeRecovery)
        expect(nodeIn(report, 'wait-ready', 'wrkr-2').error?.message).toMatch(
          /^took its config but never answered on the authenticated API within 8\.0s: its install did not finish/,
        )
      }),
    ROW_TIMEOUT,
  )
})

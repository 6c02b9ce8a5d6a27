// Fault matrix, the rows around applying configs: no matching install disk, config rejected, crash
// back to maintenance (and its recovery), nodes already configured on a rerun, and the same rows on
// Talos v1.13's maintenance API. Each row on its own range 127.91.<row>.0/24.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parseAllDocuments, parseDocument } from 'yaml'
import { callsTo, E2eCluster, nodeIn } from '../e2e/harness.js'
import { expectPhase, FAST, nodeRecovery, outcomes, ROW_TIMEOUT, withCluster } from './helpers.js'

/** Points a node's install at a selector none of its disks matches, in talconfig and its machine config. */
function selectorMatchingNothing(c: E2eCluster, node: string): void {
  const selector = { model: 'Samsung SSD 990*' }
  const configFile = join(c.clusterDir, 'clusterconfig', `e2e-${node}.yaml`)
  const docs = parseAllDocuments(readFileSync(configFile, 'utf8'))
  for (const doc of docs) {
    if (!doc.hasIn(['machine', 'install'])) continue
    doc.deleteIn(['machine', 'install', 'disk'])
    doc.setIn(['machine', 'install', 'diskSelector'], selector)
  }
  writeFileSync(configFile, docs.map((d) => d.toString()).join(''))
  const talconfigFile = join(c.clusterDir, 'talconfig.yaml')
  const talconfig = parseDocument(readFileSync(talconfigFile, 'utf8'))
  const nodes = talconfig.toJS() as { nodes: Array<{ hostname: string }> }
  const index = nodes.nodes.findIndex((n) => n.hostname === node)
  talconfig.deleteIn(['nodes', index, 'installDisk'])
  talconfig.setIn(['nodes', index, 'installDiskSelector'], selector)
  writeFileSync(talconfigFile, talconfig.toString())
  c.generated()
}

/**
 * A worker that crashed during its install is silent (installing, then rebooting: at least the 2 s
 * reboot floor) before it answers in maintenance again, as silent as a worker waiting for trustd:
 * verify names it while the control plane beside it is still booting (ControlPlaneVerifications).
 * Here the control plane waits for the bootstrap 2.5 s into its boot (half of `boot`, speed 600),
 * well after the worker is back in maintenance; a crash that lands after the control plane is up is
 * named by wait-ready instead (completeVerification).
 */
const CP_BOOTS_LONGER = { boot: 3000 }

describe.concurrent('apply faults', () => {
  // three rows on one cluster (each its own worker, the fourth one fine): a preflight refusal, an
  // install disk the node refuses at apply time, a config the node rejects; none retried, the others go on
  it(
    'no disk matches the install selector (preflight, no apply sent), a disk selector the node refuses at apply time (sim disk-mismatch), a config rejected by the node: each named, permanent, not retried; the others go on',
    () =>
      withCluster(
        '127.91.1',
        {
          workers: 4,
          faults: [
            { node: 'wrkr-2', on: 'apply', kind: 'disk-mismatch' },
            { node: 'wrkr-3', on: 'apply', kind: 'config-rejected' },
          ],
        },
        async (cluster) => {
          selectorMatchingNothing(cluster, 'wrkr-1')
          const result = await cluster.task('bootstrap:talos', {}, FAST)
          expect(result.code).toBe(1)
          const report = cluster.report()
          // no disk matches the install selector: preflight names it, no apply sent to that node
          expectPhase(
            report,
            'preflight',
            { 'cp-1': 'ok', 'wrkr-1': 'failed:disk-mismatch', 'wrkr-2': 'ok', 'wrkr-3': 'ok', 'wrkr-4': 'ok' },
            nodeRecovery,
          )
          const refused = nodeIn(report, 'preflight', 'wrkr-1')
          expect(refused.error?.message).toMatch(/Samsung SSD 990\*.*matches none of the node's disks \(\/dev\/sda 100GB QEMU HARDDISK\)/)
          expect(refused.error?.hint).toContain('talosctl get disks --insecure -n 127.91.1.21')
          expect(refused.attempts).toBe(1)
          expect(callsTo(cluster.calls(), 'wrkr-1', 'apply')).toEqual([])
          // the disk selector refused at apply time and the rejected config: named, permanent, not retried
          expectPhase(
            report,
            'apply',
            { 'cp-1': 'ok', 'wrkr-1': 'not-run', 'wrkr-2': 'failed:disk-mismatch', 'wrkr-3': 'failed:config-invalid', 'wrkr-4': 'ok' },
            nodeRecovery,
          )
          expect(nodeIn(report, 'apply', 'wrkr-2').error?.message).toMatch(/no disks matched the expression/)
          expect(outcomes(cluster.calls(), 'wrkr-2', 'apply')).toEqual(['error'])
          const rejected = nodeIn(report, 'apply', 'wrkr-3')
          expect(rejected.error?.message).toMatch(
            /configuration validation failed: .*extraKernelArgs and install\.grubUseUKICmdline can't be used together/,
          )
          expect(rejected.error?.hint).toContain('e2e-wrkr-3.yaml')
          expect(rejected).toMatchObject({ attempts: 1 })
          expect(outcomes(cluster.calls(), 'wrkr-3', 'apply')).toEqual(['error'])
          // the others go on
          for (const phase of ['verify', 'wait-ready'])
            expectPhase(report, phase, { 'cp-1': 'ok', 'wrkr-1': 'not-run', 'wrkr-2': 'not-run', 'wrkr-3': 'not-run', 'wrkr-4': 'ok' })
        },
      ),
    ROW_TIMEOUT,
  )

  it(
    'node crashes back to maintenance during install: verify names it; bootstrap:node recovers it',
    () =>
      withCluster(
        '127.91.4',
        { timings: CP_BOOTS_LONGER, faults: [{ node: 'wrkr-1', on: 'install', kind: 'crash', times: 1 }] },
        async (cluster) => {
          const result = await cluster.task('bootstrap:talos', {}, FAST)
          expect(result.code).toBe(1)
          const report = cluster.report()
          expectPhase(report, 'apply', { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'ok' })
          expectPhase(report, 'verify', { 'cp-1': 'ok', 'wrkr-1': 'failed:maintenance', 'wrkr-2': 'ok' }, nodeRecovery)
          expect(nodeIn(report, 'verify', 'wrkr-1').error?.message).toMatch(/dropped back to maintenance mode after its config was applied/)
          expectPhase(report, 'wait-ready', { 'cp-1': 'ok', 'wrkr-1': 'not-run', 'wrkr-2': 'ok' })
          expect(cluster.sim.node('wrkr-1')?.stage).toBe('maintenance')

          const before = cluster.calls().length
          const recovery = await cluster.task('bootstrap:node', { NODE: 'wrkr-1' }, FAST)
          expect(recovery.code, recovery.stderr).toBe(0)
          const recovered = cluster.report()
          expect(recovered.command).toBe('node')
          for (const phase of ['preflight', 'apply', 'verify', 'wait-ready']) expectPhase(recovered, phase, { 'wrkr-1': 'ok' })
          const after = cluster.calls().slice(before)
          expect(outcomes(after, 'wrkr-1', 'apply')).toEqual(['ok'])
          // the recovery touched no other node with a write, and never bootstrapped again
          expect(after.filter((c) => c.node !== 'wrkr-1' && ['apply', 'bootstrap', 'reset', 'reboot'].includes(c.call))).toEqual([])
          expect(cluster.sim.node('wrkr-1')).toMatchObject({ stage: 'running', ready: true })
        },
      ),
    ROW_TIMEOUT,
  )

  it(
    'nodes already configured on a rerun are skipped: no apply, no second bootstrap',
    () =>
      withCluster('127.91.5', { workers: 1 }, async (cluster) => {
        expect((await cluster.task('bootstrap:talos', {}, FAST)).code).toBe(0)
        const before = cluster.calls().length
        const rerun = await cluster.task('bootstrap:talos', {}, FAST)
        expect(rerun.code, rerun.stderr).toBe(0)
        const report = cluster.report()
        expectPhase(report, 'apply', { 'cp-1': 'skipped', 'wrkr-1': 'skipped' })
        for (const n of ['cp-1', 'wrkr-1']) expect(nodeIn(report, 'apply', n).error?.kind).toBe('configured')
        expectPhase(report, 'wait-ready', { 'cp-1': 'ok', 'wrkr-1': 'ok' })
        const after = cluster.calls().slice(before)
        expect(after.filter((c) => c.call === 'apply' || c.call === 'bootstrap')).toEqual([])
      }),
    ROW_TIMEOUT,
  )
})

describe.concurrent('Talos v1.13 maintenance API: the same outcomes as v1.12', () => {
  it(
    'disk selector in preflight, config rejected, crash and recovery, then a rerun that skips them all',
    () =>
      withCluster(
        '127.91.6',
        {
          talosVersion: 'v1.13.0',
          workers: 3,
          timings: CP_BOOTS_LONGER,
          faults: [
            { node: 'wrkr-1', on: 'install', kind: 'crash', times: 1 },
            { node: 'wrkr-2', on: 'apply', kind: 'config-rejected', times: 1 },
          ],
        },
        async (cluster) => {
          selectorMatchingNothing(cluster, 'wrkr-3')
          const first = await cluster.task('bootstrap:talos', {}, FAST)
          expect(first.code).toBe(1)
          const report = cluster.report()
          expectPhase(report, 'preflight', { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'ok', 'wrkr-3': 'failed:disk-mismatch' }, nodeRecovery)
          expectPhase(
            report,
            'apply',
            { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'failed:config-invalid', 'wrkr-3': 'not-run' },
            nodeRecovery,
          )
          expect(outcomes(cluster.calls(), 'wrkr-2', 'apply')).toEqual(['error'])
          expect(callsTo(cluster.calls(), 'wrkr-3', 'apply')).toEqual([])
          expectPhase(
            report,
            'verify',
            { 'cp-1': 'ok', 'wrkr-1': 'failed:maintenance', 'wrkr-2': 'not-run', 'wrkr-3': 'not-run' },
            nodeRecovery,
          )
          expectPhase(report, 'wait-ready', { 'cp-1': 'ok', 'wrkr-1': 'not-run', 'wrkr-2': 'not-run', 'wrkr-3': 'not-run' })

          for (const node of ['wrkr-1', 'wrkr-2']) {
            const recovery = await cluster.task('bootstrap:node', { NODE: node }, FAST)
            expect(recovery.code, `${node}: ${recovery.stderr}`).toBe(0)
            expectPhase(cluster.report(), 'wait-ready', { [node]: 'ok' })
          }

          const before = cluster.calls().length
          const rerun = await cluster.task('bootstrap:talos', { NODES: 'cp-1,wrkr-1,wrkr-2' }, FAST)
          expect(rerun.code, rerun.stderr).toBe(0)
          expectPhase(cluster.report(), 'apply', { 'cp-1': 'skipped', 'wrkr-1': 'skipped', 'wrkr-2': 'skipped' })
          expect(
            cluster
              .calls()
              .slice(before)
              .filter((c) => c.call === 'apply' || c.call === 'bootstrap'),
          ).toEqual([])
        },
      ),
    ROW_TIMEOUT,
  )
})

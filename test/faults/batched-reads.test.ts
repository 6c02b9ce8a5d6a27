// Batched status reads with the real talosctl (several -n through one endpoint, apid proxying):
// one node of a batch refusing fails that node alone, as its own read would have, while the others
// of the same batch progress, and the refusing node is not asked again one by one. (The batched
// kubelet read's per-node errors: test/unit/batched-reads.test.ts, on the real talosctl's output.)
// Each row: `task bootstrap:talos` against a fresh simulated cluster (127.95.<row>.0/24).
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { nodeIn } from '../e2e/harness.js'
import { expectPhase, fastWith, nodeRecovery, rerunWhenBack, ROW_TIMEOUT, withCluster } from './helpers.js'

/** The talosctl reads the orchestrator made after etcd was bootstrapped: the endpoint and the `-n` list of each. */
function readsAfterBootstrap(clusterDir: string, command: RegExp): Array<{ e: string; n: string[] }> {
  const lines = readFileSync(join(clusterDir, '.bootstrap', 'commands.log'), 'utf8').split('\n')
  const from = lines.findIndex((l) => / exit 0 \S+ talosctl bootstrap /.test(l))
  expect(from, 'etcd was bootstrapped').toBeGreaterThan(0)
  return lines
    .slice(from)
    .filter((l) => command.test(l))
    .map((l) => {
      const args = l.split(' ')
      return { e: args[args.indexOf('-e') + 1] ?? '', n: (args[args.indexOf('-n') + 1] ?? '').split(',') }
    })
}

const WRKR2 = '127.95.1.22'

describe.concurrent('batched reads', () => {
  it(
    "one worker refusing its MachineStatus inside the batch fails alone (took its config, never answered: its install named, the last error kept); the batch's others complete",
    () =>
      withCluster('127.95.1', { workers: 3, faults: [{ node: 'wrkr-2', on: 'get', kind: 'refused' }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, fastWith('--ready-timeout', '6s'))
        expect(result.code).toBe(1)
        const report = cluster.report()
        // verify left the workers waiting for the control plane (their API starts after the bootstrap)
        expectPhase(report, 'verify', { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'ok', 'wrkr-3': 'ok' })
        // a worker that took its config and refuses its API behind an answering endpoint may be installing still
        expectPhase(report, 'wait-ready', { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'failed:install', 'wrkr-3': 'ok' }, nodeRecovery)
        expect(nodeIn(report, 'wait-ready', 'wrkr-2').error?.message).toMatch(
          /never answered on the authenticated API.*the last: unreachable: .*connection refused/,
        )
        const reads = readsAfterBootstrap(cluster.clusterDir, / talosctl get machinestatus /)
        const ofWrkr2 = reads.filter((r) => r.n.includes(WRKR2))
        // read in batches through the control plane, with the other workers, and never asked alone
        expect(ofWrkr2.length).toBeGreaterThan(1)
        expect(ofWrkr2.filter((r) => r.e !== '127.95.1.11' || r.n.length === 1)).toEqual([])
        expect(reads.some((r) => r.n.includes('127.95.1.21') && r.n.includes(WRKR2))).toBe(true)
        // back: the same command finishes the job
        const { report: again } = await rerunWhenBack(cluster, 'wrkr-2', 'refused')
        expectPhase(again, 'wait-ready', { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'ok', 'wrkr-3': 'ok' })
      }),
    ROW_TIMEOUT,
  )
})

// An apply whose answer is lost after the node took the config (issue 26 item 6): the node is asked
// before the config is sent again, and each node takes exactly one apply. Each row on its own range
// 127.233.<row>.0/24.
import { describe, expect, it } from 'vitest'
import { callsTo, nodeIn } from '../e2e/harness.js'
import { expectPhase, fastWith, outcomes, ROW_TIMEOUT, withCluster } from './helpers.js'

// an install of seconds: longer than the apply's retries, which a re-sent config would spend refused
const SLOW_INSTALL = { install: 3000 }
// v1.13's row reads apid's mTLS answer during the install: an install of ~15 s at speed 600 keeps the
// probe inside it on a loaded machine (at ~5 s a late probe met the reboot and saw silence, which
// the product rightly reads as "took it" too, but the row is about the configured answer)
const V113_INSTALL = { install: 9000 }
const FLAGS = fastWith('--call-timeout', '3s')

describe.concurrent('lost apply answers', () => {
  it(
    'EOF or no answer after the node took the config: probed, taken as applied, never sent again; EOF before it: sent again',
    () =>
      withCluster(
        '127.233.1',
        {
          workers: 2,
          timings: SLOW_INSTALL,
          faults: [
            { node: 'cp-1', on: 'apply', kind: 'unavailable', times: 1 },
            { node: 'wrkr-1', on: 'apply', kind: 'answer-lost', times: 1 },
            { node: 'wrkr-2', on: 'apply', kind: 'answer-timeout', times: 1 },
          ],
        },
        async (cluster) => {
          const result = await cluster.task('bootstrap:talos', {}, FLAGS)
          expect(result.code, result.stderr).toBe(0)
          const report = cluster.report()
          expectPhase(report, 'apply', { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'ok' })
          for (const node of ['wrkr-1', 'wrkr-2']) {
            expect(nodeIn(report, 'apply', node).detail).toMatch(
              /config accepted \(its answer was lost: .*; the node then (stopped answering on its maintenance API|answered as configured), so it took the config: not sent again\)/,
            )
            // the one apply the node received is the one it took
            expect(callsTo(cluster.calls(), node, 'apply').map((c) => c.outcome)).toEqual([
              expect.stringMatching(/^ok \(done; its answer lost/),
            ])
          }
          // the EOF before the node took anything: it still answered in maintenance, so the apply went again
          expect(outcomes(cluster.calls(), 'cp-1', 'apply')).toEqual(['error', 'ok'])
          expectPhase(report, 'wait-ready', { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'ok' })
        },
      ),
    ROW_TIMEOUT,
  )

  it(
    'Talos v1.13 (apid stays up on mTLS after the apply): the node answers as configured',
    () =>
      withCluster(
        '127.233.2',
        {
          workers: 1,
          talosVersion: 'v1.13.0',
          timings: V113_INSTALL,
          faults: [{ node: 'wrkr-1', on: 'apply', kind: 'answer-lost', times: 1 }],
        },
        async (cluster) => {
          // the look after the lost answer must get its answer: under load a 3 s call can time out,
          // and silence is the other (also right) reading, the v1.12 one
          const result = await cluster.task('bootstrap:talos', {}, fastWith('--call-timeout', '10s'))
          expect(result.code, result.stderr).toBe(0)
          const report = cluster.report()
          expectPhase(report, 'apply', { 'cp-1': 'ok', 'wrkr-1': 'ok' })
          // either look means it took the config (answered on mTLS, or not yet listening again: a fresh
          // CI run at load saw the second once); what matters is that it was not sent again
          expect(nodeIn(report, 'apply', 'wrkr-1').detail).toMatch(
            /the node then (answered as configured|stopped answering on its maintenance API), so it took the config: not sent again/,
          )
          expect(callsTo(cluster.calls(), 'wrkr-1', 'apply')).toHaveLength(1)
        },
      ),
    ROW_TIMEOUT,
  )

  it(
    'the bootstrap answer lost after the node took it: etcd is asked before any second call, bootstrapped once',
    () =>
      withCluster(
        '127.233.3',
        { cps: 2, workers: 0, faults: [{ node: 'cp-1', on: 'bootstrap', kind: 'answer-lost', times: 1 }] },
        async (cluster) => {
          const result = await cluster.task('bootstrap:talos', {}, FLAGS)
          expect(result.code, result.stderr).toBe(0)
          expect(cluster.calls().filter((c) => c.call === 'bootstrap' && c.outcome.startsWith('ok'))).toHaveLength(1)
        },
      ),
    ROW_TIMEOUT,
  )
})

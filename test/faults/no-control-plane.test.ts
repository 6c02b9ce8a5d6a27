// bootstrap:node on a worker when no control plane answers: never "not bootstrapped" and exit 0
// (issue 12 item 1). "No control plane answered" is retried, then fails naming the control planes;
// the steps after it are not-run with that cause. Range 127.89.<row>.0/24.
import { describe, expect, it } from 'vitest'
import { nodeIn } from '../e2e/harness.js'
import { expectPhase, FAST, ROW_TIMEOUT, stepIn, withCluster } from './helpers.js'

describe.concurrent('no control plane answers', () => {
  it(
    'bootstrap:node NODE=<worker>: the etcd read is retried, then fails naming every control plane; exit 1',
    () =>
      withCluster(
        '127.89.1',
        {
          cps: 2,
          workers: 1,
          faults: [
            { node: 'cp-1', on: 'any', kind: 'unreachable' },
            { node: 'cp-2', on: 'any', kind: 'unreachable' },
          ],
        },
        async (cluster) => {
          const result = await cluster.task('bootstrap:node', { NODE: 'wrkr-1' }, [...FAST, '--yes'])
          expect(result.code, result.stdout).toBe(1)
          const report = cluster.report()
          const step = stepIn(report, 'bootstrap', 'etcd-bootstrap')
          expect(step.status).toBe('failed')
          expect(step.error?.message).toMatch(
            /^no control plane answered whether etcd runs: cp-1 \(unreachable: .*\); cp-2 \(unreachable: /,
          )
          expect(result.stdout).toMatch(/attempt 1 failed \(unreachable: no control plane answered whether etcd runs: cp-1 .*; retrying/)
          expectPhase(report, 'bootstrap', { 'wrkr-1': 'failed:unreachable' })
          expect(nodeIn(report, 'bootstrap', 'wrkr-1').error?.message).toMatch(/no control plane answered/)
          expect(stepIn(report, 'bootstrap', 'kubeconfig').status).toBe('not-run')
          expectPhase(report, 'wait-ready', { 'wrkr-1': 'not-run' })
          expect(report.phases.flatMap((p) => p.steps).filter((s) => s.status === 'skipped')).toEqual([])
        },
      ),
    ROW_TIMEOUT,
  )
})

// The etcd join wait follows progress (issue 28, item 8): etcd admits one learner at a time, so
// control planes join one after another (about 2 min each in the field). A join is failed only when
// etcd membership stops moving for bootstrapTimeout, not when the whole line of learners outlasts
// it. 127.227.<row>.0/24.
import { describe, expect, it } from 'vitest'
import { nodeIn } from '../e2e/harness.js'
import { expectPhase, fastWith, ROW_TIMEOUT, withCluster } from './helpers.js'

describe.concurrent('etcd join progress', () => {
  it(
    'four control planes joining one learner at a time, longer in total than bootstrapTimeout: every one joins',
    () =>
      // etcd 300 simulated s at speed 60: 5 s per member, the last joins ~20 s after the bootstrap; bootstrapTimeout 8s.
      // Discovery on: the joins learn their peers from it, not through the Kubernetes API, so the 8 s
      // measure etcd's pace alone (a real API server's start, 4–25 s here, would come first otherwise)
      withCluster(
        '127.227.1',
        { cps: 4, workers: 0, vip: false, discovery: 'enabled', speed: 60, timings: { etcd: 300 } },
        async (cluster) => {
          const result = await cluster.task('bootstrap:talos', {}, fastWith('--bootstrap-timeout', '8s'))
          const report = cluster.report()
          expectPhase(report, 'bootstrap', { 'cp-1': 'ok', 'cp-2': 'ok', 'cp-3': 'ok', 'cp-4': 'ok' })
          expect(result.code, result.stderr).toBe(0)
          // the last one waited longer than one bootstrapTimeout, and that was fine
          expect(nodeIn(report, 'bootstrap', 'cp-4').durationMs).toBeGreaterThan(8_000)
        },
      ),
    ROW_TIMEOUT,
  )
})

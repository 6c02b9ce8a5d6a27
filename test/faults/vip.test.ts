// Fault matrix, an endpoint VIP that never comes up (issue 28, item 9): after the etcd bootstrap the
// endpoint gets a bounded wait, and a VIP that never answers fails the run naming it and what to
// check, on a control-plane-only cluster too (it used to exit 0). With cluster discovery off the other
// control planes cannot join etcd without it (Talos learns the etcd peers through the endpoint):
// they fail with that cause, not as joins timing out. Once the VIP is fixed, the hint's command completes the cluster.
// 127.238.<row>.0/24.
import { describe, expect, it } from 'vitest'
import { hintOf, nodeIn, runInFreshShell } from '../e2e/harness.js'
import { ROW_TIMEOUT, stepIn, VIP_NEVER, withCluster } from './helpers.js'

describe.concurrent('VIP faults', () => {
  it(
    'one control plane, no workers: the VIP never answers, exit 1 naming it; fixed, the hint completes the run',
    () =>
      withCluster('127.238.4', { cps: 1, workers: 0, vip: 'never' }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, VIP_NEVER)
        expect(result.code, result.stderr).toBe(1)
        const step = stepIn(cluster.report(), 'bootstrap', 'endpoint')
        expect(step.status).toBe('failed')
        expect(step.error?.message).toMatch(/^the endpoint's VIP 127\.238\.4\.10 never answered within 20\.0s after the etcd bootstrap/)
        expect(step.error?.hint).toContain('get addresses')
        expect(step.error?.hint).toContain('etcd status')
        expect(step.error?.hint).toMatch(/vip\.ip 127\.238\.4\.10/)

        cluster.sim.fixVip()
        const { command } = hintOf(result.stderr, 'bootstrap/endpoint')
        expect(command).toMatch(/ bootstrap:talos /)
        const recovered = await runInFreshShell(cluster, command)
        expect(recovered.code, `${command}\n${recovered.stderr}`).toBe(0)
      }),
    ROW_TIMEOUT,
  )

  it(
    'three control planes, discovery off: the others cannot join etcd without the VIP and fail with its cause, not as joins',
    () =>
      withCluster('127.238.5', { cps: 3, workers: 0, vip: 'never' }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, VIP_NEVER)
        expect(result.code, result.stderr).toBe(1)
        const report = cluster.report()
        expect(stepIn(report, 'bootstrap', 'endpoint').status).toBe('failed')
        for (const cp of ['cp-2', 'cp-3']) {
          const node = nodeIn(report, 'bootstrap', cp)
          expect(node.status, `${cp}: ${JSON.stringify(node)}`).toBe('failed')
          expect(node.error?.message).toMatch(/^endpoint: the endpoint's VIP 127\.238\.5\.10 never answered/)
        }
        // the simulator follows Talos: no peers learnt, no learner added
        expect(cluster.sim.node('cp-2')?.stage).toBe('booting')
      }),
    ROW_TIMEOUT,
  )
})

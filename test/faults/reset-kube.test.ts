// Issue 16 items 6 and 7: a reset keeps the Kubernetes Node (cordoned by Talos, then re-registered
// by the kubelet under the same name), so bootstrap:node waits for that re-registration instead of
// taking the old object as registered, and ends with the node uncordoned; a drain a
// PodDisruptionBudget blocks is named as such, never as stuck. Range 127.161.x.
import { describe, expect, it } from 'vitest'
import { CLUSTER_CASE_TIMEOUT, type E2eCluster, nodeIn } from '../e2e/harness.js'
import { withCluster } from './helpers.js'

interface NodeJson {
  metadata: { uid: string; annotations?: Record<string, string> }
  spec?: { unschedulable?: boolean }
  status: { nodeInfo: { bootID: string } }
}

async function kubeNode(c: E2eCluster, name: string): Promise<NodeJson> {
  const r = await c.kubectl(['get', 'node', name, '-o', 'json'])
  expect(r.code, r.stderr).toBe(0)
  return JSON.parse(r.stdout) as NodeJson
}

/**
 * The case's own bootstrapped cluster, stopped after `body` whatever happens. The cases of a
 * describe.concurrent run side by side (each on its own 127.161.n range, simulator and cluster
 * directory: nothing is shared), at most vitest's `maxConcurrency` at a time.
 */
function bootstrapped(range: string, shape: Parameters<typeof E2eCluster.start>[1], body: (c: E2eCluster) => Promise<void>): Promise<void> {
  return withCluster(range, { cps: 1, workers: 1, image: 'disk', ...shape }, async (c) => {
    const b = await c.task('bootstrap:talos')
    expect(b.code, b.stderr + b.stdout).toBe(0)
    await body(c)
  })
}

describe.concurrent('reset: the Kubernetes Node', { timeout: CLUSTER_CASE_TIMEOUT }, () => {
  it('waits for the kubelet to register the kept Node again (new boot ID), not for the old Ready object, and ends uncordoned', () =>
    bootstrapped('127.161.1', { timings: { nodeMonitorGrace: 1_000_000, kubelet: 3000 } }, async (c) => {
      // a long node-monitor grace period: the old Node keeps reading Ready while its kubelet is away,
      // and the kubelet takes its time registering after the boot
      const before = await kubeNode(c, 'wrkr-1')

      const result = await c.task('bootstrap:node', { NODE: 'wrkr-1', RESET: 'true' }, ['--yes'])
      expect(result.code, result.stderr + result.stdout).toBe(0)
      const after = await kubeNode(c, 'wrkr-1')
      // the same object, registered again by the kubelet of the boot after the reset
      expect(after.metadata.uid).toBe(before.metadata.uid)
      expect(after.status.nodeInfo.bootID).not.toBe(before.status.nodeInfo.bootID)
      expect(after.status.nodeInfo.bootID).toBe(c.sim.node('wrkr-1')?.bootId)
      expect(after.spec?.unschedulable).toBeFalsy()
      expect(after.metadata.annotations?.['talos.dev/cordoned']).toBeUndefined()
      expect(nodeIn(c.report(), 'wait-ready', 'wrkr-1').detail).toBe('kubelet running, Ready')
    }))

  it('names a node left cordoned after the reset (cordoned by someone else, so Talos does not uncordon it) with kubectl uncordon', () =>
    bootstrapped('127.161.2', {}, async (c) => {
      const cordon = await c.kubectl(['cordon', 'wrkr-1'])
      expect(cordon.code, cordon.stderr).toBe(0)

      const result = await c.task('bootstrap:node', { NODE: 'wrkr-1', RESET: 'true' }, ['--yes'])
      expect(result.code).toBe(1)
      expect(nodeIn(c.report(), 'reset', 'wrkr-1').status).toBe('ok')
      const failed = nodeIn(c.report(), 'wait-ready', 'wrkr-1')
      expect(failed.error).toMatchObject({
        kind: 'node-not-ready',
        message: expect.stringMatching(/Ready but cordoned \(spec\.unschedulable\), not by Talos \(no talos\.dev\/cordoned annotation\)/),
      })
      expect(failed.error?.hint).toMatch(/kubectl --kubeconfig \S+ --context admin@e2e uncordon wrkr-1/)
      expect((await kubeNode(c, 'wrkr-1')).spec?.unschedulable).toBe(true)
    }))
})

// one case after another: each runs its reset against a wall-clock --reset-timeout of seconds around a
// simulated drain, which cases started side by side on a loaded machine push past it (seen at load 45)
describe('reset: a drain blocked by a PodDisruptionBudget', { timeout: CLUSTER_CASE_TIMEOUT }, () => {
  // slower, so that Talos's 5 minute DrainTimeout is seconds of the test's time
  const slow = { speed: 60 }

  it('is named as a budget-blocked drain with what to check, not as stuck, when the reset wait runs out during it', () =>
    bootstrapped('127.161.3', slow, async (c) => {
      c.sim.addFault({ node: 'wrkr-1', kind: 'drain-blocked' })

      const result = await c.task('bootstrap:node', { NODE: 'wrkr-1', RESET: 'true' }, ['--yes', '--reset-timeout', '2s'])
      expect(result.code).toBe(1)
      const failed = nodeIn(c.report(), 'reset', 'wrkr-1')
      expect(failed.error).toMatchObject({
        kind: 'drain-blocked',
        message: expect.stringMatching(
          /the reset's drain of wrkr-1 is blocked: PodDisruptionBudget default\/guarded allows no disruption of default\/guarded-\w+ \(evictions refused\); still configured \(stage resetting\)/,
        ),
      })
      expect(failed.error?.hint).toMatch(/get pdb -A/)
      expect(failed.error?.hint).toMatch(/--field-selector spec\.nodeName=wrkr-1/)
      expect(failed.error?.hint).toMatch(/task -d \S+ bootstrap:node CLUSTER_DIR=\S+ NODE=wrkr-1/)
      // its only node failed before wait-ready: the cluster-wide steps there are skipped, its own failure is the outcome
      const waitReady = c.report().phases.find((p) => p.name === 'wait-ready')
      expect(waitReady?.steps.length).toBeGreaterThan(0)
      for (const step of waitReady?.steps ?? [])
        expect(step, step.name).toMatchObject({ status: 'skipped', detail: 'every selected node failed already (wrkr-1 in reset)' })
      expect(result.stderr).not.toMatch(/^error: wait-ready\//m)
    }))

  it('once the drain is over (kubelet stopped) the pods left behind are not a blocked drain: a refused etcd leave is named', () =>
    bootstrapped('127.161.5', { ...slow, cps: 3, workers: 0 }, async (c) => {
      c.sim.addFault({ node: 'cp-2', kind: 'drain-blocked' })
      c.sim.addFault({ node: 'cp-2', kind: 'etcd-leave' })

      // past the 5m drain, inside the 5m of leave retries
      const result = await c.task('bootstrap:node', { NODE: 'cp-2', RESET: 'true' }, ['--yes', '--reset-timeout', '8s'])
      expect(result.code).toBe(1)
      const failed = nodeIn(c.report(), 'reset', 'cp-2')
      expect(failed.error).toMatchObject({
        kind: 'etcd-join',
        message: expect.stringMatching(/the reset stopped half-way: cp-2 is still configured \(stage resetting\)/),
      })
    }))

  it('a reset that outlasts the blocked drain (Talos gives up on it after 5m) completes, and says the budget was not kept', () =>
    bootstrapped('127.161.4', slow, async (c) => {
      c.sim.addFault({ node: 'wrkr-1', kind: 'drain-blocked' })

      const result = await c.task('bootstrap:node', { NODE: 'wrkr-1', RESET: 'true' }, ['--yes'])
      expect(result.code, result.stderr + result.stdout).toBe(0)
      expect(nodeIn(c.report(), 'reset', 'wrkr-1').detail).toMatch(
        /^reset to maintenance; the drain was blocked \(PodDisruptionBudget default\/guarded allows no disruption of default\/guarded-\w+\): Talos removed the pods after its 5m drain timeout regardless$/,
      )
    }))
})

// `bootstrap:status` while a run holds the lock says so (issue 26 item 14), and says whether Flux was
// handed over (issue 26 item 11). Range 127.237.x.y.
import { afterEach, describe, expect, it } from 'vitest'
import { callsTo, E2eCluster, waitFor } from './harness.js'
import { FAST } from '../faults/helpers.js'

let cluster: E2eCluster | undefined
afterEach(async () => {
  await cluster?.stop()
  cluster = undefined
})

describe('bootstrap:status around runs', () => {
  it('names a run in progress (its pid and command) while the nodes install, and whether Flux was handed over', async () => {
    cluster = await E2eCluster.start('127.237.1', { workers: 1, timings: { install: 6000 } })
    const c = cluster
    const { done } = c.spawnTask('bootstrap:talos', {}, FAST)
    await waitFor(() => callsTo(c.calls(), 'wrkr-1', 'apply').some((call) => call.outcome === 'ok'), 60_000, "wrkr-1's apply")
    const during = await c.task('bootstrap:status')
    expect(during.stdout).toMatch(
      /^a run is in progress: pid \d+, .*scripts\/talos\.ts.* \(since \d{4}-\d\d-\d\dT[\d:.]+Z\); its nodes may be installing or rebooting/m,
    )
    expect((await done).code).toBe(0)

    const after = await c.task('bootstrap:status')
    expect(after.code, after.stdout + after.stderr).toBe(0)
    expect(after.stdout).not.toMatch(/a run is in progress/)
    expect(after.stdout).toMatch(/^flux: not installed \(no Kustomization flux-system\/flux-system\)$/m)

    expect((await c.task('bootstrap:flux', {}, FAST)).code).toBe(0)
    const handed = await c.task('bootstrap:status')
    expect(handed.stdout).toMatch(/^flux: handed over \(Kustomization flux-system\/flux-system: ReconciliationSucceeded: Applied revision/m)
  }, 240_000)
})

// helm 3 still works: the suite runs helm 4 (`task tools`), and this one whole bootstrap runs on helm
// 3 (.tools/bin/helm3, v3.21.4, through HELM), the CNI installed and read back with it. Addresses 127.149.1.x.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { realTool } from '../support/real-tools.js'
import { E2eCluster, statuses } from './harness.js'

const helm3 = realTool('helm3')
if (helm3.skip) console.warn(`SKIPPED test/e2e/helm3.test.ts: ${helm3.skip}`)

describe.skipIf(!!helm3.skip)('bootstrap:talos on helm 3', () => {
  let cluster: E2eCluster
  beforeAll(async () => {
    cluster = await E2eCluster.start('127.149.1', { cps: 1, workers: 1 })
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  it('installs the CNI with helm v3.21.4 and every node turns Ready; a rerun leaves the release as it is', async () => {
    const env = { HELM: helm3.path! }
    const r = await cluster.task('bootstrap:talos', {}, [], env)
    expect(r.code, `${r.stdout}\n${r.stderr}`.slice(-3000)).toBe(0)
    expect(r.stdout + r.stderr).toMatch(/helm v3\.21\.4/)
    expect(Object.values(statuses(cluster.report(), 'wait-ready'))).toEqual(['ok', 'ok'])
    const again = await cluster.task('bootstrap:talos', {}, [], env)
    expect(again.code, again.stderr).toBe(0)
    // the release read back with helm 3's list flags: deployed, left alone
    expect(
      cluster
        .report()
        .phases.find((p) => p.name === 'wait-ready')
        ?.steps.find((s) => s.name === 'cni')?.detail,
    ).toMatch(/^cilium already deployed \(revision 1\)$/)
  }, 240_000)
})

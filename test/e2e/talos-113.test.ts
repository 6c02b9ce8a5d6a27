// Issue 29 item 5: Talos 1.13 clusters (cluster-template pins v1.13) bootstrap with the talosctl of
// their minor: the real talosctl v1.13.9 (`task tools` builds it into .tools/talosctl-v1.13.9) against
// simulated v1.13 nodes, the whole way, as v1.12.11 against v1.12 nodes does in the rest of the suite.
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { E2eCluster, statuses } from './harness.js'

const TALOSCTL_113 = resolve('.tools/talosctl-v1.13.9/talosctl')
const have = existsSync(TALOSCTL_113)
let cluster: E2eCluster
beforeAll(async () => {
  if (have)
    cluster = await E2eCluster.start('127.231.5', { cps: 3, workers: 1, speed: 3000, talosVersion: 'v1.13.9', talosctl: TALOSCTL_113 })
})
afterAll(async () => {
  await cluster?.stop()
})

describe.skipIf(!have)('talosctl v1.13.9 against Talos v1.13 nodes', () => {
  it('bootstrap:talos from maintenance to every node Ready, no version warning', async () => {
    const result = await cluster.task('bootstrap:talos')
    expect(result.code, result.stderr + result.stdout).toBe(0)
    expect(result.stdout).toMatch(/^talosctl v1\.13\.9, /m)
    expect(result.stderr).not.toMatch(/use a talosctl of the same minor/)
    for (const phase of ['preflight', 'apply', 'verify', 'wait-ready'])
      expect(statuses(cluster.report(), phase)).toEqual({ 'cp-1': 'ok', 'cp-2': 'ok', 'cp-3': 'ok', 'wrkr-1': 'ok' })
  }, 240_000)

  it('a rerun does only what is left: nothing', async () => {
    const result = await cluster.task('bootstrap:talos')
    expect(result.code, result.stderr + result.stdout).toBe(0)
    expect(statuses(cluster.report(), 'apply')).toEqual({ 'cp-1': 'skipped', 'cp-2': 'skipped', 'cp-3': 'skipped', 'wrkr-1': 'skipped' })
  }, 180_000)
})

// Issue 19: a relative CLUSTER_DIR names a directory where the operator stands, not in the repository.
import { basename, dirname } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { E2eCluster, ROOT, run } from './harness.js'

let cluster: E2eCluster
beforeAll(async () => {
  cluster = await E2eCluster.start('127.119.1', { cps: 1, workers: 1 })
})
afterAll(async () => {
  await cluster?.stop()
})

describe('CLUSTER_DIR from the working directory', () => {
  it('resolves a relative CLUSTER_DIR against the directory task is run from (task -d <repo>)', async () => {
    const where = dirname(cluster.clusterDir)
    const { CLUSTER_DIR: _unset, ...env } = cluster.env()
    const result = await run('task', ['-x', '-d', ROOT, 'bootstrap:preflight', `CLUSTER_DIR=${basename(cluster.clusterDir)}`], env, where)
    expect(result.stderr).not.toMatch(/not found/)
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toMatch(/cp-1 .*ok/)
  })

  it('resolves a relative CLUSTER_DIR from the environment the same way', async () => {
    const where = dirname(dirname(cluster.clusterDir))
    const relative = `${basename(dirname(cluster.clusterDir))}/${basename(cluster.clusterDir)}`
    const result = await run('task', ['-x', '-d', ROOT, 'bootstrap:preflight'], cluster.env({ CLUSTER_DIR: relative }), where)
    expect(result.code, result.stderr).toBe(0)
  })

  it('names the directory it looked in, resolved from where the operator stands', async () => {
    const where = dirname(cluster.clusterDir)
    const result = await run('task', ['-x', '-d', ROOT, 'bootstrap:status', 'CLUSTER_DIR=no-such-dir'], cluster.env(), where)
    expect(result.code).toBe(2)
    expect(result.stderr).toContain(`${where}/no-such-dir: cluster directory not found`)
  })
})

// Issue 27, item 18: a run writes nothing outside the cluster directory. The CNI's helm values go on
// stdin (never a file in $TMPDIR, left behind by a SIGKILL), kubectl's and flux's caches and helm's
// cache, config and data homes live under .bootstrap/cache; with HOME unset, nothing lands in the
// repository (kubectl's default would be .kube/cache in the working directory). Watched: a HOME and a
// TMPDIR of their own, empty before and after a whole bootstrap:all. Range 127.237.6.x.
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { E2eCluster, ROOT, run } from './harness.js'

let cluster: E2eCluster
beforeAll(async () => {
  cluster = await E2eCluster.start('127.237.6', { cps: 1, workers: 1, speed: 1200 })
})
afterAll(async () => {
  await cluster.stop()
})

/** Every path under `dir`, recursively. */
function everything(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f)
    return statSync(p).isDirectory() ? [p, ...everything(p)] : [p]
  })
}

const task = (name: string, env: NodeJS.ProcessEnv) => run('task', ['-x', name, `CLUSTER_DIR=${cluster.clusterDir}`], env)

describe('files only where promised', () => {
  it(
    'bootstrap:all, then bootstrap:status: nothing in HOME or TMPDIR; the caches under .bootstrap/cache',
    { timeout: 180_000 },
    async () => {
      const home = join(cluster.dir, 'home')
      const tmp = join(cluster.dir, 'tmp')
      mkdirSync(home)
      mkdirSync(tmp)
      const env = cluster.env({ HOME: home, TMPDIR: tmp, XDG_CACHE_HOME: '', XDG_CONFIG_HOME: '', XDG_DATA_HOME: '' })
      const all = await task('bootstrap:all', env)
      expect(all.code, `${all.stdout}\n${all.stderr}`).toBe(0)
      const status = await task('bootstrap:status', env)
      expect(status.code, status.stderr).toBe(0)
      expect(everything(home), 'written in HOME').toEqual([])
      expect(everything(tmp), 'written in TMPDIR').toEqual([])
      // the values reached helm on stdin: the release holds them
      const values = await run(
        'helm',
        ['get', 'values', 'cilium', '--namespace=kube-system', `--kubeconfig=${join(cluster.clusterDir, 'kubeconfig')}`, '-o', 'json'],
        cluster.env({
          HELM_CACHE_HOME: join(cluster.dir, 'helm'),
          HELM_CONFIG_HOME: join(cluster.dir, 'helm'),
          KUBECACHEDIR: join(cluster.dir, 'kc'),
        }),
      )
      expect(values.code, values.stderr).toBe(0)
      expect(JSON.parse(values.stdout)).toMatchObject({ k8sServiceHost: 'localhost', k8sServicePort: 7445 })
      // the caches are this cluster's, beside its reports
      const cache = join(cluster.clusterDir, '.bootstrap', 'cache')
      expect(existsSync(join(cache, 'kube')), 'kubectl cache under .bootstrap/cache/kube').toBe(true)
      expect(existsSync(join(cache, 'helm', 'cache')), 'helm cache under .bootstrap/cache/helm').toBe(true)
    },
  )

  it('HOME unset: nothing in the repository (no .kube/cache in the working directory)', { timeout: 120_000 }, async () => {
    const { HOME: _home, ...withoutHome } = cluster.env()
    const before = existsSync(join(ROOT, '.kube'))
    expect(before, `${ROOT}/.kube already there: remove it first`).toBe(false)
    const ready = await task('bootstrap:wait-ready', withoutHome)
    expect(ready.code, `${ready.stdout}\n${ready.stderr}`).toBe(0)
    const status = await task('bootstrap:status', withoutHome)
    expect(status.code, status.stderr).toBe(0)
    for (const name of ['.kube', '.cache', '.config', '.helm'])
      expect(existsSync(join(ROOT, name)), `${name} in the repository`).toBe(false)
  })
})

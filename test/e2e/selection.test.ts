// Issue 27, item 5: nothing is done to a node that was not asked for. A cluster-wide step that
// changes the cluster (the etcd bootstrap, the CNI, Flux) runs only when the nodes it acts on are
// among the selected ones (NODES); otherwise it only reads, and the summary names it with the command
// that runs it (docs/design.md). Range 127.237.8.x.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { E2eCluster, runInFreshShell } from './harness.js'

let cluster: E2eCluster
beforeAll(async () => {
  cluster = await E2eCluster.start('127.237.8', { cps: 1, workers: 2 })
})
afterAll(async () => {
  await cluster.stop()
})

const re = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

describe('NODES selects part of the cluster', () => {
  it(
    'control planes configured, not bootstrapped; bootstrap:talos NODES=wrkr-2: no bootstrap, no kubeconfig, no CNI; the step named with the command that runs it',
    { timeout: 240_000 },
    async () => {
      const apply = await cluster.task('bootstrap:apply')
      expect(apply.code, apply.stderr).toBe(0)
      const before = cluster.calls().length

      const partial = await cluster.task('bootstrap:talos', { NODES: 'wrkr-2' })
      expect(partial.code, `${partial.stdout}\n${partial.stderr}`).toBe(1)
      const calls = cluster.calls().slice(before)
      expect(
        calls.filter((c) => c.call === 'bootstrap'),
        'no bootstrap sent',
      ).toEqual([])
      expect(
        calls.filter((c) => c.tool === 'kube'),
        'no Kubernetes API call (no CNI install)',
      ).toEqual([])
      expect(existsSync(join(cluster.clusterDir, 'kubeconfig')), 'no kubeconfig written').toBe(false)

      // the one selected node's row says why it could not go on
      expect(partial.stdout).toMatch(/^wrkr-2\s+\S+\s+worker\s+ok\s+skipped\s+ok\s+skipped\s+not-run\s+not run$/m)
      const stepLine = /^error: bootstrap\/etcd-bootstrap: not run \((.*)\)$/m.exec(partial.stderr)
      expect(stepLine?.[1], partial.stderr).toMatch(
        /^etcd is not bootstrapped, and its bootstrap control plane cp-1 is not among the selected nodes \(NODES=wrkr-2\): a bootstrap is sent only to a selected control plane/,
      )
      const hint = /^error: {3}next: (task -d \S+ bootstrap:talos CLUSTER_DIR=\S+)$/m.exec(partial.stderr)?.[1]
      expect(hint, partial.stderr).toMatch(new RegExp(`CLUSTER_DIR=${re(cluster.clusterDir)}$`))
      // one way on: the steps waiting on it are run by the same command
      expect(partial.stderr.match(/^error: {3}next: /gm)).toHaveLength(1)
      const step = cluster
        .report()
        .phases.find((p) => p.name === 'bootstrap')
        ?.steps.find((s) => s.name === 'etcd-bootstrap')
      expect(step).toMatchObject({ status: 'not-run', next: hint })

      // the command as printed, in a fresh shell: the whole cluster, bootstrapped once
      const recovered = await runInFreshShell(cluster, hint ?? '')
      expect(recovered.code, `${recovered.stdout}\n${recovered.stderr}`).toBe(0)
      expect(cluster.calls().filter((c) => c.call === 'bootstrap' && c.outcome === 'ok')).toHaveLength(1)
    },
  )

  it(
    'a bootstrapped cluster; bootstrap:all NODES=wrkr-1: Flux neither installed nor checked, said after the summary with its command; exit 0',
    { timeout: 180_000 },
    async () => {
      const before = cluster.calls().length
      const partial = await cluster.task('bootstrap:all', { NODES: 'wrkr-1' })
      expect(partial.code, `${partial.stdout}\n${partial.stderr}`).toBe(0)
      const calls = cluster.calls().slice(before)
      expect(calls.filter((c) => c.tool === 'flux')).toEqual([])
      expect(partial.stdout).toMatch(
        /^flux\/flux-install: skipped \(Flux is the whole cluster's and NODES=wrkr-1 selects part of it\)\n {2}to run it: task -d \S+ bootstrap:flux CLUSTER_DIR=\S+$/m,
      )
      const flux = cluster.report().phases.find((p) => p.name === 'flux')
      expect(flux?.steps.map((s) => s.status)).toEqual(['skipped', 'skipped', 'skipped', 'skipped', 'skipped'])
    },
  )
})

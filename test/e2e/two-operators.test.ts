// Issue 26 item 2: two operators, two copies of the cluster directory (a laptop and CI), different
// bootstrap nodes. The lock is per directory; what guards the cluster is the nodes' own etcd state,
// read right before the bootstrap call: a node whose bootstrap was accepted reads `Finished`
// ("Bootstrap requested") and then `Preparing` for seconds (services/etcd.go BootstrapEtcd), and that
// counts as bootstrapped. Range 127.203.x.y.
import { cpSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { callsTo, E2eCluster, run } from './harness.js'
import { stepIn } from '../faults/helpers.js'

let cluster: E2eCluster | undefined
afterEach(async () => {
  await cluster?.stop()
  cluster = undefined
})

describe('two operators', () => {
  it('the second copy, bootstrapping cp-2 while cp-1 reads Finished/Preparing after an accepted bootstrap, does not bootstrap', async () => {
    // etcd takes 6000 simulated seconds (10 s here): the window after the request lasts seconds
    cluster = await E2eCluster.start('127.203.1', { cps: 2, workers: 0, timings: { etcd: 6000 } })
    const c = cluster
    const copy = join(c.dir, 'laptop')
    cpSync(c.clusterDir, copy, { recursive: true })
    {
      const applied = await c.task('bootstrap:apply')
      expect(applied.code, applied.stderr + applied.stdout).toBe(0)
    }
    await c.sim.until(() => ['cp-1', 'cp-2'].every((n) => c.sim.node(n)?.services.etcd === 'Preparing'), 60_000)
    // operator A (CI) bootstraps cp-1
    const a = await run('talosctl', ['bootstrap', '-e', '127.203.1.11', '-n', '127.203.1.11'], c.env())
    expect(a.code, a.stderr).toBe(0)
    expect(c.sim.node('cp-1')?.services.etcd).not.toBe('Running')
    // operator B (the laptop's copy) runs bootstrap:etcd with cp-2 as its bootstrap node
    const b = await run(
      'task',
      ['-x', 'bootstrap:etcd', `CLUSTER_DIR=${copy}`, '--', '--bootstrap-node', 'cp-2', '--bootstrap-timeout', '60s'],
      c.env({ CLUSTER_DIR: copy, TALOSCONFIG: join(copy, 'clusterconfig', 'talosconfig'), KUBECONFIG: join(copy, 'kubeconfig') }),
    )
    expect(callsTo(c.calls(), 'cp-2', 'bootstrap')).toEqual([])
    expect(b.code, b.stderr + b.stdout).toBe(0)
    const report = JSON.parse((await import('node:fs')).readFileSync(join(copy, '.bootstrap', 'last-run.json'), 'utf8')) as Parameters<
      typeof stepIn
    >[0]
    expect(stepIn(report, 'bootstrap', 'etcd-bootstrap').detail).toMatch(
      /already bootstrapped \(etcd running on cp-1\); not bootstrapping cp-2: it would start a second etcd cluster/,
    )
    // one etcd cluster: both members on both control planes
    for (const ip of ['127.203.1.11', '127.203.1.12']) {
      const members = await run('talosctl', ['etcd', 'members', '-e', ip, '-n', ip], c.env())
      expect(members.stdout.match(/cp-\d/g)?.sort(), members.stdout).toEqual(['cp-1', 'cp-2'])
    }
  })
})

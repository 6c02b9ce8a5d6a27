// The product never starts a second etcd cluster: Talos accepts a bootstrap on any control plane whose
// etcd data directory is empty, joining ones included (v1alpha1_server.go Bootstrap), so every control
// plane is asked before each attempt. Range 127.88.<case>.0/24.
import { describe, expect, it } from 'vitest'
import { callsTo, nodeIn, run, waitFor } from './harness.js'
import { fastWith, FAST, ROW_TIMEOUT, stepIn, withCluster } from '../faults/helpers.js'

describe.concurrent('bootstrap on the right control plane only', () => {
  it(
    'BOOTSTRAP_NODE at a second control plane while the first is bootstrapping: not bootstrapped there, one etcd cluster',
    () =>
      // cp-2 refuses the first attempts (not available yet); meanwhile another operator bootstraps cp-1
      withCluster(
        '127.88.1',
        { cps: 2, workers: 1, timings: { etcd: 600 }, faults: [{ node: 'cp-2', on: 'bootstrap', kind: 'bootstrap-not-ready', times: 4 }] },
        async (cluster) => {
          const task = cluster.spawnTask('bootstrap:talos', {}, [
            ...fastWith('--retries', '4'),
            '--retry-delay',
            '1s',
            '--bootstrap-node',
            'cp-2',
          ])
          await waitFor(
            () => callsTo(cluster.calls(), 'cp-2', 'bootstrap').length > 0,
            60_000,
            'the first bootstrap attempt on cp-2',
          ).catch(async (e: unknown) => {
            task.child.kill()
            const r = await task.done
            throw new Error(`${String(e)}: ${r.stdout.slice(-3000)}`)
          })
          const other = await run('talosctl', ['bootstrap', '-e', '127.88.1.11', '-n', '127.88.1.11'], cluster.env())
          expect(other.code, other.stderr).toBe(0)
          const result = await task.done
          expect(result.code, result.stderr + result.stdout).toBe(0)
          expect(stepIn(cluster.report(), 'bootstrap', 'etcd-bootstrap').detail).toBe(
            'already bootstrapped (etcd running on cp-1); not bootstrapping cp-2: it would start a second etcd cluster',
          )
          expect(callsTo(cluster.calls(), 'cp-2', 'bootstrap').filter((c) => c.outcome === 'ok')).toEqual([])
          // one etcd cluster: both members listed on both control planes
          for (const ip of ['127.88.1.11', '127.88.1.12']) {
            const members = await run('talosctl', ['etcd', 'members', '-e', ip, '-n', ip], cluster.env())
            expect(members.stdout.match(/cp-\d/g)?.sort(), members.stdout).toEqual(['cp-1', 'cp-2'])
          }
        },
      ),
    ROW_TIMEOUT,
  )

  it(
    'BOOTSTRAP_NODE at a control plane that joined: etcd runs on cp-1, nothing is bootstrapped',
    () =>
      withCluster('127.88.2', { cps: 2, workers: 0 }, async (cluster) => {
        expect((await cluster.task('bootstrap:talos', {}, FAST)).code).toBe(0)
        const before = cluster.calls().length
        const again = await cluster.task('bootstrap:etcd', {}, FAST, { BOOTSTRAP_NODE: 'cp-2' })
        expect(again.code, again.stderr).toBe(0)
        expect(stepIn(cluster.report(), 'bootstrap', 'etcd-bootstrap').detail).toMatch(/^already bootstrapped \(etcd running on cp-[12]\)/)
        expect(
          cluster
            .calls()
            .slice(before)
            .filter((c) => c.call === 'bootstrap'),
        ).toEqual([])
      }),
    ROW_TIMEOUT,
  )

  // etcd is registered only in StartAllServices (v1alpha1_sequencer_tasks.go): a control plane verify
  // reads early in its boot answers `service "etcd" is not registered on any nodes`, which is "not yet"
  it(
    'verify reads etcd before it is registered (a long boot): not yet, never a failure',
    () =>
      withCluster('127.88.3', { cps: 1, workers: 0, image: 'disk', timings: { boot: 9000 } }, async (cluster) => {
        expect((await cluster.task('bootstrap:apply', {}, FAST)).code).toBe(0)
        const result = await cluster.task('bootstrap:verify', {}, [...fastWith('--verify-timeout', '60s'), '--poll-interval', '200ms'])
        expect(result.code, result.stdout).toBe(0)
        expect(nodeIn(cluster.report(), 'verify', 'cp-1').detail).toBe('booting, etcd waiting for bootstrap')
      }),
    ROW_TIMEOUT,
  )
})

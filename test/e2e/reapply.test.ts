// --reapply of a change Talos applies with a reboot (v1alpha1_server.go ApplyConfiguration, auto mode;
// v1alpha1_runtime.go CanApplyImmediate): verify must see the node go down and come back, never take a
// `running` read from just before the reboot. Range 127.85.<case>.0/24.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parse, stringify } from 'yaml'
import { nodeIn } from './harness.js'
import { FAST, ROW_TIMEOUT, withCluster } from '../faults/helpers.js'

describe.concurrent('re-apply with a reboot', () => {
  it(
    'bootstrap:talos --reapply: the worker is verified only after its reboot',
    () =>
      withCluster('127.85.1', { cps: 1, workers: 1, image: 'disk', vip: false, speed: 20 }, async (cluster) => {
        expect((await cluster.task('bootstrap:talos', {}, FAST)).code).toBe(0)
        const file = join(cluster.clusterDir, 'clusterconfig', 'e2e-wrkr-1.yaml')
        const config = parse(readFileSync(file, 'utf8'))
        config.machine.env = { HTTPS_PROXY: 'http://127.0.0.1:3128' } // not applied live: a reboot
        writeFileSync(file, stringify(config))
        let backAt = 0
        let wentDown = false
        cluster.sim.watch((v) => {
          if (v.name !== 'wrkr-1') return
          if (v.stage === 'rebooting') wentDown = true
          else if (wentDown && v.stage === 'running' && !backAt) backAt = Date.now()
        })
        const before = cluster.calls().length
        const result = await cluster.task('bootstrap:talos', { NODES: 'wrkr-1' }, [...FAST, '--reapply'])
        expect(result.code, result.stdout).toBe(0)
        expect(nodeIn(cluster.report(), 'apply', 'wrkr-1').detail).toBe('re-applied; the node reboots to apply it')
        expect(backAt).toBeGreaterThan(0)
        // the read verify accepted (its last machinestatus of wrkr-1) came after the node was back
        const reads = cluster
          .calls()
          .slice(before)
          .filter(
            (c) => c.node === 'wrkr-1' && c.command === 'get' && c.args.some((a) => a.startsWith('machinestatus')) && c.outcome === 'ok',
          )
        expect(reads.length).toBeGreaterThan(0)
        expect(Date.parse(reads.at(-1)!.time)).toBeGreaterThanOrEqual(backAt)
      }),
    ROW_TIMEOUT,
  )
})

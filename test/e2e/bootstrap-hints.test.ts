// Issue 26 item 9: a failure that left the etcd bootstrap undone hints the command that does it
// (bootstrap:node recovers a node of a running cluster and never bootstraps). The hint runs verbatim
// in a fresh shell once the fault is gone. Range 127.204.x.y.
import { afterEach, describe, expect, it } from 'vitest'
import { E2eCluster, nodeIn, runInFreshShell } from './harness.js'
import { FAST } from '../faults/helpers.js'

let cluster: E2eCluster | undefined
afterEach(async () => {
  await cluster?.stop()
  cluster = undefined
})

describe('hints while the bootstrap is undone', () => {
  it('the bootstrap node down before the bootstrap: its hint is bootstrap:talos, and run verbatim it bootstraps once', async () => {
    cluster = await E2eCluster.start('127.204.1', { cps: 2, workers: 1, faults: [{ node: 'cp-1', on: 'any', kind: 'unreachable' }] })
    const c = cluster
    const result = await c.task('bootstrap:talos', {}, FAST)
    expect(result.code).toBe(1)
    const hint = nodeIn(c.report(), 'preflight', 'cp-1').error?.hint ?? ''
    const command = /.*run: (task .+)$/.exec(hint)?.[1] ?? ''
    expect(command).toMatch(/^task -d \S+ bootstrap:talos CLUSTER_DIR=\S+$/)
    expect(result.stderr).toContain(`next: ${hint}`)
    c.sim.clearFault('cp-1', 'unreachable')
    const again = await runInFreshShell(c, command)
    expect(again.code, again.stderr + again.stdout).toBe(0)
    expect(
      c
        .calls()
        .filter((call) => call.call === 'bootstrap' && call.outcome === 'ok')
        .map((call) => call.node),
    ).toEqual(['cp-1'])
  }, 180_000)

  it('bootstrap:all with a failed node: the Flux steps left not run get their own next: line, and run verbatim they hand over', async () => {
    cluster = await E2eCluster.start('127.204.2', { cps: 1, workers: 1, faults: [{ node: 'wrkr-1', on: 'any', kind: 'unreachable' }] })
    const c = cluster
    const result = await c.task('bootstrap:all', {}, FAST)
    expect(result.code).toBe(1)
    const lines = result.stderr.split('\n')
    const at = lines.findIndex((l) => /^error: flux\/\S+: not run/.test(l))
    expect(at, result.stderr).toBeGreaterThanOrEqual(0)
    const flux = /next: once the failures above are recovered, run: (task .+)$/.exec(lines[at + 1] ?? '')?.[1] ?? ''
    expect(flux).toMatch(/^task -d \S+ bootstrap:flux CLUSTER_DIR=\S+$/)
    // the node's own hint first, then the Flux one, each verbatim in a fresh shell
    const node = /.*run: (task .+)$/.exec(nodeIn(c.report(), 'preflight', 'wrkr-1').error?.hint ?? '')?.[1] ?? ''
    c.sim.clearFault('wrkr-1', 'unreachable')
    const recovered = await runInFreshShell(c, node)
    expect(recovered.code, recovered.stderr + recovered.stdout).toBe(0)
    const handed = await runInFreshShell(c, flux)
    expect(handed.code, handed.stderr + handed.stdout).toBe(0)
    expect(c.report().command).toBe('flux')
    expect(c.report().ok).toBe(true)
  }, 240_000)
})

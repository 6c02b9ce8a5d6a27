// A cluster step's failure hints the command that was run, which waits for every node again, not one
// node's recovery (issue 26 item 12); the hint runs verbatim in a fresh shell once the cause is gone.
// Range 127.236.x.y.
import { afterEach, describe, expect, it } from 'vitest'
import { E2eCluster, runInFreshShell, statuses } from './harness.js'
import { FAST, fastWith, stepIn } from '../faults/helpers.js'

let cluster: E2eCluster | undefined
afterEach(async () => {
  await cluster?.stop()
  cluster = undefined
})

/** the command a hint ends with (`…, then run: task …`, `…; run again: task …`) */
const commandOf = (hint: string | undefined): string => /.*: (task -d .+)$/.exec(hint ?? '')?.[1] ?? ''

describe('cluster step hints', () => {
  it('the kubeconfig step fails: its hint names bootstrap:talos, not bootstrap:node, which run verbatim makes every node Ready', async () => {
    cluster = await E2eCluster.start('127.236.1', { workers: 2, faults: [{ node: 'cp-1', on: 'kubeconfig', kind: 'refused' }] })
    const c = cluster
    const result = await c.task('bootstrap:talos', {}, FAST)
    expect(result.code).toBe(1)
    const report = c.report()
    const step = stepIn(report, 'bootstrap', 'kubeconfig')
    expect(step.status).toBe('failed')
    expect(step.error?.hint).toMatch(/127\.236\.1\.11/) // the cause is still named
    const command = commandOf(step.error?.hint)
    expect(command).toMatch(/^task -d \S+ bootstrap:talos CLUSTER_DIR=\S+$/)
    // no node failed by itself: nothing points at one node's recovery
    expect(statuses(report, 'wait-ready')).toEqual({ 'cp-1': 'not-run', 'wrkr-1': 'not-run', 'wrkr-2': 'not-run' })
    expect(result.stderr).toContain(`next: ${step.error?.hint ?? ''}`)
    expect(result.stderr).not.toMatch(/bootstrap:node/)

    c.sim.clearFault('cp-1', 'refused')
    const again = await runInFreshShell(c, command)
    expect(again.code, again.stderr + again.stdout).toBe(0)
    expect(statuses(c.report(), 'wait-ready')).toEqual({ 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'ok' })
    expect(c.calls().filter((call) => call.call === 'bootstrap' && call.outcome === 'ok')).toHaveLength(1)
  }, 240_000)

  it('the etcd-bootstrap step fails (bootstrap never available): its hint names bootstrap:talos, which run verbatim bootstraps once and makes every node Ready', async () => {
    cluster = await E2eCluster.start('127.236.2', { workers: 1, faults: [{ node: 'cp-1', on: 'bootstrap', kind: 'bootstrap-not-ready' }] })
    const c = cluster
    const result = await c.task('bootstrap:talos', {}, fastWith('--bootstrap-timeout', '4s'))
    expect(result.code).toBe(1)
    const step = stepIn(c.report(), 'bootstrap', 'etcd-bootstrap')
    expect(step.status).toBe('failed')
    const command = commandOf(step.error?.hint)
    expect(command, step.error?.hint).toMatch(/^task -d \S+ bootstrap:talos CLUSTER_DIR=\S+$/)
    expect(result.stderr).toContain(`next: ${step.error?.hint ?? ''}`)
    expect(result.stderr).not.toMatch(/bootstrap:node/)

    c.sim.clearFault('cp-1', 'bootstrap-not-ready')
    const again = await runInFreshShell(c, command)
    expect(again.code, again.stderr + again.stdout).toBe(0)
    expect(statuses(c.report(), 'wait-ready')).toEqual({ 'cp-1': 'ok', 'wrkr-1': 'ok' })
    expect(c.calls().filter((call) => call.call === 'bootstrap' && call.outcome === 'ok')).toHaveLength(1)
  }, 240_000)
})

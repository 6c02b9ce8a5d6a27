// A reset of a control plane needs the remaining voters without an etcd alarm (issue 26 item 3): a
// NOSPACE member takes no writes, so it is no healthy voter for the removal's quorum. Range 127.238.x.y.
import { afterEach, describe, expect, it } from 'vitest'
import { callsTo, E2eCluster, nodeIn, runInFreshShell } from './harness.js'

let cluster: E2eCluster | undefined
afterEach(async () => {
  await cluster?.stop()
  cluster = undefined
})

describe('reset and etcd alarms', () => {
  it('refuses to reset cp-3 while cp-1 has NOSPACE (1 healthy of 2 remaining, 2 needed), names the alarm; once it is cleared the hint resets', async () => {
    cluster = await E2eCluster.start('127.238.1', { cps: 3, workers: 0 })
    const c = cluster
    const b = await c.task('bootstrap:talos')
    expect(b.code, b.stderr + b.stdout).toBe(0)
    c.sim.addFault({ node: 'cp-1', kind: 'etcd-nospace' })

    const before = c.calls().length
    const result = await c.task('bootstrap:node', { NODE: 'cp-3', RESET: 'true' }, ['--yes', '--call-timeout', '5s'])
    expect(result.code).toBe(1)
    const failed = nodeIn(c.report(), 'reset', 'cp-3')
    expect(failed.error).toMatchObject({
      kind: 'etcd-join',
      message: expect.stringMatching(
        /would break etcd quorum: 1 healthy of 2 remaining voting members, 2 needed of 3 \(not established: cp-1: etcd alarm NOSPACE on member [0-9a-f]{16}\)/,
      ),
    })
    expect(failed.error?.hint).toMatch(/etcd alarm list.*etcd defrag.*etcd alarm disarm/)
    const after = c.calls().slice(before)
    expect(after.filter((call) => call.call === 'reset' || (call.command === 'etcd' && call.args.includes('remove-member')))).toEqual([])
    expect(callsTo(after, 'cp-3', 'reset')).toEqual([])
    expect(c.sim.node('cp-3')?.stage).toBe('running')

    // space freed, the alarm gone: the hint's command resets cp-3 and it rejoins
    c.sim.clearFault('cp-1', 'etcd-nospace')
    const command = /then run: (task .+)$/.exec(failed.error?.hint ?? '')?.[1] ?? ''
    expect(command).toMatch(/^task -d \S+ bootstrap:node CLUSTER_DIR=\S+ NODE=cp-3 RESET=true -- --yes$/)
    const again = await runInFreshShell(c, command)
    expect(again.code, again.stderr + again.stdout).toBe(0)
    expect(callsTo(c.calls().slice(before), 'cp-3', 'reset').filter((call) => call.outcome.startsWith('ok'))).toHaveLength(1)
  }, 300_000)
})

// Issue: recover one node with one command; resume after a failure.
import { afterAll, describe, expect, it } from 'vitest'
import { withCluster } from '../faults/helpers.js'
import { callsTo, CLUSTER_CASE_TIMEOUT, E2eCluster, nodeIn, statuses } from './harness.js'

describe('recovery', { timeout: CLUSTER_CASE_TIMEOUT }, () => {
  it('resets a control plane with RESET=true and brings it back into etcd under a new member ID', () =>
    withCluster('127.63.1', { cps: 3, workers: 1 }, async (c) => {
      expect((await c.task('bootstrap:talos')).code).toBe(0)
      const before = c.sim.node('cp-2')?.etcdMember
      expect(before).toBeTruthy()

      const refused = await c.task('bootstrap:node', { NODE: 'cp-2', RESET: 'true' })
      expect(refused.code).toBe(2)
      expect(refused.stderr).toMatch(/RESET=true wipes cp-2 and needs confirmation \(fix: .*-- --yes\)/)

      const result = await c.task('bootstrap:node', { NODE: 'cp-2', RESET: 'true' }, ['--yes'])
      expect(result.code, result.stderr).toBe(0)
      const report = c.report()
      expect(report.command).toBe('node')
      expect(report.phases.map((p) => [p.name, p.nodes.map((n) => `${n.name}:${n.status}`).join()])).toEqual([
        ['preflight', 'cp-2:ok'],
        ['reset', 'cp-2:ok'],
        ['apply', 'cp-2:ok'],
        ['verify', 'cp-2:ok'],
        ['bootstrap', 'cp-2:ok'],
        ['wait-ready', 'cp-2:ok'],
      ])
      const reset = callsTo(c.calls(), 'cp-2', 'reset')
      expect(reset).toHaveLength(1)
      // --wait=false is the client's: with it the real talosctl reads no boot id and follows no events afterwards
      expect(reset[0]?.args).toEqual(expect.arrayContaining(['--graceful=true', '--reboot']))
      expect(c.calls().filter((call) => call.call === 'bootstrap')).toHaveLength(1) // only the first bootstrap, never again
      const after = c.sim.node('cp-2')
      expect(after?.etcdMember).toBeTruthy()
      expect(after?.etcdMember).not.toBe(before)
      expect(after?.stage).toBe('running')
    }))

  // one cluster, its cases in turn: the resumed run leaves every node running and Ready, with cp-1 the
  // only control plane, which is all the refusal after it needs
  describe('one control plane: a resumed run, then the last member refused', () => {
    let cluster: E2eCluster | undefined
    afterAll(async () => {
      await cluster?.stop()
    })

    it('resumes a run that failed on an unreachable node once it is back, without re-applying the others', async () => {
      cluster = await E2eCluster.start('127.63.2', { cps: 1, workers: 2, faults: [{ node: 'wrkr-2', on: 'any', kind: 'unreachable' }] })
      const c = cluster
      const first = await c.task('bootstrap:talos', {}, ['--retries', '1'])
      expect(first.code).toBe(1)
      expect(statuses(c.report(), 'wait-ready')).toEqual({ 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'not-run' })
      const appliedBefore = c
        .calls()
        .filter((call) => call.call === 'apply')
        .map((call) => call.node)
      expect(appliedBefore.sort()).toEqual(['cp-1', 'wrkr-1'])

      c.sim.clearFault('wrkr-2', 'unreachable')
      const mark = c.calls().length
      const second = await c.task('bootstrap:talos')
      expect(second.code, second.stderr).toBe(0)
      const again = c.calls().slice(mark)
      expect(again.filter((call) => call.call === 'apply').map((call) => call.node)).toEqual(['wrkr-2'])
      expect(again.filter((call) => call.call === 'bootstrap')).toEqual([])
      // nodes verified before are re-checked with one authenticated read, not the maintenance probe
      expect(again.filter((call) => call.call === 'probe' && call.node !== 'wrkr-2')).toEqual([])
      // ... one talosctl for all of them: `get machinestatus -n cp-1,wrkr-1` through cp-1 (apid proxies
      // to wrkr-1: its read arrives with cp-1 as the endpoint), not one process each
      const beforeApply = again.slice(
        0,
        again.findIndex((call) => call.call === 'apply'),
      )
      const confirmed = beforeApply.filter((call) => call.call === 'get' && call.args[0] === 'machinestatuses')
      const endpoint = c.sim.node('cp-1')!.ip
      expect(confirmed.map((call) => [call.node, call.args[call.args.indexOf('-e') + 1]])).toEqual([
        ['cp-1', endpoint],
        ['wrkr-1', endpoint],
      ])
      expect(Object.values(statuses(c.report(), 'wait-ready'))).toEqual(['ok', 'ok', 'ok'])
    })

    it('refuses to reset the last etcd member, naming why', async () => {
      const c = cluster
      if (!c) throw new Error('the cluster on 127.63.2 did not start')
      expect(c.sim.node('cp-1')?.etcdMember).toBeTruthy()
      const mark = c.calls().length
      const result = await c.task('bootstrap:node', { NODE: 'cp-1', RESET: 'true' }, ['--yes'])
      expect(result.code).toBe(1)
      expect(nodeIn(c.report(), 'reset', 'cp-1').error).toMatchObject({
        kind: 'etcd-join',
        message: expect.stringMatching(/only control plane|last etcd member/),
      })
      expect(callsTo(c.calls().slice(mark), 'cp-1', 'reset')).toEqual([])
    })
  })
})

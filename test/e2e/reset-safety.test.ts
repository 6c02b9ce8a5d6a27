// Issue 16: a reset never wipes the last running etcd data, never forces a live node, and removes
// an unreachable member by its hex ID. Range 127.116.x.y.
import { describe, expect, it } from 'vitest'
import type { CallRecord, Fault } from '../../sim/index.js'
import { withCluster } from '../faults/helpers.js'
import { callsTo, CLUSTER_CASE_TIMEOUT, type ClusterShape, E2eCluster, nodeIn, run, sharedCluster, waitFor } from './harness.js'
import { inTurn, SIDE_BY_SIDE } from '../support/in-turn.js'

async function talosctl(c: E2eCluster, ip: string, args: string[]): Promise<string> {
  const r = await run('talosctl', [...args, '-e', ip, '-n', ip], c.env())
  expect(r.code, r.stderr).toBe(0)
  return r.stdout
}

/**
 * The case's own cluster of this shape after a successful `bootstrap:talos`, stopped after `body`
 * whatever happens. The cases of the describe.concurrent run side by side (each on its own 127.116.n
 * range, its own simulator and cluster directory, nothing shared), at most vitest's `maxConcurrency` at a time.
 */
function bootstrapped(range: string, shape: ClusterShape, body: (c: E2eCluster) => Promise<void>): Promise<void> {
  return withCluster(range, shape, async (c) => {
    const b = await c.task('bootstrap:talos')
    expect(b.code, b.stderr + b.stdout).toBe(0)
    await body(c)
  })
}

/**
 * Adds `fault` the moment the simulator records preflight's status read of `node` (its record of the
 * call, in the same turn as the answer): the product's next read of that node comes only after a new
 * talosctl has started, so it always meets the fault, however loaded the machine.
 */
function faultAfterPreflight(c: E2eCluster, node: string, fault: Fault): () => void {
  const sim = c.sim as unknown as { record: (r: CallRecord) => void }
  const record = sim.record.bind(sim)
  let added = false
  sim.record = (r: CallRecord) => {
    record(r)
    if (added || r.node !== node || r.call !== 'get' || r.purpose || r.outcome !== 'ok') return
    added = true
    c.sim.addFault(fault)
  }
  return () => {
    sim.record = record
  }
}

const memberIds = async (c: E2eCluster, ip: string): Promise<string[]> =>
  // rows are NODE ID HOSTNAME …: the 16-hex-digit ID of each
  (await talosctl(c, ip, ['etcd', 'members']))
    .split('\n')
    .slice(1)
    .map((l) => /\b[0-9a-f]{16}\b/.exec(l)?.[0] ?? '')
    .filter(Boolean)

describe.concurrent('reset safety', { timeout: CLUSTER_CASE_TIMEOUT }, () => {
  // one cluster, its cases in turn, beside the other case's cluster: the refusal leaves it as it was
  // (nothing reset, the fault cleared, three members), which is all the rejoin after it needs; the
  // rejoin leaves three started members, which is all the removal of an unreachable one needs (it comes last)
  describe('a refusal that changes nothing, a rejoin, then an unreachable member removed, on one cluster', SIDE_BY_SIDE, () => {
    const cluster = sharedCluster('127.116.2', { cps: 3, workers: 0 }, [])

    inTurn(
      'refuses to reset a control plane when no member list can be read, naming why',
      async () => {
        const c = cluster()
        const mark = c.calls().length
        // every etcd client call fails; the services still say Running
        for (const node of ['cp-1', 'cp-2', 'cp-3']) c.sim.addFault({ node, on: 'etcd', kind: 'unavailable' })

        const result = await c.task('bootstrap:node', { NODE: 'cp-2', RESET: 'true' }, ['--yes', '--retries', '1'])
        expect(result.code).toBe(1)
        const failed = nodeIn(c.report(), 'reset', 'cp-2')
        expect(failed.error).toMatchObject({
          kind: 'etcd-join',
          message: expect.stringMatching(/no etcd member list could be read \(cp-1: .*; cp-3: .*; cp-2: .*\)/),
        })
        expect(failed.error?.hint).toMatch(/service etcd/)
        expect(callsTo(c.calls().slice(mark), 'cp-2', 'reset')).toEqual([])
        c.sim.clearFault(null, 'unavailable')
        expect(await memberIds(c, '127.116.2.11')).toHaveLength(3)
      },
      CLUSTER_CASE_TIMEOUT,
    )

    inTurn(
      'rejoin after a reset whose leave found etcd down: the stale member goes, done only under a new started ID',
      async () => {
        const c = cluster()
        const old = c.sim.node('cp-2')?.etcdMember
        expect(old).toMatch(/^[0-9a-f]{16}$/)
        expect(await memberIds(c, '127.116.2.11')).toHaveLength(3)
        // the graceful leave does nothing while etcd is not running (LeaveEtcd: a crash-looping service
        // reads Waiting between its restarts): its member stays behind
        c.sim.addFault({ node: 'cp-2', kind: 'etcd-crash' })
        await waitFor(() => c.sim.node('cp-2')?.services.etcd === 'Waiting', 30_000, "cp-2's etcd crashing")

        // the reset wipes the corrupt data the crashes came from: the node's next etcd runs (cleared
        // once the reset is past its leave and wipe: the node is down or booting again)
        let resetting = false
        const wiped = setInterval(() => {
          const stage = c.sim.node('cp-2')?.stage
          if (stage === 'resetting') resetting = true
          if (!resetting || stage === 'resetting') return
          c.sim.clearFault('cp-2', 'etcd-crash')
          clearInterval(wiped)
        }, 5)
        const result = await c.task('bootstrap:node', { NODE: 'cp-2', RESET: 'true' }, ['--yes']).finally(() => clearInterval(wiped))
        expect(result.code, result.stderr).toBe(0)
        const now = c.sim.node('cp-2')?.etcdMember
        expect(now).toMatch(/^[0-9a-f]{16}$/)
        expect(now).not.toBe(old)
        const ids = await memberIds(c, '127.116.2.11')
        expect(ids).toHaveLength(3)
        expect(ids).toContain(now)
        expect(ids).not.toContain(old)
        // the join step named the new ID, not the stale one it found first
        expect(nodeIn(c.report(), 'bootstrap', 'cp-2').detail).toBe(`etcd member ${now} (was ${old})`)
      },
      CLUSTER_CASE_TIMEOUT,
    )

    inTurn(
      'removes an unreachable control plane by its hex member ID through another, then forces the reset',
      async () => {
        const c = cluster()
        const mark = c.calls().length
        const old = c.sim.node('cp-2')?.etcdMember
        expect(old).toMatch(/^[0-9a-f]{16}$/)
        expect(await memberIds(c, '127.116.2.11')).toContain(old)
        c.sim.addFault({ node: 'cp-2', kind: 'unreachable' })

        const result = await c.task('bootstrap:node', { NODE: 'cp-2', RESET: 'true' }, ['--yes', '--retries', '1'])
        expect(result.code).toBe(1) // the forced reset cannot reach it either: named, with the member already removed
        const removes = c
          .calls()
          .slice(mark)
          .filter((call) => call.command === 'etcd' && call.args.includes('remove-member'))
        expect(removes.map((r) => [r.node, r.args[r.args.indexOf('remove-member') + 1]])).toEqual([['cp-1', old]])
        expect(await memberIds(c, '127.116.2.11')).not.toContain(old)
        expect(nodeIn(c.report(), 'reset', 'cp-2').error?.kind).toBe('unreachable')
        // sim conformance (v1alpha1_server.go EtcdRemoveMemberByID): the same remove again, as a retry whose
        // first reply was lost, meets etcd's ErrMemberNotFound as NotFound; the v1.12 CLI parses a hex ID only
        const again = await run('talosctl', ['etcd', 'remove-member', old!, '-e', '127.116.2.11', '-n', '127.116.2.11'], c.env())
        expect(again.code).toBe(1)
        expect(again.stderr).toContain(
          `rpc error: code = NotFound desc = failed to remove member ${BigInt(`0x${old}`).toString(10)}: etcdserver: member not found`,
        )
        const byName = await run('talosctl', ['etcd', 'remove-member', 'cp-2', '-e', '127.116.2.11', '-n', '127.116.2.11'], c.env())
        expect(byName.code).toBe(1)
        expect(byName.stderr).toContain('invalid syntax')
      },
      CLUSTER_CASE_TIMEOUT,
    )
  })

  it('retries a removal etcd refuses as an unhealthy cluster (another member down, then connected under 5 s) until it goes through', () =>
    bootstrapped('127.116.8', { cps: 3, workers: 0 }, async (c) => {
      // real etcd's own refusal (etcdserver/server.go mayRemoveMember), not a fault: cp-2's Talos API
      // refuses connections while its etcd runs on, so its live member is removed through cp-1; cp-3's
      // etcd crashes once the quorum guard has read it, and runs again after the first refusal
      const old = c.sim.node('cp-2')?.etcdMember
      expect(old).toMatch(/^[0-9a-f]{16}$/)
      c.sim.addFault({ node: 'cp-2', kind: 'refused' })
      const mark = c.calls().length
      const since = () => c.calls().slice(mark)
      const removals = () => since().filter((call) => call.command === 'etcd' && call.args.includes('remove-member'))
      let step: 'guard' | 'stopped' | 'started' = 'guard'
      const timer = setInterval(() => {
        if (step === 'guard' && since().some((call) => call.node === 'cp-1' && call.args.includes('alarm') && call.outcome === 'ok')) {
          c.sim.addFault({ node: 'cp-3', kind: 'etcd-crash' })
          step = 'stopped'
        } else if (step === 'stopped' && removals().some((r) => r.outcome.includes('unhealthy cluster'))) {
          c.sim.clearFault('cp-3', 'etcd-crash')
          step = 'started'
        }
      }, 5)
      const result = await c
        .task('bootstrap:node', { NODE: 'cp-2', RESET: 'true' }, [
          '--yes',
          '--retries',
          '5',
          '--retry-delay',
          '1s',
          '--retry-max-delay',
          '3s',
        ])
        .finally(() => clearInterval(timer))
      expect(step).toBe('started')
      // refused while cp-3 was down or connected under 5 s, then accepted: the removal was retried, never failed
      const outcomes = removals().map((r) => r.outcome)
      expect(outcomes[0]).toContain('failed to remove member: failed to remove member')
      expect(outcomes[0]).toContain('etcdserver: unhealthy cluster')
      expect(outcomes.at(-1)).toBe('ok')
      expect(outcomes.slice(0, -1).every((o) => o.includes('unhealthy cluster'))).toBe(true)
      expect(await memberIds(c, '127.116.8.11')).not.toContain(old)
      // then the forced reset meets cp-2's refused API: that is what fails, with the member already removed
      expect(result.code).toBe(1)
      expect(nodeIn(c.report(), 'reset', 'cp-2').error).toMatchObject({
        kind: 'unreachable',
        message: expect.stringContaining(`the reset is half done: etcd member ${old} was removed through cp-1`),
      })
    }))
})

// one case after another: each hangs on a call or reset timeout of seconds of the wall clock (2-4 s),
// which cases side by side on a loaded machine run out on their own (seen at load 30-50: a member list
// read of a running etcd timed out, a worker's one timed-out read became two)
describe('reset safety: cases under short wall-clock timeouts', { timeout: CLUSTER_CASE_TIMEOUT }, () => {
  // the quorum refusal wipes nothing; the refused leave after it needs the other members' etcd started
  // again and healthy, as a cluster of its own would be
  describe('a quorum refusal, then a refused leave, on one cluster', () => {
    const cluster = sharedCluster('127.116.1', { cps: 3, workers: 0 }, [])

    it('refuses to reset a control plane when the other members run no etcd (quorum), wiping nothing', async () => {
      const c = cluster()
      const mark = c.calls().length
      const before = await memberIds(c, '127.116.1.12')
      expect(before).toHaveLength(3)
      // the other two members' etcd goes away: cp-2 holds the last running copy of the data
      for (const node of ['cp-1', 'cp-3']) c.sim.addFault({ node, kind: 'etcd-crash' })
      await waitFor(() => !c.sim.node('cp-1')?.etcdHealthy && !c.sim.node('cp-3')?.etcdHealthy, 30_000, 'cp-1 and cp-3 down')

      const result = await c.task('bootstrap:node', { NODE: 'cp-2', RESET: 'true' }, ['--yes', '--call-timeout', '3s'])
      expect(result.code).toBe(1)
      const failed = nodeIn(c.report(), 'reset', 'cp-2')
      expect(failed.error).toMatchObject({
        kind: 'etcd-join',
        message: expect.stringMatching(/would break etcd quorum: 0 healthy of 2 remaining voting members, 2 needed/),
      })
      expect(failed.error?.hint).toMatch(/etcd members/)
      expect(callsTo(c.calls().slice(mark), 'cp-2', 'reset')).toEqual([])
      expect(c.sim.node('cp-2')?.stage).toBe('running')
      expect(await memberIds(c, '127.116.1.12')).toEqual(before)
    })

    it('names a reset whose etcd leave was refused: half done, still configured, the way out', async () => {
      const c = cluster()
      // every member's etcd running and healthy (the case before crashed two of them)
      for (const node of ['cp-1', 'cp-3']) c.sim.clearFault(node, 'etcd-crash')
      await waitFor(() => ['cp-1', 'cp-2', 'cp-3'].every((n) => c.sim.node(n)?.etcdHealthy), 60_000, 'every member healthy')
      expect(await memberIds(c, '127.116.1.11')).toHaveLength(3)
      const old = c.sim.node('cp-2')?.etcdMember
      // etcd refuses the leave's MemberRemove (strict reconfiguration), as after a member failed since the guard read
      c.sim.addFault({ node: 'cp-2', kind: 'etcd-leave' })

      const result = await c.task('bootstrap:node', { NODE: 'cp-2', RESET: 'true' }, ['--yes', '--reset-timeout', '4s'])
      expect(result.code).toBe(1)
      const failed = nodeIn(c.report(), 'reset', 'cp-2')
      expect(failed.error).toMatchObject({
        kind: 'etcd-join',
        message: expect.stringMatching(
          /the reset stopped half-way: cp-2 is still configured \(stage resetting\).*cordoned.*re-configuration failed/,
        ),
      })
      expect(failed.error?.hint).toMatch(/kubectl uncordon cp-2.*RESET=true -- --yes/)
      expect(c.sim.node('cp-2')).toMatchObject({ stage: 'resetting', configured: true })
      expect(await memberIds(c, '127.116.1.11')).toContain(old)
    })
  })

  // the refusal leaves the worker running and untouched; the timed-out read's fault is used up, and cleared
  describe('a worker refused, then reset, on one cluster', () => {
    const cluster = sharedCluster('127.116.4', { cps: 1, workers: 1 }, [])

    it('refuses to force a worker whose status reads keep timing out', async () => {
      const c = cluster()
      const mark = c.calls().length
      const stop = faultAfterPreflight(c, 'wrkr-1', { node: 'wrkr-1', on: 'get', kind: 'timeout', times: 2 })
      const result = await c.task('bootstrap:node', { NODE: 'wrkr-1', RESET: 'true' }, ['--yes', '--call-timeout', '2s', '--retries', '1'])
      stop()
      expect(result.code).toBe(1)
      expect(nodeIn(c.report(), 'reset', 'wrkr-1').error).toMatchObject({
        kind: 'timeout',
        message: expect.stringMatching(/not reset: wrkr-1 did not answer .*--graceful=false\) is only for an unreachable node/),
      })
      expect(callsTo(c.calls().slice(mark), 'wrkr-1', 'reset')).toEqual([])
      expect(c.sim.node('wrkr-1')?.stage).toBe('running')
    })

    it('resets a live worker gracefully when its status read times out once (never --graceful=false)', async () => {
      const c = cluster()
      c.sim.clearFault('wrkr-1', 'timeout')
      expect(c.sim.node('wrkr-1')?.stage).toBe('running')
      const mark = c.calls().length
      const stop = faultAfterPreflight(c, 'wrkr-1', { node: 'wrkr-1', on: 'get', kind: 'timeout', times: 1 })
      const result = await c.task('bootstrap:node', { NODE: 'wrkr-1', RESET: 'true' }, ['--yes', '--call-timeout', '2s'])
      stop()
      expect(result.code, result.stderr).toBe(0)
      const resets = callsTo(c.calls().slice(mark), 'wrkr-1', 'reset')
      expect(resets).toHaveLength(1)
      expect(resets[0]?.args).toContain('--graceful=true')
    })
  })
})

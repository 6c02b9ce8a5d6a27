// Issue 26 items 1 and 3: a member is a node's only by the address in its peer URL, and a reset of a
// control plane needs the remaining voters' health established. Range 127.201.x.y.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parse, stringify } from 'yaml'
import { withCluster } from '../faults/helpers.js'
import { inTurn, SIDE_BY_SIDE } from '../support/in-turn.js'
import { callsTo, CLUSTER_CASE_TIMEOUT, type E2eCluster, nodeIn, run, runInFreshShell, sharedCluster } from './harness.js'

const memberCount = async (c: E2eCluster, ip: string): Promise<number> => {
  const r = await run('talosctl', ['etcd', 'members', '-e', ip, '-n', ip], c.env())
  expect(r.code, r.stderr).toBe(0)
  return r.stdout.split('\n').filter((l) => /\b[0-9a-f]{16}\b/.test(l)).length
}

/** The inventory names `from` where the node runs; it now says `to` (a typo, a renumbered host). */
function moveInInventory(c: E2eCluster, from: string, to: string): void {
  const file = join(c.clusterDir, 'talconfig.yaml')
  const text = readFileSync(file, 'utf8')
  expect(text).toContain(from)
  writeFileSync(file, text.replace(from, to))
  c.generated()
}

/**
 * The node's config takes its address by DHCP (no static address in it): the inventory's address is
 * all the tool has, and an offline check cannot tell it is wrong (with a static address it can:
 * test/bad-input/node-identity.test.ts).
 */
function dhcpConfig(c: E2eCluster, node: string): void {
  const dir = join(c.clusterDir, 'clusterconfig')
  const file = readdirSync(dir).find((f) => f.endsWith(`-${node}.yaml`))
  expect(file, `${node}'s config in ${dir}`).toBeDefined()
  const path = join(dir, file as string)
  const doc = parse(readFileSync(path, 'utf8')) as { machine: { network: { interfaces: Array<Record<string, unknown>> } } }
  for (const link of doc.machine.network.interfaces) {
    delete link.addresses
    link.dhcp = true
  }
  writeFileSync(path, stringify(doc))
}

/** the resets and member removals among the calls since `mark` */
const mutations = (c: E2eCluster, mark: number) =>
  c
    .calls()
    .slice(mark)
    .filter((call) => call.call === 'reset' || (call.command === 'etcd' && call.args.includes('remove-member')))

describe.concurrent('etcd membership by address', { timeout: CLUSTER_CASE_TIMEOUT }, () => {
  // one cluster, its cases in turn, beside the four control planes' case: the refusal leaves it as it
  // was (the faults cleared, three members), the half-done reset's hint brings it back to three members,
  // and the inventory edit comes last
  describe('three control planes, on one cluster', SIDE_BY_SIDE, () => {
    const cluster = sharedCluster('127.201.1', { cps: 3, workers: 0 }, [])

    inTurn(
      'a reset of a control plane refuses when the other members answer Unavailable although their services run, naming them',
      async () => {
        const c = cluster()
        const mark = c.calls().length
        // real etcd: its member list comes in ID order, not in the order the members joined
        // cp-1's and cp-2's etcd API answer Unavailable; their etcd services still say Running, cp-3's own list reads
        c.sim.addFault({ node: 'cp-1', on: 'etcd', kind: 'unavailable' })
        c.sim.addFault({ node: 'cp-2', on: 'etcd', kind: 'unavailable' })
        const result = await c.task('bootstrap:node', { NODE: 'cp-3', RESET: 'true' }, ['--yes', '--retries', '1'])
        expect(result.code).toBe(1)
        const failed = nodeIn(c.report(), 'reset', 'cp-3')
        expect(failed.error?.kind).toBe('etcd-join')
        expect(failed.error?.message).toMatch(
          /would break etcd quorum: 0 healthy of 2 remaining voting members, 2 needed of 3 \(not established: cp-1: .*; cp-2: .*\)/,
        )
        expect(mutations(c, mark)).toEqual([])
        expect(c.sim.node('cp-3')?.stage).toBe('running')
        c.sim.clearFault(null, 'unavailable')
        expect(await memberCount(c, '127.201.1.11')).toBe(3)
      },
      CLUSTER_CASE_TIMEOUT,
    )

    inTurn(
      'a reset that removed the member and then could not reach the node says it is half done; its hint (RESET=true kept) finishes it',
      async () => {
        const c = cluster()
        expect(await memberCount(c, '127.201.1.11')).toBe(3)
        c.sim.addFault({ node: 'cp-2', kind: 'unreachable' })
        const result = await c.task('bootstrap:node', { NODE: 'cp-2', RESET: 'true' }, ['--yes', '--retries', '1'])
        expect(result.code).toBe(1)
        const failed = nodeIn(c.report(), 'reset', 'cp-2')
        expect(failed.error?.message).toMatch(
          /the reset is half done: etcd member [0-9a-f]{16} was removed through cp-1, but cp-2 was not wiped/,
        )
        const next = result.stderr.split('\n').find((l) => /next: .*RESET=true/.test(l)) ?? ''
        const command = /.*run: (task .+)$/.exec(next)?.[1] ?? ''
        expect(command).toMatch(/bootstrap:node .*NODE=cp-2 RESET=true -- --yes$/)
        // the node is powered on again; the hint, verbatim, in a fresh shell finishes the job
        c.sim.clearFault('cp-2', 'unreachable')
        const again = await runInFreshShell(c, command)
        expect(again.code, again.stderr + again.stdout).toBe(0)
        expect(await memberCount(c, '127.201.1.11')).toBe(3)
      },
      CLUSTER_CASE_TIMEOUT,
    )

    inTurn(
      'a reset of a control plane whose inventory address is wrong refuses: the hostname match at another address is named, nothing removed',
      async () => {
        const c = cluster()
        const mark = c.calls().length
        expect(await memberCount(c, '127.201.1.11')).toBe(3)
        // cp-3 runs at .13; the inventory says .43, where nothing answers
        moveInInventory(c, '127.201.1.13', '127.201.1.43')
        dhcpConfig(c, 'cp-3')
        const result = await c.task('bootstrap:node', { NODE: 'cp-3', RESET: 'true' }, ['--yes', '--retries', '1'])
        expect(result.code, result.stderr + result.stdout).toBe(1)
        const failed = nodeIn(c.report(), 'reset', 'cp-3')
        expect(failed.error?.kind).toBe('etcd-join')
        expect(failed.error?.message).toMatch(
          /etcd member [0-9a-f]{16} is named cp-3 but its peer URL is at 127\.201\.1\.13, not cp-3's inventory address 127\.201\.1\.43/,
        )
        expect(failed.error?.hint).toMatch(/talconfig|inventory/)
        expect(mutations(c, mark)).toEqual([])
        expect(callsTo(c.calls().slice(mark), 'cp-3', 'reset')).toEqual([])
        expect(await memberCount(c, '127.201.1.11')).toBe(3)
        expect(c.sim.node('cp-3')?.stage).toBe('running')
        // status names it too: cp-3 is no member at .43
        const status = await c.task('bootstrap:status')
        expect(status.code).toBe(1)
        expect(status.stdout + status.stderr).toMatch(/cp-3.*127\.201\.1\.13/)
      },
      CLUSTER_CASE_TIMEOUT,
    )
  })

  it('a reset of one of four control planes needs a quorum of the four: one other unread refuses', () =>
    withCluster('127.201.3', { cps: 4, workers: 0 }, async (c) => {
      {
        const b = await c.task('bootstrap:talos')
        expect(b.code, b.stderr + b.stdout).toBe(0)
      }
      // 3 voters remain, 2 of them healthy: enough for a 3-member cluster, not for the removal the 4 commit (3 needed)
      c.sim.addFault({ node: 'cp-1', on: 'etcd', kind: 'unavailable' })
      const result = await c.task('bootstrap:node', { NODE: 'cp-4', RESET: 'true' }, ['--yes', '--retries', '1'])
      expect(result.code).toBe(1)
      expect(nodeIn(c.report(), 'reset', 'cp-4').error?.message).toMatch(
        /2 healthy of 3 remaining voting members, 3 needed of 4 \(not established: cp-1: /,
      )
      expect(mutations(c, 0)).toEqual([])
    }))
})

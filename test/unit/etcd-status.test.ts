// `talosctl etcd status` and `talosctl version` read per node (lib/tools/talosctl.ts etcdStatus,
// versions). The outputs below are the real talosctl v1.12.11's against the simulator's real etcd
// (3 control planes and a worker on 127.252.9.x, captured with `etcd status -n <all> -e cp-1`):
// a batched call exits 0 when any node answered and names a failed node only in its WARNING, so
// such a node must come out failed, never passing. A batch that fails whole (its endpoint down)
// or hangs (a member whose etcd is stopped holds the whole call: Talos's EtcdStatus waits on its
// local etcd client) leaves each node to be asked alone, through itself.
import { describe, expect, it } from 'vitest'
import { loadInventory } from '../../lib/input/inventory.js'
import type { ToolCall, ToolResult, ToolRunner } from '../../lib/tools/exec.js'
import { parseEtcdStatus, parseServerVersions, Talosctl } from '../../lib/tools/talosctl.js'
import { clusterDir, type FixtureNode } from './fixtures.js'

const NODES: FixtureNode[] = [
  { hostname: 'cp-1', ip: '127.252.9.11', cp: true },
  { hostname: 'cp-2', ip: '127.252.9.12', cp: true },
  { hostname: 'cp-3', ip: '127.252.9.13', cp: true },
  { hostname: 'wrkr-1', ip: '127.252.9.21', cp: false },
]

const HEADER =
  'NODE           MEMBER             DB SIZE   IN USE           LEADER             RAFT INDEX   RAFT TERM   RAFT APPLIED INDEX   LEARNER   PROTOCOL   STORAGE   ERRORS'
const ROW = {
  cp1: '127.252.9.11   cd6a4ddd2e285dde   20 kB     16 kB (80.00%)   cd6a4ddd2e285dde   44           2           44                   false     3.6.11     3.6.0     ',
  cp2: '127.252.9.12   3879d5bbeb1f3c8d   20 kB     16 kB (80.00%)   cd6a4ddd2e285dde   44           2           44                   false     3.6.11     3.6.0     ',
  cp3: '127.252.9.13   902f2aac968a4749   20 kB     16 kB (80.00%)   cd6a4ddd2e285dde   44           2           44                   false     3.6.11     3.5.0     ',
}
/** `etcd status -n cp-1,cp-2,cp-3 -e cp-1`, all healthy (exit 0) */
const ALL = `${HEADER}\n${ROW.cp1}\n${ROW.cp2}\n${ROW.cp3}\n`
/** the same with cp-2 unreachable: exit 0, cp-2 only in the WARNING */
const CP2_DOWN = {
  stdout: `${HEADER}\n127.252.9.11   cd6a4ddd2e285dde   20 kB     16 kB (80.00%)   cd6a4ddd2e285dde   49           2           49                   false     3.6.11     3.6.0     \n127.252.9.13   902f2aac968a4749   20 kB     16 kB (80.00%)   cd6a4ddd2e285dde   49           2           49                   false     3.6.11     3.6.0     \n`,
  stderr:
    'WARNING: 1 error occurred:\n\t* 127.252.9.12: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 127.252.9.12:50000: connect: connection refused"\n\n\n',
}
/** `-e cp-2` while cp-2 is down: the batch fails whole, naming no node (exit 1) */
const VIA_DOWN =
  'error getting status: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 127.252.9.12:50000: connect: connection refused"\n'
/** a worker in the batch (exit 0) */
const WORKER_WARNING =
  'WARNING: 1 error occurred:\n\t* 127.252.9.21: rpc error: code = Unimplemented desc = etcd status is only available on control plane nodes\n\n\n'

type Answer = Pick<ToolResult, 'exitCode' | 'stdout' | 'stderr'> & { timedOut?: boolean }

function setup(answer: (args: string[], call: ToolCall) => Answer) {
  const inventory = loadInventory(clusterDir(NODES))
  const calls: string[][] = []
  const runner = {
    run: (call: ToolCall): Promise<ToolResult> => {
      calls.push(call.args)
      const a = answer(call.args, call)
      return Promise.resolve({ call, ok: a.exitCode === 0, durationMs: 5, aborted: false, ...a, timedOut: a.timedOut ?? false })
    },
  } as unknown as ToolRunner
  const talosctl = new Talosctl(runner, inventory)
  const node = (name: string) => inventory.nodes.find((n) => n.name === name) ?? expect.fail(name)
  return { talosctl, calls, node, cps: ['cp-1', 'cp-2', 'cp-3'].map(node) }
}

const arg = (args: string[], flag: string): string => args[args.indexOf(flag) + 1] ?? ''
const rowOf = (ip: string): string => Object.values(ROW).find((r) => r.startsWith(ip)) ?? expect.fail(ip)

describe('parseEtcdStatus (the real table)', () => {
  it('one row per member: IDs, leader, raft index, term and applied index, learner, protocol, no errors', () => {
    const rows = parseEtcdStatus(ALL)
    expect(rows.map((r) => r.node)).toEqual(['127.252.9.11', '127.252.9.12', '127.252.9.13'])
    expect(rows[1]?.value).toEqual({
      node: '127.252.9.12',
      memberId: '3879d5bbeb1f3c8d',
      leader: 'cd6a4ddd2e285dde',
      raftIndex: 44,
      raftTerm: 2,
      raftAppliedIndex: 44,
      learner: false,
      protocol: '3.6.11',
      errors: '',
      dbSize: '20 kB',
      inUse: '16 kB (80.00%)',
    })
  })

  it('an ERRORS cell (etcd joins them with ", ") and a learner, in the same tabwriter layout', () => {
    const wide = `${HEADER}            \n127.252.9.13   902f2aac968a4749   20 kB     16 kB (80.00%)   0000000000000000   51           3           40                   true      3.6.11     3.6.0     etcdserver: no leader, memberID:902f2aac968a4749 alarm:NOSPACE\n`
    const [row] = parseEtcdStatus(wide)
    expect(row?.value).toMatchObject({
      memberId: '902f2aac968a4749',
      leader: '0000000000000000',
      raftIndex: 51,
      raftAppliedIndex: 40,
      learner: true,
      errors: 'etcdserver: no leader, memberID:902f2aac968a4749 alarm:NOSPACE',
    })
  })

  it('no table, no rows (every node failed: talosctl printed only its WARNING)', () => {
    expect(parseEtcdStatus('')).toEqual([])
    expect(parseEtcdStatus('error getting status: …')).toEqual([])
  })
})

describe('Talosctl.etcdStatus', () => {
  it('all answer in one batched call through via', async () => {
    const { talosctl, calls, cps, node } = setup(() => ({ exitCode: 0, stdout: ALL, stderr: '' }))
    const answers = await talosctl.etcdStatus(cps, node('cp-1'))
    expect([...answers.values()].map((a) => a.value?.memberId)).toEqual(['cd6a4ddd2e285dde', '3879d5bbeb1f3c8d', '902f2aac968a4749'])
    expect(calls).toHaveLength(1)
    expect(calls[0]?.slice(0, 2)).toEqual(['etcd', 'status'])
    expect(arg(calls[0]!, '-e')).toBe('127.252.9.11')
    expect(arg(calls[0]!, '-n')).toBe('127.252.9.11,127.252.9.12,127.252.9.13')
  })

  it('exit 0 with a WARNING: the node named there fails with its own error (unreachable), never passes', async () => {
    const { talosctl, calls, cps, node } = setup(() => ({ exitCode: 0, ...CP2_DOWN }))
    const answers = await talosctl.etcdStatus(cps, node('cp-1'))
    expect(answers.get('127.252.9.11')?.value?.raftIndex).toBe(49)
    expect(answers.get('127.252.9.13')?.value?.memberId).toBe('902f2aac968a4749')
    const failed = answers.get('127.252.9.12')
    expect(failed?.value).toBeUndefined()
    expect(failed?.error?.kind).toBe('unreachable')
    expect(failed?.error?.message).toContain('dial tcp 127.252.9.12:50000: connect: connection refused')
    // named in the WARNING: told, not asked again
    expect(calls).toHaveLength(1)
  })

  it('a worker in the batch is named by its Unimplemented answer', async () => {
    const { talosctl, node, cps } = setup(() => ({ exitCode: 0, stdout: ALL, stderr: WORKER_WARNING }))
    const answers = await talosctl.etcdStatus([...cps, node('wrkr-1')], node('cp-1'))
    expect(answers.get('127.252.9.21')?.error?.message).toContain('etcd status is only available on control plane nodes')
    expect(answers.get('127.252.9.13')?.value?.protocol).toBe('3.6.11')
  })

  it('the endpoint down fails the batch whole: each control plane is asked alone, through itself', async () => {
    const { talosctl, calls, cps, node } = setup((args) => {
      if (arg(args, '-n').includes(',')) return { exitCode: 1, stdout: '', stderr: VIA_DOWN }
      const ip = arg(args, '-n')
      if (ip === '127.252.9.12') return { exitCode: 1, stdout: '', stderr: VIA_DOWN }
      return { exitCode: 0, stdout: `${HEADER}\n${rowOf(ip)}\n`, stderr: '' }
    })
    const answers = await talosctl.etcdStatus(cps, node('cp-2'))
    expect(calls).toHaveLength(4)
    for (const alone of calls.slice(1)) expect(arg(alone, '-e')).toBe(arg(alone, '-n'))
    expect(answers.get('127.252.9.11')?.value?.memberId).toBe('cd6a4ddd2e285dde')
    expect(answers.get('127.252.9.13')?.value?.memberId).toBe('902f2aac968a4749')
    expect(answers.get('127.252.9.12')?.error?.kind).toBe('unreachable')
  })

  it('a batch held to its deadline (a stopped etcd) leaves each node to be asked alone; the one that hangs again times out alone', async () => {
    const { talosctl, calls, cps, node } = setup((args) => {
      const ip = arg(args, '-n')
      if (ip.includes(',') || ip === '127.252.9.13') return { exitCode: null, stdout: '', stderr: '', timedOut: true }
      return { exitCode: 0, stdout: `${HEADER}\n${rowOf(ip)}\n`, stderr: '' }
    })
    const answers = await talosctl.etcdStatus(cps, node('cp-1'))
    expect(calls).toHaveLength(4)
    expect(answers.get('127.252.9.12')?.value?.memberId).toBe('3879d5bbeb1f3c8d')
    expect(answers.get('127.252.9.13')?.error).toBeDefined()
    expect(answers.get('127.252.9.13')?.value).toBeUndefined()
  })

  it('exit 0 without a row for a node and without its name in a WARNING: asked alone, and a row-less answer is a failure', async () => {
    const { talosctl, cps, node } = setup((args) =>
      arg(args, '-n').includes(',')
        ? { exitCode: 0, stdout: `${HEADER}\n${ROW.cp1}\n${ROW.cp2}\n`, stderr: '' }
        : { exitCode: 0, stdout: '', stderr: '' },
    )
    const answers = await talosctl.etcdStatus(cps, node('cp-1'))
    expect(answers.get('127.252.9.13')?.error?.message).toMatch(/printed no row for 127\.252\.9\.13/)
  })
})

describe('dry runs', () => {
  it('the dry answers parse: every control plane a started voter of one leader, every node at the configs’ version', async () => {
    const { talosctl, cps, node } = setup((_, call) => ({ exitCode: 0, stdout: call.dryRunStdout ?? '', stderr: '' }))
    const status = await talosctl.etcdStatus(cps, node('cp-1'))
    expect([...status.values()].map((a) => [a.value?.node, a.value?.leader, a.value?.learner])).toEqual(
      cps.map((cp) => [cp.address, '0000000000000001', false]),
    )
    const versions = await talosctl.versions([...cps, node('wrkr-1')])
    expect([...versions.values()].every((a) => typeof a.value === 'string' && a.value.startsWith('v'))).toBe(true)
    expect(versions.size).toBe(4)
  })
})

describe('Talosctl.versions', () => {
  const block = (ip: string, tag: string) =>
    `\tNODE:        ${ip}\n\tTag:         ${tag}\n\tSHA:         76312e31\n\tBuilt:       \n\tGo version:  go1.25.5\n\tOS/Arch:     linux/amd64\n\tEnabled:     RBAC\n`
  const CLIENT =
    'Client:\n\tTag:         v1.12.11\n\tSHA:         undefined\n\tBuilt:       \n\tGo version:  go1.26.8\n\tOS/Arch:     linux/amd64\nServer:\n'

  it('the Tag of each Server block, the Client block skipped', () => {
    expect(parseServerVersions(`${CLIENT}${block('127.252.9.11', 'v1.12.11')}${block('127.252.9.21', 'v1.13.9')}`)).toEqual([
      { node: '127.252.9.11', value: 'v1.12.11' },
      { node: '127.252.9.21', value: 'v1.13.9' },
    ])
  })

  it('a node in the WARNING (exit 0) fails; the others have their Tag', async () => {
    const { talosctl, calls, cps } = setup(() => ({
      exitCode: 0,
      stdout: `${CLIENT}${block('127.252.9.11', 'v1.12.11')}${block('127.252.9.13', 'v1.13.9')}`,
      stderr: CP2_DOWN.stderr,
    }))
    const answers = await talosctl.versions(cps)
    expect(answers.get('127.252.9.11')?.value).toBe('v1.12.11')
    expect(answers.get('127.252.9.13')?.value).toBe('v1.13.9')
    expect(answers.get('127.252.9.12')?.error?.kind).toBe('unreachable')
    expect(calls).toHaveLength(1)
    expect(calls[0]?.[0]).toBe('version')
  })
})

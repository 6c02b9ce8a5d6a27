// Batched authenticated reads (talosctl -n a,b,c through one endpoint): each node's own error is
// classified for that node alone, and a batch that fails whole leaves every node to be read alone.
// The outputs are the real talosctl v1.12.11's against the simulator (apid proxying): `get` prints
// the rows it got and a go-multierror of the failed nodes' errors in node order, naming no node
// (cmd/talosctl/pkg/talos/helpers/resources.go ForEachResource), exit 1; `service` names each node
// in apid's per-node error (`* <node>: rpc error …`, exit 0); an endpoint that cannot be reached is
// one plain error.
import { describe, expect, it } from 'vitest'
import { loadInventory } from '../../lib/input/inventory.js'
import type { Run } from '../../lib/engine/run.js'
import { StatusReads } from '../../lib/wait/status-reads.js'
import type { ToolCall, ToolResult, ToolRunner } from '../../lib/tools/exec.js'
import { Talosctl } from '../../lib/tools/talosctl.js'
import { clusterDir, type FixtureNode } from './fixtures.js'

const NODES: FixtureNode[] = [
  { hostname: 'cp-1', ip: '127.0.0.11', cp: true },
  { hostname: 'wrkr-1', ip: '127.0.0.21', cp: false },
  { hostname: 'wrkr-2', ip: '127.0.0.22', cp: false },
  { hostname: 'wrkr-3', ip: '127.0.0.23', cp: false },
]

const refused = (ip: string): string =>
  `rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp ${ip}:50000: connect: connection refused"`
const row = (ip: string, stage: string): string =>
  JSON.stringify(
    {
      metadata: { id: 'machine', namespace: 'runtime', type: 'MachineStatuses.runtime.talos.dev' },
      node: ip,
      spec: { stage, status: { ready: stage === 'running', unmetConditions: [] } },
    },
    null,
    4,
  )
const multi = (errors: string[]): string =>
  `${errors.length} error${errors.length === 1 ? '' : 's'} occurred:\n${errors.map((e) => `\t* ${e}`).join('\n')}\n\n`
const block = (ip: string): string =>
  `NODE     ${ip}\nID       kubelet\nSTATE    Running\nHEALTH   OK\nEVENTS   [Running]: Health check successful (3m43s ago)\n`

type Answer = Pick<ToolResult, 'exitCode' | 'stdout' | 'stderr'>

/** A ToolRunner that answers each talosctl call with `answer(args)` and records the calls. */
function fakeRunner(answer: (args: string[]) => Answer): { runner: ToolRunner; calls: string[][] } {
  const calls: string[][] = []
  const runner = {
    run: (call: ToolCall): Promise<ToolResult> => {
      calls.push(call.args)
      const answered = answer(call.args)
      return Promise.resolve({ call, ok: answered.exitCode === 0, durationMs: 5, timedOut: false, aborted: false, ...answered })
    },
  }
  return { runner: runner as unknown as ToolRunner, calls }
}

const nodesArg = (args: string[]): string[] => (args[args.indexOf('-n') + 1] ?? '').split(',')

function setup(answer: (args: string[]) => Answer) {
  const inventory = loadInventory(clusterDir(NODES))
  const { runner, calls } = fakeRunner(answer)
  const talosctl = new Talosctl(runner, inventory)
  const node = (name: string) => inventory.nodes.find((n) => n.name === name) ?? expect.fail(name)
  return { inventory, talosctl, calls, node }
}

describe('batched MachineStatus read', () => {
  it("a node's own error in the batch is that node's (unreachable), the others answer", async () => {
    const { talosctl, node } = setup(() => ({
      exitCode: 1,
      stdout: [row('127.0.0.11', 'running'), row('127.0.0.23', 'booting')].join('\n'),
      stderr: multi([refused('127.0.0.21'), refused('127.0.0.22')]),
    }))
    const answers = await talosctl.machineStatuses([node('cp-1'), node('wrkr-1'), node('wrkr-2'), node('wrkr-3')], node('cp-1'))
    expect(answers.get('127.0.0.11')?.value?.stage).toBe('running')
    expect(answers.get('127.0.0.23')?.value?.stage).toBe('booting')
    for (const ip of ['127.0.0.21', '127.0.0.22']) {
      expect(answers.get(ip)?.error?.kind).toBe('unreachable')
      expect(answers.get(ip)?.error?.message).toContain(`dial tcp ${ip}:50000: connect: connection refused`)
    }
    // the hint names the node that failed, not the endpoint
    expect(answers.get('127.0.0.22')?.error?.hint).toContain('127.0.0.22')
  })

  it('a batch that failed whole (the endpoint refused) tells nothing about any node', async () => {
    const { talosctl, node } = setup(() => ({ exitCode: 1, stdout: '', stderr: `${refused('127.0.0.11')}\n` }))
    const answers = await talosctl.machineStatuses([node('cp-1'), node('wrkr-1'), node('wrkr-2')], node('cp-1'))
    expect(answers.size).toBe(0)
  })

  it('errors that do not line up with the missing rows are not guessed at', async () => {
    const { talosctl, node } = setup(() => ({ exitCode: 1, stdout: row('127.0.0.11', 'running'), stderr: multi([refused('127.0.0.21')]) }))
    const answers = await talosctl.machineStatuses([node('cp-1'), node('wrkr-1'), node('wrkr-2')], node('cp-1'))
    expect([...answers.keys()]).toEqual(['127.0.0.11'])
  })
})

describe('batched service read', () => {
  it("apid's per-node error names the node: classified for it alone", async () => {
    const { talosctl, node } = setup(() => ({
      exitCode: 0,
      stdout: block('127.0.0.11') + block('127.0.0.23'),
      stderr: `WARNING: 1 error occurred:\n\t* 127.0.0.22: ${refused('127.0.0.22')}\n\n`,
    }))
    const answers = await talosctl.serviceStatuses([node('cp-1'), node('wrkr-2'), node('wrkr-3')], node('cp-1'), 'kubelet')
    expect(answers.get('127.0.0.11')?.value?.state).toBe('Running')
    expect(answers.get('127.0.0.23')?.value?.state).toBe('Running')
    expect(answers.get('127.0.0.22')?.error?.kind).toBe('unreachable')
    expect(answers.get('127.0.0.22')?.error?.message).toMatch(/^rpc error: code = Unavailable .*dial tcp 127\.0\.0\.22:50000/)
  })

  it('the endpoint down: no node is told anything', async () => {
    const { talosctl, node } = setup(() => ({ exitCode: 1, stdout: '', stderr: `${refused('127.0.0.11')}\n` }))
    expect((await talosctl.serviceStatuses([node('cp-1'), node('wrkr-2')], node('cp-1'), 'kubelet')).size).toBe(0)
  })
})

/** A Run with just what StatusReads uses. */
const runOf = (talosctl: Talosctl): Run =>
  ({ talosctl, failed: new Map<string, string>(), settings: { pollIntervalMs: 400 } }) as unknown as Run

describe('StatusReads (verify and wait-ready)', () => {
  it('one refusing node of a batch fails its read alone while the others progress, with no read of their own', async () => {
    const { talosctl, calls, node } = setup((args) => {
      const asked = nodesArg(args)
      if (asked.length === 1) return { exitCode: 0, stdout: row(asked[0] ?? '', 'booting'), stderr: '' }
      const down: string[] = asked.filter((ip) => ip === '127.0.0.22')
      return {
        exitCode: down.length ? 1 : 0,
        stdout: asked
          .filter((ip) => !down.includes(ip))
          .map((ip) => row(ip, 'running'))
          .join('\n'),
        stderr: down.length ? multi(down.map(refused)) : '',
      }
    })
    const reads = new StatusReads(runOf(talosctl))
    // no control plane has answered yet: read alone; cp-1 answering makes it the endpoint
    expect((await reads.read(node('cp-1'))).stage).toBe('booting')
    const [w1, w2, w3] = await Promise.allSettled(['wrkr-1', 'wrkr-2', 'wrkr-3'].map((n) => reads.read(node(n))))
    expect(w1).toMatchObject({ status: 'fulfilled', value: { stage: 'running' } })
    expect(w3).toMatchObject({ status: 'fulfilled', value: { stage: 'running' } })
    expect(w2).toMatchObject({ status: 'rejected', reason: { kind: 'unreachable' } })
    // one batch through cp-1 (the endpoint resolving the type first), no single read of any worker
    expect(calls.slice(1).map(nodesArg)).toEqual([['127.0.0.11', '127.0.0.21', '127.0.0.22', '127.0.0.23']])
    expect(calls[1]?.[calls[1].indexOf('-e') + 1]).toBe('127.0.0.11')
  })

  it('a batch failing whole (its endpoint down) falls back to reading each node alone', async () => {
    const { talosctl, calls, node } = setup((args) => {
      const asked = nodesArg(args)
      if (asked.length > 1) return { exitCode: 1, stdout: '', stderr: `${refused('127.0.0.11')}\n` }
      return asked[0] === '127.0.0.11' && calls.length > 1
        ? { exitCode: 1, stdout: '', stderr: `${refused('127.0.0.11')}\n` }
        : { exitCode: 0, stdout: row(asked[0] ?? '', 'running'), stderr: '' }
    })
    const reads = new StatusReads(runOf(talosctl))
    await reads.read(node('cp-1'))
    const got = await Promise.all(['wrkr-1', 'wrkr-2'].map((n) => reads.read(node(n))))
    expect(got.map((s) => s.node)).toEqual(['127.0.0.21', '127.0.0.22'])
    // the batch, then each node alone
    expect(calls.slice(1).map(nodesArg)).toEqual([['127.0.0.11', '127.0.0.21', '127.0.0.22'], ['127.0.0.21'], ['127.0.0.22']])
    // the endpoint is dropped: the next round reads alone until a control plane answers again
    await reads.read(node('wrkr-1'))
    expect(calls.at(-1)?.filter((a) => a.startsWith('127.'))).toEqual(['127.0.0.21', '127.0.0.21'])
  })
})

describe('large batches', () => {
  it('go out as several calls of at most 50 nodes, each resolving the type through the same first node', async () => {
    const { talosctl, calls, node, inventory } = setup((args) => ({
      exitCode: 0,
      stdout: nodesArg(args)
        .map((ip) => row(ip, 'running'))
        .join('\n'),
      stderr: '',
    }))
    const many = Array.from({ length: 120 }, (_, i) => ({ ...inventory.nodes[1]!, name: `w-${i}`, address: `127.0.1.${i + 1}` }))
    const answers = await talosctl.machineStatuses([node('cp-1'), ...many], node('cp-1'))
    expect(answers.size).toBe(121)
    expect(calls.map((c) => nodesArg(c).length)).toEqual([51, 51, 21])
    expect(calls.map((c) => nodesArg(c)[0])).toEqual(['127.0.0.11', '127.0.0.11', '127.0.0.11'])
    const services = await talosctl.serviceStatuses(many, node('cp-1'), 'kubelet')
    expect(calls.slice(3).map((c) => nodesArg(c).length)).toEqual([50, 50, 20])
    expect(services.size).toBe(0) // the fake answers every call with MachineStatus rows: no service blocks
  })
})

describe('StatusReads: the spared node', () => {
  it('is never borrowed to resolve a batch: another control plane is, else each node is read alone', async () => {
    const nodes2: FixtureNode[] = [...NODES.slice(0, 1), { hostname: 'cp-2', ip: '127.0.0.12', cp: true }, ...NODES.slice(1)]
    const inventory = loadInventory(clusterDir(nodes2))
    const { runner, calls } = fakeRunner((args) => ({
      exitCode: 0,
      stdout: nodesArg(args)
        .map((ip) => row(ip, 'running'))
        .join('\n'),
      stderr: '',
    }))
    const node = (name: string) => inventory.nodes.find((n) => n.name === name) ?? expect.fail(name)
    const reads = new StatusReads(runOf(new Talosctl(runner, inventory)), undefined, () => node('cp-1'))
    await reads.read(node('cp-1'))
    await reads.read(node('wrkr-1'))
    // only the spared cp-1 answered so far: the worker was read alone
    expect(calls.map(nodesArg)).toEqual([['127.0.0.11'], ['127.0.0.21']])
    await reads.read(node('cp-2'))
    await reads.read(node('wrkr-2'))
    // the batch for wrkr-2 resolves through cp-2 (it answered), never through cp-1
    expect(calls.at(-1) && nodesArg(calls.at(-1) ?? [])).toEqual(['127.0.0.12', '127.0.0.22'])
  })
})

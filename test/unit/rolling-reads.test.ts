// The rolling steps' reads batched across the workers in flight (lib/phases/shared/rolling-reads.ts):
// the workers asking together go out as one call (through a control plane for talosctl, one
// `kubectl get node a b …`); a node the batch told is not read again, a node it told an error or
// could not tell is read alone, and an endpoint that failed a batch whole is not used again. The
// outputs are the real talosctl's and kubectl's formats (as test/unit/batched-reads.test.ts).
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { Run } from '../../lib/engine/run.js'
import { loadInventory } from '../../lib/input/inventory.js'
import { RollingReads } from '../../lib/phases/shared/rolling-reads.js'
import type { ToolCall, ToolResult, ToolRunner } from '../../lib/tools/exec.js'
import { Kubectl } from '../../lib/tools/kubectl.js'
import { Talosctl } from '../../lib/tools/talosctl.js'
import { clusterDir, type FixtureNode } from './fixtures.js'

const NODES: FixtureNode[] = [
  { hostname: 'cp-1', ip: '127.0.0.11', cp: true },
  { hostname: 'cp-2', ip: '127.0.0.12', cp: true },
  { hostname: 'wrkr-1', ip: '127.0.0.21', cp: false },
  { hostname: 'wrkr-2', ip: '127.0.0.22', cp: false },
  { hostname: 'wrkr-3', ip: '127.0.0.23', cp: false },
]
const WORKERS = ['wrkr-1', 'wrkr-2', 'wrkr-3']

const refused = (ip: string): string =>
  `rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp ${ip}:50000: connect: connection refused"`
const multi = (errors: string[]): string =>
  `${errors.length} error${errors.length === 1 ? '' : 's'} occurred:\n${errors.map((e) => `\t* ${e}`).join('\n')}\n\n`
const status = (ip: string, stage: string): string =>
  JSON.stringify({ metadata: { id: 'machine' }, node: ip, spec: { stage, status: { ready: stage === 'running', unmetConditions: [] } } })
const kubelet = (ip: string): string =>
  `NODE     ${ip}\nID       kubelet\nSTATE    Running\nHEALTH   OK\nEVENTS   [Running]: Health check successful (3s ago)\n`
const versions = (ips: string[]): string =>
  `Client:\n\tTag:         v1.13.9\nServer:\n${ips.map((ip) => `\tNODE:        ${ip}\n\tTag:         v1.13.9\n`).join('')}`
const kubeNode = (name: string) => ({ apiVersion: 'v1', kind: 'Node', metadata: { name, resourceVersion: '1' } })

type Answer = Pick<ToolResult, 'exitCode' | 'stdout' | 'stderr'>
const ok = (stdout: string): Answer => ({ exitCode: 0, stdout, stderr: '' })
const nodesArg = (args: string[]): string[] => (args[args.indexOf('-n') + 1] ?? '').split(',')
/** a batched MachineStatus read answering the rows of `running`, with wrkr-2's refusal as its one error */
const wrkr2Refused = (running: string[]): Answer => ({
  exitCode: 1,
  stdout: running.map((ip) => status(ip, 'running')).join('\n'),
  stderr: multi([refused('127.0.0.22')]),
})

function setup(talos: (args: string[]) => Answer, kube: (args: string[]) => Answer = () => ok('')) {
  const inventory = loadInventory(clusterDir(NODES))
  const calls: Array<{ tool: string; args: string[] }> = []
  const runner = {
    dryRun: false,
    run: (call: ToolCall): Promise<ToolResult> => {
      calls.push({ tool: call.tool, args: call.args })
      const answered = call.tool === 'kubectl' ? kube(call.args) : talos(call.args)
      return Promise.resolve({ call, ok: answered.exitCode === 0, durationMs: 5, timedOut: false, aborted: false, ...answered })
    },
  } as unknown as ToolRunner
  const dir = mkdtempSync(join(tmpdir(), 'tb-unit-'))
  const kubeconfig = join(dir, 'kubeconfig')
  writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n')
  const kubectl = new Kubectl(runner, { kubeconfig, clusterName: 'demo', cacheDir: dir })
  const run = {
    talosctl: new Talosctl(runner, inventory),
    inventory,
    failed: new Map<string, string>(),
    settings: { pollIntervalMs: 400 },
  } as unknown as Run
  const node = (name: string) => inventory.nodes.find((n) => n.name === name) ?? expect.fail(name)
  const talosCalls = () => calls.filter((c) => c.tool === 'talosctl').map((c) => c.args)
  const kubeCalls = () => calls.filter((c) => c.tool === 'kubectl').map((c) => c.args.slice(c.args.indexOf('get')))
  return { run, kubectl, node, talosCalls, kubeCalls }
}

describe('RollingReads, batched', () => {
  it('the workers asking together: one call through the first control plane, each answer its own node’s', async () => {
    const { run, kubectl, node, talosCalls } = setup((args) =>
      args[0] === 'service' ? ok(nodesArg(args).map(kubelet).join('')) : ok(versions(nodesArg(args))),
    )
    const reads = new RollingReads(run, kubectl, true)
    const [kubelets, tags] = await Promise.all([
      Promise.all(WORKERS.map((w) => reads.kubelet(node(w)))),
      Promise.all(WORKERS.map((w) => reads.version(node(w), () => expect.fail(`${w} read alone`)))),
    ])
    expect(kubelets.map((k) => k.state)).toEqual(['Running', 'Running', 'Running'])
    expect(tags).toEqual(['v1.13.9', 'v1.13.9', 'v1.13.9'])
    const calls = talosCalls()
    expect(calls.map((c) => c[0])).toEqual(['service', 'version'])
    for (const c of calls) {
      expect(c[c.indexOf('-e') + 1]).toBe('127.0.0.11')
      expect(nodesArg(c)).toEqual(['127.0.0.11', '127.0.0.21', '127.0.0.22', '127.0.0.23'])
    }
  })

  it('one node of a batch answers, another is told an error: that one alone is read again, alone', async () => {
    const { run, kubectl, node, talosCalls } = setup((args) => {
      const asked = nodesArg(args)
      if (asked.length === 1) return ok(status(asked[0] ?? '', 'booting'))
      // wrkr-2 refuses through the endpoint (its row missing, its error in node order)
      return wrkr2Refused(asked.filter((ip) => ip !== '127.0.0.22'))
    })
    const reads = new RollingReads(run, kubectl, true)
    const got = await Promise.all(WORKERS.map((w) => reads.machineStatus(node(w))))
    // wrkr-2's answer is its own read's (it may have been the endpoint's proxying)
    expect(got.map((s) => s.stage)).toEqual(['running', 'booting', 'running'])
    expect(talosCalls().map(nodesArg)).toEqual([['127.0.0.11', '127.0.0.21', '127.0.0.22', '127.0.0.23'], ['127.0.0.22']])
    // read alone: through the node itself
    expect(talosCalls()[1]?.[talosCalls()[1]!.indexOf('-e') + 1]).toBe('127.0.0.22')
  })

  it('a node the batch could not tell (errors not matching the missing rows) is read alone; the others are not', async () => {
    const { run, kubectl, node, talosCalls } = setup((args) => {
      const asked = nodesArg(args)
      if (asked.length === 1) return ok(status(asked[0] ?? '', 'running'))
      // two rows missing, one error: which is whose cannot be told
      return wrkr2Refused(['127.0.0.11', '127.0.0.21'])
    })
    const reads = new RollingReads(run, kubectl, true)
    await Promise.all(WORKERS.map((w) => reads.machineStatus(node(w))))
    expect(talosCalls().map(nodesArg).slice(1).sort()).toEqual([['127.0.0.22'], ['127.0.0.23']])
  })

  it('a batch failed whole: each node alone, and its endpoint is not used again (the next control plane is)', async () => {
    const { run, kubectl, node, talosCalls } = setup((args) => {
      const asked = nodesArg(args)
      const via = args[args.indexOf('-e') + 1]
      if (via === '127.0.0.11') return { exitCode: 1, stdout: '', stderr: `${refused('127.0.0.11')}\n` }
      return ok(asked.map((ip) => status(ip, 'running')).join('\n'))
    })
    const reads = new RollingReads(run, kubectl, true)
    await Promise.all(WORKERS.slice(0, 2).map((w) => reads.machineStatus(node(w))))
    expect(talosCalls().map(nodesArg)).toEqual([['127.0.0.11', '127.0.0.21', '127.0.0.22'], ['127.0.0.21'], ['127.0.0.22']])
    await Promise.all(WORKERS.slice(0, 2).map((w) => reads.machineStatus(node(w))))
    const last = talosCalls().at(-1) ?? []
    expect([last[last.indexOf('-e') + 1], ...nodesArg(last)]).toEqual(['127.0.0.12', '127.0.0.12', '127.0.0.21', '127.0.0.22'])
  })

  it('the Nodes: one kubectl get naming each; a Node not found is none (no read of its own); a failed get reads each alone', async () => {
    let fail = false
    const { run, kubectl, node, kubeCalls } = setup(
      () => ok(''),
      (args) => {
        const names = args.slice(args.indexOf('node') + 1, args.indexOf('-o'))
        if (fail && names.length > 1) return { exitCode: 1, stdout: '', stderr: 'Unable to connect to the server: EOF' }
        const found = names.filter((n) => n !== 'wrkr-3').map(kubeNode)
        return ok(JSON.stringify(found.length === 1 ? found[0] : { kind: 'List', items: found }))
      },
    )
    void node
    const reads = new RollingReads(run, kubectl, true)
    const got = await Promise.all(WORKERS.map((w) => reads.node(w)))
    expect(got.map((n) => n?.metadata.name)).toEqual(['wrkr-1', 'wrkr-2', undefined])
    expect(kubeCalls().map((a) => a.slice(0, 5))).toEqual([['get', 'node', 'wrkr-1', 'wrkr-2', 'wrkr-3']])
    fail = true
    const again = await Promise.all(WORKERS.slice(0, 2).map((w) => reads.node(w)))
    expect(again.map((n) => n?.metadata.name)).toEqual(['wrkr-1', 'wrkr-2'])
    expect(
      kubeCalls()
        .slice(1)
        .map((a) => a.slice(0, 3)),
    ).toEqual([
      ['get', 'node', 'wrkr-1'],
      ['get', 'node', 'wrkr-1'],
      ['get', 'node', 'wrkr-2'],
    ])
  })

  it('extensions: each node’s documents from one `get extensions`, a node with none told [] (not read alone)', async () => {
    const ext = (ip: string) => JSON.stringify({ node: ip, spec: { metadata: { name: 'schematic', version: 'abc123' } } })
    const { run, kubectl, node, talosCalls } = setup(() => ok([ext('127.0.0.11'), ext('127.0.0.21')].join('\n')))
    const reads = new RollingReads(run, kubectl, true)
    const got = await Promise.all(WORKERS.slice(0, 2).map((w) => reads.extensions(node(w), () => expect.fail(`${w} read alone`))))
    expect(got).toEqual([[{ name: 'schematic', version: 'abc123', extraInfo: '' }], []])
    expect(talosCalls()).toHaveLength(1)
    expect(talosCalls()[0]?.slice(0, 2)).toEqual(['get', 'extensions'])
  })
})

describe('RollingReads, not batched (one node at a time)', () => {
  it('every read is the node’s own call, as without the batch', async () => {
    const { run, kubectl, node, talosCalls, kubeCalls } = setup(
      (args) => (args[0] === 'service' ? ok(kubelet(nodesArg(args)[0] ?? '')) : ok(status(nodesArg(args)[0] ?? '', 'running'))),
      (args) => ok(JSON.stringify(kubeNode(args[args.indexOf('node') + 1] ?? ''))),
    )
    const reads = new RollingReads(run, kubectl)
    await Promise.all(WORKERS.map((w) => Promise.all([reads.machineStatus(node(w)), reads.kubelet(node(w)), reads.node(w)])))
    expect(talosCalls().map(nodesArg)).toEqual(WORKERS.flatMap((_, i) => [[`127.0.0.2${i + 1}`], [`127.0.0.2${i + 1}`]]))
    expect(kubeCalls().map((a) => a[2])).toEqual(WORKERS)
    let alone = 0
    expect(await reads.version(node('wrkr-1'), () => Promise.resolve(`v1.13.${++alone}`))).toBe('v1.13.1')
  })
})

// The quorum gate's reads (lib/phases/shared/quorum.ts readQuorum, talosctl.etcdStatus) made by the
// real talosctl v1.12.11 against three simulated control planes running real etcd: all healthy
// passes on the second read; a control plane cut off, named only in `etcd status`'s WARNING (exit
// 0), fails Q1 and Q9 (and has no version: its own error); a NOSPACE alarm fails Q3; a stopped etcd, which holds the batched call to
// its deadline, is asked alone and fails Q1 while the others answer. Range 127.252.1.x.
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { execFile } from 'node:child_process'
import { Redactor } from '../../lib/input/redact.js'
import { setHintContext } from '../../lib/cli/hints.js'
import { loadInventory } from '../../lib/input/inventory.js'
import type { Run } from '../../lib/engine/run.js'
import type { StepReporter } from '../../lib/engine/phase.js'
import { NodeError } from '../../lib/core/errors.js'
import { describeFailure, evaluateQuorum, readQuorum, waitForQuorum } from '../../lib/phases/shared/quorum.js'
import { ToolRunner } from '../../lib/tools/exec.js'
import { Talosctl } from '../../lib/tools/talosctl.js'
import { pollUntil } from '../../lib/wait/poll.js'
import { applyInsecure, at, bootstrapWhenReady, sleep, startOn, talosctl, type Started } from './helpers.js'

let c: Started | null = null

/** a hint's command in a clean shell: the simulator's talosctl first on PATH, nothing else from this environment */
function shell(command: string, binDir: string, home: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile('bash', ['-c', command], { env: { PATH: `${binDir}:/usr/bin:/bin`, HOME: home }, timeout: 30_000 }, (err, stdout, stderr) =>
      done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    )
  })
}
afterEach(async () => {
  await c?.stop()
  c = null
})

describe('the quorum gate against real etcd', () => {
  it('passes when healthy; names Q1/Q9 for a control plane cut off, Q3 for an alarm, Q1 for a stopped etcd', async () => {
    c = await startOn('127.252.1', { cps: 3, workers: 0, image: 'disk', vip: false, speed: 20, timings: { boot: 6 } })
    const sim = c.sim
    for (const n of ['cp-1', 'cp-2', 'cp-3']) await applyInsecure(sim, n)
    expect((await bootstrapWhenReady(sim, 'cp-1')).code).toBe(0)
    await sim.until(() => ['cp-1', 'cp-2', 'cp-3'].every((n) => sim.node(n)!.etcdHealthy), 60_000)

    const inventory = loadInventory(sim.clusterDir)
    setHintContext({
      clusterDir: sim.clusterDir,
      talosconfig: inventory.talosconfig,
      kubeconfig: join(c.dir, 'kubeconfig'),
      controlPlanes: inventory.nodes.filter((n) => n.role === 'controlplane'),
    })
    const signal = new AbortController().signal
    const runner = new ToolRunner({
      env: { PATH: process.env.PATH ?? '', HOME: c.dir, TALOSCTL: join(sim.binDir, 'talosctl') },
      callTimeoutMs: 8_000,
      signal,
      dryRun: false,
      redactor: new Redactor(),
    })
    const run = { inventory, talosctl: new Talosctl(runner, inventory), settings: { readyTimeoutMs: 60_000 } } as unknown as Run
    const report = {
      poll: <T>(check: (ms: number) => Promise<{ done: true; value: T } | { done: false; state: string }>, timeoutMs: number) =>
        pollUntil(check, { intervalMs: 500, timeoutMs, signal }),
    } as unknown as StepReporter
    const [cp1, cp2, cp3] = ['cp-1', 'cp-2', 'cp-3'].map((n) => inventory.nodes.find((x) => x.name === n)!)
    const target = { node: cp1! }

    // healthy: the first read cannot tell Q8, the gate passes on a later one
    const first = evaluateQuorum(await readQuorum(run, cp1!, undefined), target)
    expect(first.failures.map((f) => f.rule)).toEqual(['Q8'])
    const detail = await waitForQuorum(report, run, target, 'task upgrade:talos')
    expect(detail).toMatch(/^3\/3 members healthy, leader cp-[123], raft \d+$/)

    // cp-2 cut off: the batched etcd status exits 0 and names it only in its WARNING
    sim.addFault({ node: 'cp-2', kind: 'unreachable' })
    await sleep(1000)
    const leader = first.leader!.raftIndex
    const cut = evaluateQuorum(await readQuorum(run, cp1!, leader), target).failures.map(describeFailure)
    expect(cut).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^Q1 cp-2: etcd status: .*connection refused/),
        // 0 while the other two elect a new leader, when cp-2 led
        expect.stringMatching(/^Q9 cp-1: taking cp-1 down leaves [01] healthy of 3 members, 2 needed$/),
      ]),
    )
    // versions per node from the same kind of batch: cp-2's Tag is no pass, its own error
    const tags = await run.talosctl.versions([cp1!, cp2!, cp3!])
    expect([tags.get(cp1!.address)?.value, tags.get(cp3!.address)?.value]).toEqual(['v1.12.11', 'v1.12.11'])
    expect(tags.get(cp2!.address)?.error?.kind).toBe('unreachable')
    const refused = await waitForQuorum(report, run, target, 'task upgrade:talos', 2_000).catch((err: unknown) => err)
    expect(refused).toBeInstanceOf(NodeError)
    expect(refused).toMatchObject({ kind: 'quorum', message: expect.stringContaining('Q1 cp-2: etcd status:') })
    // the hint's reads run as written, through a control plane that answered (cp-3: cp-2 is cut off, cp-1 the target)
    const reads = [...((refused as NodeError).hint.match(/`talosctl [^`]+`/g) ?? [])].map((cmd) => cmd.slice(1, -1)).slice(0, 3)
    expect(reads.map((cmd) => cmd.replace(/ --talosconfig \S+/, ''))).toEqual([
      `talosctl -e ${cp3!.address} -n ${cp1!.address},${cp2!.address},${cp3!.address} etcd status`,
      `talosctl -e ${cp3!.address} -n ${cp3!.address} etcd members`,
      `talosctl -e ${cp3!.address} -n ${cp3!.address} etcd alarm list`,
    ])
    for (const cmd of reads) {
      const ran = await shell(cmd, sim.binDir, c.dir)
      expect(ran.code, `${cmd}: ${ran.stderr}`).toBe(0)
    }
    expect((await shell(reads[0]!, sim.binDir, c.dir)).stderr).toContain(`* ${cp2!.address}: rpc error`)
    sim.clearFault('cp-2', 'unreachable')
    await sim.until(() => sim.node('cp-2')!.etcdHealthy, 60_000)

    // a NOSPACE alarm on cp-3's member
    sim.addFault({ node: 'cp-3', kind: 'etcd-nospace' })
    await sleep(3000)
    const alarmed = evaluateQuorum(await readQuorum(run, cp1!, 0), target).failures.map(describeFailure)
    expect(alarmed).toContainEqual(expect.stringMatching(/^Q3 cp-3: etcd alarm NOSPACE on member [0-9a-f]{16}$/))
    sim.clearFault('cp-3', 'etcd-nospace')
    expect((await talosctl(sim, ['etcd', 'alarm', 'disarm', ...at(cp1!.address)])).code).toBe(0)

    // cp-3's etcd crashing: the batch is held to its deadline, each control plane is then asked alone
    sim.addFault({ node: 'cp-3', kind: 'etcd-crash' })
    await sim.until(() => !sim.node('cp-3')!.etcdHealthy, 30_000)
    const stopped = await readQuorum(run, cp2!, 0)
    expect(stopped.status.get(cp1!.address)?.value?.memberId).toMatch(/^[0-9a-f]{16}$/)
    expect(stopped.status.get(cp2!.address)?.value?.memberId).toMatch(/^[0-9a-f]{16}$/)
    expect(stopped.status.get(cp3!.address)?.error).toBeInstanceOf(NodeError)
    expect(evaluateQuorum(stopped, { node: cp2! }).failures.map(describeFailure)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^Q1 cp-3: etcd status: /),
        expect.stringMatching(/^Q9 cp-2: taking cp-2 down leaves [01] healthy of 3 members, 2 needed$/),
      ]),
    )
  }, 300_000)
})

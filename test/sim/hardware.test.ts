// A node's memory and its EPHEMERAL volume as the real talosctl reads them (the Memory API, VolumeStatus),
// and `talosctl health`'s memory and disk size checks on them (siderolabs/talos pkg/cluster/check/nodes.go,
// pkg/minimal/limits.go), with Talos's texts. Range 127.254.1.x.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startSimulator, type Simulator } from '../../sim/index.js'
import { loadScenario } from '../../sim/scenario.js'
import { applyInsecure, at, bootstrapWhenReady, talosctl } from './helpers.js'
import { realTool } from '../support/real-tools.js'

const tool = realTool('talosctl')
if (tool.skip) console.warn(`SKIPPED test/sim/hardware.test.ts: ${tool.skip}`)

const R = '127.254.1'
const CP = `${R}.11`,
  W = `${R}.21`

const scenario = {
  cluster: { name: 'test', talosVersion: 'v1.12.11', endpoint: `https://${CP}:6443` },
  speed: 1000,
  timings: { maintenance: 2, boot: 30, etcd: 20, kubelet: 15, cni: 20 },
  nodes: [
    // 6 GB (5722 MiB): EPHEMERAL is what the Talos partitions leave, 3519 MiB, under the 3932 MiB minimum
    { name: 'cp-1', ip: CP, role: 'controlplane' as const, image: 'disk' as const, disks: [{ dev: '/dev/sda', size: '6GB' }] },
    // 1 GiB: MemTotal 924 MiB, over a worker's 874 MiB
    { name: 'wrkr-1', ip: W, role: 'worker' as const, image: 'disk' as const, memory: '1GiB' },
  ],
  faults: [],
}

describe.skipIf(!!tool.skip)("a node's memory and disk, as talosctl and talosctl health read them", () => {
  let sim: Simulator
  let dir: string
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sim-hardware-'))
    sim = await startSimulator({ scenario, dir })
    for (const n of ['cp-1', 'wrkr-1']) expect((await applyInsecure(sim, n)).code).toBe(0)
    expect((await bootstrapWhenReady(sim, 'cp-1', 60_000)).code).toBe(0)
    await sim.until(() => ['cp-1', 'wrkr-1'].every((n) => sim.node(n)?.registered), 60_000)
  }, 120_000)
  afterAll(async () => {
    await sim?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it("talosctl memory: each node's MemTotal, the machine's memory less what the kernel keeps", async () => {
    const r = await talosctl(sim, ['memory', ...at(CP, `${CP},${W}`)])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(new RegExp(`^${CP.replace(/\./g, '\\.')}\\s+3996\\s`, 'm'))
    expect(r.stdout).toMatch(new RegExp(`^${W.replace(/\./g, '\\.')}\\s+924\\s`, 'm'))
  })

  it('get volumestatus: EPHEMERAL, the rest of the install disk', async () => {
    const r = await talosctl(sim, ['get', 'volumestatus', 'EPHEMERAL', ...at(CP, `${CP},${W}`), '-o', 'json'])
    expect(r.code, r.stderr).toBe(0)
    const docs = r.stdout.split(/\n(?=\{)/).map((d) => JSON.parse(d) as { node: string; spec: Record<string, unknown> })
    expect(docs.find((d) => d.node === CP)?.spec).toMatchObject({
      location: '/dev/sda6',
      phase: 'ready',
      size: 3519 * 1024 * 1024,
      prettySize: '3.4 GiB',
    })
    expect(docs.find((d) => d.node === W)?.spec).toMatchObject({ location: '/dev/sda6', prettySize: '91 GiB' })
  })

  it('get platformmetadata: bare metal, so talosctl health checks both', async () => {
    const r = await talosctl(sim, ['get', 'platformmetadata', ...at(CP, W), '-o', 'json'])
    expect(r.code, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout)).toMatchObject({ metadata: { id: 'platformmetadata' }, spec: { platform: 'metal' } })
  })

  it("talosctl health: memory sizes pass, disk sizes fail with Talos's text for the small disk", async () => {
    const h = await talosctl(sim, ['health', ...at(CP), '--wait-timeout', '3s'])
    expect(h.code).not.toBe(0)
    expect(h.stderr).toContain('waiting for all nodes memory sizes: OK')
    expect(h.stderr).toContain(
      `waiting for all nodes disk sizes: 1 error occurred:\n\t* ephemeral partition "/dev/sda6" for node "${CP}" is too small, expected at least 3.8 GiB, actual 3.4 GiB`,
    )
  })

  it("the boot's size checks on the console: a warning or a note, the boot going on", async () => {
    const cp = await talosctl(sim, ['dmesg', ...at(CP)])
    expect(cp.stdout).toContain('task diskSizeCheck (1/1): WARNING: disk size is less than recommended')
    expect(cp.stdout).toContain('task diskSizeCheck (1/1): WARNING: current total disk size is 3519 MiB')
    expect(cp.stdout).toContain('task memorySizeCheck (1/1): memory size is OK')
    const w = await talosctl(sim, ['dmesg', ...at(CP, W)])
    expect(w.stdout).toContain('task memorySizeCheck (1/1): NOTE: recommended memory size is 1898 MiB')
    expect(w.stdout).toContain('task memorySizeCheck (1/1): NOTE: current total memory size is 924 MiB')
  })

  it('a memory that is no size is refused by the scenario', () => {
    expect(() => loadScenario({ ...scenario, nodes: [{ ...scenario.nodes[0], memory: 'lots' }] })).toThrow(
      /nodes\[0\]\.memory: "lots" is not a size like 4GiB/,
    )
  })
})

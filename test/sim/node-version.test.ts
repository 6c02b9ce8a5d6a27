// Issue 29 item 5: each simulated node reports the Talos it runs (scenario nodes[].talosVersion, default
// the cluster's), in `talosctl version` and the Version resource, and behaves as that minor does: a
// v1.13 node answers Version in maintenance (v1.13's maintenance API), a v1.12 node refuses it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startSimulator, type Simulator } from '../../sim/index.js'
import { at, scenarioOn, talosctl } from './helpers.js'

let sim: Simulator
let dir: string
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sim-test-'))
  const scenario = scenarioOn('127.39.231', { cps: 1, workers: 1 })
  scenario.nodes[1] = { ...scenario.nodes[1]!, talosVersion: 'v1.13.9' }
  sim = await startSimulator({ scenario, dir })
})
afterAll(async () => {
  await sim?.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('a Talos version per node', () => {
  it('maintenance: the v1.13 node answers its version, the v1.12 node refuses as v1.12 does', async () => {
    const v13 = await talosctl(sim, ['version', '--insecure', ...at('127.39.231.21')])
    expect(v13.stdout).toMatch(/Tag:\s+v1\.13\.9/)
    const v12 = await talosctl(sim, ['version', '--insecure', ...at('127.39.231.11')])
    expect(v12.stderr).toContain('API is not implemented in maintenance mode')
  })

  it("the Version resource names each node's own", async () => {
    const read = async (ip: string): Promise<string> =>
      (await talosctl(sim, ['get', 'version', '--insecure', '-o', 'jsonpath={.spec.version}', ...at(ip)])).stdout.trim()
    expect(await read('127.39.231.21')).toBe('v1.13.9')
    expect(await read('127.39.231.11')).toBe('v1.12.11')
  })

  it('a version the simulator does not emulate is refused with its field', async () => {
    const scenario = scenarioOn('127.39.232', { cps: 1, workers: 0 })
    scenario.nodes[0] = { ...scenario.nodes[0]!, talosVersion: 'v1.14.0' }
    await expect(startSimulator({ scenario, dir: join(dir, 'bad') })).rejects.toThrow(/nodes\[0\]\.talosVersion|nodes\.0\.talosVersion/)
  })
})

// Issue 29 item 3: with cluster.configs: external a node takes the cluster's PKI from the config applied
// to it. A worker's config carries the Talos CA's certificate only; applied first on a v1.13 node (whose
// apid turns to mTLS at once), its certificate is issued once a control plane's config brings the CA's
// key, and it then answers the operator's own talosconfig. Range 127.39.233.x.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startSimulator, type Simulator } from '../../sim/index.js'
import { scenarioOn, talosctl } from './helpers.js'

let sim: Simulator
let dir: string
let gen: string
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sim-test-'))
  const scenario = scenarioOn('127.39.233', { cps: 1, workers: 1, talosVersion: 'v1.13.9', vip: false })
  scenario.cluster.configs = 'external'
  sim = await startSimulator({ scenario, dir })
  gen = join(dir, 'operator')
  execFileSync(join(sim.binDir, 'talosctl'), [
    'gen',
    'config',
    'home',
    'https://127.39.233.11:6443',
    '-o',
    gen,
    '--with-docs=false',
    '--with-examples=false',
  ])
})
afterAll(async () => {
  await sim?.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('the PKI from the applied configs', () => {
  it("a worker's config first: its apid waits for the CA key, then answers the operator's talosconfig", async () => {
    const apply = (ip: string, file: string) => talosctl(sim, ['apply-config', '--insecure', '-e', ip, '-n', ip, '-f', join(gen, file)])
    expect((await apply('127.39.233.21', 'worker.yaml')).code).toBe(0)
    expect((await apply('127.39.233.11', 'controlplane.yaml')).code).toBe(0)
    await sim.until(() => sim.node('wrkr-1')?.stage === 'running', 30_000)
    const talosconfig = join(gen, 'talosconfig')
    const version = await talosctl(sim, ['version', '-e', '127.39.233.21', '-n', '127.39.233.21'], { talosconfig })
    expect(version.stderr).toBe('')
    expect(version.stdout).toMatch(/Server:[\s\S]*Tag:\s+v1\.13\.9/)
  })
})

// sim/bin/talosctl as the product runs it: a thin client whose commands the
// simulator runs (sim/cli-server.js). They must print what the node processes print
// (sim/<tool>/cli.js), byte for byte, with the same exit codes, stream by stream, and handle
// signals as the tools do.
// Addresses: 127.26.1.0/24 only.
import { describe, it, expect, beforeAll, afterAll } from 'vitest'
import { execFile, spawn } from 'node:child_process'
import { mkdirSync, writeFileSync, readFileSync, existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { startOn, type Started } from './helpers.js'

const CLIENT = resolve(__dirname, '../../sim/bin/talosctl')
const CP = '127.26.1.11'
const WORKER = '127.26.1.21'

interface Result { code: number | null; stdout: string; stderr: string }
let s: Started
let baseEnv: NodeJS.ProcessEnv

function talosctl(args: string[], { server = true, cwd, env = {}, bin = CLIENT }: { server?: boolean; cwd?: string; env?: Record<string, string>; bin?: string } = {}): Promise<Result> {
  return new Promise((done) => {
    const fullEnv = { ...baseEnv, ...env, SIM_CLI_SERVER: server ? String(s.sim.env.SIM_CLI_SERVER) : '' }
    execFile(bin, args, { env: fullEnv, cwd: cwd ?? s.dir }, (err, stdout, stderr) => {
      done({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr })
    })
  })
}

beforeAll(async () => {
  s = await startOn('127.26.1', {
    cps: 1, workers: 1,
    faults: [{ node: 'wrkr-1', on: 'probe', kind: 'timeout' }],
  })
  baseEnv = { PATH: process.env.PATH, HOME: s.dir, TALOSCONFIG: s.sim.env.TALOSCONFIG, SIM_TALOSCTL_VERSION: 'v1.12.11' }
}, 60_000)
afterAll(async () => { await s?.stop() })

describe('sim/bin/talosctl served by the simulator', () => {
  it('the simulator writes its address to the env file, on loopback', () => {
    expect(s.sim.env.SIM_CLI_SERVER).toMatch(/^127\.0\.0\.1:\d+$/)
    expect(readFileSync(join(s.dir, 'env'), 'utf8')).toContain(`export SIM_CLI_SERVER='${s.sim.env.SIM_CLI_SERVER}'`)
  })

  it('prints what the node process prints, stream by stream, with the same exit code', async () => {
    const cases = [
      ['version', '--client'],
      ['get', 'machinestatus', '--insecure', '-n', CP, '-e', CP],
      ['get', 'machinestatus', '--insecure', '-n', CP, '-e', CP, '-o', 'jsonpath={.spec.stage}'],
      ['get', 'machinestatus', '-n', CP, '-e', CP], // maintenance: the CA does not match
      ['validate', '--mode', 'metal', '-c', s.sim.env.TALOSCONFIG], // not a machine config
      ['validate', '--mode', 'metal', '-c', 'missing.yaml'],
      ['--bogus'],
      ['get'],
      ['help', 'get'],
      ['get', 'disks', '--insecure', '-n', CP, '-e', CP, '-o', 'jsonpath={.spec.dev_path}'],
    ]
    for (const args of cases) {
      const [served, own] = await Promise.all([talosctl(args), talosctl(args, { server: false })])
      expect({ args, ...served }).toEqual({ args, ...own })
    }
    const served = await talosctl(['--bogus'])
    expect(served.code).toBe(1)
    expect(served.stderr).toMatch(/^unknown flag: --bogus\n\nUsage:/)
    expect(served.stdout).toBe('')
  })

  it('resolves file arguments against the caller\'s working directory, not the simulator\'s', async () => {
    const cwd = join(s.dir, 'work')
    mkdirSync(cwd, { recursive: true })
    const config = readFileSync(join(s.sim.clusterDir, 'clusterconfig', 'test-cp-1.yaml'))
    writeFileSync(join(cwd, 'cp.yaml'), config)
    const r = await talosctl(['validate', '--mode', 'metal', '-c', 'cp.yaml'], { cwd })
    expect(r).toEqual({ code: 0, stdout: 'cp.yaml is valid for metal mode\n', stderr: '' })
    expect(existsSync(join(process.cwd(), 'cp.yaml'))).toBe(false)
  })

  it('falls back to a node process when the address answers nothing', async () => {
    const r = await talosctl(['version', '--client'], { env: {} , server: false })
    expect(r.code).toBe(0)
    const stale = await new Promise<Result>((done) => {
      execFile(CLIENT, ['version', '--client'], { env: { ...baseEnv, SIM_CLI_SERVER: '127.0.0.1:1' } }, (err, stdout, stderr) => done({ code: err ? 1 : 0, stdout, stderr }))
    })
    expect(stale).toEqual(r)
  })

  it('a first SIGINT cancels the call in flight as talosctl does (message, context canceled, exit 1)', async () => {
    const child = spawn(CLIENT, ['get', 'machinestatus', '--insecure', '-n', WORKER, '-e', WORKER], { env: { ...baseEnv, SIM_CLI_SERVER: String(s.sim.env.SIM_CLI_SERVER) }, cwd: s.dir })
    let stderr = ''
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    const code = new Promise<number | null>((done) => child.on('close', (c) => done(c)))
    // the worker's reads hang (timeout fault): wait until the call is in flight
    await waitFor(() => s.sim.callsLog.some((c) => c.node === 'wrkr-1'))
    child.kill('SIGINT')
    expect(await code).toBe(1)
    expect(stderr).toMatch(/^Signal received, aborting, press Ctrl\+C once again to abort immediately\.\.\.\n/)
    expect(stderr).toContain('context canceled')
  })

  it('a killed client leaves nothing running in the simulator', async () => {
    const child = spawn(CLIENT, ['get', 'machinestatus', '--insecure', '-n', WORKER, '-e', WORKER], { env: { ...baseEnv, SIM_CLI_SERVER: String(s.sim.env.SIM_CLI_SERVER) }, cwd: s.dir })
    const before = s.sim.callsLog.length
    await waitFor(() => s.sim.callsLog.length > before)
    const closed = new Promise((done) => child.on('close', done))
    child.kill('SIGKILL')
    await closed
    // the server's run for that client was cancelled: its connection to the node closes
    await waitFor(async () => (await activeRuns()) === 0)
  })
})

async function activeRuns(): Promise<number> {
  const { inflightRuns } = await import('../../sim/cli-server.js')
  return inflightRuns()
}

async function waitFor(ok: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs
  while (!(await ok())) {
    if (Date.now() > until) throw new Error('timed out waiting')
    await new Promise((r) => setTimeout(r, 20))
  }
}

// The ToolRunner starts tools through zx's bash. Bash started with a socket as stdin (node's pipes
// are socketpairs) and SHLVL unset or 0, as under cron, systemd or some CI runners, sources
// ~/.bashrc as if sshd had started it: an operator's pyenv/nvm set-up there cost every call
// 0.15–8 s. The runner gives tools no stdin, so it never happens.
import { mkdtempSync, writeFileSync, existsSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { Redactor } from '../../lib/input/redact.js'
import { runLocalSync, ToolRunner } from '../../lib/tools/exec.js'

const home = mkdtempSync(join(tmpdir(), 'tb-home-'))
const marker = join(home, 'bashrc-was-read')
writeFileSync(join(home, '.bashrc'), `touch '${marker}'\n`)
afterAll(() => rmSync(home, { recursive: true, force: true }))

/** A runner that runs for real (no dry run), 20 s a call unless `callTimeoutMs` says otherwise. */
const runnerWith = (env: NodeJS.ProcessEnv = process.env, callTimeoutMs = 20_000): ToolRunner =>
  new ToolRunner({ env, callTimeoutMs, signal: new AbortController().signal, dryRun: false, redactor: new Redactor() })

describe('ToolRunner', () => {
  it.each([
    ['SHLVL=0', { SHLVL: '0' }],
    ['SHLVL unset', {}],
  ])('does not make bash read ~/.bashrc (%s)', async (_, shlvl) => {
    const { SHLVL: _ignored, ...env } = process.env
    const runner = runnerWith({ ...env, ...shlvl, HOME: home, KUBECTL: 'echo' }, 10_000)
    const result = await runner.run({ tool: 'kubectl', args: ['hello'] })
    expect(result).toMatchObject({ exitCode: 0, stdout: 'hello\n' })
    expect(existsSync(marker)).toBe(false)
  })

  it('the check above can fail: bash with a node pipe (a socketpair) as stdin does read it', async () => {
    const { spawnSync } = await import('node:child_process')
    const { SHLVL: _ignored, ...env } = process.env
    try {
      spawnSync('bash', ['-c', 'true'], { env: { ...env, HOME: home }, stdio: ['pipe', 'ignore', 'ignore'] })
      expect(existsSync(marker)).toBe(true)
    } finally {
      rmSync(marker, { force: true })
    }
  })
})

describe('ToolRunner: stdout lines and the stall watchdog', () => {
  it('hands each stdout line over as it comes, and a call that keeps printing is never cut', async () => {
    const lines: string[] = []
    const result = await runnerWith().run({
      tool: 'sh',
      args: ['-c', 'for i in 1 2 3 4 5 6; do echo "line $i"; sleep 0.2; done'],
      // each silence is 0.2 s; the whole call longer than the watchdog's 3 s only on a loaded machine
      stallTimeoutMs: 3_000,
      onStdoutLine: (line) => lines.push(line),
    })
    expect(result).toMatchObject({ ok: true, exitCode: 0, stalled: false, timedOut: false })
    expect(lines).toEqual(['line 1', 'line 2', 'line 3', 'line 4', 'line 5', 'line 6'])
  })

  it('cuts a call silent on both streams for stallTimeoutMs: stalled, not timed out, what it printed kept', async () => {
    const lines: string[] = []
    const started = performance.now()
    const result = await runnerWith().run({
      tool: 'sh',
      args: ['-c', 'echo started; echo on-stderr >&2; sleep 30; echo never'],
      // 2 s: at 500 ms a loaded machine (the suite beside it) cut it between its two lines
      stallTimeoutMs: 2_000,
      onStdoutLine: (line) => lines.push(line),
      onStderrLine: (line) => lines.push(line),
    })
    expect(result).toMatchObject({ ok: false, stalled: true, timedOut: false, aborted: false })
    expect(lines).toEqual(['started', 'on-stderr'])
    // cut long before the sleep's end (the deadline is 20 s)
    expect(performance.now() - started).toBeLessThan(15_000)
  })
})

describe('ToolRunner: input to a tool that exits without reading it', () => {
  it('returns the tool exit code and stderr; the broken pipe (EPIPE) does not end the process', async () => {
    const runner = runnerWith()
    // more than a pipe holds: the write is still under way when the tool has gone
    const result = await runner.run({
      tool: 'sh',
      args: ['-c', 'echo "chart not found" >&2; exit 3'],
      input: 'values: x\n'.repeat(1 << 19),
    })
    expect(result).toMatchObject({ ok: false, exitCode: 3, stderr: 'chart not found\n' })
  })

  it('runLocalSync (the config generators): the same, from spawnSync', () => {
    const result = runLocalSync({ ...process.env, TALHELPER: 'sh' }, 'talhelper', ['-c', 'echo "no such patch" >&2; exit 3'], {
      cwd: tmpdir(),
      input: 'values: x\n'.repeat(1 << 19),
    })
    expect(result).toMatchObject({ ok: false, exitCode: 3, stderr: 'no such patch\n' })
  })
})

describe("ToolRunner: Go's collector for short calls", () => {
  const goEnv = 'echo "GOGC=${GOGC-unset} GOMEMLIMIT=${GOMEMLIMIT-unset}"'
  const { GOGC: _gogc, GOMEMLIMIT: _limit, ...base } = process.env

  it('a call that reads and returns runs with the collector off up to 256 MiB', async () => {
    const result = await runnerWith(base).run({ tool: 'sh', args: ['-c', goEnv] })
    expect(result.stdout).toBe('GOGC=off GOMEMLIMIT=256MiB\n')
  })

  it("a streaming call keeps Go's default", async () => {
    const lines: string[] = []
    const result = await runnerWith(base).run({ tool: 'sh', args: ['-c', goEnv], onStdoutLine: (l) => lines.push(l) })
    expect(result.stdout).toBe('GOGC=unset GOMEMLIMIT=unset\n')
  })

  it("the operator's GOGC or GOMEMLIMIT wins: nothing is added", async () => {
    expect((await runnerWith({ ...base, GOGC: '200' }).run({ tool: 'sh', args: ['-c', goEnv] })).stdout).toBe('GOGC=200 GOMEMLIMIT=unset\n')
    expect((await runnerWith({ ...base, GOMEMLIMIT: '1GiB' }).run({ tool: 'sh', args: ['-c', goEnv] })).stdout).toBe(
      'GOGC=unset GOMEMLIMIT=1GiB\n',
    )
  })
})

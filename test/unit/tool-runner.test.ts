// The ToolRunner starts tools through zx's bash. Bash started with a socket as stdin (node's pipes
// are socketpairs) and SHLVL unset or 0, as under cron, systemd or some CI runners, sources
// ~/.bashrc as if sshd had started it: an operator's pyenv/nvm set-up there cost every call
// 0.15–8 s. The runner gives tools no stdin, so it never happens.
import { mkdtempSync, writeFileSync, existsSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { Redactor } from '../../lib/input/redact.js'
import { ToolRunner } from '../../lib/tools/exec.js'

const home = mkdtempSync(join(tmpdir(), 'tb-home-'))
const marker = join(home, 'bashrc-was-read')
writeFileSync(join(home, '.bashrc'), `touch '${marker}'\n`)
afterAll(() => rmSync(home, { recursive: true, force: true }))

describe('ToolRunner', () => {
  it.each([
    ['SHLVL=0', { SHLVL: '0' }],
    ['SHLVL unset', {}],
  ])('does not make bash read ~/.bashrc (%s)', async (_, shlvl) => {
    const { SHLVL: _ignored, ...env } = process.env
    const runner = new ToolRunner({
      env: { ...env, ...shlvl, HOME: home, KUBECTL: 'echo' },
      callTimeoutMs: 10_000,
      signal: new AbortController().signal,
      dryRun: false,
      redactor: new Redactor(),
    })
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

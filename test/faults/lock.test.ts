// Issue 27, item 11: one run at a time. Runs started together over a stale lock end with one holder
// (the takeover is atomic), and a lock held from another PID namespace (a container) or another host
// is never taken for a dead pid's. No simulator: the lock alone, in a scratch cluster directory.
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { acquireLock } from '../../lib/state/lock.js'
import { InputError } from '../../lib/core/errors.js'

const HOLDER = resolve(import.meta.dirname, '../support/lock-holder.ts')
let dir: string
let lock: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'i27-lock-'))
  mkdirSync(join(dir, '.bootstrap'))
  lock = join(dir, '.bootstrap', 'lock')
})
afterEach(() => rmSync(dir, { recursive: true, force: true }))

function holder(at: number, holdMs: number): Promise<string> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ['--import', 'tsx/esm', HOLDER, dir, String(at), String(holdMs)],
      { cwd: resolve(import.meta.dirname, '../..') },
      (_e, out) => done(out.trim()),
    )
  })
}

function refusal(fn: () => unknown): string {
  try {
    fn()
  } catch (err) {
    if (err instanceof InputError) return err.format()
    throw err
  }
  throw new Error('the lock was taken')
}

const bootId = (): string => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()

describe('the stale lock taken over atomically', () => {
  it('six runs started together over a stale lock, six rounds: one holder each round', { timeout: 120_000 }, async () => {
    for (let round = 0; round < 6; round++) {
      writeFileSync(lock, '2147483646\nstart: 5\ncommand: node scripts/talos.ts\n')
      const at = Date.now() + 2500
      const outcomes = await Promise.all(Array.from({ length: 6 }, () => holder(at, 2500)))
      const acquired = outcomes.filter((o) => o === 'acquired')
      expect(acquired.length, `round ${round}: ${outcomes.join(' | ')}`).toBe(1)
      for (const o of outcomes.filter((x) => x !== 'acquired')) expect(o).toMatch(/^refused: .*another run holds the lock \(pid \d+/)
      rmSync(lock, { force: true })
    }
  })
})

describe('the holder identified across PID namespaces and hosts', () => {
  it('records host name, boot id and PID namespace', () => {
    const release = acquireLock(dir, () => undefined)
    const text = readFileSync(lock, 'utf8')
    expect(text).toContain(`\nhost: ${hostname()}\n`)
    expect(text).toContain(`\nboot: ${bootId()}\n`)
    expect(text).toContain(`\npidns: ${readlinkSync('/proc/self/ns/pid')}\n`)
    release()
  })

  it('a lock from another PID namespace (a container) whose pid is no process here: refused, not taken over', () => {
    writeFileSync(lock, `2147483646\nstart: 5\ncommand: node scripts/talos.ts\nhost: ${hostname()}\nboot: ${bootId()}\npidns: pid:[1]\n`)
    expect(refusal(() => acquireLock(dir, () => undefined))).toMatch(
      /another run holds the lock \(pid 2147483646, node scripts\/talos\.ts, in another PID namespace \(pid:\[1\], a container\)\): it cannot be checked from here \(fix: .*rm /,
    )
    expect(readFileSync(lock, 'utf8')).toContain('pidns: pid:[1]')
  })

  it('a lock from another host: refused, naming the host', () => {
    writeFileSync(lock, `2147483646\nstart: 5\ncommand: node scripts/talos.ts\nhost: elsewhere.example\nboot: x\npidns: pid:[1]\n`)
    expect(refusal(() => acquireLock(dir, () => undefined))).toMatch(
      /another run holds the lock \(pid 2147483646 on elsewhere\.example, .*on host elsewhere\.example/,
    )
  })

  it('a lock from before a reboot of this machine (another boot id): taken over with a warning', () => {
    const warnings: string[] = []
    writeFileSync(
      lock,
      `${process.pid === 1 ? 2 : 1}\nstart: 5\ncommand: node scripts/talos.ts\nhost: ${hostname()}\nboot: 00000000-0000-0000-0000-000000000000\npidns: pid:[1]\n`,
    )
    acquireLock(dir, (m) => warnings.push(m))()
    expect(warnings).toEqual([expect.stringMatching(/the machine rebooted since/)])
  })
})

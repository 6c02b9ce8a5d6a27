// What runs leave under .bootstrap: the lock names its holder well enough to tell a reused pid from
// a live run, a journal of the wrong shape is ignored and rewritten, and nothing is written through
// a symbolic link (issue 12, items 14-16).
import { spawn, type ChildProcess } from 'node:child_process'
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { InputError } from '../../lib/core/errors.js'
import { Journal } from '../../lib/state/journal.js'
import { acquireLock } from '../../lib/state/lock.js'
import type { Report } from '../../lib/core/results.js'
import { writeReport } from '../../lib/state/report-store.js'
import { Redactor } from '../../lib/input/redact.js'
import { checkStateFiles, commandLog } from '../../lib/state/state-files.js'
import { ToolRunner } from '../../lib/tools/exec.js'

let dir: string
let state: string
let children: ChildProcess[] = []
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tb-state-'))
  state = join(dir, '.bootstrap')
  mkdirSync(state)
})
afterEach(() => {
  for (const child of children) child.kill()
  children = []
  rmSync(dir, { recursive: true, force: true })
})

function procStart(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? ''
}

async function sleeper(): Promise<number> {
  const child = spawn('sleep', ['60'], { stdio: 'ignore' })
  children.push(child)
  await new Promise((resolve) => child.once('spawn', resolve))
  return child.pid as number
}

function inputError(fn: () => unknown): InputError {
  try {
    fn()
  } catch (err) {
    if (err instanceof InputError) return err
    throw err
  }
  throw new Error('no error thrown')
}

describe('lock', () => {
  it('records pid, start time and command, and releases', () => {
    const release = acquireLock(dir, () => undefined)
    const text = readFileSync(join(state, 'lock'), 'utf8')
    expect(text.split('\n')[0]).toBe(String(process.pid))
    expect(text).toContain(`start: ${procStart(process.pid)}\n`)
    expect(text).toMatch(/^command: .*node/m)
    release()
    expect(existsSync(join(state, 'lock'))).toBe(false)
  })

  it('refuses while the recorded holder still runs, naming it', async () => {
    const pid = await sleeper()
    writeFileSync(join(state, 'lock'), `${pid}\nstart: ${procStart(pid)}\ncommand: node scripts/talos.ts\n`)
    const err = inputError(() => acquireLock(dir, () => undefined))
    expect(err.format()).toBe(
      `${join(state, 'lock')}: another run holds the lock (pid ${pid}, node scripts/talos.ts) (fix: wait for pid ${pid} to finish, or stop it (kill -INT ${pid}))`,
    )
  })

  it('takes over a lock whose pid now belongs to another process (start time differs), with a warning', async () => {
    const pid = await sleeper()
    const warnings: string[] = []
    writeFileSync(join(state, 'lock'), `${pid}\nstart: 1\ncommand: node scripts/talos.ts\n`)
    acquireLock(dir, (m) => warnings.push(m))()
    expect(warnings).toEqual([
      expect.stringMatching(new RegExp(`taking over a stale lock .* left by pid ${pid}.*now belongs to another process \\(sleep 60\\)`)),
    ])
  })

  it('takes over an old pid-only lock held by an unrelated live process (pid reuse, e.g. pid 1)', () => {
    const warnings: string[] = []
    writeFileSync(join(state, 'lock'), '1\n')
    const release = acquireLock(dir, (m) => warnings.push(m))
    expect(warnings).toEqual([expect.stringMatching(/taking over a stale lock .* left by pid 1: pid 1 now belongs to another process/)])
    expect(readFileSync(join(state, 'lock'), 'utf8').split('\n')[0]).toBe(String(process.pid))
    release()
  })

  it('takes over the lock of a process that is gone', () => {
    const warnings: string[] = []
    writeFileSync(join(state, 'lock'), '2147483646\nstart: 5\ncommand: node scripts/apply.ts\n')
    acquireLock(dir, (m) => warnings.push(m))()
    expect(warnings).toEqual([expect.stringMatching(/pid 2147483646 is gone/)])
  })

  it('a dangling lock symlink is bad input naming the path, not a crash', () => {
    symlinkSync(join(dir, 'nowhere'), join(state, 'lock'))
    const err = inputError(() => acquireLock(dir, () => undefined))
    expect(err.format()).toMatch(
      new RegExp(`^${join(state, 'lock')}: is a symbolic link: refusing to write through it \\(fix: remove the link`),
    )
    expect(existsSync(join(dir, 'nowhere'))).toBe(false)
  })
})

describe('journal', () => {
  const phase = {
    name: 'apply' as const,
    ok: true,
    durationMs: 1,
    steps: [],
    nodes: [{ name: 'cp-1', ip: '127.0.0.1', role: 'controlplane' as const, status: 'ok' as const, attempts: 1, durationMs: 1 }],
  }

  for (const [label, text] of [
    ['a node entry that is a number', '{"version":1,"nodes":{"cp-1":5}}'],
    ['nodes as a list', '{"version":1,"nodes":[]}'],
    ['a phase entry without a status', '{"version":1,"nodes":{"cp-1":{"apply":{"at":3}}}}'],
    ['not JSON', '{"version":1,'],
  ] as const) {
    it(`${label}: warns, ignores it, and rewrites it`, () => {
      writeFileSync(join(state, 'journal.json'), text)
      const warnings: string[] = []
      const journal = Journal.load(dir, (m) => warnings.push(m))
      expect(warnings).toEqual([
        expect.stringMatching(/journal\.json: ignoring a journal of the wrong shape \(.+\); it is rewritten by this run/),
      ])
      expect(journal.done('cp-1', 'apply')).toBe(false)
      journal.record(phase)
      journal.save()
      const again = Journal.load(dir, (m) => warnings.push(m))
      expect(warnings).toHaveLength(1)
      expect(again.done('cp-1', 'apply')).toBe(true)
    })
  }
})

describe('nothing is written through a symbolic link', () => {
  const report: Report = {
    version: 1,
    command: 'apply',
    ok: true,
    startedAt: '2026-01-01T00:00:00.000Z',
    finishedAt: '2026-01-01T00:00:01.000Z',
    settings: {},
    phases: [],
  }

  it('a linked last-run.json is refused, its target untouched', () => {
    const target = join(dir, 'precious')
    writeFileSync(target, 'keep me\n')
    symlinkSync(target, join(state, 'last-run.json'))
    const err = inputError(() => writeReport(dir, report, new Redactor()))
    expect(err.format()).toContain(`${join(state, 'last-run.json')}: is a symbolic link`)
    expect(readFileSync(target, 'utf8')).toBe('keep me\n')
  })

  it('a linked runs/ directory is refused', () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'tb-elsewhere-'))
    symlinkSync(elsewhere, join(state, 'runs'))
    try {
      expect(inputError(() => writeReport(dir, report, new Redactor())).format()).toContain(`${join(state, 'runs')}: is a symbolic link`)
      expect(readdirSync(elsewhere)).toEqual([])
    } finally {
      rmSync(elsewhere, { recursive: true, force: true })
    }
  })

  it('a forged command in a report never leaves runs/', () => {
    const file = writeReport(dir, { ...report, command: 'x/../../../../escape' }, new Redactor())
    expect(dirname(file)).toBe(join(state, 'runs'))
    expect(readdirSync(join(state, 'runs'))).toEqual([basename(file)])
    expect(existsSync(join(dir, 'escape.json'))).toBe(false)
  })

  it('the command log does not append through a link', async () => {
    const target = join(dir, 'precious')
    writeFileSync(target, 'keep me\n')
    symlinkSync(target, join(state, 'commands.log'))
    const tools = new ToolRunner({
      env: process.env,
      callTimeoutMs: 5000,
      signal: new AbortController().signal,
      dryRun: false,
      redactor: new Redactor(),
      log: commandLog(dir, join(state, 'commands.log')),
    })
    await tools.run({ tool: 'kubectl', args: ['version', '--client'], local: true })
    expect(readFileSync(target, 'utf8')).toBe('keep me\n')
    expect(lstatSync(join(state, 'commands.log')).isSymbolicLink()).toBe(true)
    expect(readlinkSync(join(state, 'commands.log'))).toBe(target)
  })

  it('a directory where a state file belongs, or a file where runs/ belongs, is bad input naming it', () => {
    mkdirSync(join(state, 'journal.json'))
    const files = ['lock', 'commands.log', 'journal.json', 'last-run.json'].map((f) => join(state, f))
    expect(inputError(() => checkStateFiles(dir, files, [join(state, 'runs')])).format()).toMatch(
      new RegExp(`^${join(state, 'journal.json')}: is not a regular file \\(fix: move it away`),
    )
    rmSync(join(state, 'journal.json'), { recursive: true })
    writeFileSync(join(state, 'runs'), '')
    expect(inputError(() => checkStateFiles(dir, files, [join(state, 'runs')])).format()).toMatch(/runs: is not a directory/)
  })

  it('a lock that is a directory is bad input, not a crash', () => {
    mkdirSync(join(state, 'lock'))
    expect(inputError(() => acquireLock(dir, () => undefined)).format()).toMatch(
      /lock: cannot read the lock \(EISDIR\) \(fix: remove it if no run is active/,
    )
  })
})

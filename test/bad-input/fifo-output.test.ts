// Issue 27, items 13 and 14: a FIFO in place of an input is refused at once (no hang: a blocked read
// would leave only SIGKILL to stop the tool), and terminal control sequences from outside (a report's
// node name, a node's or a tool's text) reach the terminal only made visible. Range 127.216.1.x.
import { execFileSync } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { beforeEach, describe, expect, it } from 'vitest'
import type { TaskResult } from '../e2e/harness.js'
import { BadInputBed, expectBadInput, useBed } from './helpers.js'

const bedOf = useBed('127.216.1')
let bed: BadInputBed
beforeEach(() => {
  bed = bedOf()
})

/** The task, killed (its whole process group) if it has not ended within `ms`. */
async function within(name: string, ms: number, vars: Record<string, string> = {}): Promise<TaskResult & { hung: boolean }> {
  const { child, done } = bed.cluster.spawnTask(name, vars)
  let hung = false
  const timer = setTimeout(() => {
    hung = true
    if (child.pid) process.kill(-child.pid, 'SIGKILL')
  }, ms)
  const result = await done
  clearTimeout(timer)
  return { ...result, hung }
}

function fifo(path: string): void {
  rmSync(path, { force: true })
  execFileSync('mkfifo', [path])
}

describe('item 13: a FIFO in place of an input file', () => {
  for (const [what, relative] of [
    ['a machine config', 'clusterconfig/e2e-wrkr-1.yaml'],
    ['the talosconfig', 'clusterconfig/talosconfig'],
    ['bootstrap.yaml', 'bootstrap.yaml'],
  ] as const) {
    it(`${what}: exit 2 at once, naming it`, { timeout: 60_000 }, async () => {
      const path = bed.path(...relative.split('/'))
      fifo(path)
      const result = await within('bootstrap:preflight', 20_000)
      expect(result.hung, 'the tool hung on the FIFO').toBe(false)
      expectBadInput(result, bed, { file: path, what: /FIFO/, fix: /./ })
    })
  }
})

describe('item 14: control characters from outside are shown, never sent to the terminal', () => {
  it("a report's node name and message with escape sequences (bootstrap:report)", { timeout: 60_000 }, async () => {
    const first = await bed.cluster.task('bootstrap:preflight')
    expect(first.code, first.stderr).toBe(0)
    const file = bed.path('.bootstrap', 'last-run.json')
    const report = JSON.parse(readFileSync(file, 'utf8')) as { phases: Array<{ nodes: Array<{ name: string }> }> }
    const node = report.phases[0]?.nodes[0]
    if (!node) throw new Error('no node in the report')
    node.name = 'cp-1\u001b]0;owned\u0007\u001b[2J\r'
    writeFileSync(file, JSON.stringify(report))
    const result = await bed.cluster.task('bootstrap:report')
    expect(result.code, result.stderr).toBe(0)
    const printed = result.stdout + result.stderr
    expect(printed).not.toMatch(/[\u0007\u001b\r]/)
    expect(printed).toContain('cp-1\\x1b]0;owned\\x07\\x1b[2J\\x0d')
  })

  it("a tool's error text with escape sequences (talosctl validate)", { timeout: 60_000 }, async () => {
    const real = execFileSync('sh', ['-c', 'command -v talosctl'], { env: bed.cluster.env(), encoding: 'utf8' }).trim()
    const fake = join(bed.cluster.dir, 'talosctl-escapes')
    writeFileSync(
      fake,
      `#!/bin/sh\nif [ "$1" = validate ]; then printf 'bad \\033]0;owned\\007 config\\033[2J\\r\\n' >&2; exit 1; fi\nexec ${real} "$@"\n`,
      { mode: 0o755 },
    )
    const result = await bed.cluster.task('bootstrap:preflight', {}, [], { TALOSCTL: fake })
    expect(result.code, result.stderr).toBe(2)
    expect(result.stderr).toContain('bad \\x1b]0;owned\\x07 config\\x1b[2J')
    expect(result.stderr + result.stdout).not.toMatch(/[\u0007\u001b\r]/)
  })
})

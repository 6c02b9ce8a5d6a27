// The Node the project runs on (README, Node.js): the suite itself on one `engines` accepts, and every
// task that starts node on the project's (.tools/node, from `task node`) when it installed one.
import { execFileSync, spawnSync } from 'node:child_process'
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join, resolve } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { goBin } from '../support/go-bin.js'

const ROOT = resolve(import.meta.dirname, '../..')

/** `^M.m.p || ^M.m.p`: the only form package.json's engines uses */
function accepts(engines: string, version: string): boolean {
  const [major = 0, minor = 0, patch = 0] = version.split('.').map(Number)
  return engines.split('||').some((range) => {
    const m = /^\s*\^(\d+)\.(\d+)\.(\d+)\s*$/.exec(range)
    if (!m) throw new Error(`package.json engines: "${range}" is not a ^M.m.p range`)
    const [want, wantMinor, wantPatch] = [Number(m[1]), Number(m[2]), Number(m[3])]
    return major === want && (minor > wantMinor || (minor === wantMinor && patch >= wantPatch))
  })
}

describe('the Node the project runs on', () => {
  const engines = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node

  it('engines takes Node 24 and 26 (the LTS lines task node keeps or installs), not 20, 22 or a current odd release', () => {
    expect(['20.20.2', '22.22.2', '23.11.0', '25.9.0', '27.0.0'].filter((v) => accepts(engines, v))).toEqual([])
    expect(['24.0.0', '24.21.0', '26.0.0', '26.12.1'].every((v) => accepts(engines, v))).toBe(true)
  })

  it('runs this suite on a Node that engines accepts (CI: the project node from task node)', () => {
    expect(accepts(engines, process.versions.node), `node ${process.version} (${process.execPath})`).toBe(true)
  })
})

describe('Taskfile: every task that starts node', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tb-taskfile-node-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  const fake = (path: string, name: string): void => {
    mkdirSync(join(path, '..'), { recursive: true })
    writeFileSync(path, `#!/bin/sh\necho "${name} $*"\n`)
    chmodSync(path, 0o755)
  }
  copyFileSync(join(ROOT, 'Taskfile.yaml'), join(dir, 'Taskfile.yaml'))
  fake(join(dir, 'path-bin', 'node'), 'path-node')
  const project = join(dir, '.tools', 'node', 'bin', 'node')
  // go-task where this run finds it: GOPATH/bin, or elsewhere on PATH when it was there before (the README installs it only then)
  const taskDir = dirname(
    execFileSync('sh', ['-c', 'command -v task'], {
      encoding: 'utf8',
      env: { ...process.env, PATH: [goBin(), process.env.PATH ?? ''].join(delimiter) },
    }).trim(),
  )
  const env = { HOME: dir, PATH: [join(dir, 'path-bin'), taskDir, '/usr/local/bin', '/usr/bin', '/bin'].join(delimiter) }
  const task = (...args: string[]): string => {
    const r = spawnSync('task', ['-d', dir, '-x', ...args], { env, encoding: 'utf8', timeout: 30_000 })
    return `${r.stdout}${r.stderr}`
  }
  const tasks: [string[], string][] = [
    [['bootstrap:preflight'], '--disable-warning=ExperimentalWarning scripts/preflight.ts'],
    [['bootstrap:talos'], '--disable-warning=ExperimentalWarning scripts/talos.ts'],
    [['bootstrap:node', 'NODE=n-1'], '--disable-warning=ExperimentalWarning scripts/node.ts'],
    [['bootstrap:report'], '--disable-warning=ExperimentalWarning scripts/report.ts'],
    [['sim:up'], 'sim/cli.js up'],
    [['sim:down'], 'sim/cli.js down'],
    [['sim:calls'], 'sim/cli.js calls'],
  ]

  it.each(tasks)('%s runs on .tools/node when the project installed one', (args, command) => {
    fake(project, 'project-node')
    const out = task(...args)
    expect(out).toContain(`project-node ${command}`)
    expect(out).not.toContain('path-node')
  })

  it('npm (task test) runs on it too', () => {
    fake(project, 'project-node')
    const npm = execFileSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim()
    writeFileSync(join(dir, 'path-bin', 'npm'), `#!/bin/sh\nexec '${npm}' "$@"\n`)
    chmodSync(join(dir, 'path-bin', 'npm'), 0o755)
    const out = task('test')
    // npm's own script starts with `#!/usr/bin/env node`: the project's node runs it, with `test`
    expect(out).toMatch(/project-node \S*npm\S* test/)
    expect(out).not.toContain('path-node')
  })

  it('runs on the node on PATH when the project installed none', () => {
    rmSync(join(dir, '.tools'), { recursive: true, force: true })
    const out = task('sim:calls')
    expect(out).toContain('path-node sim/cli.js calls')
  })
})

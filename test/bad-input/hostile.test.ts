// Issue 12, hostile input (items 10, 13, 14, 15): an unknown or worker BOOTSTRAP_NODE, YAML alias
// bombs, a read-only cluster directory, a kubeconfig path that is a directory, durations a timer cannot
// hold, links planted under .bootstrap. Each: exit 2, `<path>:<line>: <what> (fix: …)` (or the flag or
// variable that said it), no stack trace, no call to any node. Range 127.181.1.x.
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { beforeEach, describe, expect, it } from 'vitest'
import { run } from '../e2e/harness.js'
import { BadInputBed, expectBadInput, lineOf, useBed } from './helpers.js'

const bedOf = useBed('127.181.1')
let bed: BadInputBed
beforeEach(() => {
  bed = bedOf()
})

/** `a: &a [x x x …]`, each next key nine aliases of the one before: a few lines, billions of values. */
function aliasBomb(key: string): string {
  const lines = [`${key}: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]`]
  for (let i = 1; i < 10; i++)
    lines.push(
      `l${i}: &l${i} [${Array(9)
        .fill(`*l${i - 1}`)
        .join(', ')}]`,
    )
  return `${lines.join('\n')}\n`
}

describe('bootstrap node: exit 2 before any config is applied', () => {
  it('BOOTSTRAP_NODE naming a worker (bootstrap:talos)', async () => {
    const result = await bed.cluster.task('bootstrap:talos', {}, [], { BOOTSTRAP_NODE: 'wrkr-1' })
    expectBadInput(result, bed, {
      what: /^environment BOOTSTRAP_NODE: bootstrapNode "wrkr-1" is a worker: etcd is bootstrapped on a control plane$/,
      fix: /name a control plane \(cp-1\)/,
    })
  })

  it('BOOTSTRAP_NODE naming no node (bootstrap:apply)', async () => {
    const result = await bed.cluster.task('bootstrap:apply', {}, [], { BOOTSTRAP_NODE: 'cp-9' })
    expectBadInput(result, bed, {
      what: /^environment BOOTSTRAP_NODE: bootstrapNode "cp-9" is no node of the inventory$/,
      fix: /name a control plane \(cp-1\)/,
    })
  })

  it('bootstrapNode in bootstrap.yaml naming a worker by address: file and line', async () => {
    const file = bed.path('bootstrap.yaml')
    writeFileSync(file, `${readFileSync(file, 'utf8')}bootstrapNode: 127.181.1.22\n`)
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'bootstrapNode:'),
      what: /^bootstrapNode "127\.181\.1\.22" is a worker/,
      fix: /name a control plane/,
    })
  })

  it('--bootstrap-node naming no node', async () => {
    const result = await bed.cluster.task('bootstrap:etcd', {}, ['--bootstrap-node', 'nope'])
    expectBadInput(result, bed, {
      what: /^flag --bootstrap-node: bootstrapNode "nope" is no node of the inventory$/,
      fix: /name a control plane/,
    })
  })
})

describe('hostile files and values: exit 2 with the message, no stack trace', () => {
  it('a YAML alias bomb in bootstrap.yaml', async () => {
    const file = bed.write('bootstrap.yaml', aliasBomb('readinessGates'))
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, { file, line: 2, what: /^YAML aliases expand too far/, fix: /write the values out/ })
  })

  it('a YAML alias bomb in talconfig.yaml', async () => {
    const file = bed.path('talconfig.yaml')
    writeFileSync(file, `${readFileSync(file, 'utf8')}${aliasBomb('x-bomb')}`)
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, { file, line: lineOf(file, 'l1: &l1'), what: /^YAML aliases expand too far/, fix: /write the values out/ })
  })

  it('a YAML alias bomb in a machine config', async () => {
    const file = bed.path('clusterconfig', readdirSync(bed.path('clusterconfig')).find((f) => f.endsWith('-wrkr-1.yaml')) ?? '')
    writeFileSync(file, `${aliasBomb('x-bomb')}${readFileSync(file, 'utf8')}`)
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file,
      what: /^(YAML aliases expand too far|machine config of wrkr-1 is invalid: )/,
      fix: /write the values out|correct the config/,
    })
  })

  it('--call-timeout 1000h: longer than a timer holds', async () => {
    const result = await bed.cluster.task('bootstrap:preflight', {}, ['--call-timeout', '1000h'])
    expectBadInput(result, bed, {
      what: /^flag --call-timeout: callTimeout "1000h" is longer than a timer can hold \(at most 596h\)$/,
      fix: /--call-timeout 5s/,
    })
  })

  it('verifyTimeout: 900h in bootstrap.yaml: file and line', async () => {
    const file = bed.edit('bootstrap.yaml', /^verifyTimeout: .*$/m, 'verifyTimeout: 900h')
    const result = await bed.cluster.task('bootstrap:verify')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'verifyTimeout: 900h'),
      what: /^verifyTimeout "900h" is longer than a timer can hold/,
      fix: /verifyTimeout: 5s/,
    })
  })

  it('a kubeconfig path that is a directory (bootstrap:wait-ready)', async () => {
    mkdirSync(bed.path('kubeconfig'))
    const result = await bed.cluster.task('bootstrap:wait-ready')
    expectBadInput(result, bed, {
      file: bed.path('kubeconfig'),
      what: /^is a directory, not a kubeconfig file/,
      fix: /move the directory away/,
    })
  })

  it('a read-only cluster directory (bootstrap:apply)', async () => {
    // a read-only bind mount in a mount namespace of its own: root ignores file modes
    const args = ['-x', 'bootstrap:apply', `CLUSTER_DIR=${bed.dir}`]
    const result = await run(
      'unshare',
      ['-m', 'sh', '-c', 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"', bed.dir, 'task', ...args],
      bed.cluster.env(),
    )
    expectBadInput(result, bed, {
      file: join(bed.dir, '.bootstrap'),
      what: /^cannot write here \(EROFS\)$/,
      fix: /make the cluster directory writable/,
    })
  })
})

describe('links under .bootstrap: refused with exit 2 naming the path, the target untouched', () => {
  for (const name of ['commands.log', 'last-run.json', 'journal.json']) {
    it(`a symlinked ${name}`, async () => {
      const target = join(bed.cluster.dir, `precious-${name}`)
      writeFileSync(target, 'keep me\n')
      mkdirSync(bed.path('.bootstrap'), { recursive: true })
      symlinkSync(target, bed.path('.bootstrap', name))
      const result = await bed.cluster.task('bootstrap:preflight')
      expectBadInput(result, bed, {
        file: bed.path('.bootstrap', name),
        what: /^is a symbolic link: refusing to write through it$/,
        fix: /remove the link/,
      })
      expect(readFileSync(target, 'utf8')).toBe('keep me\n')
    })
  }

  it('a dangling lock symlink', async () => {
    mkdirSync(bed.path('.bootstrap'), { recursive: true })
    symlinkSync(join(bed.cluster.dir, 'nowhere'), bed.path('.bootstrap', 'lock'))
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, { file: bed.path('.bootstrap', 'lock'), what: /^is a symbolic link/, fix: /remove the link/ })
  })

  it('bootstrap:report: a symlinked runs/<name>.svg is refused; a forged command writes nowhere outside runs/', async () => {
    const runs = bed.path('.bootstrap', 'runs')
    mkdirSync(runs, { recursive: true })
    const report = {
      version: 1,
      command: 'apply',
      ok: true,
      startedAt: '2026-01-01T00:00:00.000Z',
      finishedAt: '2026-01-01T00:00:01.000Z',
      settings: {},
      phases: [],
    }
    writeFileSync(bed.path('.bootstrap', 'last-run.json'), JSON.stringify(report))
    const target = join(bed.cluster.dir, 'precious.svg')
    writeFileSync(target, 'keep me\n')
    symlinkSync(target, join(runs, '2026-01-01T00-00-00-000Z-apply.svg'))
    const linked = await bed.cluster.task('bootstrap:report')
    expectBadInput(linked, bed, {
      file: join(runs, '2026-01-01T00-00-00-000Z-apply.svg'),
      what: /^is a symbolic link/,
      fix: /remove the link/,
    })
    expect(readFileSync(target, 'utf8')).toBe('keep me\n')

    writeFileSync(bed.path('.bootstrap', 'last-run.json'), JSON.stringify({ ...report, command: 'x/../../../../forged' }))
    const before = readdirSync(bed.cluster.dir).sort()
    const forged = await bed.cluster.task('bootstrap:report')
    expect(forged.code, forged.stderr).toBe(0)
    const svg = /^svg: (.+)$/m.exec(forged.stdout)?.[1] ?? ''
    expect(svg.startsWith(`${runs}/`) && !svg.slice(runs.length + 1).includes('/'), svg).toBe(true)
    expect(readdirSync(bed.cluster.dir).sort()).toEqual(before)
  })
})

// The answers of reusable local calls (talosctl validate, client versions) kept in the state directory
// (lib/state/tool-answers.ts, ToolRunner's `reusable`): a success is given back without starting the
// tool again while the binary and the input files are the same; anything else runs the tool.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeEach, describe, expect, it } from 'vitest'
import { Redactor } from '../../lib/input/redact.js'
import { toolCacheDir } from '../../lib/state/paths.js'
import { checkStateFiles } from '../../lib/state/state-files.js'
import { TOOL_ANSWERS_FILE, ToolAnswers } from '../../lib/state/tool-answers.js'
import { ToolRunner } from '../../lib/tools/exec.js'

const root = mkdtempSync(join(tmpdir(), 'tb-answers-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

const SECRET = 'c2VjcmV0LXRva2VuLW5vdC1zaG9ydA-plain-secret-value'

/** A talosctl that counts its runs, fails a config saying BAD, and prints the config it validated (the worst case for secrets). */
function fakeTalosctl(dir: string, marker = 'v1'): string {
  const path = join(dir, 'talosctl')
  writeFileSync(
    path,
    `#!/bin/sh\n# ${marker}\necho run >> '${join(dir, 'runs')}'\nif [ "$1" = version ]; then echo "Client:"; echo "	Tag:         ${marker}"; exit 0; fi\nif grep -q BAD "$5"; then echo "1 error occurred: bad" >&2; exit 1; fi\necho "$5 is valid for metal mode"\ncat "$5"\n`,
  )
  chmodSync(path, 0o755)
  return path
}

function setUp() {
  const clusterDir = mkdtempSync(join(root, 'cluster-'))
  const bin = join(clusterDir, 'bin')
  mkdirSync(bin)
  const talosctl = fakeTalosctl(bin)
  const file = join(toolCacheDir(clusterDir), TOOL_ANSWERS_FILE)
  checkStateFiles(clusterDir, [file], [toolCacheDir(clusterDir)])
  const redactor = new Redactor()
  redactor.add(SECRET)
  const runner = (): ToolRunner =>
    new ToolRunner({
      env: { PATH: `${bin}:${process.env.PATH ?? ''}`, TALOSCTL: talosctl },
      callTimeoutMs: 20_000,
      signal: new AbortController().signal,
      dryRun: false,
      redactor,
      // a new ToolAnswers per runner: each stands for a new run reading the file
      answers: new ToolAnswers(clusterDir, file),
    })
  const config = join(clusterDir, 'cp-1.yaml')
  writeFileSync(config, `machine:\n  token: ${SECRET}\n`)
  const runs = (): number => readFileSync(join(bin, 'runs'), 'utf8').split('\n').filter(Boolean).length
  const validate = (r: ToolRunner) => {
    const args = ['validate', '--mode', 'metal', '-c', config]
    return r.run({ tool: 'talosctl', args, local: true, reusable: { key: args, files: [config] } })
  }
  return { clusterDir, bin, file, config, runner, runs, validate }
}

describe('reusable tool answers', () => {
  let t: ReturnType<typeof setUp>
  beforeEach(() => {
    t = setUp()
  })

  it('a second run gets the first one’s success without starting the tool; the file holds no secret', async () => {
    const first = await t.validate(t.runner())
    expect(first).toMatchObject({ ok: true, exitCode: 0 })
    const again = await t.validate(t.runner())
    expect(again).toMatchObject({ ok: true, exitCode: 0, durationMs: 0 })
    expect(again.stdout).toContain('is valid for metal mode')
    expect(t.runs()).toBe(1)
    const kept = readFileSync(t.file, 'utf8')
    expect(kept).not.toContain(SECRET)
    expect(kept).toContain('is valid for metal mode')
  })

  it('a changed input file runs the tool again', async () => {
    await t.validate(t.runner())
    writeFileSync(t.config, `machine:\n  token: ${SECRET}\n  env: {A: b}\n`)
    await t.validate(t.runner())
    expect(t.runs()).toBe(2)
  })

  it('a replaced binary (a new talosctl at the same path) is asked again', async () => {
    const r = t.runner()
    await r.run({ tool: 'talosctl', args: ['version', '--client'], local: true, reusable: { key: ['version', '--client'] } })
    rmSync(join(t.bin, 'talosctl'))
    fakeTalosctl(t.bin, 'v2')
    const again = await t
      .runner()
      .run({ tool: 'talosctl', args: ['version', '--client'], local: true, reusable: { key: ['version', '--client'] } })
    expect(again.stdout).toContain('v2')
    expect(t.runs()).toBe(2)
  })

  it('a failure is never kept: the tool is asked every time', async () => {
    writeFileSync(t.config, 'machine: BAD\n')
    expect(await t.validate(t.runner())).toMatchObject({ ok: false, exitCode: 1 })
    expect(await t.validate(t.runner())).toMatchObject({ ok: false, exitCode: 1 })
    expect(t.runs()).toBe(2)
  })

  it('a corrupt or foreign file is ignored and rewritten', async () => {
    writeFileSync(t.file, '{"version": 1, "answers": [not json')
    expect(await t.validate(t.runner())).toMatchObject({ ok: true })
    expect(JSON.parse(readFileSync(t.file, 'utf8'))).toMatchObject({ version: 1 })
    await t.validate(t.runner())
    expect(t.runs()).toBe(1)
  })

  it('without a place to keep answers (a dry run, the status command) every call runs', async () => {
    const bare = new ToolRunner({
      env: { PATH: process.env.PATH ?? '', TALOSCTL: join(t.bin, 'talosctl') },
      callTimeoutMs: 20_000,
      signal: new AbortController().signal,
      dryRun: false,
      redactor: new Redactor(),
    })
    await t.validate(bare)
    await t.validate(bare)
    expect(t.runs()).toBe(2)
  })
})

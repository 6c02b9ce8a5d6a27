// Issue 27, items 8, 9, 10: no secret of the inputs in any output. The values of a machine config's
// secret-bearing sections (a misspelt key too, which `talosctl validate` echoes) whatever their
// length; a config path that resolves to a key file (in the cluster directory, or by a link out of
// it); credentials in a URL's user info. Checked in stdout, stderr and every file under .bootstrap.
// Range 127.215.1.x.
import { existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeEach, describe, expect, it } from 'vitest'
import type { TaskResult } from '../e2e/harness.js'
import { BadInputBed, useBed } from '../bad-input/helpers.js'
import { filesUnder } from './secrets.js'

const bedOf = useBed('127.215.1')
let bed: BadInputBed
beforeEach(() => {
  bed = bedOf()
})

/** stdout, stderr and every file the run left under .bootstrap */
function everything(result: TaskResult): string {
  const state = bed.path('.bootstrap')
  const files = existsSync(state) ? filesUnder(state).map((f) => `${f.path}:\n${f.text}`) : []
  return [result.stdout, result.stderr, ...files].join('\n')
}

function expectNone(result: TaskResult, secrets: string[]): void {
  const text = everything(result)
  for (const secret of secrets) expect(text, `"${secret}" printed:\n${text.slice(-4000)}`).not.toContain(secret)
}

/** The lines of a key file that are its secret (not comments, not the PEM armour). */
function keyLines(relative: string): string[] {
  return bed
    .read(relative)
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length >= 8 && !l.startsWith('#') && !l.startsWith('-----'))
}

describe('item 8: every value of a secret-bearing section, whatever its key and length', () => {
  it('misspelt registry credentials and a LUKS passphrase that talosctl validate echoes: exit 2, no value printed', async () => {
    bed.edit(
      'clusterconfig/e2e-wrkr-1.yaml',
      /\n(\s+)install:\n/,
      [
        '',
        '$1registries:',
        '$1    config:',
        '$1        127.0.0.1:5000:',
        '$1            auth:',
        '$1                username: bob',
        '$1                pasword: hunter2',
        '$1                identityTokn: tk9',
        '$1                auht: YjpwCg',
        '$1systemDiskEncryption:',
        '$1    state:',
        '$1        provider: luks2',
        '$1        keys:',
        '$1            - slot: 0',
        '$1              static:',
        '$1                  passphrse: pp12',
        '$1install:',
        '',
      ].join('\n'),
    )
    const result = await bed.cluster.task('bootstrap:preflight')
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(2)
    expect(result.stderr).toMatch(/unknown keys found during decoding: .*auth\.pasword/)
    expectNone(result, ['hunter2', 'tk9', 'YjpwCg', 'pp12'])
  })
})

describe('item 9: a config path that resolves to a key file', () => {
  it('filenameTmpl: ../flux-deploy-key: the key is not printed in the input error', async () => {
    bed.edit('talconfig.yaml', /(\n\s+- hostname: wrkr-2\n)(\s+)/, '$1$2filenameTmpl: ../flux-deploy-key\n$2')
    const result = await bed.cluster.task('bootstrap:talos')
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(2)
    expectNone(result, keyLines('flux-deploy-key'))
  })

  it('a link to the age key inside the cluster directory: not printed', async () => {
    bed.write(
      'age.agekey',
      '# created: 2026-11-26T00:00:00Z\n# public key: age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\nAGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX\n',
    )
    bed.write('bootstrap.yaml', bed.read('bootstrap.yaml').replace(/^flux:\n/m, 'flux:\n  sopsAgeKeyFile: age.agekey\n'))
    const config = bed.path('clusterconfig', 'e2e-wrkr-2.yaml')
    rmSync(config)
    symlinkSync(bed.path('age.agekey'), config)
    const result = await bed.cluster.task('bootstrap:apply')
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(2)
    expectNone(result, keyLines('age.agekey'))
  })

  it('a link out of the cluster directory: refused before it is read', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'i27-outside-'))
    try {
      const key = join(outside, 'keys.txt')
      writeFileSync(
        key,
        '# an age key the operator keeps elsewhere\nAGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ\n',
      )
      const config = bed.path('clusterconfig', 'e2e-wrkr-2.yaml')
      rmSync(config)
      symlinkSync(key, config)
      const result = await bed.cluster.task('bootstrap:talos')
      expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(2)
      expect(result.stderr).toContain(`${config}: the machine config of wrkr-2 is outside the cluster directory`)
      expectNone(result, ['AGE-SECRET-KEY-1QQQQ'])
    } finally {
      rmSync(outside, { recursive: true, force: true })
    }
  })

  it('a Flux secret manifest outside the cluster directory: refused', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'i27-outside-'))
    try {
      const secret = join(outside, 'token.yaml')
      writeFileSync(secret, 'apiVersion: v1\nkind: Secret\nmetadata: {name: t, namespace: flux-system}\nstringData: {token: abc}\n')
      bed.write('bootstrap.yaml', bed.read('bootstrap.yaml').replace(/^flux:\n/m, `flux:\n  secrets:\n    - ${secret}\n`))
      const result = await bed.cluster.task('bootstrap:preflight')
      expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(2)
      expect(result.stderr).toContain(`${secret}: this input file is outside the cluster directory`)
    } finally {
      rmSync(outside, { recursive: true, force: true })
    }
  })
})

describe('item 10: credentials in a URL', () => {
  it('cni.repo with user info: the password is in no plan, line or report (DRY_RUN)', async () => {
    bed.edit('bootstrap.yaml', /repo: https:\/\/127\.0\.0\.1:/, 'repo: https://bob:pw9x@127.0.0.1:')
    const result = await bed.cluster.task('bootstrap:talos', { DRY_RUN: 'true' })
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0)
    expect(result.stdout).toMatch(/helm upgrade --install/)
    expectNone(result, ['pw9x'])
  })

  it('flux.git.url with an https token as user: not printed (DRY_RUN bootstrap:all)', async () => {
    bed.edit('bootstrap.yaml', /url: ssh:\/\/git@/, 'url: https://ghp_tok3n@')
    const result = await bed.cluster.task('bootstrap:all', { DRY_RUN: 'true' })
    expectNone(result, ['ghp_tok3n'])
  })
})

// Issue 29 item 2: the talhelper generate step with the real talhelper v3.1.17 (task tools): a new
// secrets bundle (`talhelper gensecret`) only when there is none, encrypted with sops on its way to
// disk when a .sops.yaml is found upward, then `talhelper genconfig`; what counts as an input.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { generateConfigs, staleness } from '../../lib/input/generate.js'
import { goBin } from '../support/go-bin.js'
import { inputErrors } from './fixtures.js'

const TALHELPER = resolve('.tools/bin/talhelper')
const GO_BIN = goBin()
const have = existsSync(TALHELPER) && existsSync(join(GO_BIN, 'sops')) && existsSync(join(GO_BIN, 'age-keygen'))

const TALCONFIG = [
  'clusterName: home',
  'talosVersion: v1.12.11',
  'kubernetesVersion: v1.35.0',
  'endpoint: https://127.233.1.10:6443',
  'patches:',
  '  - "@./patches/all.yaml"',
  'nodes:',
  '  - hostname: k8s-0',
  '    ipAddress: 127.233.1.11',
  '    controlPlane: true',
  '    installDisk: /dev/sda',
  '    talosImageURL: ghcr.io/siderolabs/installer',
  '',
].join('\n')

/** <repo>/talos with talconfig.yaml and its patch; `sopsRule` writes <repo>/.sops.yaml with that path_regex */
function repository(sopsRule?: string): { repo: string; dir: string; env: NodeJS.ProcessEnv } {
  const repo = mkdtempSync(join(tmpdir(), 'tb-gen-'))
  const dir = join(repo, 'talos')
  mkdirSync(join(dir, 'patches'), { recursive: true })
  writeFileSync(join(dir, 'talconfig.yaml'), TALCONFIG)
  writeFileSync(join(dir, 'patches', 'all.yaml'), 'machine:\n  features:\n    kubePrism:\n      enabled: true\n')
  const env: NodeJS.ProcessEnv = { PATH: [GO_BIN, process.env.PATH ?? ''].join(delimiter), HOME: repo, TALHELPER }
  if (sopsRule !== undefined) {
    const key = join(repo, 'age.key')
    execFileSync(join(GO_BIN, 'age-keygen'), ['-o', key], { stdio: 'ignore' })
    const recipient = /public key: (\S+)/.exec(readFileSync(key, 'utf8'))?.[1] as string
    writeFileSync(join(repo, '.sops.yaml'), `creation_rules:\n  - path_regex: ${sopsRule}\n    age: ${recipient}\n`)
    env.SOPS_AGE_KEY_FILE = key
  }
  return { repo, dir, env }
}
function generate(dir: string, env: NodeJS.ProcessEnv): string[] {
  const said: string[] = []
  generateConfigs(dir, {}, { generate: true, dryRun: false, env, say: (l) => said.push(l), warn: (l) => said.push(`warning: ${l}`) })
  return said
}

describe.skipIf(!have)('talhelper gensecret and genconfig', () => {
  it('no secrets file and no .sops.yaml: talsecret.yaml (0600) from gensecret, a warning, then genconfig', () => {
    const { dir, env } = repository()
    const said = generate(dir, env)
    expect(said[0]).toBe(
      `generate: clusterconfig/ lacks home-k8s-0.yaml, talosconfig: running talhelper gensecret > talsecret.yaml, then talhelper genconfig -c talconfig.yaml -o clusterconfig in ${dir}`,
    )
    expect(said[1]).toMatch(/^warning: .*talsecret\.yaml holds the cluster's secrets in plain text/)
    expect(statSync(join(dir, 'talsecret.yaml')).mode & 0o777).toBe(0o600)
    const secrets = parse(readFileSync(join(dir, 'talsecret.yaml'), 'utf8')) as { trustdinfo: { token: string } }
    expect(readFileSync(join(dir, 'clusterconfig', 'home-k8s-0.yaml'), 'utf8')).toContain(`token: ${secrets.trustdinfo.token}`)
    // a second run: nothing to do, the secrets kept
    expect(generate(dir, env)).toEqual([])
    expect((parse(readFileSync(join(dir, 'talsecret.yaml'), 'utf8')) as typeof secrets).trustdinfo.token).toBe(secrets.trustdinfo.token)
  })

  it('.sops.yaml above the cluster directory: talsecret.sops.yaml encrypted before it reaches the disk, genconfig decrypts it', () => {
    const { dir, env } = repository('talos/.*\\.sops\\.ya?ml')
    const said = generate(dir, env)
    expect(said).toContain(
      `generate: talhelper gensecret wrote talsecret.sops.yaml (encrypted with sops under ${join(dir, '..', '.sops.yaml')})`,
    )
    const stored = readFileSync(join(dir, 'talsecret.sops.yaml'), 'utf8')
    expect(stored).toMatch(/^sops:$/m)
    expect(stored).toMatch(/token: ENC\[AES256_GCM,/)
    expect(readdirSync(dir).sort()).toEqual(['clusterconfig', 'patches', 'talconfig.yaml', 'talsecret.sops.yaml'])
    const plain = parse(execFileSync(join(GO_BIN, 'sops'), ['-d', join(dir, 'talsecret.sops.yaml')], { env, encoding: 'utf8' })) as {
      trustdinfo: { token: string }
    }
    expect(readFileSync(join(dir, 'clusterconfig', 'home-k8s-0.yaml'), 'utf8')).toContain(`token: ${plain.trustdinfo.token}`)
  })

  it('another run writes the secrets file while ours is generated: theirs is kept, never replaced', () => {
    const { dir, env } = repository()
    // a talhelper whose gensecret lets "another run" write talsecret.yaml first (the race two operators can run into)
    const wrapper = join(dir, '..', 'talhelper-racing')
    writeFileSync(
      wrapper,
      `#!/bin/sh\nif [ "$1" = gensecret ]; then ${TALHELPER} gensecret > talsecret.yaml; fi\nexec ${TALHELPER} "$@"\n`,
      { mode: 0o755 },
    )
    const said = generate(dir, { ...env, TALHELPER: wrapper })
    const theirs = readFileSync(join(dir, 'talsecret.yaml'), 'utf8')
    expect(said).toContain('generate: talsecret.yaml appeared meanwhile (another run wrote it): it is kept, and ours dropped')
    const token = (parse(theirs) as { trustdinfo: { token: string } }).trustdinfo.token
    expect(readFileSync(join(dir, 'clusterconfig', 'home-k8s-0.yaml'), 'utf8')).toContain(`token: ${token}`)
    expect(readdirSync(dir).filter((f) => f.includes('partial'))).toEqual([])
  })

  it('a .sops.yaml with no rule for the secrets file: exit 2 naming it, no secrets file written', () => {
    const { repo, dir, env } = repository('^kubernetes/.*\\.sops\\.ya?ml$')
    const [msg] = inputErrors(() => generate(dir, env))
    expect(msg).toMatch(
      new RegExp(
        `^${join(repo, '.sops.yaml').replace(/[.]/g, '\\.')}: sops could not encrypt the new talsecret\\.sops\\.yaml: .*no matching creation rules found.* \\(fix: .*nothing was written\\)$`,
      ),
    )
    expect(readdirSync(dir).sort()).toEqual(['patches', 'talconfig.yaml'])
  })
})

describe('what makes a generated output stale', () => {
  it('an input newer than the oldest output, or an output missing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tb-stale-'))
    const [a, b, input, other] = ['a.yaml', 'b.yaml', 'talconfig.yaml', 'unrelated.yaml'].map((f) => join(dir, f)) as [
      string,
      string,
      string,
      string,
    ]
    for (const f of [input, other, a, b]) writeFileSync(f, '')
    const t = Date.now() / 1000
    utimesSync(input, t - 100, t - 100)
    utimesSync(a, t - 50, t - 50)
    utimesSync(b, t, t)
    utimesSync(other, t + 100, t + 100)
    expect(staleness({ outputs: [a, b], inputs: [input] })).toEqual({ missing: [], newer: [] })
    utimesSync(input, t - 10, t - 10)
    expect(staleness({ outputs: [a, b], inputs: [input] })).toEqual({ missing: [], newer: [input] })
    expect(staleness({ outputs: [a, join(dir, 'c.yaml')], inputs: [] })).toEqual({ missing: [join(dir, 'c.yaml')], newer: [] })
  })

  it('inputs written in the same pass as the configs (a git clone, a copy: any order) are not newer', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tb-stale-'))
    const [config, input] = ['a.yaml', 'talconfig.yaml'].map((f) => join(dir, f)) as [string, string]
    for (const f of [config, input]) writeFileSync(f, '')
    const t = Date.now() / 1000
    utimesSync(config, t, t)
    utimesSync(input, t + 1, t + 1)
    expect(staleness({ outputs: [config], inputs: [input] })).toEqual({ missing: [], newer: [] })
    utimesSync(input, t + 3, t + 3)
    expect(staleness({ outputs: [config], inputs: [input] })).toEqual({ missing: [], newer: [input] })
  })

  it('a patch talconfig.yaml does not reference is no input; one it references is', () => {
    const { dir } = repository()
    mkdirSync(join(dir, 'clusterconfig'))
    for (const f of ['home-k8s-0.yaml', 'talosconfig']) writeFileSync(join(dir, 'clusterconfig', f), '')
    const later = Date.now() / 1000 + 50
    writeFileSync(join(dir, 'patches', 'unused.yaml'), '')
    utimesSync(join(dir, 'patches', 'unused.yaml'), later, later)
    const options = { generate: false, dryRun: false, env: {}, say: () => undefined, warn: () => undefined }
    expect(() => generateConfigs(dir, {}, options)).not.toThrow()
    utimesSync(join(dir, 'patches', 'all.yaml'), later, later)
    expect(inputErrors(() => generateConfigs(dir, {}, options))[0]).toMatch(/patches\/all\.yaml changed after clusterconfig\/ was written/)
  })
})

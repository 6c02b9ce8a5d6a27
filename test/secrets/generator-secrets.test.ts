// Issue 29 item 2: the operator's generator runs before the configs are read; the secrets bundle it
// reads (talsecret.yaml) is learned first, so a generator that fails quoting a key or a token (here a
// talhelper stand-in that echoes the bundle's trustd token and OS CA key in its error) prints neither.
// No node is touched. Range 127.233.2.x.
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { run } from '../e2e/harness.js'
import { goBin } from '../support/go-bin.js'

const TALOSCTL = resolve('.tools/bin/talosctl')

describe('a generator failing with the secrets in its message', () => {
  it('exit 2 with its cause, the token and the key redacted', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'tb-gensec-')), 'talos')
    mkdirSync(dir)
    execFileSync(TALOSCTL, ['gen', 'secrets', '-o', join(dir, 'talsecret.yaml')])
    const bundle = parse(execFileSync('cat', [join(dir, 'talsecret.yaml')], { encoding: 'utf8' })) as {
      trustdinfo: { token: string }
      certs: { os: { key: string } }
    }
    writeFileSync(
      join(dir, 'talconfig.yaml'),
      'clusterName: home\nendpoint: https://127.233.2.10:6443\nnodes:\n  - hostname: cp-1\n    ipAddress: 127.233.2.11\n    controlPlane: true\n',
    )
    const talhelper = join(dir, '..', 'talhelper')
    writeFileSync(
      talhelper,
      `#!/bin/sh\necho "There are issues with your Talhelper config file:"\necho 'field: "trustdinfo.token"'\necho "  * ${bundle.trustdinfo.token} is wrong (key ${bundle.certs.os.key})"\necho "2026/11/27 10:00:00 failed to parse config file: please fix issues with your config file" >&2\nexit 1\n`,
      { mode: 0o755 },
    )
    const env = { ...process.env, PATH: [goBin(), process.env.PATH ?? ''].join(':'), TALHELPER: talhelper, NO_COLOR: '1' }
    const result = await run('task', ['-x', 'bootstrap:preflight', `CLUSTER_DIR=${dir}`], env)
    expect(result.code).toBe(2)
    expect(result.stderr).toContain(
      `${join(dir, 'talconfig.yaml')}: talhelper genconfig failed: failed to parse config file: please fix issues with your config file; trustdinfo.token: <redacted> is wrong (key <redacted>)`,
    )
    expect(result.stdout + result.stderr).not.toContain(bundle.trustdinfo.token)
    expect(result.stdout + result.stderr).not.toContain(bundle.certs.os.key)
  })
})

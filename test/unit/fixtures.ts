import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { InputError, InputErrors } from '../../lib/core/errors.js'

const pem = (label: string): string =>
  Buffer.from(`-----BEGIN ${label}-----\nMIIBfakefakefakefake${label.replace(/\s/g, '')}\n-----END ${label}-----\n`).toString('base64')

export function talosconfigText(name = 'demo'): string {
  return `context: ${name}\ncontexts:\n    ${name}:\n        endpoints: []\n        ca: ${pem('CERTIFICATE')}\n        crt: ${pem('CERTIFICATE')}\n        key: ${pem('ED25519 PRIVATE KEY')}\n`
}

export interface FixtureNode {
  hostname: string
  ip: string
  cp: boolean
}

/** A talhelper-style cluster directory; `talconfig` replaces the generated talconfig.yaml text. */
export function clusterDir(
  nodes: FixtureNode[],
  options: { talconfig?: string; skipConfigFor?: string[]; settings?: string } = {},
): string {
  const dir = mkdtempSync(join(tmpdir(), 'tb-unit-'))
  mkdirSync(join(dir, 'clusterconfig'))
  const lines = ['clusterName: demo', 'endpoint: https://127.0.0.10:6443', 'nodes:']
  for (const n of nodes) {
    lines.push(`  - hostname: ${n.hostname}`, `    ipAddress: ${n.ip}`, `    controlPlane: ${n.cp}`, '    installDisk: /dev/sda')
    if (!options.skipConfigFor?.includes(n.hostname)) {
      writeFileSync(
        join(dir, 'clusterconfig', `demo-${n.hostname}.yaml`),
        `version: v1alpha1\nmachine:\n  type: ${n.cp ? 'controlplane' : 'worker'}\n  token: abcdefgh12345678\n  install:\n    disk: /dev/sda\n`,
      )
    }
  }
  writeFileSync(join(dir, 'talconfig.yaml'), options.talconfig ?? `${lines.join('\n')}\n`)
  writeFileSync(join(dir, 'clusterconfig', 'talosconfig'), talosconfigText())
  if (options.settings !== undefined) writeFileSync(join(dir, 'bootstrap.yaml'), options.settings)
  return dir
}

export const threeNodes: FixtureNode[] = [
  { hostname: 'cp-1', ip: '127.0.0.11', cp: true },
  { hostname: 'wrkr-1', ip: '127.0.0.21', cp: false },
  { hostname: 'wrkr-2', ip: '127.0.0.22', cp: false },
]

/** The formatted lines of the input error(s) `fn` throws (it must throw one). */
export function inputErrors(fn: () => unknown): string[] {
  try {
    fn()
  } catch (err) {
    if (err instanceof InputError) return [err.format()]
    if (err instanceof InputErrors) return err.errors.map((e) => e.format())
    throw err
  }
  throw new Error('expected an input error')
}

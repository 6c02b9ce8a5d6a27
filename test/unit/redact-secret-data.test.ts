// Issue 12 item 17: every value of every Secret's data/stringData, in every YAML document of a
// flux.secrets file, is masked whatever its length (a 7-character password), also after a `--- `
// separator with a trailing space.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Redactor } from '../../lib/input/redact.js'

let dir: string | undefined
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true })
})

function redactorFor(text: string): Redactor {
  dir = mkdtempSync(join(tmpdir(), 'tb-redact-'))
  const file = join(dir, 'secrets.yaml')
  writeFileSync(file, text)
  const redactor = new Redactor()
  redactor.addFromYamlFile(file)
  return redactor
}

const secret = (name: string, body: string): string =>
  `apiVersion: v1\nkind: Secret\nmetadata:\n  name: ${name}\n  namespace: flux-system\n${body}`

describe('Secret values from flux.secrets files', () => {
  it('masks a short stringData value (7 characters) and its base64 form', () => {
    const r = redactorFor(secret('a', 'stringData:\n  password: hunter2\n  user: bob\n'))
    expect(r.redact('Invalid value: "hunter2": must be base64')).toBe('Invalid value: "<redacted>": must be base64')
    expect(r.redact(`data[password]: ${Buffer.from('hunter2').toString('base64')}`)).toBe('data[password]: <redacted>')
    expect(r.redact('login bob failed')).toBe('login <redacted> failed')
    // inside another word it is not the value
    expect(r.redact('bobsleigh hunter22')).toBe('bobsleigh hunter22')
  })

  it('masks a short data value, encoded and decoded', () => {
    const r = redactorFor(secret('b', `data:\n  pin: ${Buffer.from('4711').toString('base64')}\n`))
    expect(r.redact(`pin=4711 raw=${Buffer.from('4711').toString('base64')}`)).toBe('pin=<redacted> raw=<redacted>')
  })

  for (const separator of ['--- ', '---  # the second secret', '---\t']) {
    it(`masks the values of a second document after ${JSON.stringify(separator)}`, () => {
      const r = redactorFor(
        `${secret('first', 'stringData:\n  token: first-token-value\n')}${separator}\n${secret('second', 'stringData:\n  token: s3cr3t!\n  key: another-long-secret-value\n')}`,
      )
      expect(r.redact('first-token-value s3cr3t! another-long-secret-value')).toBe('<redacted> <redacted> <redacted>')
    })
  }
})

describe('a report with a short secret', () => {
  it('stays valid JSON: numbers and booleans are never masked, strings are', async () => {
    const { writeReport } = await import('../../lib/state/report-store.js')
    const { mkdirSync, readFileSync } = await import('node:fs')
    const r = redactorFor(secret('c', 'stringData:\n  pin: "1"\n  word: "true"\n'))
    const cluster = dir as string
    mkdirSync(join(cluster, '.bootstrap'), { recursive: true })
    writeReport(
      cluster,
      {
        version: 1,
        command: 'apply',
        ok: true,
        startedAt: '2026-01-01T00:00:00.000Z',
        finishedAt: '2026-01-01T00:00:01.000Z',
        settings: { retries: 1 },
        phases: [
          {
            name: 'apply',
            ok: true,
            durationMs: 1,
            steps: [],
            nodes: [
              {
                name: 'cp-1',
                ip: '127.0.0.1',
                role: 'controlplane',
                status: 'failed',
                attempts: 1,
                durationMs: 1,
                error: { kind: 'unknown', message: 'pin 1 is true', hint: 'h' },
              },
            ],
          },
        ],
      },
      r,
    )
    const report = JSON.parse(readFileSync(join(cluster, '.bootstrap', 'last-run.json'), 'utf8'))
    expect(report.ok).toBe(true)
    expect(report.settings.retries).toBe(1)
    expect(report.phases[0].nodes[0].error.message).toBe('pin <redacted> is <redacted>')
  })

  it('masks the Secrets of a List, and each long line of a multi-line value', () => {
    const r = redactorFor(
      'apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: Secret\n    metadata: { name: l }\n    stringData:\n      conf: |\n        user=admin\n        password=correct-horse-battery\n',
    )
    expect(r.redact('line: password=correct-horse-battery; {}')).toBe('line: <redacted>; {}')
  })
})

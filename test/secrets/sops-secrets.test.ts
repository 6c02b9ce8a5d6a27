// Issue 27, item 10: the values of a SOPS-encrypted flux.secrets file, once decrypted in memory, are
// masked like the plaintext ones: a short value (1-7 characters) where it stands as a word of its own,
// and each line of a multi-line value, which Kubernetes quotes with its newlines escaped. Flux carries
// such a quote into a Kustomization's failure message, which the tool prints and reports. Checked in
// stdout, stderr and every file under .bootstrap. Range 127.237.5.x.
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { goBin } from '../support/go-bin.js'
import { E2eCluster } from '../e2e/harness.js'
import { describeLeaks, filesUnder, findLeaks } from './secrets.js'

const GO_BIN = goBin()
let cluster: E2eCluster | undefined
afterAll(async () => {
  await cluster?.stop()
})

/** An age identity file and its recipient (age-keygen). */
function ageKey(): { file: string; recipient: string } {
  const file = execFileSync(join(GO_BIN, 'age-keygen'), [], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
  return { file, recipient: /public key: (age1\S+)/.exec(file)?.[1] ?? '' }
}

describe('SOPS-decrypted Secret values in a failure message', () => {
  it('a 5-character password and every line of a multi-line value: masked in every output', { timeout: 180_000 }, async () => {
    const short = `p${randomBytes(2).toString('hex')}`
    const lines = [
      `user=u${randomBytes(3).toString('hex')}`,
      `pass=${randomBytes(4).toString('hex')}`,
      `host=db-${randomBytes(2).toString('hex')}`,
    ]
    const multi = `${lines.join('\n')}\n`
    // Kubernetes quotes an invalid value, newlines escaped; Flux puts that into the Kustomization's Ready message
    const quoted = JSON.stringify(multi).slice(1, -1)
    cluster = await E2eCluster.start('127.237.5', {
      cps: 1,
      workers: 1,
      speed: 1200,
      faults: [
        {
          kind: 'flux',
          message: `Secret/flux-system/db is invalid: data[password]: Invalid value: "${short}"; data[config]: Invalid value: "${quoted}"`,
        },
      ],
    })
    const dir = cluster.clusterDir
    const key = ageKey()
    writeFileSync(join(dir, 'age.agekey'), key.file, { mode: 0o600 })
    const clear = join(cluster.dir, 'db.clear.yaml')
    writeFileSync(
      clear,
      `apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: flux-system\ntype: Opaque\nstringData:\n  password: ${short}\n  config: |\n${lines.map((l) => `    ${l}`).join('\n')}\n`,
    )
    const encrypted = execFileSync(
      join(GO_BIN, 'sops'),
      [
        '--encrypt',
        '--age',
        key.recipient,
        '--encrypted-regex',
        '^(data|stringData)$',
        '--input-type',
        'yaml',
        '--output-type',
        'yaml',
        clear,
      ],
      { encoding: 'utf8' },
    )
    writeFileSync(clear, '')
    expect(encrypted).not.toContain(short)
    writeFileSync(join(dir, 'db.sops.yaml'), encrypted)
    const settings = join(dir, 'bootstrap.yaml')
    writeFileSync(
      settings,
      readFileSync(settings, 'utf8').replace(/^flux:\n/m, 'flux:\n  sopsAgeKeyFile: age.agekey\n  secrets:\n    - db.sops.yaml\n'),
    )

    // the flux fault's failing Kustomization ends flux's wait at once; the budget covers Flux's
    // controllers starting on the real control plane (the controller-manager, scheduler and kubelets
    // make their pods: seconds on a loaded machine), as test/secrets/audit.test.ts's does
    const all = await cluster.task('bootstrap:all', {}, ['--retries', '1', '--flux-timeout', '30s'])
    expect(all.code, `${all.stdout}\n${all.stderr}`).toBe(1)
    // the failure message went through the outputs, with the values masked
    expect(all.stderr).toContain('data[password]: Invalid value: "<redacted>"')
    expect(all.stderr).toContain('data[config]: Invalid value: "<redacted>\\n<redacted>\\n<redacted>\\n"')
    const outputs = [
      { where: 'stdout', text: all.stdout },
      { where: 'stderr', text: all.stderr },
      ...filesUnder(join(dir, '.bootstrap')).map((f) => ({ where: f.path, text: f.text })),
    ]
    const secrets = [
      { origin: 'db.sops.yaml stringData.password (5 characters)', needles: [`"${short}"`, ` ${short} `] },
      ...lines.map((line, i) => ({ origin: `db.sops.yaml stringData.config line ${i + 1}`, needles: [line] })),
    ]
    const leaks = findLeaks(outputs, secrets)
    expect(leaks, `secrets found in outputs:\n${describeLeaks(leaks, dir)}`).toEqual([])
  })
})

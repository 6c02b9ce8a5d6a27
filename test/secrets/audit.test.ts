// Issue "Every failure seen in the field, rehearsed", item 3: the secrets audit. The secret values are read
// from the inputs the simulator wrote (machine configs, talosconfig, Flux deploy key); after a dry run, a
// full `task -x bootstrap:all`, failing runs (faults, bad input), no form of any of them may appear in
// stdout, stderr or any file under CLUSTER_DIR/.bootstrap (reports, commands.log, journal).
import { randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { E2eCluster, type TaskResult } from '../e2e/harness.js'
import { clusterSecrets, describeLeaks, filesUnder, findLeaks, needlesOf, yamlSecrets, type Secret } from './secrets.js'

const clusters: E2eCluster[] = []
afterAll(async () => {
  await Promise.all(clusters.map((c) => c.stop()))
})

async function start(range: string, shape: Parameters<typeof E2eCluster.start>[1]): Promise<{ cluster: E2eCluster; secrets: Secret[] }> {
  const cluster = await E2eCluster.start(range, shape)
  clusters.push(cluster)
  const secrets = clusterSecrets(cluster.clusterDir)
  return { cluster, secrets }
}

type Output = { where: string; text: string }

function outputsOf(label: string, result: TaskResult): Output[] {
  return [
    { where: `${label} stdout`, text: result.stdout },
    { where: `${label} stderr`, text: result.stderr },
  ]
}

/** Every file the runs left under .bootstrap, plus what the runs printed. */
function everyOutput(cluster: E2eCluster, printed: Output[]): Output[] {
  return [...printed, ...filesUnder(join(cluster.clusterDir, '.bootstrap')).map((f) => ({ where: f.path, text: f.text }))]
}

function expectNoLeak(cluster: E2eCluster, outputs: Output[], secrets: Secret[]): void {
  const leaks = findLeaks(outputs, secrets)
  expect(leaks, `secrets found in outputs:\n${describeLeaks(leaks, cluster.clusterDir)}`).toEqual([])
}

/** A Flux git token as a Secret manifest that bootstrap:flux applies before Flux (flux.secrets). */
function writeFluxToken(cluster: E2eCluster, token: string): void {
  writeFileSync(
    join(cluster.clusterDir, 'flux-git-token.yaml'),
    `apiVersion: v1\nkind: Secret\nmetadata:\n  name: git-token\n  namespace: flux-system\ntype: Opaque\nstringData:\n  token: ${token}\n`,
  )
  const settings = join(cluster.clusterDir, 'bootstrap.yaml')
  writeFileSync(settings, readFileSync(settings, 'utf8').replace(/^flux:\n/m, 'flux:\n  secrets:\n    - flux-git-token.yaml\n'))
}

describe('secrets audit: no secret value reaches stdout, stderr, the logs or the reports', () => {
  it('the audit finds the secrets where they are (the inputs), so a leak could not slip through', async () => {
    const { cluster, secrets } = await start('127.71.1', { cps: 1, workers: 1, speed: 1200 })
    const origins = secrets.map((s) => s.origin)
    // every kind the brief names: machine config tokens, secrets and CA keys; talosconfig key/crt; the Flux key
    expect(origins).toEqual(
      expect.arrayContaining([
        'clusterconfig/e2e-cp-1.yaml machine.token',
        'clusterconfig/e2e-cp-1.yaml machine.ca.key',
        'clusterconfig/e2e-cp-1.yaml cluster.secret',
        'clusterconfig/e2e-cp-1.yaml cluster.token',
        'clusterconfig/e2e-cp-1.yaml cluster.ca.key',
        'clusterconfig/e2e-cp-1.yaml cluster.etcd.ca.key',
        'clusterconfig/e2e-cp-1.yaml cluster.serviceAccount.key',
        'clusterconfig/e2e-cp-1.yaml cluster.secretboxEncryptionSecret',
        'clusterconfig/e2e-wrkr-1.yaml machine.token',
        'clusterconfig/talosconfig contexts.e2e.key',
        'clusterconfig/talosconfig contexts.e2e.crt',
        'flux-deploy-key',
      ]),
    )
    const cp = join(cluster.clusterDir, 'clusterconfig', 'e2e-cp-1.yaml')
    expect(findLeaks([{ where: cp, text: readFileSync(cp, 'utf8') }], secrets).length).toBeGreaterThan(5)
    // a PEM body line, printed alone and decoded, is still found
    const caKey = secrets.find((s) => s.origin.endsWith('cluster.ca.key'))
    const bodyLine = caKey?.needles.find((n) => !/^[A-Za-z0-9+/=]{100,}$/.test(n)) ?? 'missing'
    expect(findLeaks([{ where: 'sample', text: `error: ${bodyLine}\n` }], secrets).map((l) => l.origin)).toContain(
      'clusterconfig/e2e-cp-1.yaml cluster.ca.key',
    )
    expect(needlesOf('abcdef.0123456789abcdef')).toContain(Buffer.from('abcdef.0123456789abcdef').toString('base64').slice(0, 28))
  })

  it('after a dry run, the full bootstrap:all and a bad input: nothing leaks', { timeout: 180_000 }, async () => {
    const { cluster, secrets } = await start('127.71.2', { cps: 1, workers: 1, speed: 1200 })
    // a Flux token, applied as a secret before Flux (flux.secrets)
    const token = `ghp_${randomBytes(18).toString('hex')}`
    writeFluxToken(cluster, token)
    secrets.push({ origin: 'flux-git-token.yaml stringData.token', needles: needlesOf(token) })
    const printed: Output[] = []

    const dry = await cluster.task('bootstrap:all', { DRY_RUN: 'true' })
    expect(dry.code, dry.stderr).toBe(0)
    printed.push(...outputsOf('dry run', dry))

    const all = await cluster.task('bootstrap:all')
    expect(all.code, `${all.stdout}\n${all.stderr}`).toBe(0)
    printed.push(...outputsOf('bootstrap:all', all))

    // the kubeconfig the run wrote holds a client key: it must not reach the outputs either
    const kubeconfigSecrets = yamlSecrets(join(cluster.clusterDir, 'kubeconfig'), 'kubeconfig (written by the run)').filter((s) =>
      /client-key-data|token/.test(s.origin),
    )

    // bad input on a line holding a secret: the error names the line, never the value
    const worker = join(cluster.clusterDir, 'clusterconfig', 'e2e-wrkr-1.yaml')
    const original = readFileSync(worker, 'utf8')
    writeFileSync(worker, original.replace(/^( {4}token: )(\S+)$/m, '$1$2: oops'))
    const bad = await cluster.task('bootstrap:apply')
    writeFileSync(worker, original)
    expect(bad.code, bad.stderr).toBe(2)
    printed.push(...outputsOf('bad input', bad))

    expect((await cluster.kubectl(['get', 'secret', '-n', 'flux-system', 'git-token', '-o', 'name'])).stdout.trim()).toBe(
      'secret/git-token',
    )
    expectNoLeak(cluster, everyOutput(cluster, printed), [...secrets, ...kubeconfigSecrets])
  })

  it(
    'after failing runs (a rejected config, a node trusting another CA, a failing Flux kustomization): nothing leaks',
    { timeout: 180_000 },
    async () => {
      // Kubernetes quotes an invalid value in its error ("Invalid value: …"), and Flux carries that into the
      // Kustomization's Ready message: a Flux token from flux.secrets can come back in a failure message
      const token = `ghp_${randomBytes(18).toString('hex')}`
      const { cluster, secrets } = await start('127.71.3', {
        cps: 1,
        workers: 2,
        speed: 1200,
        faults: [
          { node: 'wrkr-1', on: 'apply', kind: 'config-rejected' },
          { node: 'wrkr-2', on: 'any', kind: 'pki-mismatch' },
          {
            kind: 'flux',
            message: `Secret/flux-system/git-token dry-run failed: Secret "git-token" is invalid: data[token]: Invalid value: "${token}": must be base64`,
          },
        ],
      })
      writeFluxToken(cluster, token)
      secrets.push({ origin: 'flux-git-token.yaml stringData.token', needles: needlesOf(token) })
      const printed: Output[] = []
      // short waits: the failures are permanent, waiting longer would only slow the test
      const all = await cluster.task('bootstrap:all', {}, ['--retries', '1', '--verify-timeout', '5s', '--flux-timeout', '5s'])
      expect(all.code, `${all.stdout}\n${all.stderr}`).toBe(1)
      printed.push(...outputsOf('failing bootstrap:all', all))
      const report = cluster.report()
      expect(report.ok).toBe(false)

      const verify = await cluster.task('bootstrap:verify', { NODES: 'wrkr-1' }, ['--verify-timeout', '2s'])
      expect(verify.code).toBe(1)
      printed.push(...outputsOf('failing verify', verify))

      expectNoLeak(cluster, everyOutput(cluster, printed), secrets)
    },
  )

  it(
    'short Secret values and a second document after `--- ` (trailing space) in flux.secrets: nothing leaks',
    { timeout: 180_000 },
    async () => {
      // a 7-character password, and a token in the file's second document; Flux quotes both in its failure
      const short = `p${randomBytes(3).toString('hex')}`
      const second = `tok_${randomBytes(12).toString('hex')}`
      const { cluster, secrets } = await start('127.71.5', {
        cps: 1,
        workers: 1,
        speed: 1200,
        faults: [
          {
            kind: 'flux',
            message: `Secret/flux-system/creds is invalid: data[password]: Invalid value: "${short}"; data[token]: Invalid value: "${second}"`,
          },
        ],
      })
      const file = join(cluster.clusterDir, 'flux-creds.yaml')
      const doc = (name: string, body: string): string =>
        `apiVersion: v1\nkind: Secret\nmetadata:\n  name: ${name}\n  namespace: flux-system\ntype: Opaque\n${body}`
      writeFileSync(
        file,
        `${doc('creds', `stringData:\n  password: ${short}\n`)}--- \n${doc('creds-2', `data:\n  token: ${Buffer.from(second).toString('base64')}\n`)}`,
      )
      const settings = join(cluster.clusterDir, 'bootstrap.yaml')
      writeFileSync(settings, readFileSync(settings, 'utf8').replace(/^flux:\n/m, 'flux:\n  secrets:\n    - flux-creds.yaml\n'))
      // the failing Kustomization ends flux's wait at once; the budget covers Flux's controllers starting
      // (seconds on a real control plane, SIM_KUBE=real)
      const all = await cluster.task('bootstrap:all', {}, ['--retries', '1', '--flux-timeout', '30s'])
      expect(all.code, `${all.stdout}\n${all.stderr}`).toBe(1)
      // the failure was reported (with the values masked), so the values did pass through the outputs
      expect(all.stderr).toContain('Invalid value: "<redacted>"')
      const needles = [
        { origin: 'flux-creds.yaml stringData.password (7 characters)', needles: [short] },
        { origin: 'flux-creds.yaml (second document) data.token', needles: needlesOf(second) },
      ]
      expectNoLeak(cluster, everyOutput(cluster, outputsOf('failing bootstrap:all', all)), [...secrets, ...needles])
    },
  )
})

// Issue 18 (and 11.8, 12.3/12.5): the Flux handover as operators do it. Secrets applied server-side
// (no plain-text last-applied copy), SOPS files decrypted in memory, "handed over" meaning every
// Kustomization and HelmRelease Ready, drift named on a re-run, no Flux over a cluster not ready.
// Addresses: 127.64.0.0/16.
import { execFileSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect } from 'vitest'
import { parse, stringify } from 'yaml'
import type { Report } from '../../lib/core/results.js'
import { goBin } from '../support/go-bin.js'
import { inTurn, SIDE_BY_SIDE } from '../support/in-turn.js'
import { E2eCluster, type TaskResult } from './harness.js'

const GO_BIN = goBin()
const PLAIN_PASSWORD = 'pw-7char' // short on purpose: every value is secret, whatever its length
const SLOW = 180_000

/** A fresh age identity (age-keygen, as cluster-template's `task init` makes one). */
function ageKey(): { identity: string; recipient: string; file: string } {
  const file = execFileSync(join(GO_BIN, 'age-keygen'), [], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
  const identity = file.split('\n').find((l) => l.startsWith('AGE-SECRET-KEY-')) ?? ''
  const recipient = /public key: (age1\S+)/.exec(file)?.[1] ?? ''
  return { identity, recipient, file }
}

/** A Secret manifest encrypted with the real sops to `recipient` (cluster-template's *.sops.yaml). */
function sopsEncrypt(dir: string, name: string, plain: string, recipient: string): string {
  const clear = join(dir, `${name}.clear.yaml`)
  writeFileSync(clear, plain)
  const out = execFileSync(
    join(GO_BIN, 'sops'),
    ['--encrypt', '--age', recipient, '--encrypted-regex', '^(data|stringData)$', '--input-type', 'yaml', '--output-type', 'yaml', clear],
    { encoding: 'utf8' },
  )
  // the plaintext exists only for the test's set-up; the product never sees this file
  writeFileSync(clear, '')
  return out
}

function editSettings(cluster: E2eCluster, edit: (settings: Record<string, any>) => void): void {
  const file = join(cluster.clusterDir, 'bootstrap.yaml')
  const settings = parse(readFileSync(file, 'utf8')) as Record<string, any>
  edit(settings)
  writeFileSync(file, stringify(settings))
}

const step = (report: Report, name: string) => report.phases.find((p) => p.name === 'flux')?.steps.find((s) => s.name === name)
const why = (r: TaskResult): string => `${r.stdout}\n${r.stderr}`.slice(-3000)

/** Every file under `dir`, recursively (the plaintext must be in none of them). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f)
    return statSync(p).isDirectory() ? filesUnder(p) : [p]
  })
}

// the describes run side by side, each on its own cluster and range (127.64.1 to .6); the tests of each run
// in turn on its cluster
describe('Flux handover: Secrets, SOPS, every Kustomization, drift', SIDE_BY_SIDE, () => {
  let cluster: E2eCluster
  const key = ageKey()
  beforeAll(async () => {
    cluster = await E2eCluster.start('127.64.1', {
      cps: 1,
      workers: 1,
      flux: {
        ageKey: key.identity,
        repository: [
          { kind: 'Kustomization', name: 'cluster-apps', wait: false },
          { kind: 'Kustomization', name: 'cluster-secrets', parent: 'flux-system/cluster-apps', decryption: true },
          { kind: 'HelmRelease', name: 'podinfo', parent: 'flux-system/cluster-apps' },
        ],
      },
    })
    const dir = cluster.clusterDir
    mkdirSync(join(dir, 'secrets'))
    writeFileSync(join(dir, 'age.agekey'), key.file, { mode: 0o600 })
    writeFileSync(
      join(dir, 'secrets', 'git-token.yaml'),
      'apiVersion: v1\nkind: Secret\nmetadata:\n  name: git-token\n  namespace: flux-system\nstringData:\n  token: tok-1234\n',
    )
    const secret = `apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-db\n  namespace: apps\nstringData:\n  password: ${PLAIN_PASSWORD}\n`
    writeFileSync(join(dir, 'secrets', 'app-db.sops.yaml'), sopsEncrypt(cluster.dir, 'app-db', secret, key.recipient))
    editSettings(cluster, (s) => {
      s.flux.secrets = ['secrets/git-token.yaml', 'secrets/app-db.sops.yaml']
      s.flux.sopsAgeKeyFile = 'age.agekey'
      // a gate on what Flux deploys is checked after the handover (issue 12 item 5)
      s.flux.readinessGates = [{ name: 'dns', namespace: 'kube-system', selector: 'k8s-app=kube-dns' }]
    })
  }, SLOW)
  afterAll(async () => {
    await cluster?.stop()
  })

  inTurn(
    'hands over: SOPS decrypted in memory, Secrets server-side with no plain-text copy, every Kustomization Ready',
    async () => {
      const result = await cluster.task('bootstrap:all')
      expect(result.code, why(result)).toBe(0)
      const report = cluster.report()
      expect(step(report, 'flux-secrets')?.detail).toMatch(/3 secret manifest\(s\) applied server-side, namespaces flux-system, apps/)
      expect(step(report, 'flux-kustomization')?.detail).toMatch(/^handed over: 3 Kustomization\(s\), 1 HelmRelease\(s\) Ready/)
      expect(step(report, 'flux-readiness-gates')).toMatchObject({ status: 'ok', detail: '1 gate(s) satisfied' })

      // the real kubectl reads what the API stored: no last-applied-configuration (kubectl describe
      // would show a client-side apply's copy of every value), fields owned by our manager
      for (const [ns, name] of [
        ['flux-system', 'git-token'],
        ['apps', 'app-db'],
        ['flux-system', 'sops-age'],
      ] as const) {
        const got = await cluster.kubectl(['get', 'secret', name, '-n', ns, '-o', 'json', '--show-managed-fields'])
        expect(got.code, got.stderr).toBe(0)
        const obj = JSON.parse(got.stdout) as {
          metadata: { annotations?: Record<string, string>; managedFields?: Array<{ manager: string; operation: string }> }
          data: Record<string, string>
        }
        expect(obj.metadata.annotations?.['kubectl.kubernetes.io/last-applied-configuration'], `${ns}/${name}`).toBeUndefined()
        expect(obj.metadata.managedFields?.map((m) => `${m.manager}:${m.operation}`)).toContain('talos-bootstrap:Apply')
        if (name === 'app-db') expect(Buffer.from(obj.data.password ?? '', 'base64').toString()).toBe(PLAIN_PASSWORD)
      }
      const described = await cluster.kubectl(['describe', 'secret', 'app-db', '-n', 'apps'])
      expect(described.stdout).not.toContain(PLAIN_PASSWORD)

      // the decrypted value reaches no file, log or output of the product
      expect(`${result.stdout}${result.stderr}`).not.toContain(PLAIN_PASSWORD)
      for (const file of filesUnder(cluster.clusterDir)) expect(readFileSync(file, 'utf8').includes(PLAIN_PASSWORD), file).toBe(false)
    },
    SLOW,
  )

  inTurn(
    'a copy left by an earlier client-side apply is removed on the next run',
    async () => {
      const csa = await cluster.kubectl(['apply', '-f', join(cluster.clusterDir, 'secrets', 'git-token.yaml')])
      expect(csa.code, csa.stderr).toBe(0)
      const annotation = async (): Promise<string> =>
        (await cluster.kubectl(['get', 'secret', 'git-token', '-n', 'flux-system', '-o', 'jsonpath={.metadata.annotations}'])).stdout
      expect(await annotation()).toContain('last-applied-configuration')
      const again = await cluster.task('bootstrap:flux')
      expect(again.code, why(again)).toBe(0)
      expect(await annotation()).not.toContain('last-applied-configuration')
    },
    SLOW,
  )

  inTurn(
    "a re-run names the drift: a branch change bootstraps again, a path change is refused with flux's text",
    async () => {
      editSettings(cluster, (s) => (s.flux.git.branch = 'release'))
      const branch = await cluster.task('bootstrap:flux')
      expect(branch.code, why(branch)).toBe(0)
      expect(step(cluster.report(), 'flux-install')?.detail).toMatch(
        /^bootstrapped again from .*: git\.branch \(live main, settings release\)$/,
      )

      editSettings(cluster, (s) => (s.flux.git.path = 'clusters/other'))
      const path = await cluster.task('bootstrap:flux')
      expect(path.code).toBe(1)
      const install = step(cluster.report(), 'flux-install')
      expect(install?.status).toBe('failed')
      expect(install?.error?.message).toContain('git.path (live ./clusters/e2e, settings clusters/other)')
      // pkg/bootstrap/bootstrap_plain_git.go ReconcileSyncConfig
      expect(install?.error?.message).toContain(
        'sync path configuration ("./clusters/other") would overwrite path ("./clusters/e2e") of existing Kustomization',
      )
      expect(install?.error?.hint).toMatch(/task -d \S+ bootstrap:flux CLUSTER_DIR=\S+/)

      editSettings(cluster, (s) => (s.flux.git.path = 'clusters/e2e'))
      const again = await cluster.task('bootstrap:flux')
      expect(again.code, why(again)).toBe(0)
      expect(step(cluster.report(), 'flux-install')?.detail).toMatch(/^already installed/)
    },
    SLOW,
  )

  inTurn(
    'refuses, exit 2 naming the file, a SOPS file it cannot decrypt; nothing is applied',
    async () => {
      const other = ageKey()
      writeFileSync(join(cluster.clusterDir, 'other.agekey'), other.file, { mode: 0o600 })
      editSettings(cluster, (s) => (s.flux.sopsAgeKeyFile = 'other.agekey'))
      const before = cluster.calls().length
      const wrongKey = await cluster.task('bootstrap:flux')
      expect(wrongKey.code).toBe(2)
      expect(wrongKey.stderr).toMatch(
        /secrets\/app-db\.sops\.yaml: sops cannot decrypt secrets\/app-db\.sops\.yaml: .*\(fix: check that other\.agekey holds the age identity/,
      )
      const noSops = await cluster.task('bootstrap:flux', {}, [], { SOPS: join(cluster.dir, 'no-such-sops') })
      expect(noSops.code).toBe(2)
      expect(noSops.stderr).toContain('secrets/app-db.sops.yaml is SOPS-encrypted and sops is not on PATH')
      expect(
        cluster
          .calls()
          .slice(before)
          .filter((c) => c.call === 'kube' || c.tool === 'flux'),
      ).toEqual([])
      editSettings(cluster, (s) => (s.flux.sopsAgeKeyFile = 'age.agekey'))
    },
    SLOW,
  )

  inTurn(
    'rejects flux.mode install and a bootstrap without privateKeyFile (exit 2, nothing touched)',
    async () => {
      editSettings(cluster, (s) => (s.flux.mode = 'install'))
      const install = await cluster.task('bootstrap:flux')
      expect(install.code).toBe(2)
      expect(install.stderr).toMatch(/bootstrap\.yaml:\d+: flux\.mode install can never hand over/)
      editSettings(cluster, (s) => {
        s.flux.mode = 'bootstrap'
        delete s.flux.git.privateKeyFile
      })
      const noKey = await cluster.task('bootstrap:flux')
      expect(noKey.code).toBe(2)
      expect(noKey.stderr).toMatch(/bootstrap\.yaml:\d+: flux\.git\.privateKeyFile is required/)
      editSettings(cluster, (s) => (s.flux.git.privateKeyFile = 'flux-deploy-key'))
    },
    SLOW,
  )
})

describe('Flux handover: failing Kustomizations under a wait: false root', SIDE_BY_SIDE, () => {
  let cluster: E2eCluster
  const message =
    "kustomize build failed: accumulating resources: accumulation err='accumulating resources from './podinfo': open /tmp/kustomization-1/podinfo: no such file or directory'"
  beforeAll(async () => {
    cluster = await E2eCluster.start('127.64.2', {
      cps: 1,
      workers: 0,
      allowSchedulingOnControlPlanes: true,
      flux: {
        ageKey: ageKey().identity,
        repository: [
          { kind: 'Kustomization', name: 'cluster-apps', wait: false },
          { kind: 'Kustomization', name: 'apps', parent: 'flux-system/cluster-apps', fail: message },
          // encrypted secrets in the repository, but no sops-age Secret was given
          { kind: 'Kustomization', name: 'cluster-secrets', parent: 'flux-system/cluster-apps', decryption: true },
        ],
      },
    })
  }, SLOW)
  afterAll(async () => {
    await cluster?.stop()
  })

  inTurn(
    'names each failing Kustomization with its message instead of reporting the Ready root',
    async () => {
      const result = await cluster.task('bootstrap:all')
      expect(result.code).toBe(1)
      const report = cluster.report()
      expect(step(report, 'flux-install')?.status, why(result)).toBe('ok') // the root itself is Ready (wait: false)
      const handover = step(report, 'flux-kustomization')
      expect(handover?.status).toBe('failed')
      expect(handover?.error?.message).toContain(`flux-system/apps: BuildFailed: ${message}`)
      expect(handover?.error?.hint).toMatch(/task -d \S+ bootstrap:flux CLUSTER_DIR=\S+/)
      expect(step(report, 'flux-readiness-gates')).toMatchObject({ status: 'not-run' })
      // kustomize-controller internal/decryptor/decryptor.go: the decryption Secret is missing
      const ks = await cluster.kubectl([
        'get',
        'kustomization',
        'cluster-secrets',
        '-n',
        'flux-system',
        '-o',
        'jsonpath={.status.conditions[?(@.type=="Ready")].message}',
      ])
      expect(ks.stdout).toBe('secrets "sops-age" not found')
    },
    SLOW,
  )

  inTurn(
    'a Secret the API refuses is named with its file, and the hint says to run bootstrap:flux again',
    async () => {
      writeFileSync(
        join(cluster.clusterDir, 'bad-secret.yaml'),
        'apiVersion: v1\nkind: Secret\nmetadata:\n  name: bad\n  namespace: flux-system\ndata:\n  token: not*base64\n',
      )
      editSettings(cluster, (s) => (s.flux.secrets = ['bad-secret.yaml']))
      const result = await cluster.task('bootstrap:flux')
      expect(result.code).toBe(1)
      const secrets = step(cluster.report(), 'flux-secrets')
      expect(secrets?.status).toBe('failed')
      expect(secrets?.error?.message).toMatch(/^bad-secret\.yaml: .*illegal base64 data at input byte 3/)
      expect(secrets?.error?.hint).toMatch(/run again: task -d \S+ bootstrap:flux CLUSTER_DIR=\S+$/)
      editSettings(cluster, (s) => (s.flux.secrets = []))
    },
    SLOW,
  )

  inTurn(
    'detects Flux installed by another tool and offers the existing mode instead of a prompt nobody answers',
    async () => {
      const label = await cluster.kubectl(['label', 'crd', 'gitrepositories.source.toolkit.fluxcd.io', 'app.kubernetes.io/managed-by=Helm'])
      expect(label.code, label.stderr).toBe(0)
      const result = await cluster.task('bootstrap:flux')
      expect(result.code).toBe(1)
      const install = step(cluster.report(), 'flux-install')
      expect(install?.error?.message).toMatch(
        /^Flux v\S+ is installed on this cluster by Helm: flux bootstrap would ask to override that installation/,
      )
      expect(install?.error?.hint).toContain('flux.mode: existing')
      expect(cluster.calls().filter((c) => c.tool === 'flux' && c.command === 'bootstrap').length).toBe(1) // only the first run's
    },
    SLOW,
  )
})

describe('Flux over a cluster that is not ready', SIDE_BY_SIDE, () => {
  let cluster: E2eCluster
  beforeAll(async () => {
    cluster = await E2eCluster.start('127.64.3', { cps: 1, workers: 1, faults: [{ node: 'wrkr-1', kind: 'cni' }] })
  }, SLOW)
  afterAll(async () => {
    await cluster?.stop()
  })

  inTurn(
    'after wait-ready failed, every flux step is not-run naming the cause; bootstrap:flux alone checks first',
    async () => {
      const all = await cluster.task('bootstrap:all', {}, ['--ready-timeout', '4s'])
      expect(all.code).toBe(1)
      const flux = cluster.report().phases.find((p) => p.name === 'flux')
      for (const s of flux?.steps ?? [])
        expect(s, s.name).toMatchObject({ status: 'not-run', detail: expect.stringContaining('wrkr-1 failed in wait-ready') })
      expect(flux?.steps.length).toBeGreaterThan(0)

      const alone = await cluster.task('bootstrap:flux')
      expect(alone.code).toBe(1)
      const report = cluster.report()
      const check = step(report, 'flux-cluster-ready')
      expect(check?.status).toBe('failed')
      expect(check?.error?.message).toMatch(/the cluster is not ready for Flux: .*wrkr-1 NotReady/)
      expect(check?.error?.hint).toMatch(/task -d \S+ bootstrap:wait-ready CLUSTER_DIR=\S+/)
      for (const name of ['flux-secrets', 'flux-install', 'flux-kustomization']) expect(step(report, name)?.status, name).toBe('not-run')
      expect(cluster.calls().filter((c) => c.tool === 'flux')).toEqual([])
    },
    SLOW,
  )
})

describe('Flux bootstrap against a repository that refuses the deploy key', SIDE_BY_SIDE, () => {
  let cluster: E2eCluster
  beforeAll(async () => {
    cluster = await E2eCluster.start('127.64.4', {
      cps: 1,
      workers: 0,
      allowSchedulingOnControlPlanes: true,
      flux: { git: { deployKey: 'refused' } },
    })
  }, SLOW)
  afterAll(async () => {
    await cluster?.stop()
  })

  inTurn(
    'names the refused key and how to register it',
    async () => {
      const result = await cluster.task('bootstrap:all')
      expect(result.code).toBe(1)
      const install = step(cluster.report(), 'flux-install')
      expect(install?.error?.message).toMatch(
        /^failed to clone repository: unable to clone '.*': ssh: handshake failed: ssh: unable to authenticate/,
      )
      expect(install?.error?.hint).toMatch(
        /^the repository refuses the deploy key: register the public key of flux\.git\.privateKeyFile as a deploy key with write access, then run: task -d \S+ bootstrap:flux CLUSTER_DIR=\S+$/,
      )
      expect(step(cluster.report(), 'flux-kustomization')).toMatchObject({ status: 'not-run', detail: 'the flux install failed' })
    },
    SLOW,
  )
})

describe('Flux through flux-operator and a FluxInstance (cluster-template since 2025)', SIDE_BY_SIDE, () => {
  let cluster: E2eCluster
  beforeAll(async () => {
    cluster = await E2eCluster.start('127.64.5', {
      cps: 1,
      workers: 0,
      allowSchedulingOnControlPlanes: true,
      flux: { repository: [{ kind: 'Kustomization', name: 'cluster-apps', wait: false }] },
    })
    writeFileSync(
      join(cluster.clusterDir, 'known_hosts'),
      '127.0.0.1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n',
    )
    editSettings(cluster, (s) => {
      s.flux.mode = 'operator'
      // the chart from the simulator's loopback repository (the default is flux-operator's OCI registry)
      s.flux.operator = { chart: 'flux-operator', repo: s.cni.repo, caFile: s.cni.caFile, version: '0.33.0' }
      s.flux.git.knownHostsFile = 'known_hosts'
    })
  }, SLOW)
  afterAll(async () => {
    await cluster?.stop()
  })

  inTurn(
    'installs flux-operator with helm, applies a FluxInstance syncing flux.git and waits for every Kustomization',
    async () => {
      const result = await cluster.task('bootstrap:all')
      expect(result.code, why(result)).toBe(0)
      const report = cluster.report()
      expect(step(report, 'flux-install')?.detail).toMatch(/^flux-operator installed; FluxInstance flux Ready/)
      expect(step(report, 'flux-kustomization')?.detail).toMatch(/^handed over: 2 Kustomization\(s\)/)
      const calls = cluster.calls()
      expect(calls.filter((c) => c.tool === 'flux' && c.command === 'bootstrap')).toEqual([])
      const fi = JSON.parse((await cluster.kubectl(['get', 'fluxinstance', 'flux', '-n', 'flux-system', '-o', 'json'])).stdout) as {
        spec: { sync: Record<string, string> }
      }
      expect(fi.spec.sync).toMatchObject({
        kind: 'GitRepository',
        url: 'ssh://git@127.0.0.1/fleet.git',
        ref: 'refs/heads/main',
        path: 'clusters/e2e',
        pullSecret: 'flux-system',
      })
      const git = JSON.parse(
        (await cluster.kubectl(['get', 'gitrepository', 'flux-system', '-n', 'flux-system', '-o', 'json'])).stdout,
      ) as { spec: { url: string; secretRef: { name: string } } }
      expect(git.spec).toMatchObject({ url: 'ssh://git@127.0.0.1/fleet.git', secretRef: { name: 'flux-system' } })
      const secret = JSON.parse((await cluster.kubectl(['get', 'secret', 'flux-system', '-n', 'flux-system', '-o', 'json'])).stdout) as {
        metadata: { annotations?: Record<string, string> }
        data: Record<string, string>
      }
      expect(Buffer.from(secret.data.identity ?? '', 'base64').toString()).toBe(
        readFileSync(join(cluster.clusterDir, 'flux-deploy-key'), 'utf8'),
      )
      expect(Buffer.from(secret.data.known_hosts ?? '', 'base64').toString()).toMatch(/^127\.0\.0\.1 ssh-ed25519 /)
      expect(secret.metadata.annotations?.['kubectl.kubernetes.io/last-applied-configuration']).toBeUndefined()
    },
    SLOW,
  )

  inTurn(
    'a later flux.mode: bootstrap sees Flux managed by flux-operator and does not run flux bootstrap over it',
    async () => {
      editSettings(cluster, (s) => {
        s.flux.mode = 'bootstrap'
        delete s.flux.operator
      })
      const result = await cluster.task('bootstrap:flux')
      expect(result.code).toBe(1)
      expect(step(cluster.report(), 'flux-install')?.error?.message).toMatch(/is installed on this cluster by flux-operator/)
      expect(cluster.calls().filter((c) => c.tool === 'flux' && c.command === 'bootstrap')).toEqual([])
    },
    SLOW,
  )
})

describe('Flux after an unmet readiness gate', SIDE_BY_SIDE, () => {
  let cluster: E2eCluster
  beforeAll(async () => {
    cluster = await E2eCluster.start('127.64.6', { cps: 1, workers: 0, allowSchedulingOnControlPlanes: true })
    editSettings(cluster, (s) => (s.readinessGates = [{ name: 'storage', namespace: 'kube-system', selector: 'app=csi-driver' }]))
  }, SLOW)
  afterAll(async () => {
    await cluster?.stop()
  })

  inTurn(
    'installs no Flux: every flux step is not-run naming the gate',
    async () => {
      const result = await cluster.task('bootstrap:all', {}, ['--ready-timeout', '3s'])
      expect(result.code).toBe(1)
      const flux = cluster.report().phases.find((p) => p.name === 'flux')
      expect(flux?.steps.length).toBeGreaterThan(0)
      for (const s of flux?.steps ?? [])
        expect(s, s.name).toMatchObject({
          status: 'not-run',
          detail: expect.stringContaining('readiness gates not satisfied: storage: no pods match app=csi-driver in kube-system'),
        })
      expect(cluster.calls().filter((c) => c.tool === 'flux')).toEqual([])
    },
    SLOW,
  )
})

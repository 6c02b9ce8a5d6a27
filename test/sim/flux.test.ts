// The simulated flux CLI against the simulated Kubernetes API (sim/kube) and its Flux controllers.
import fs from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
// @ts-ignore plain JS test kit
import { startKubeForTest, run } from '../../sim/testkit.js'
// @ts-ignore plain JS
import { openSshEd25519 } from '../../sim/pki.js'

describe('flux: bootstrap git, get, reconcile', () => {
  let k: any
  let keyFile = ''
  let key: { privateKey: string; publicKey: string }
  beforeAll(async () => {
    k = await startKubeForTest({
      ip: '127.51.0.1',
      speed: 1000,
      nodes: [{ name: 'cp-1', ip: '127.51.0.11', role: 'controlplane' }],
      fluxMessage: 'kustomize build failed: accumulating resources: missing ./apps',
    })
    key = await openSshEd25519()
    keyFile = `${k.dir}/identity`
    fs.writeFileSync(keyFile, key.privateKey, { mode: 0o600 })
    const cni = await run(
      'helm',
      ['upgrade', '--install', 'cilium', ...k.chart, '-n', 'kube-system', '--set', 'operator.replicas=1', '--wait'],
      { env: k.env },
    )
    expect(cni.code).toBe(0)
  })
  afterAll(async () => k?.close())

  const boot = (extra: string[]) =>
    run(
      'flux',
      [
        'bootstrap',
        'git',
        '--url',
        'ssh://git@127.51.0.5/fleet.git',
        '--branch',
        'main',
        '--path',
        'clusters/sim',
        '--private-key-file',
        keyFile,
        '--timeout',
        '20s',
        ...extra,
      ],
      { env: k.env },
    )

  it('check --pre passes the Kubernetes version check', async () => {
    expect(await run('flux', ['check', '--pre'], { env: k.env })).toEqual({
      code: 0,
      stdout: '',
      stderr: '► checking prerequisites\n✔ Kubernetes 1.35.0 >=1.33.0-0\n✔ prerequisites checks passed\n',
    })
  })

  it('without --silent and with no stdin, bootstrap prompts for the deploy key and aborts', async () => {
    const r = await boot([])
    expect(r.code).toBe(1)
    expect(r.stdout).toBe('Please give the key access to your repository? [y/N] ')
    expect(r.stderr).toContain(`✔ public key: ${key.publicKey.split(' ').slice(0, 2).join(' ')}\n`)
    expect(r.stderr.endsWith('✗ aborting\n')).toBe(true)
  })

  it('bootstrap git --silent: Secret with the key, GitRepository and Kustomization Ready; key never printed', async () => {
    const r = await boot(['--silent'])
    expect(r.stderr).toContain(
      '◎ waiting for Kustomization "flux-system/flux-system" to be reconciled\n✔ Kustomization reconciled successfully\n',
    )
    expect(r.stderr.endsWith('✔ all components are healthy\n')).toBe(true)
    expect(r.code).toBe(0)
    expect(r.stdout + r.stderr).not.toContain(key.privateKey.split('\n')[1])
    const secret = JSON.parse(
      (
        await run('kubectl', ['--kubeconfig', k.kubeconfig, '-n', 'flux-system', 'get', 'secret', 'flux-system', '-o', 'json'], {
          env: k.env,
        })
      ).stdout,
    )
    expect(Buffer.from(secret.data.identity, 'base64').toString()).toBe(key.privateKey)
    const ks = JSON.parse(
      (
        await run('kubectl', ['--kubeconfig', k.kubeconfig, '-n', 'flux-system', 'get', 'kustomization', 'flux-system', '-o', 'json'], {
          env: k.env,
        })
      ).stdout,
    )
    expect(ks.spec).toMatchObject({ path: './clusters/sim', sourceRef: { kind: 'GitRepository', name: 'flux-system' } })
    const get = await run('flux', ['get', 'kustomizations', '-A', '--no-header'], { env: k.env })
    expect(get.stdout).toMatch(
      /^flux-system\tflux-system\tmain@sha1:[0-9a-f]{8}\tFalse    \tTrue \tApplied revision: main@sha1:[0-9a-f]{8}\t\n$/,
    )
    const hdr = await run('flux', ['get', 'ks'], { env: k.env })
    expect(hdr.stdout.split('\n')[0]).toMatch(/^NAME +\tREVISION +\tSUSPENDED\tREADY\tMESSAGE +$/)
  })

  it('reconcile --with-source prints flux lines; with the flux fault it fails with the Ready message', async () => {
    const ok = await run('flux', ['reconcile', 'kustomization', 'flux-system', '--with-source'], { env: k.env })
    expect(ok.code).toBe(0)
    expect(ok.stderr).toMatch(
      /^► annotating GitRepository flux-system in flux-system namespace\n✔ GitRepository annotated\n◎ waiting for GitRepository reconciliation\n✔ fetched revision main@sha1:[0-9a-f]{40}\n► annotating Kustomization flux-system in flux-system namespace\n✔ Kustomization annotated\n◎ waiting for Kustomization reconciliation\n✔ applied revision main@sha1:[0-9a-f]{40}\n$/,
    )
    k.faults.add('flux')
    const bad = await run('flux', ['reconcile', 'ks', 'flux-system', '--with-source'], { env: k.env })
    expect(bad.code).toBe(1)
    expect(bad.stderr.split('\n').at(-2)).toBe(
      '✗ Kustomization reconciliation failed: kustomize build failed: accumulating resources: missing ./apps',
    )
    const get = await run('flux', ['get', 'ks', '--no-header'], { env: k.env })
    expect(get.stdout).toContain('\tFalse\tkustomize build failed: accumulating resources: missing ./apps\t\n')
    expect(k.calls.filter((c: any) => c.tool === 'flux' && c.call === 'flux').at(-2).outcome).toBe(
      'error: Kustomization reconciliation failed: kustomize build failed: accumulating resources: missing ./apps',
    )
  })

  it('fails as flux does on unknown flags, missing objects and an old Kubernetes', async () => {
    expect(await run('flux', ['check', '--pre', '--foo'], { env: k.env })).toMatchObject({ code: 1, stderr: '✗ unknown flag: --foo\n' })
    expect((await run('flux', ['reconcile', 'ks', 'nope'], { env: k.env })).stderr).toBe(
      '✗ kustomizations.kustomize.toolkit.fluxcd.io "nope" not found\n',
    )
    expect((await run('flux', ['version', '--client'])).stdout).toMatch(/^flux: v2\.9\.\d+\n$/)
  })
})

describe('flux: old cluster', () => {
  let k: any
  beforeAll(async () => {
    k = await startKubeForTest({ ip: '127.51.1.1', speed: 1000, kubernetesVersion: 'v1.32.4' })
  })
  afterAll(async () => k?.close())
  it('check --pre fails the version constraint', async () => {
    expect(await run('flux', ['check', '--pre'], { env: k.env })).toMatchObject({
      code: 1,
      stderr: '► checking prerequisites\n✗ Kubernetes version v1.32.4 does not match >=1.33.0-0\n',
    })
  })
})

// cmd/flux/bootstrap_git.go, pkg/bootstrap/bootstrap.go, bootstrap_plain_git.go, cmd/flux/cluster_info.go
describe('flux: bootstrap git as flux2 v2.9 does it on a re-run', () => {
  let k: any
  let keyFile = ''
  let key: { privateKey: string; publicKey: string }
  const kubectl = (args: string[]) => run('kubectl', ['--kubeconfig', k.kubeconfig, ...args], { env: k.env })
  beforeAll(async () => {
    k = await startKubeForTest({ ip: '127.51.2.1', speed: 1000, nodes: [{ name: 'cp-1', ip: '127.51.2.11', role: 'controlplane' }] })
    key = await openSshEd25519()
    keyFile = `${k.dir}/identity`
    fs.writeFileSync(keyFile, key.privateKey, { mode: 0o600 })
    expect((await run('helm', ['upgrade', '--install', 'cilium', ...k.chart, '-n', 'kube-system', '--wait'], { env: k.env })).code).toBe(0)
  })
  afterAll(async () => k?.close())
  const boot = (url: string, path: string, extra: string[] = []) =>
    run('flux', ['bootstrap', 'git', '--url', url, '--branch', 'main', '--path', path, '--silent', '--timeout', '20s', ...extra], {
      env: k.env,
    })

  it('answers URL errors with Go url.Parse and getAuthOpts texts', async () => {
    expect((await boot('127.51.2.5:fleet.git', 'x')).stderr).toBe(
      '✗ parse "127.51.2.5:fleet.git": first path segment in URL cannot contain colon\n',
    )
    expect((await boot('ssh://git@127.51.2.5:x/fleet.git', 'x')).stderr).toBe(
      '✗ parse "ssh://git@127.51.2.5:x/fleet.git": invalid port ":x" after host\n',
    )
    expect((await boot('ftp://127.51.2.5/fleet.git', 'x')).stderr).toBe(
      '✗ failed to create authentication options for ftp://127.51.2.5/fleet.git: scheme "ftp" is not supported\n',
    )
  })

  it('syncs an https URL over ssh with the key; a re-run without a key keeps the Secret; a new path is refused', async () => {
    const first = await boot('https://127.51.2.5/fleet.git', 'clusters/a', ['--private-key-file', keyFile])
    expect(first.code, first.stderr).toBe(0)
    const git = JSON.parse((await kubectl(['-n', 'flux-system', 'get', 'gitrepository', 'flux-system', '-o', 'json'])).stdout)
    expect(git.spec.url).toBe('ssh://git@127.51.2.5/fleet.git')
    // no key and no credentials given: ReconcileSourceSecret keeps the existing Secret
    const again = await boot('ssh://git@127.51.2.5/fleet.git', 'clusters/a')
    expect(again.code, again.stderr).toBe(0)
    expect(again.stderr).toContain('► determining if source secret "flux-system/flux-system" exists\n✔ source secret up to date\n')
    expect(again.stderr).not.toContain('installing components') // mustInstallManifests: the root applied a revision
    const secret = JSON.parse((await kubectl(['-n', 'flux-system', 'get', 'secret', 'flux-system', '-o', 'json'])).stdout)
    expect(Buffer.from(secret.data.identity, 'base64').toString()).toBe(key.privateKey)
    const moved = await boot('ssh://git@127.51.2.5/fleet.git', 'clusters/b')
    expect(moved.code).toBe(1)
    expect(
      moved.stderr.endsWith('✗ sync path configuration ("./clusters/b") would overwrite path ("./clusters/a") of existing Kustomization\n'),
    ).toBe(true)
  })

  it("asks before overriding Flux installed by another tool; no answer (EOF) is promptui's ^D", async () => {
    expect((await kubectl(['label', 'crd', 'gitrepositories.source.toolkit.fluxcd.io', 'app.kubernetes.io/managed-by=Helm'])).code).toBe(0)
    const r = await boot('ssh://git@127.51.2.5/fleet.git', 'clusters/a')
    expect(r.code).toBe(1)
    expect(r.stderr).toContain('has been installed on this cluster with Helm!\n')
    expect(r.stdout).toBe('Are you sure you want to override the Helm installation? Y/N? [y/N] ')
    expect(r.stderr.endsWith('✗ ^D\n')).toBe(true)
  })
})

// The Git side the simulator has no server for, as the scenario's flux.git says it answers:
// pkg/manifestgen/sourcesecret/sourcesecret.go ScanHostKey; bootstrap_plain_git.go clone retry
describe('flux: a Git host whose SSH port is closed, a repository that refuses the key', () => {
  const keyed = async (ip: string, git: Record<string, string>) => {
    const k = await startKubeForTest({ ip, speed: 1000, flux: { git } })
    const key = await openSshEd25519()
    fs.writeFileSync(`${k.dir}/identity`, key.privateKey, { mode: 0o600 })
    const r = await run(
      'flux',
      [
        'bootstrap',
        'git',
        '--url',
        'ssh://git@127.51.3.5/fleet.git',
        '--path',
        'x',
        '--private-key-file',
        `${k.dir}/identity`,
        '--silent',
        '--timeout',
        '10s',
      ],
      { env: k.env },
    )
    await k.close()
    return r
  }
  it("fails the host-key scan with flux's text", async () => {
    const r = await keyed('127.51.3.1', { hostKeyScan: 'refused' })
    expect(r).toMatchObject({
      code: 1,
      stderr:
        '✗ failed to create authentication options for ssh://git@127.51.3.5/fleet.git: SSH key scan for host 127.51.3.5:22 failed, error: dial tcp 127.51.3.5:22: connect: connection refused\n',
    })
  })
  it('fails the clone twice, then `failed to clone repository`', async () => {
    const r = await keyed('127.51.3.2', { deployKey: 'refused' })
    expect(r.code).toBe(1)
    const err =
      "unable to clone 'ssh://git@127.51.3.5/fleet.git': ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey], no supported methods remain"
    expect(r.stderr).toBe(
      `► cloning branch "main" from Git repository "ssh://git@127.51.3.5/fleet.git"\n⚠️  clone failure: ${err}\n⚠️  clone failure: ${err}\n✗ failed to clone repository: ${err}\n`,
    )
  })
})

// controlplaneio-fluxcd/flux-operator (FluxInstance v1) and kustomize-controller's handling of what
// the repository holds (internal/controller/kustomization_controller.go, internal/decryptor/decryptor.go)
describe('flux-operator and the repository content', () => {
  let k: any
  const identity = 'AGE-SECRET-KEY-1QYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSYV8Y0M'
  const kubectl = (args: string[], input?: string) =>
    run('kubectl', ['--kubeconfig', k.kubeconfig, ...args], { env: k.env, ...(input ? { input } : {}) })
  beforeAll(async () => {
    k = await startKubeForTest({
      ip: '127.51.4.1',
      speed: 1000,
      nodes: [{ name: 'cp-1', ip: '127.51.4.11', role: 'controlplane' }],
      flux: {
        ageKey: identity,
        repository: [
          { kind: 'Kustomization', name: 'cluster-apps', namespace: 'flux-system', parent: 'flux-system/flux-system', wait: true },
          { kind: 'Kustomization', name: 'secrets', namespace: 'flux-system', parent: 'flux-system/cluster-apps', decryption: true },
          { kind: 'HelmRelease', name: 'podinfo', namespace: 'flux-system', parent: 'flux-system/cluster-apps' },
        ],
      },
    })
    expect((await run('helm', ['upgrade', '--install', 'cilium', ...k.chart, '-n', 'kube-system', '--wait'], { env: k.env })).code).toBe(0)
  })
  afterAll(async () => k?.close())

  it('installs flux-operator from a chart repository (its OCI registry stands in loopback here); a FluxInstance installs Flux and its sync', async () => {
    const chart = await run(
      'helm',
      [
        'upgrade',
        '--install',
        'flux-operator',
        'flux-operator',
        '--repo',
        k.repo.url,
        '--ca-file',
        k.repo.caFile,
        '-n',
        'flux-system',
        '--create-namespace',
        '--version',
        '0.33.0',
        '--wait',
      ],
      { env: k.env },
    )
    expect(chart.code, chart.stderr).toBe(0)
    const fi =
      'apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata: {name: flux, namespace: flux-system}\nspec:\n  distribution: {version: "2.x", registry: ghcr.io/fluxcd}\n  sync: {kind: GitRepository, url: "ssh://git@127.51.4.5/fleet.git", ref: refs/heads/main, path: clusters/sim, pullSecret: flux-system}\n'
    expect((await kubectl(['apply', '--server-side', '-f', '-'], fi)).code).toBe(0)
    const w = await kubectl(['wait', 'fluxinstance/flux', '-n', 'flux-system', '--for=condition=Ready', '--timeout=20s'])
    expect(w.code, w.stderr).toBe(0)
    const crd = JSON.parse((await kubectl(['get', 'crd', 'gitrepositories.source.toolkit.fluxcd.io', '-o', 'json'])).stdout)
    expect(crd.metadata.labels['app.kubernetes.io/managed-by']).toBe('flux-operator')
    const git = JSON.parse((await kubectl(['get', 'gitrepository', 'flux-system', '-n', 'flux-system', '-o', 'json'])).stdout)
    expect(git.spec).toMatchObject({
      url: 'ssh://git@127.51.4.5/fleet.git',
      ref: { name: 'refs/heads/main' },
      secretRef: { name: 'flux-system' },
    })
  })

  it("applies the repository's children; a wait: true parent fails when a child cannot decrypt, and heals with the key", async () => {
    const root = await kubectl(['wait', 'kustomization/flux-system', '-n', 'flux-system', '--for=condition=Ready', '--timeout=20s'])
    expect(root.code, root.stderr).toBe(0)
    const msg = (name: string) =>
      kubectl(['get', 'kustomization', name, '-n', 'flux-system', '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].message}'])
    // the controllers work on simulated time: poll (bounded) until the message settles
    const until = async (name: string, want: RegExp): Promise<string> => {
      let got = ''
      for (let i = 0; i < 200 && !want.test((got = (await msg(name)).stdout)); i++) await new Promise((r) => setTimeout(r, 100))
      return got
    }
    expect(await until('secrets', /sops-age/)).toBe('secrets "sops-age" not found')
    expect(await until('cluster-apps', /health check failed/)).toBe(
      "health check failed after 60s: timeout waiting for: [Kustomization/flux-system/secrets status: 'Failed']",
    )
    // the wrong identity: sops finds no key for the data key
    const wrong = 'AGE-SECRET-KEY-1ZZZSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSYV8Y0M'
    await kubectl(['create', 'secret', 'generic', 'sops-age', '-n', 'flux-system', `--from-literal=age.agekey=${wrong}`])
    await kubectl(['annotate', 'kustomization', 'secrets', '-n', 'flux-system', 'reconcile.fluxcd.io/requestedAt=1'])
    expect(await until('secrets', /decryption failed/)).toBe(
      "decryption failed for 'Secret.v1.[noGrp]/cluster-secrets': failed to decrypt and format 'flux-system/cluster-secrets' Secret data: Error getting data key: 0 successful groups required, got 0",
    )
    await kubectl(['delete', 'secret', 'sops-age', '-n', 'flux-system'])
    await kubectl(['create', 'secret', 'generic', 'sops-age', '-n', 'flux-system', `--from-literal=age.agekey=${identity}`])
    await kubectl(['annotate', 'kustomization', 'secrets', '-n', 'flux-system', 'reconcile.fluxcd.io/requestedAt=2', '--overwrite'])
    const healed = await kubectl([
      'wait',
      'kustomization/secrets',
      'kustomization/cluster-apps',
      'helmrelease/podinfo',
      '-n',
      'flux-system',
      '--for=condition=Ready',
      '--timeout=30s',
    ])
    expect(healed.code, healed.stderr).toBe(0)
  })
})

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
    k = await startKubeForTest({ ip: '127.51.0.1', speed: 1000, nodes: [{ name: 'cp-1', ip: '127.51.0.11', role: 'controlplane' }], fluxMessage: 'kustomize build failed: accumulating resources: missing ./apps' })
    key = await openSshEd25519()
    keyFile = `${k.dir}/identity`
    fs.writeFileSync(keyFile, key.privateKey, { mode: 0o600 })
    const cni = await run('helm', ['upgrade', '--install', 'cilium', ...k.chart, '-n', 'kube-system', '--set', 'operator.replicas=1', '--wait'], { env: k.env })
    expect(cni.code).toBe(0)
  })
  afterAll(async () => k?.close())

  const boot = (extra: string[]) =>
    run('flux', ['bootstrap', 'git', '--url', 'ssh://git@127.51.0.5/fleet.git', '--branch', 'main', '--path', 'clusters/sim', '--private-key-file', keyFile, '--timeout', '20s', ...extra], { env: k.env })

  it('check --pre passes the Kubernetes version check', async () => {
    expect(await run('flux', ['check', '--pre'], { env: k.env })).toEqual({ code: 0, stdout: '', stderr: '► checking prerequisites\n✔ Kubernetes 1.35.0 >=1.33.0-0\n✔ prerequisites checks passed\n' })
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
    expect(r.stderr).toContain('◎ waiting for Kustomization "flux-system/flux-system" to be reconciled\n✔ Kustomization reconciled successfully\n')
    expect(r.stderr.endsWith('✔ all components are healthy\n')).toBe(true)
    expect(r.code).toBe(0)
    expect(r.stdout + r.stderr).not.toContain(key.privateKey.split('\n')[1])
    const secret = JSON.parse((await run('kubectl', ['--kubeconfig', k.kubeconfig, '-n', 'flux-system', 'get', 'secret', 'flux-system', '-o', 'json'], { env: k.env })).stdout)
    expect(Buffer.from(secret.data.identity, 'base64').toString()).toBe(key.privateKey)
    const ks = JSON.parse((await run('kubectl', ['--kubeconfig', k.kubeconfig, '-n', 'flux-system', 'get', 'kustomization', 'flux-system', '-o', 'json'], { env: k.env })).stdout)
    expect(ks.spec).toMatchObject({ path: './clusters/sim', sourceRef: { kind: 'GitRepository', name: 'flux-system' } })
    const get = await run('flux', ['get', 'kustomizations', '-A', '--no-header'], { env: k.env })
    expect(get.stdout).toMatch(/^flux-system\tflux-system\tmain@sha1:[0-9a-f]{8}\tFalse    \tTrue \tApplied revision: main@sha1:[0-9a-f]{8}\t\n$/)
    const hdr = await run('flux', ['get', 'ks'], { env: k.env })
    expect(hdr.stdout.split('\n')[0]).toMatch(/^NAME +\tREVISION +\tSUSPENDED\tREADY\tMESSAGE +$/)
  })

  it('reconcile --with-source prints flux lines; with the flux fault it fails with the Ready message', async () => {
    const ok = await run('flux', ['reconcile', 'kustomization', 'flux-system', '--with-source'], { env: k.env })
    expect(ok.code).toBe(0)
    expect(ok.stderr).toMatch(/^► annotating GitRepository flux-system in flux-system namespace\n✔ GitRepository annotated\n◎ waiting for GitRepository reconciliation\n✔ fetched revision main@sha1:[0-9a-f]{40}\n► annotating Kustomization flux-system in flux-system namespace\n✔ Kustomization annotated\n◎ waiting for Kustomization reconciliation\n✔ applied revision main@sha1:[0-9a-f]{40}\n$/)
    k.faults.add('flux')
    const bad = await run('flux', ['reconcile', 'ks', 'flux-system', '--with-source'], { env: k.env })
    expect(bad.code).toBe(1)
    expect(bad.stderr.split('\n').at(-2)).toBe('✗ Kustomization reconciliation failed: kustomize build failed: accumulating resources: missing ./apps')
    const get = await run('flux', ['get', 'ks', '--no-header'], { env: k.env })
    expect(get.stdout).toContain('\tFalse\tkustomize build failed: accumulating resources: missing ./apps\t\n')
    expect(k.calls.filter((c: any) => c.tool === 'flux' && c.call === 'flux').at(-2).outcome).toBe('error: Kustomization reconciliation failed: kustomize build failed: accumulating resources: missing ./apps')
  })

  it('fails as flux does on unknown flags, missing objects and an old Kubernetes', async () => {
    expect(await run('flux', ['check', '--pre', '--foo'], { env: k.env })).toMatchObject({ code: 1, stderr: '✗ unknown flag: --foo\n' })
    expect((await run('flux', ['reconcile', 'ks', 'nope'], { env: k.env })).stderr).toBe('✗ kustomizations.kustomize.toolkit.fluxcd.io "nope" not found\n')
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
    expect(await run('flux', ['check', '--pre'], { env: k.env })).toMatchObject({ code: 1, stderr: '► checking prerequisites\n✗ Kubernetes version v1.32.4 does not match >=1.33.0-0\n' })
  })
})

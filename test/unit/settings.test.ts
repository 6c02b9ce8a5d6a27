import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { InputError } from '../../lib/core/errors.js'
import { loadSettings } from '../../lib/input/settings.js'
import { clusterDir, threeNodes } from './fixtures.js'

function inputError(fn: () => unknown): string {
  try {
    fn()
  } catch (err) {
    if (err instanceof InputError) return err.format()
    throw err
  }
  throw new Error('expected an input error')
}

describe('settings', () => {
  it('has the documented defaults', () => {
    const s = loadSettings({ clusterDir: clusterDir(threeNodes), env: {}, flags: {} })
    expect(s).toMatchObject({
      concurrency: 1,
      retries: 5,
      retryDelayMs: 3000,
      retryMaxDelayMs: 60_000,
      pollIntervalMs: 5000,
      verifyTimeoutMs: 300_000,
      callTimeoutMs: 30_000,
      kubeconfig: 'kubeconfig',
    })
  })

  it('layers defaults < bootstrap.yaml < environment < flags', () => {
    const dir = clusterDir(threeNodes, { settings: 'concurrency: 2\nretries: 1\npollInterval: 2s\n' })
    const s = loadSettings({ clusterDir: dir, env: { CONCURRENCY: '3', BOOTSTRAP_RETRIES: '7' }, flags: { concurrency: '4' } })
    expect(s.concurrency).toBe(4)
    expect(s.retries).toBe(7)
    expect(s.pollIntervalMs).toBe(2000)
  })

  it.each([
    ['0', 'concurrency must be a whole number >= 1, got "0"'],
    ['abc', 'concurrency must be a whole number >= 1, got "abc"'],
  ])('refuses CONCURRENCY=%s with the fix', (value, message) => {
    const text = inputError(() => loadSettings({ clusterDir: clusterDir(threeNodes), env: { CONCURRENCY: value }, flags: {} }))
    expect(text).toBe(`environment CONCURRENCY: ${message} (fix: set concurrency: 4 in bootstrap.yaml, CONCURRENCY=4, or --concurrency 4)`)
  })

  it('names the line of an unknown key', () => {
    const dir = clusterDir(threeNodes, { settings: 'retries: 2\nretrys: 3\n' })
    expect(inputError(() => loadSettings({ clusterDir: dir, env: {}, flags: {} }))).toMatch(
      new RegExp(`^${join(dir, 'bootstrap.yaml')}:2: unknown setting "retrys" \\(fix: remove it or use one of: concurrency, retries`),
    )
  })

  it('names the line of a wrong type', () => {
    const dir = clusterDir(threeNodes, { settings: 'retries: 2\npollInterval: soon\n' })
    expect(inputError(() => loadSettings({ clusterDir: dir, env: {}, flags: {} }))).toMatch(
      /bootstrap\.yaml:2: pollInterval must be a duration, got "soon"/,
    )
  })

  it('reads the cni, gates and flux sections', () => {
    const dir = clusterDir(threeNodes, {
      settings:
        'cni: { chart: cilium, version: 1.18.4 }\nreadinessGates:\n  - { namespace: kube-system, selector: k8s-app=kube-dns }\nflux:\n  mode: bootstrap\n  git: { url: ssh://git@127.0.0.1/fleet.git, path: clusters/x, privateKeyFile: deploy-key }\n  readinessGates:\n    - { namespace: storage, selector: app=csi }\n',
    })
    const s = loadSettings({ clusterDir: dir, env: {}, flags: {} })
    expect(s.cni).toEqual({
      chart: 'cilium',
      repo: 'https://helm.cilium.io/',
      version: '1.18.4',
      release: 'cilium',
      namespace: 'kube-system',
      daemonset: 'cilium',
    })
    expect(s.readinessGates).toEqual([{ name: 'k8s-app=kube-dns', namespace: 'kube-system', selector: 'k8s-app=kube-dns' }])
    expect(s.flux).toMatchObject({
      mode: 'bootstrap',
      kustomization: 'flux-system/flux-system',
      handover: 'all',
      git: { branch: 'main', path: 'clusters/x', privateKeyFile: 'deploy-key' },
    })
    // post-Flux gates: on what Flux deploys (issue 12 item 5)
    expect(s.flux?.readinessGates).toEqual([{ name: 'app=csi', namespace: 'storage', selector: 'app=csi' }])
  })

  it('cni: the repository URL and its CA file (absolute); a `helm repo add` alias is bad input at its line', () => {
    const dir = clusterDir(threeNodes, {
      settings: 'cni:\n  chart: tigera-operator\n  repo: https://127.0.0.1:8443/charts/\n  caFile: clusterconfig/talosconfig\n',
    })
    expect(loadSettings({ clusterDir: dir, env: {}, flags: {} }).cni).toMatchObject({
      chart: 'tigera-operator',
      repo: 'https://127.0.0.1:8443/charts/',
      caFile: join(dir, 'clusterconfig', 'talosconfig'),
      release: 'tigera-operator',
    })
    const alias = clusterDir(threeNodes, { settings: 'retries: 2\ncni:\n  chart: cilium/cilium\n' })
    expect(inputError(() => loadSettings({ clusterDir: alias, env: {}, flags: {} }))).toBe(
      `${join(alias, 'bootstrap.yaml')}:3: cni.chart "cilium/cilium" names a chart through a \`helm repo add\` alias, which this tool does not rely on (fix: write chart: cilium and repo: https://helm.cilium.io/ under cni (docs/settings.md))`,
    )
    const noCa = clusterDir(threeNodes, { settings: 'cni:\n  chart: cilium\n  repo: https://127.0.0.1:8443/\n  caFile: charts-ca.crt\n' })
    expect(inputError(() => loadSettings({ clusterDir: noCa, env: {}, flags: {} }))).toMatch(
      /bootstrap\.yaml:4: cni\.caFile \S+charts-ca\.crt not found \(fix: write the chart repository's CA certificate \(PEM\) there or fix the path\)$/,
    )
  })
})

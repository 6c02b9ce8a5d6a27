// Issue 29: a repository shaped like onedr0p/cluster-template's topf era (test/fixtures/topf/
// cluster-template/talos: topf.yaml, patches/{all,control-plane,worker,node/<host>}, its own secrets),
// unchanged, on a simulator that runs the operator's own configs (cluster.configs: external). The
// template disables Talos's CoreDNS and installs its own from the bootstrap helmfile; without that
// helmfile nothing installs CoreDNS, which preflight says before any node is touched. With CoreDNS
// installed from the configs instead (an inline manifest), the whole bootstrap runs.
import { copyFileSync, cpSync, mkdtempSync, readFileSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { E2eCluster, run, statuses } from './harness.js'

const FIXTURE = resolve(import.meta.dirname, '../fixtures/topf/cluster-template/talos')
const STANDIN = resolve(import.meta.dirname, '../support/topf')
let cluster: E2eCluster
let dir: string
let env: NodeJS.ProcessEnv

beforeAll(async () => {
  cluster = await E2eCluster.start('127.231.1', {
    cps: 3,
    workers: 1,
    speed: 3000,
    configs: 'external',
    discovery: 'enabled',
    names: ['k8s-0', 'k8s-1', 'k8s-2', 'k8s-3'],
  })
  dir = join(mkdtempSync(join(tmpdir(), 'tb-ct-')), 'talos')
  cpSync(FIXTURE, dir, { recursive: true })
  for (const f of ['bootstrap.yaml', 'charts-ca.crt', 'flux-deploy-key']) copyFileSync(join(cluster.clusterDir, f), join(dir, f))
  env = cluster.env({ CLUSTER_DIR: dir, PATH: [STANDIN, cluster.env().PATH ?? ''].join(delimiter) })
})
afterAll(async () => {
  await cluster?.stop()
})

describe("cluster-template's topf layout on the operator's own configs", () => {
  it('coreDNS disabled and no helmfile installing it: exit 2 before any node is touched', async () => {
    const result = await run('task', ['-x', 'bootstrap:preflight', `CLUSTER_DIR=${dir}`], env)
    expect(result.code, result.stderr + result.stdout).toBe(2)
    expect(result.stdout).toContain('generate: output/ lacks k8s-0.yaml, k8s-1.yaml, k8s-2.yaml, k8s-3.yaml, talosconfig')
    expect(result.stderr).toMatch(
      new RegExp(
        `^${join(dir, 'output', 'k8s-0.yaml')}:\\d+: k8s-0: cluster\\.coreDNS\\.disabled is true and nothing installs CoreDNS`,
        'm',
      ),
    )
    expect(cluster.calls().filter((c) => c.call !== 'probe')).toEqual([])
  })

  it('CoreDNS installed from the configs instead: rendered again, then the whole bootstrap to every node Ready', async () => {
    const patch = join(dir, 'patches', 'control-plane', 'coredns.yaml')
    writeFileSync(
      patch,
      [
        'cluster:',
        '  inlineManifests:',
        '    - name: coredns',
        '      contents: |',
        '        apiVersion: v1',
        '        kind: Service',
        '        metadata:',
        '          name: kube-dns',
        '          namespace: kube-system',
        '        spec:',
        '          selector: { k8s-app: kube-dns }',
        '          ports: [{ name: dns, port: 53, protocol: UDP }]',
        '',
      ].join('\n'),
    )
    // an edit after the render (not within the 2 s a checkout or copy writes files together)
    const later = Date.now() / 1000 + 5
    utimesSync(patch, later, later)
    const result = await run('task', ['-x', 'bootstrap:talos', `CLUSTER_DIR=${dir}`], env)
    expect(result.code, result.stderr + result.stdout).toBe(0)
    expect(result.stdout).toContain('generate: patches/control-plane/coredns.yaml changed after output/ was written: running topf render')
    const report = JSON.parse(readFileSync(join(dir, '.bootstrap', 'last-run.json'), 'utf8')) as Parameters<typeof statuses>[0]
    for (const phase of ['apply', 'verify', 'wait-ready'])
      expect(statuses(report, phase)).toEqual({ 'k8s-0': 'ok', 'k8s-1': 'ok', 'k8s-2': 'ok', 'k8s-3': 'ok' })
  }, 240_000)
})

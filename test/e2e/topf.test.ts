// Issue 29 item 1: a topf repository bootstraps with no talconfig.yaml and no configs on disk: the
// inventory comes from topf.yaml, the configs from `topf render -o output` and the talosconfig from
// `topf talosconfig`, run by the tool as a visible step because output/ is missing; a rerun finds
// them fresh and renders nothing; a patch edited afterwards with --no-generate is exit 2 naming it,
// with no node touched. topf cannot be built here: test/support/topf/topf stands in for it,
// rendering with the real talosctl from a secrets bundle taken from the simulated cluster's PKI.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { delimiter, join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { E2eCluster, statuses } from './harness.js'

const STANDIN = resolve(import.meta.dirname, '../support/topf')
let cluster: E2eCluster
let dir: string
const withTopf = (): Record<string, string> => ({ PATH: [STANDIN, cluster.env().PATH ?? ''].join(delimiter) })

beforeAll(async () => {
  cluster = await E2eCluster.start('127.231.2', { cps: 1, workers: 1, speed: 3000 })
  dir = cluster.clusterDir
  // the cluster's secrets as topf keeps them (secrets.yaml): the simulated nodes' PKI
  execFileSync(join(cluster.sim.binDir, 'talosctl'), [
    'gen',
    'secrets',
    '--from-controlplane-config',
    join(dir, 'clusterconfig', 'e2e-cp-1.yaml'),
    '-o',
    join(dir, 'secrets.yaml'),
  ])
  rmSync(join(dir, 'talconfig.yaml'))
  rmSync(join(dir, 'clusterconfig'), { recursive: true })
  writeFileSync(
    join(dir, 'topf.yaml'),
    [
      'clusterName: e2e',
      'clusterEndpoint: https://127.231.2.10:6443',
      'kubernetesVersion: 1.35.0',
      'talosVersion: 1.12.11',
      'secretsPath: secrets.yaml',
      'patchesDir: patches',
      'nodes:',
      '  - host: cp-1',
      '    ip: 127.231.2.11',
      '    role: control-plane',
      '  - host: wrkr-1',
      '    ip: 127.231.2.21',
      '    role: worker',
      '',
    ].join('\n'),
  )
  for (const folder of ['all', 'control-plane', 'node/wrkr-1']) mkdirSync(join(dir, 'patches', folder), { recursive: true })
  writeFileSync(
    join(dir, 'patches/all/hostname.yaml.tpl'),
    'apiVersion: v1alpha1\nkind: HostnameConfig\nauto: "off"\nhostname: {{ .Node.Host }}\n',
  )
  writeFileSync(
    join(dir, 'patches/all/cluster.yaml'),
    'machine:\n  install:\n    disk: /dev/sda\n  features:\n    kubePrism:\n      enabled: true\n      port: 7445\ncluster:\n  network:\n    cni:\n      name: none\n  proxy:\n    disabled: true\n  discovery:\n    enabled: false\n',
  )
  writeFileSync(join(dir, 'patches/control-plane/api.yaml.tpl'), 'cluster:\n  apiServer:\n    certSANs:\n      - 127.231.2.10\n')
  writeFileSync(join(dir, 'patches/node/wrkr-1/labels.yaml.tpl'), 'machine:\n  nodeLabels:\n    example.org/host: {{ .Node.Host }}\n')
})
afterAll(async () => {
  await cluster?.stop()
})

describe('a topf repository (topf.yaml, patches, no configs on disk)', () => {
  it('renders the configs as a visible step, then bootstraps every node from them', async () => {
    const result = await cluster.task('bootstrap:talos', {}, [], withTopf())
    expect(result.code, result.stderr + result.stdout).toBe(0)
    expect(result.stdout).toContain(
      `generate: output/ lacks cp-1.yaml, wrkr-1.yaml, talosconfig: running topf render -o output && topf talosconfig > output/talosconfig in ${dir}`,
    )
    expect(result.stdout).toMatch(/generate: topf wrote the configs of 2 node\(s\) and the talosconfig into \S+\/output/)
    for (const phase of ['preflight', 'apply', 'verify', 'wait-ready'])
      expect(statuses(cluster.report(), phase)).toEqual({ 'cp-1': 'ok', 'wrkr-1': 'ok' })
    const log = readFileSync(join(dir, '.bootstrap', 'commands.log'), 'utf8')
    expect(log).toContain(`apply-config --insecure -n 127.231.2.21 -e 127.231.2.21 -f ${join(dir, 'output', 'wrkr-1.yaml')}`)
    expect(log).toContain(`--talosconfig ${join(dir, 'output', 'talosconfig')}`)
    // the talosconfig topf printed never reaches the output
    const key = /key: (\S+)/.exec(readFileSync(join(dir, 'output', 'talosconfig'), 'utf8'))?.[1] as string
    expect(result.stdout + result.stderr + log).not.toContain(key)
  }, 180_000)

  it('a rerun finds the render fresh: nothing rendered, nothing left to do', async () => {
    const result = await cluster.task('bootstrap:talos')
    expect(result.code, result.stderr + result.stdout).toBe(0)
    expect(result.stdout).not.toContain('generate:')
    expect(statuses(cluster.report(), 'apply')).toEqual({ 'cp-1': 'skipped', 'wrkr-1': 'skipped' })
  }, 180_000)

  it('--no-generate after a patch changed: exit 2 naming the patch, no node called', async () => {
    const patch = join(dir, 'patches/node/wrkr-1/labels.yaml.tpl')
    const later = Date.now() / 1000 + 5
    utimesSync(patch, later, later)
    const calls = cluster.calls().length
    const result = await cluster.task('bootstrap:apply', {}, ['--no-generate'], withTopf())
    expect(result.code).toBe(2)
    expect(result.stderr).toContain(
      `${join(dir, 'output')}: the machine configs are out of date: patches/node/wrkr-1/labels.yaml.tpl changed after output/ was written (fix: run \`topf render -o output && topf talosconfig > output/talosconfig\` in ${dir}, or run again without --no-generate (the tool then runs it))`,
    )
    expect(cluster.calls().length).toBe(calls)
    expect(existsSync(join(dir, 'output', 'wrkr-1.yaml'))).toBe(true)
  })
})

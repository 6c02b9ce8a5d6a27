// Issue 15: a talhelper repository as operators write them loads unchanged and bootstraps: `${VAR}`
// from talenv.yaml and from the environment (talosVersion included, so the version-skew warning sees
// the real value), FQDN hostnames and talhelper's `<cluster>-<fqdn>.yaml` files, a worker without
// controlPlane:, a comma-separated ipAddress, a per-node filenameTmpl, another output folder.
// Talos registers an FQDN hostname in Kubernetes by its first label (machined
// controllers/k8s/nodename.go), as the simulator does: wait-ready must find the nodes under it.
import { cpSync, mkdtempSync, readdirSync, readFileSync, renameSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parse, stringify } from 'yaml'
import { E2eCluster, run, statuses } from './harness.js'

let cluster: E2eCluster
beforeAll(async () => {
  cluster = await E2eCluster.start('127.97.1', { cps: 1, workers: 2, speed: 3000 })
  const dir = cluster.clusterDir
  const fqdn = (name: string): string => `${name}.lab.example`
  // talhelper genconfig -o generated: the configs named as it names them, hostnames as FQDNs
  renameSync(join(dir, 'clusterconfig'), join(dir, 'generated'))
  for (const [name, file] of [
    ['cp-1', `e2e-${fqdn('cp-1')}.yaml`],
    ['wrkr-1', `e2e-${fqdn('wrkr-1')}.yaml`],
    ['wrkr-2', `${fqdn('wrkr-2')}.yaml`],
  ] as const) {
    const from = join(dir, 'generated', `e2e-${name}.yaml`)
    writeFileSync(join(dir, 'generated', file), readFileSync(from, 'utf8').replace(`hostname: ${name}\n`, `hostname: ${fqdn(name)}\n`))
    if (file !== `e2e-${name}.yaml`) renameSync(from, `${from}.old`)
  }
  writeFileSync(join(dir, 'talenv.yaml'), '---\nCLUSTER: e2e\nCP_IP: 127.97.1.11\n')
  writeFileSync(
    join(dir, 'talconfig.yaml'),
    [
      '# yaml-language-server: $schema=./talconfig.json  ($UNSET in a comment is left alone)',
      'clusterName: ${CLUSTER}',
      'talosVersion: "${talosVersion}"',
      'kubernetesVersion: v1.35.0',
      'endpoint: https://127.97.1.10:6443',
      'nodes:',
      `  - hostname: ${fqdn('cp-1')}`,
      '    ipAddress: ${CP_IP}',
      '    controlPlane: true',
      '    installDisk: /dev/sda',
      `  - hostname: ${fqdn('wrkr-1')}`,
      '    ipAddress: $WRKR1_IP',
      '    installDisk: /dev/sda',
      `  - hostname: ${fqdn('wrkr-2')}`,
      '    ipAddress: 127.97.1.22, 127.97.1.122',
      '    controlPlane: false',
      '    installDisk: /dev/sda',
      '    filenameTmpl: "{{ .Hostname }}.yaml"',
      '',
    ].join('\n'),
  )
  writeFileSync(join(dir, 'bootstrap.yaml'), `${readFileSync(join(dir, 'bootstrap.yaml'), 'utf8')}talhelperOutDir: generated\n`)
  // as talhelper genconfig would have left them after the edit: newer than talconfig.yaml and talenv.yaml
  const later = Date.now() / 1000 + 5
  for (const f of readdirSync(join(dir, 'generated'))) utimesSync(join(dir, 'generated', f), later, later)
})
afterAll(async () => {
  await cluster?.stop()
})

const ENV = { WRKR1_IP: '127.97.1.21', talosVersion: 'v1.12.11' }

describe('a talhelper repository with variables, FQDNs and its own file names', () => {
  it('bootstraps: every node under its FQDN, Ready in Kubernetes under its short name', async () => {
    const result = await cluster.task('bootstrap:talos', {}, [], ENV)
    expect(result.code, result.stderr + result.stdout).toBe(0)
    const report = cluster.report()
    for (const phase of ['preflight', 'apply', 'verify', 'wait-ready']) {
      expect(statuses(report, phase)).toEqual({ 'cp-1.lab.example': 'ok', 'wrkr-1.lab.example': 'ok', 'wrkr-2.lab.example': 'ok' })
    }
    // the configs applied are talhelper's files in the output folder, to the first address of a list
    // (the product's command log: the real talosctl sends the config's bytes, not its path, to the node)
    const log = readFileSync(join(cluster.clusterDir, '.bootstrap', 'commands.log'), 'utf8').split('\n')
    const applies = log.filter((l) => / talosctl apply-config --insecure /.test(l) && /^\S+ exit 0 /.test(l)).map((l) => l.split(' '))
    expect(applies.map((w) => [w[w.indexOf('-n') + 1], w[w.indexOf('-f') + 1]]).sort()).toEqual([
      ['127.97.1.11', join(cluster.clusterDir, 'generated', 'e2e-cp-1.lab.example.yaml')],
      ['127.97.1.21', join(cluster.clusterDir, 'generated', 'e2e-wrkr-1.lab.example.yaml')],
      ['127.97.1.22', join(cluster.clusterDir, 'generated', 'wrkr-2.lab.example.yaml')],
    ])
    // a whole bootstrap with the default waits: more than vitest's 60 s on a loaded 2-core machine
  }, 180_000)

  it('NODES takes a short name when it is unique, and an address of the list', async () => {
    const result = await cluster.task('bootstrap:verify', { NODES: 'wrkr-1,127.97.1.122' }, [], ENV)
    expect(result.code, result.stderr + result.stdout).toBe(0)
    expect(statuses(cluster.report(), 'verify')).toEqual({ 'wrkr-1.lab.example': 'ok', 'wrkr-2.lab.example': 'ok' })
  })

  it('talosVersion from the environment reaches the version-skew check', async () => {
    const result = await cluster.task('bootstrap:apply', { DRY_RUN: 'true' }, [], { ...ENV, talosVersion: '1.11.5' })
    expect(result.code, result.stderr + result.stdout).toBe(0)
    expect(result.stderr + result.stdout).toMatch(/talosctl v1\.12\.11 but the cluster's talosVersion is v1\.11\.5/)
  })
})

describe('the home-ops fixture (test/fixtures/talhelper/home-ops), as the issue ran it', () => {
  it('bootstrap:apply DRY_RUN=true plans the files talhelper named for every node; preflight validates them', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'tb-home-ops-')), 'home-ops')
    cpSync(resolve(import.meta.dirname, '../fixtures/talhelper/home-ops'), dir, { recursive: true })
    const env = cluster.env({ CLUSTER_DIR: dir, CLUSTER_DOMAIN: 'home.example', NODE3_IP: '127.97.3.13' })
    const dry = await run('task', ['-x', 'bootstrap:apply', `CLUSTER_DIR=${dir}`, 'DRY_RUN=true'], env)
    expect(dry.code, dry.stderr + dry.stdout).toBe(0)
    for (const [ip, host] of [
      ['127.97.3.11', 'knode01'],
      ['127.97.3.12', 'knode02'],
      ['127.97.3.13', 'knode03'],
    ]) {
      expect(dry.stdout).toContain(
        `apply-config --insecure -n ${ip} -e ${ip} -f ${join(dir, 'clusterconfig', `home-${host}.home.example.yaml`)}`,
      )
    }
    // the repository installs its CNI some other way: preflight loads it and names that alone (issue 17)
    const noCni = await run('task', ['-x', 'bootstrap:preflight', `CLUSTER_DIR=${dir}`, '--', '--retries', '0'], env)
    expect(noCni.code).toBe(2)
    expect(noCni.stderr).not.toMatch(/is invalid|variable|not a valid/)
    expect(noCni.stderr).toMatch(/cluster\.network\.cni\.name is none and nothing installs a CNI/)
    // with the tool's settings beside it (the example's cilium), preflight validates every config, then
    // finds no node: nothing listens on 127.97.3.x
    const example = parse(readFileSync(resolve(import.meta.dirname, '../../talos/bootstrap.yaml'), 'utf8')) as { cni: unknown }
    writeFileSync(join(dir, 'bootstrap.yaml'), stringify({ cni: example.cni }))
    const preflight = await run('task', ['-x', 'bootstrap:preflight', `CLUSTER_DIR=${dir}`, '--', '--retries', '0'], env)
    expect(preflight.stderr).not.toMatch(/is invalid|variable|not a valid/)
    expect(preflight.stderr).toMatch(/knode01\.home\.example \(127\.97\.3\.11\) failed in preflight: unreachable/)
  })
})

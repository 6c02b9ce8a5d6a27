// Issue 29 item 4: `cni: none` is accepted when something installs the CNI, the configs themselves
// included (a control plane's cluster.inlineManifests, extraManifests, cni.urls, which Talos applies);
// exit 2 when nothing does, and when cluster.coreDNS.disabled: true and nothing installs CoreDNS.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { checkClusterCni, manifestInstalls, type OtherInstallers } from '../../lib/input/cni-compat.js'
import type { ClusterNode } from '../../lib/core/model.js'
import { loadSettings } from '../../lib/input/settings.js'

const CILIUM_DS = readFileSync(resolve(import.meta.dirname, '../fixtures/cni/cilium-daemonset.yaml'), 'utf8')
const COREDNS = `apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
spec:
  clusterIP: 127.96.0.10
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
`

const indent = (text: string, by: string): string =>
  text
    .split('\n')
    .map((l) => (l ? by + l : l))
    .join('\n')

/** A control plane's and a worker's config (cni none, kube-proxy off), `cluster` lines added to the control plane's. */
function cluster(clusterExtra: string, settings?: string): { dir: string; nodes: ClusterNode[] } {
  const dir = mkdtempSync(join(tmpdir(), 'tb-cni-inst-'))
  const config = (role: string, extra: string): string =>
    `version: v1alpha1\nmachine:\n  type: ${role}\n  features:\n    kubePrism:\n      enabled: true\n      port: 7445\ncluster:\n  clusterName: demo\n  network:\n    cni:\n      name: none\n  proxy:\n    disabled: true\n${extra}`
  writeFileSync(join(dir, 'demo-cp-1.yaml'), config('controlplane', clusterExtra))
  writeFileSync(join(dir, 'demo-wrkr-1.yaml'), config('worker', ''))
  if (settings) writeFileSync(join(dir, 'bootstrap.yaml'), settings)
  return {
    dir,
    nodes: [
      { name: 'cp-1', address: '127.0.0.11', role: 'controlplane', configFile: join(dir, 'demo-cp-1.yaml') },
      { name: 'wrkr-1', address: '127.0.0.21', role: 'worker', configFile: join(dir, 'demo-wrkr-1.yaml') },
    ],
  }
}
async function check(clusterExtra: string, settings?: string, others?: OtherInstallers): Promise<string[]> {
  const { dir, nodes } = cluster(clusterExtra, settings)
  const loaded = loadSettings({ clusterDir: dir, env: {}, flags: {} })
  const { errors } = await checkClusterCni(nodes, loaded.cni, dir, others)
  return errors.map((e) => e.format().replaceAll(dir, '<dir>'))
}
const inline = (name: string, contents: string): string =>
  `  inlineManifests:\n    - name: ${name}\n      contents: |\n${indent(contents, '        ')}`

describe('what installs the CNI and CoreDNS', () => {
  it('a manifest installs a CNI when a DaemonSet mounts the host /etc/cni/net.d; CoreDNS by its kube-dns Service or coredns Deployment', () => {
    expect(manifestInstalls(CILIUM_DS)).toEqual(['cni'])
    expect(manifestInstalls(COREDNS)).toEqual(['coredns'])
    expect(manifestInstalls(CILIUM_DS.replaceAll('/etc/cni/net.d', '/var/lib/cilium'))).toEqual([])
    expect(manifestInstalls('kind: ConfigMap\nmetadata:\n  name: cilium\n')).toEqual([])
  })

  it("cni none with the CNI in a control plane's inlineManifests and no cni: in bootstrap.yaml: accepted", async () => {
    expect(await check(inline('cilium', CILIUM_DS))).toEqual([])
  })

  it('cni none with a CNI among extraManifests (by its file name): accepted', async () => {
    expect(await check('  extraManifests:\n    - https://raw.githubusercontent.com/example/manifests/main/cilium.yaml\n')).toEqual([])
  })

  it('cni none and inline manifests that install no CNI: exit 2 naming every place looked at', async () => {
    const errors = await check(inline('settings', 'kind: ConfigMap\nmetadata:\n  name: x\n'))
    expect(errors).toEqual([
      "<dir>/demo-cp-1.yaml:12: cp-1: cluster.network.cni.name is none and nothing installs a CNI (no cni: in bootstrap.yaml, and no CNI in the configs' inlineManifests, extraManifests or cni.urls): no node could ever turn Ready (fix: add a cni: section to <dir>/bootstrap.yaml (the cilium example in talos/bootstrap.yaml, docs/settings.md), install one from the configs (cluster.inlineManifests), or set cluster.network.cni.name: flannel and regenerate the configs)",
    ])
  })

  it("another source the caller found (the bootstrap helmfile's CNI release) is accepted too", async () => {
    const others: OtherInstallers = {
      installers: [
        { addon: 'cni', source: 'release kube-system/cilium in bootstrap/helmfile/apps.yaml' },
        { addon: 'coredns', source: 'release kube-system/coredns in bootstrap/helmfile/apps.yaml' },
      ],
      looked: [],
    }
    expect(await check('  coreDNS:\n    disabled: true\n', undefined, others)).toEqual([])
    expect((await check('', undefined, { installers: [], looked: ['no CNI release in bootstrap/helmfile/apps.yaml'] }))[0]).toContain(
      'nothing installs a CNI (no cni: in bootstrap.yaml, no CNI release in bootstrap/helmfile/apps.yaml, and no CNI in',
    )
  })

  it('coreDNS disabled and nothing installs CoreDNS: exit 2 at that line', async () => {
    const errors = await check(`${inline('cilium', CILIUM_DS)}  coreDNS:\n    disabled: true\n`)
    expect(errors).toHaveLength(1)
    expect(errors[0]).toMatch(
      /^<dir>\/demo-cp-1\.yaml:\d+: cp-1: cluster\.coreDNS\.disabled is true and nothing installs CoreDNS \(no kube-dns Service or coredns Deployment in the configs' inlineManifests or extraManifests\): no pod could resolve a name, Flux's included \(fix: remove cluster\.coreDNS\.disabled/,
    )
  })

  it('coreDNS disabled with CoreDNS in the inline manifests: accepted', async () => {
    expect(
      await check(
        `  inlineManifests:\n    - name: cilium\n      contents: |\n${indent(CILIUM_DS, '        ')}    - name: coredns\n      contents: |\n${indent(COREDNS, '        ')}  coreDNS:\n    disabled: true\n`,
      ),
    ).toEqual([])
  })

  it('a CNI in the configs and another in bootstrap.yaml: two CNIs, exit 2', async () => {
    const errors = await check(
      inline('cilium', CILIUM_DS),
      'cni:\n  chart: cilium\n  repo: https://helm.cilium.io/\n  release: cilium\n  values:\n    kubeProxyReplacement: true\n    k8sServiceHost: localhost\n    k8sServicePort: 7445\n',
    )
    expect(errors[0]).toBe(
      '<dir>/bootstrap.yaml:2: bootstrap.yaml installs cilium and the configs install a CNI too (cluster.inlineManifests "cilium" in demo-cp-1.yaml): two CNIs on every node (fix: remove cni: from bootstrap.yaml, or the CNI from the configs and then regenerate the machine configs (talhelper genconfig))',
    )
  })
})

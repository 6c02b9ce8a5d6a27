// Issue 17: the machine configs and the CNI settings checked against each other, offline (lib/input/cni-compat.ts).
// Each case writes configs shaped as `talosctl gen config` writes them and a bootstrap.yaml, and
// expects the error at the file and line that must change, with the fix.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { checkClusterCni, type CniCheckResult } from '../../lib/input/cni-compat.js'
import type { ClusterNode } from '../../lib/core/model.js'
import { loadSettings } from '../../lib/input/settings.js'

interface NodeShape {
  cni?: string | null // null: no cni section (Talos: flannel)
  proxyDisabled?: boolean | null // null: no proxy section
  kubePrism?: { enabled: boolean; port?: number } | null
}

function config(role: 'controlplane' | 'worker', shape: NodeShape): string {
  const prism =
    shape.kubePrism === null
      ? ''
      : `        kubePrism:\n            enabled: ${String(shape.kubePrism?.enabled ?? true)}\n${shape.kubePrism?.port ? `            port: ${shape.kubePrism.port}\n` : '            port: 7445\n'}`
  const cni = shape.cni === null ? '' : `        cni:\n            name: ${shape.cni ?? 'none'}\n`
  const proxyDisabled = shape.proxyDisabled === undefined ? role === 'controlplane' : shape.proxyDisabled
  const proxy =
    proxyDisabled === null || (role === 'worker' && shape.proxyDisabled === undefined)
      ? ''
      : `    proxy:\n        disabled: ${String(proxyDisabled)}\n`
  return `version: v1alpha1\ndebug: false\nmachine:\n    type: ${role}\n    features:\n        rbac: true\n${prism}cluster:\n    clusterName: demo\n    network:\n${cni}        dnsDomain: cluster.local\n${proxy}---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: x\n`
}

const GUIDE_VALUES = `    ipam: { mode: kubernetes }
    kubeProxyReplacement: true
    k8sServiceHost: localhost
    k8sServicePort: 7445
    cgroup: { autoMount: { enabled: false }, hostRoot: /sys/fs/cgroup }
`

async function cluster(
  nodes: Record<string, NodeShape & { role?: 'controlplane' | 'worker' }>,
  settings: string | undefined,
): Promise<{ dir: string; result: CniCheckResult; file: (n: string) => string }> {
  const dir = mkdtempSync(join(tmpdir(), 'tb-cni-'))
  const list: ClusterNode[] = Object.entries(nodes).map(([name, shape], i) => {
    const role = shape.role ?? (name.startsWith('cp') ? 'controlplane' : 'worker')
    const configFile = join(dir, `demo-${name}.yaml`)
    writeFileSync(configFile, config(role, shape))
    return { name, address: `127.0.0.${11 + i}`, role, configFile }
  })
  if (settings !== undefined) writeFileSync(join(dir, 'bootstrap.yaml'), settings)
  const loaded = loadSettings({ clusterDir: dir, env: {}, flags: {} })
  return {
    dir,
    result: await checkClusterCni(list, loaded.cni, dir),
    file: (n) => join(dir, n === 'settings' ? 'bootstrap.yaml' : `demo-${n}.yaml`),
  }
}

const cilium = (values = GUIDE_VALUES, chart = 'cilium'): string => `cni:\n  chart: ${chart}\n  release: cilium\n  values:\n${values}`
const lineOf = (file: string, text: string): number =>
  readFileSync(file, 'utf8')
    .split('\n')
    .findIndex((l) => l.includes(text)) + 1

function only(result: CniCheckResult): { file: string | undefined; line: number | undefined; message: string; fix: string } {
  expect(result.errors.map((e) => e.format())).toHaveLength(1)
  const e = result.errors[0]
  if (!e) throw new Error('no error')
  return { file: e.file, line: e.line, message: e.message, fix: e.fix }
}

describe('machine configs against the CNI settings', async () => {
  it('the Talos guide values with cni none, kube-proxy disabled and KubePrism on 7445: no error, nothing skipped', async () => {
    const { result } = await cluster({ 'cp-1': {}, 'cp-2': {}, 'wrkr-1': {} }, cilium())
    expect(result).toEqual({ errors: [], skipped: [] })
  })

  it('a CNI in the settings and a control plane whose cni is flannel: two CNIs, at that config line', async () => {
    const { result, file } = await cluster({ 'cp-1': { cni: 'flannel' }, 'wrkr-1': { cni: null } }, cilium())
    const e = only(result)
    expect(e.file).toBe(file('cp-1'))
    expect(e.line).toBe(lineOf(file('cp-1'), 'name: flannel'))
    expect(e.message).toMatch(/cluster\.network\.cni\.name is flannel: Talos installs its own flannel next to cilium from/)
    expect(e.fix).toMatch(/set cluster\.network\.cni\.name: none/)
  })

  it('a control plane with no cni section is flannel (Talos default): named as such', async () => {
    const { result, file } = await cluster({ 'cp-1': { cni: null } }, cilium())
    const e = only(result)
    expect(e.file).toBe(file('cp-1'))
    expect(e.line).toBe(lineOf(file('cp-1'), 'network:'))
    expect(e.message).toMatch(/not set \(Talos defaults to flannel\)/)
  })

  it('custom CNI URLs next to a chart: named', async () => {
    const { result } = await cluster({ 'cp-1': { cni: 'custom' } }, cilium())
    expect(only(result).message).toMatch(/Talos applies the manifests of cluster\.network\.cni\.urls next to cilium/)
  })

  it('every config says none and no CNI is configured: nodes could never turn Ready', async () => {
    const { result, file } = await cluster({ 'cp-1': {}, 'wrkr-1': {} }, 'retries: 3\n')
    const e = only(result)
    expect(e.file).toBe(file('cp-1'))
    expect(e.line).toBe(lineOf(file('cp-1'), 'name: none'))
    expect(e.message).toMatch(
      /cni\.name is none and nothing installs a CNI \(no cni: in bootstrap\.yaml, .*\): no node could ever turn Ready/,
    )
    expect(e.fix).toMatch(/add a cni: section to .*bootstrap\.yaml.*or set cluster\.network\.cni\.name: flannel/)
  })

  it('no settings file at all and cni none: the same error', async () => {
    const { result } = await cluster({ 'cp-1': {} }, undefined)
    expect(only(result).message).toMatch(/nothing installs a CNI/)
  })

  it('Talos flannel and no CNI in the settings: fine', async () => {
    const { result } = await cluster({ 'cp-1': { cni: null, proxyDisabled: null }, 'wrkr-1': { cni: null } }, 'retries: 3\n')
    expect(result.errors).toEqual([])
  })

  it('kube-proxy disabled and cilium without k8sServiceHost/k8sServicePort: at cni.values', async () => {
    const { result, file } = await cluster(
      { 'cp-1': {}, 'wrkr-1': {} },
      cilium('    ipam: { mode: kubernetes }\n    kubeProxyReplacement: true\n'),
    )
    const e = only(result)
    expect(e.file).toBe(file('settings'))
    expect(e.line).toBe(lineOf(file('settings'), 'ipam:'))
    expect(e.message).toMatch(
      /cni\.values has no k8sServiceHost and k8sServicePort but demo-cp-1\.yaml disables kube-proxy .*could not reach the API server/,
    )
    expect(e.fix).toMatch(/k8sServiceHost: localhost and k8sServicePort: 7445/)
  })

  it('kube-proxy disabled and kubeProxyReplacement false: at that key', async () => {
    const { result, file } = await cluster(
      { 'cp-1': {} },
      cilium(GUIDE_VALUES.replace('kubeProxyReplacement: true', 'kubeProxyReplacement: false')),
    )
    const e = only(result)
    expect(e.line).toBe(lineOf(file('settings'), 'kubeProxyReplacement'))
    expect(e.message).toMatch(/kubeProxyReplacement is false but demo-cp-1\.yaml disables kube-proxy/)
  })

  it('kube-proxy running: cilium without k8sServiceHost is fine (the Service IP works)', async () => {
    const { result } = await cluster({ 'cp-1': { proxyDisabled: false } }, cilium('    ipam: { mode: kubernetes }\n'))
    expect(result.errors).toEqual([])
  })

  it('k8sServicePort is not the KubePrism port: at k8sServicePort', async () => {
    const { result, file } = await cluster(
      { 'cp-1': { kubePrism: { enabled: true, port: 7446 } }, 'wrkr-1': { kubePrism: { enabled: true, port: 7446 } } },
      cilium(),
    )
    const e = only(result)
    expect(e.file).toBe(file('settings'))
    expect(e.line).toBe(lineOf(file('settings'), 'k8sServicePort'))
    expect(e.message).toMatch(/k8sServicePort is 7445 but KubePrism listens on 7446/)
    expect(e.fix).toBe('set k8sServicePort: 7446')
  })

  it('KubePrism disabled everywhere while cilium uses localhost: at each config', async () => {
    const { result, file } = await cluster(
      { 'cp-1': { kubePrism: { enabled: false } }, 'wrkr-1': { kubePrism: { enabled: false } } },
      cilium(),
    )
    expect(result.errors.map((e) => [e.file, e.line])).toEqual([
      [file('cp-1'), lineOf(file('cp-1'), 'enabled: false')],
      [file('wrkr-1'), lineOf(file('wrkr-1'), 'enabled: false')],
    ])
    expect(result.errors[0]?.message).toMatch(/KubePrism is disabled .* cilium reaches the API server through it/)
  })

  it('KubePrism absent from a config is off (Talos enables it only when enabled: true)', async () => {
    const { result, file } = await cluster({ 'cp-1': { kubePrism: null } }, cilium())
    expect(only(result).file).toBe(file('cp-1'))
  })

  it('configs that disagree: cni name, proxy, KubePrism port; each at the differing config', async () => {
    const { result, file } = await cluster(
      {
        'cp-1': {},
        'cp-2': { proxyDisabled: false },
        'wrkr-1': { cni: 'flannel' },
        'wrkr-2': { kubePrism: { enabled: true, port: 7000 } },
      },
      cilium(),
    )
    const messages = result.errors.map((e) => `${e.file ?? ''}:${e.line ?? ''}: ${e.message}`)
    expect(messages).toEqual(
      expect.arrayContaining([
        `${file('wrkr-1')}:${lineOf(file('wrkr-1'), 'name: flannel')}: wrkr-1: cluster.network.cni.name is flannel here but none in demo-cp-1.yaml (cp-1): the configs of one cluster disagree`,
        `${file('cp-2')}:${lineOf(file('cp-2'), 'disabled: false')}: cp-2: cluster.proxy.disabled is false here but true in demo-cp-1.yaml (cp-1): the configs of one cluster disagree`,
        `${file('wrkr-2')}:${lineOf(file('wrkr-2'), 'port: 7000')}: wrkr-2: machine.features.kubePrism.port is 7000 here but 7445 in demo-cp-1.yaml (cp-1): the configs of one cluster disagree`,
      ]),
    )
    expect(result.errors).toHaveLength(3)
  })

  it('a chart that is not cilium: the CNI name is checked, the cilium checks are said to be skipped', async () => {
    const { result, file } = await cluster(
      { 'cp-1': { cni: 'flannel' } },
      'cni:\n  chart: tigera-operator\n  repo: https://docs.tigera.io/calico/charts\n  release: calico\n',
    )
    expect(only(result).file).toBe(file('cp-1'))
    expect(result.skipped).toEqual([
      expect.stringMatching(
        /chart tigera-operator is not cilium: checked the CNI name only; kube-proxy .*k8sServiceHost\/k8sServicePort and KubePrism .* not checked/,
      ),
    ])
  })
})

describe('the example settings and the simulator carry the Talos guide "Deploying Cilium CNI" values', () => {
  const example = loadSettings({ clusterDir: join(import.meta.dirname, '../../talos'), env: {}, flags: {} })

  it('talos/bootstrap.yaml: kube-proxy-free through KubePrism, capabilities without SYS_MODULE, cgroup as Talos mounts it', () => {
    expect(example.cni?.values).toEqual({
      ipam: { mode: 'kubernetes' },
      kubeProxyReplacement: true,
      k8sServiceHost: 'localhost',
      k8sServicePort: 7445,
      securityContext: {
        capabilities: {
          ciliumAgent: [
            'CHOWN',
            'KILL',
            'NET_ADMIN',
            'NET_RAW',
            'IPC_LOCK',
            'SYS_ADMIN',
            'SYS_RESOURCE',
            'DAC_OVERRIDE',
            'FOWNER',
            'SETGID',
            'SETUID',
          ],
          cleanCiliumState: ['NET_ADMIN', 'SYS_ADMIN', 'SYS_RESOURCE'],
        },
      },
      cgroup: { autoMount: { enabled: false }, hostRoot: '/sys/fs/cgroup' },
    })
  })

  it("the simulator's written settings carry the same values", async () => {
    // @ts-expect-error plain JS module of the simulator
    const { bootstrapSettings } = (await import('../../sim/writer.js')) as {
      bootstrapSettings: (s: object) => { cni: { values: unknown } }
    }
    expect(bootstrapSettings({ speed: 60, cluster: { name: 'x' } }).cni.values).toEqual(example.cni?.values)
  })

  it('they pass the check against configs as the Talos guide wants them (cni none, kube-proxy disabled, KubePrism on)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tb-cni-'))
    const nodes: ClusterNode[] = (['controlplane', 'worker'] as const).map((role, i) => {
      const configFile = join(dir, `n${i}.yaml`)
      writeFileSync(configFile, config(role, {}))
      return { name: `n${i}`, address: `127.0.0.${i + 1}`, role, configFile }
    })
    expect(await checkClusterCni(nodes, example.cni, join(import.meta.dirname, '../../talos'))).toEqual({ errors: [], skipped: [] })
  })
})

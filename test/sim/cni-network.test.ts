// The simulator holds a CNI to what a real Talos node needs (issue 17, item 3). Each case's machine
// config facts (sim/talos/network.js reads them from the applied config in the full simulator):
// - kube-proxy disabled (cluster.proxy.disabled) and cilium without k8sServiceHost: the agent cannot
//   reach the in-cluster Service, it restarts with "Unable to contact k8s api-server" and the node
//   stays NotReady (cilium's daemonset.yaml sets KUBERNETES_SERVICE_HOST only from k8sServiceHost;
//   kube-proxy is rendered by Talos only when enabled: talos machined controllers/k8s/control_plane.go
//   ProxyEnabled, k8stemplates/kube-proxy.go);
// - localhost is KubePrism: reachable only when machine.features.kubePrism is enabled on that port
//   (pkg/machinery/config/types/v1alpha1/v1alpha1_features.go, controllers/k8s/kubeprism*.go);
// - a config whose CNI is not none makes Talos deploy its own flannel DaemonSet kube-system/kube-flannel
//   (control_plane.go FlannelEnabled, k8stemplates/flannel.go): next to cilium, two CNIs.
// Addresses: 127.38.0.0/16, one /24 per case.
import { afterEach, describe, expect, it } from 'vitest'
// @ts-ignore plain JS test kit
import { startKubeForTest, run } from '../../sim/testkit.js'
// @ts-ignore plain JS
import { networkOf } from '../../sim/talos/network.js'

type Kit = Awaited<ReturnType<typeof startKubeForTest>>
interface Network {
  cni: string
  proxy: boolean
  kubePrism: { enabled: boolean; port: number }
}
interface PodView {
  metadata: { name: string; labels?: Record<string, string> }
  spec: { nodeName?: string }
  status?: {
    conditions?: Array<{ type: string; status: string }>
    containerStatuses?: Array<{
      restartCount: number
      state?: { waiting?: { reason?: string } }
      lastState?: { terminated?: { message?: string } }
    }>
  }
}

const TALOS: Network = { cni: 'none', proxy: false, kubePrism: { enabled: true, port: 7445 } }
const GUIDE = ['--set', 'kubeProxyReplacement=true', '--set', 'k8sServiceHost=localhost', '--set', 'k8sServicePort=7445']

let kit: Kit | undefined
afterEach(async () => {
  await kit?.close()
  kit = undefined
})

async function cluster(range: string, network: Network): Promise<Kit> {
  kit = await startKubeForTest({
    ip: `${range}.1`,
    speed: 2000,
    timings: { cni: 10 },
    nodes: [
      { name: 'cp-1', ip: `${range}.11`, role: 'controlplane' },
      { name: 'wrkr-1', ip: `${range}.21`, role: 'worker' },
    ],
    network: { of: () => network },
  })
  return kit as Kit
}

const pods = (k: Kit, label: string): PodView[] =>
  (k.kube.store.list(k.kube.registry.get('', 'v1', 'pods')) as PodView[]).filter((p) => p.metadata.labels?.['k8s-app'] === label)
const ready = (p: PodView): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false
const until = async (what: string, check: () => boolean): Promise<void> => {
  for (let i = 0; i < 400; i++) {
    if (check()) return
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error(`never happened: ${what}`)
}
const install = (k: Kit, extra: string[]) =>
  run('helm', ['upgrade', '--install', 'cilium', ...k.chart, '-n', 'kube-system', ...extra], { env: k.env })

describe('a CNI held to what a Talos node needs', () => {
  it('kube-proxy disabled, cilium without k8sServiceHost: the agents restart, unable to reach the API server; nodes stay NotReady', async () => {
    const k = await cluster('127.38.1', TALOS)
    expect((await install(k, ['--set', 'kubeProxyReplacement=true'])).code).toBe(0)
    await until(
      'both agents restarted',
      () => pods(k, 'cilium').length === 2 && pods(k, 'cilium').every((p) => (p.status?.containerStatuses?.[0]?.restartCount ?? 0) > 0),
    )
    for (const pod of pods(k, 'cilium')) {
      expect(ready(pod)).toBe(false)
      const status = pod.status?.containerStatuses?.[0]
      expect(status?.state?.waiting?.reason).toBe('CrashLoopBackOff')
      expect(status?.lastState?.terminated?.message).toMatch(
        /level=fatal msg="Unable to initialize Kubernetes subsystem" error="unable to create k8s client: Get \\"https:\/\/127\.96\.0\.1:443\/api\/v1\/namespaces\/kube-system\\": dial tcp 127\.96\.0\.1:443: i\/o timeout"/,
      )
      expect(status?.lastState?.terminated?.message).toMatch(/msg="Unable to contact k8s api-server"/)
    }
    expect(k.kube.nodeReady('cp-1') || k.kube.nodeReady('wrkr-1')).toBe(false)
    // no kube-proxy and no flannel from Talos with this config
    expect(pods(k, 'kube-proxy')).toEqual([])
    expect(pods(k, 'flannel')).toEqual([])
  })

  it('the Talos guide values (k8sServiceHost localhost, KubePrism port): the agents get ready, the nodes Ready', async () => {
    const k = await cluster('127.38.2', TALOS)
    expect((await install(k, GUIDE)).code).toBe(0)
    await until('both nodes Ready', () => k.kube.nodeReady('cp-1') && k.kube.nodeReady('wrkr-1'))
    expect(pods(k, 'cilium').every(ready)).toBe(true)
  })

  it('k8sServicePort that is not the KubePrism port: connection refused on localhost', async () => {
    const k = await cluster('127.38.3', TALOS)
    expect((await install(k, [...GUIDE, '--set', 'k8sServicePort=6443'])).code).toBe(0)
    await until('an agent restarted', () => pods(k, 'cilium').some((p) => (p.status?.containerStatuses?.[0]?.restartCount ?? 0) > 0))
    const message = pods(k, 'cilium').find((p) => p.status?.containerStatuses?.[0]?.lastState?.terminated)?.status?.containerStatuses?.[0]
      ?.lastState?.terminated?.message
    expect(message).toMatch(/dial tcp 127\.0\.0\.1:6443: connect: connection refused/)
  })

  it('KubePrism disabled: localhost answers nothing', async () => {
    const k = await cluster('127.38.4', { ...TALOS, kubePrism: { enabled: false, port: 7445 } })
    expect((await install(k, GUIDE)).code).toBe(0)
    await until('an agent restarted', () => pods(k, 'cilium').some((p) => (p.status?.containerStatuses?.[0]?.restartCount ?? 0) > 0))
    expect(k.kube.nodeReady('wrkr-1')).toBe(false)
  })

  it('kube-proxy enabled: Talos deploys it, and cilium reaches the API through the Service', async () => {
    const k = await cluster('127.38.5', { ...TALOS, proxy: true })
    await until('kube-proxy on both nodes', () => pods(k, 'kube-proxy').length === 2)
    expect((await install(k, [])).code).toBe(0)
    await until('both nodes Ready', () => k.kube.nodeReady('cp-1') && k.kube.nodeReady('wrkr-1'))
  })

  it('a config whose CNI is flannel: Talos runs its own flannel; with cilium installed two CNIs show on every node', async () => {
    const k = await cluster('127.38.6', { ...TALOS, cni: 'flannel' })
    await until('flannel on both nodes', () => pods(k, 'flannel').length === 2)
    // Talos points flannel at KubePrism (control_plane.go flannelKubeServiceHost): it comes up alone
    await until('nodes Ready through flannel', () => k.kube.nodeReady('cp-1') && k.kube.nodeReady('wrkr-1'))
    expect((await install(k, GUIDE)).code).toBe(0)
    await until('cilium on both nodes', () => pods(k, 'cilium').length === 2)
    for (const node of ['cp-1', 'wrkr-1']) {
      expect(pods(k, 'flannel').filter((p) => p.spec.nodeName === node)).toHaveLength(1)
      expect(pods(k, 'cilium').filter((p) => p.spec.nodeName === node)).toHaveLength(1)
    }
  })
})

describe("what the simulator reads from a node's applied config (sim/talos/network.js)", () => {
  it('Talos defaults: no cni section is flannel, no proxy section deploys kube-proxy, no kubePrism section is off on 7445', () => {
    // v1alpha1_clusterconfig.go CNI(), v1alpha1_proxyconfig.go Enabled(), v1alpha1_features.go
    expect(networkOf({ machine: {}, cluster: {} })).toEqual({
      cni: 'flannel',
      proxy: true,
      kubePrism: { enabled: false, port: 7445 },
      inlineManifests: [],
    })
    expect(
      networkOf({
        machine: { features: { kubePrism: { enabled: true, port: 7000 } } },
        cluster: { network: { cni: { name: 'none' } }, proxy: { disabled: true } },
      }),
    ).toEqual({ cni: 'none', proxy: false, kubePrism: { enabled: true, port: 7000 }, inlineManifests: [] })
    expect(networkOf(null)).toBeUndefined()
  })
})

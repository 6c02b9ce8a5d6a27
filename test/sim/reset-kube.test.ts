// A reset's Kubernetes side (issue 16 items 6 and 7): the Node object stays, cordoned by Talos, goes
// Unknown when its kubelet stops; the kubelet re-registers it under the same name with a new boot ID
// and Talos uncordons only a node it cordoned; the drain and a budget-blocked drain. Range 127.162.x.
// Sources (Talos v1.12): controllers/k8s/node_cordoned_spec.go and node_apply.go (ApplyCordoned),
// runtime/v1alpha1/v1alpha1_sequencer.go (Reset: drain errors only logged) and _tasks.go
// (CordonAndDrainNode, stopAndRemoveAllPods, LeaveEtcd), pkg/kubernetes/kubernetes.go (Drain, DrainTimeout),
// internal/pkg/etcd/etcd.go (LeaveCluster retried 5 min).
import { afterEach, describe, expect, it } from 'vitest'
import type { Kube, KubeObject } from '../../sim/kube/index.js'
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { applyInsecure, at, bootstrapWhenReady, startOn, talosctl, type Started } from './helpers.js'

let c: Started | null = null
afterEach(async () => {
  await c?.stop()
  c = null
})

const kubeOf = (s: Started): Kube => s.sim.kube as Kube
function nodeObj(s: Started, name: string): KubeObject | undefined {
  const k = kubeOf(s)
  return k.store.get(k.registry.get('', 'v1', 'nodes')!, undefined, name)
}
const ready = (n: KubeObject | undefined): { status: string; lastTransitionTime: string } | undefined =>
  (n?.status?.conditions as Array<{ type: string; status: string; lastTransitionTime: string }> | undefined)?.find(
    (x) => x.type === 'Ready',
  )

async function running(range: string, speed = 1000): Promise<Started> {
  c = await startOn(range, { cps: 1, workers: 1, image: 'disk', speed, timings: { drain: 30 }, kube: 'model' })
  const { sim } = c
  for (const n of ['cp-1', 'wrkr-1']) await applyInsecure(sim, n)
  await bootstrapWhenReady(sim, 'cp-1')
  await sim.until(() => sim.node('wrkr-1')!.registered && sim.node('wrkr-1')!.stage === 'running')
  return c
}

/**
 * The simulated time the kubelet stopped at, and what `talosctl dmesg -f` (following from before the
 * reset, through the control plane) printed of the node's log until the node went down.
 */
function whenKubeletStops(s: Started, node: string, ip: string): Promise<{ at: number; dmesg: Promise<string> }> {
  const follow = execFile(join(s.sim.binDir, 'talosctl'), ['dmesg', '-f', ...at(s.sim.node('cp-1')!.ip, ip)], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', HOME: s.sim.dir, TALOSCONFIG: s.sim.env.TALOSCONFIG },
  })
  let out = ''
  follow.stdout?.on('data', (d: string) => {
    out += d
  })
  const dmesg = new Promise<string>((done) => follow.on('exit', () => done(out)))
  return new Promise((resolve) => {
    const stop = s.sim.watch((v) => {
      if (v.name !== node || v.services.kubelet === 'Running' || v.stage !== 'resetting') return
      stop()
      resolve({ at: kubeOf(s).clock.now().getTime(), dmesg })
    })
  })
}

/** sim.until re-checks on node changes only: a Kubernetes-side condition is polled */
async function kubeUntil(pred: () => boolean, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs
  while (!pred()) {
    if (Date.now() > end) throw new Error('timed out waiting for the Kubernetes side')
    await new Promise((r) => setTimeout(r, 5))
  }
}

const reset = (s: Started, ip: string) => talosctl(s.sim, ['reset', '--graceful=true', '--reboot', '--wait=false', ...at(ip)])

describe('reset, Kubernetes side', () => {
  it('keeps the Node: cordoned with talos.dev/cordoned, Unknown once the kubelet stops, re-registered under a new boot ID, uncordoned', async () => {
    const s = await running('127.162.1')
    const { sim } = s
    const before = nodeObj(s, 'wrkr-1')!
    const bootBefore = before.status.nodeInfo.bootID as string
    expect(bootBefore).toBe(sim.node('wrkr-1')!.bootId) // the kubelet reports the node's own boot ID
    expect((await reset(s, '127.162.1.21')).code).toBe(0)
    await kubeUntil(() => nodeObj(s, 'wrkr-1')?.spec?.unschedulable === true)
    expect(nodeObj(s, 'wrkr-1')!.metadata.annotations?.['talos.dev/cordoned']).toBe('true')
    // node-lifecycle controller: Unknown after the grace period, the object itself stays
    await kubeUntil(() => ready(nodeObj(s, 'wrkr-1'))?.status === 'Unknown')
    await sim.until(() => sim.node('wrkr-1')!.stage === 'maintenance')
    expect(nodeObj(s, 'wrkr-1')?.metadata.uid).toBe(before.metadata.uid)
    expect(nodeObj(s, 'wrkr-1')?.status.nodeInfo.bootID).toBe(bootBefore)

    await applyInsecure(sim, 'wrkr-1')
    await sim.until(() => sim.node('wrkr-1')!.registered)
    const after = nodeObj(s, 'wrkr-1')!
    expect(after.metadata.uid).toBe(before.metadata.uid)
    expect(after.status.nodeInfo.bootID).not.toBe(bootBefore)
    expect(after.status.nodeInfo.bootID).toBe(sim.node('wrkr-1')!.bootId)
    // the kubelet's first status after the restart: NotReady (its CNI pod restarts), a new transition
    expect(ready(after)?.status).toBe('False')
    expect(ready(after)?.lastTransitionTime).not.toBe(ready(before)?.lastTransitionTime)
    expect(after.spec?.unschedulable).toBeFalsy()
    expect(after.metadata.annotations?.['talos.dev/cordoned']).toBeUndefined()
  })

  it('leaves a node cordoned by someone else cordoned (no talos.dev/cordoned annotation)', async () => {
    const s = await running('127.162.2')
    const { sim } = s
    const k = kubeOf(s)
    const node = nodeObj(s, 'wrkr-1')!
    k.store.update(k.registry.get('', 'v1', 'nodes')!, { ...node, spec: { ...node.spec, unschedulable: true } }) // kubectl cordon
    await reset(s, '127.162.2.21')
    await sim.until(() => sim.node('wrkr-1')!.stage === 'maintenance')
    expect(nodeObj(s, 'wrkr-1')!.metadata.annotations?.['talos.dev/cordoned']).toBeUndefined()
    await applyInsecure(sim, 'wrkr-1')
    await sim.until(() => sim.node('wrkr-1')!.registered)
    expect(nodeObj(s, 'wrkr-1')!.spec.unschedulable).toBe(true)
  })

  it('drains before the kubelet stops; a budget-blocked eviction holds the reset for DrainTimeout, is logged, and the reset goes on', async () => {
    // slower: the log is read between the drain's end and the wipe (2 simulated seconds)
    const s = await running('127.162.3', 50)
    const { sim } = s
    const k = kubeOf(s)
    const PODS = k.registry.get('', 'v1', 'pods')!
    sim.addFault({ node: 'wrkr-1', kind: 'drain-blocked' })
    const stopped = whenKubeletStops(s, 'wrkr-1', '127.162.3.21')
    const t0 = k.clock.now().getTime()
    await reset(s, '127.162.3.21')
    await kubeUntil(() => k.store.list(PODS).some((p) => p.metadata.name.startsWith('guarded-') && p.spec.nodeName === 'wrkr-1'))
    const pdb = k.store.get(k.registry.get('policy', 'v1', 'poddisruptionbudgets')!, 'default', 'guarded')
    expect(pdb?.status).toMatchObject({ disruptionsAllowed: 0 })
    expect(nodeObj(s, 'wrkr-1')?.spec?.unschedulable).toBe(true)
    const { at: kubeletStopped, dmesg } = await stopped
    // DrainTimeout is 5 minutes of simulated time; the eviction was never allowed
    expect(kubeletStopped - t0).toBeGreaterThanOrEqual(300_000)
    expect(await dmesg).toMatch(
      /\[talos\] WARNING: failed to evict pod: failed to evict pod default\/guarded-\w+: context deadline exceeded\n/,
    )
    // Drain's errors are only logged (taskErrorHandler(logError, …)): the reset carries on to maintenance
    await sim.until(() => sim.node('wrkr-1')!.stage === 'maintenance')
  })

  it('an unblocked drain evicts the controller-owned pods and takes the drain time before the kubelet stops', async () => {
    const s = await running('127.162.4')
    const { sim } = s
    const k = kubeOf(s)
    const PODS = k.registry.get('', 'v1', 'pods')!
    k.store.create(PODS, {
      metadata: {
        name: 'web-1',
        namespace: 'default',
        labels: { app: 'web' },
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web', uid: 'u1', controller: true }],
      },
      spec: { nodeName: 'wrkr-1', containers: [{ name: 'c', image: 'x' }] },
      status: { phase: 'Running' },
    })
    const stopped = whenKubeletStops(s, 'wrkr-1', '127.162.4.21')
    const t0 = k.clock.now().getTime()
    await reset(s, '127.162.4.21')
    const { at: kubeletStopped } = await stopped
    expect(k.store.get(PODS, 'default', 'web-1')).toBeUndefined()
    expect(kubeletStopped - t0).toBeGreaterThanOrEqual(30_000) // timings.drain
    await sim.until(() => sim.node('wrkr-1')!.stage === 'maintenance')
  })

  it('a refused etcd leave is retried for 5 minutes before the reset sequence fails (still configured, resetting)', async () => {
    c = await startOn('127.162.5', {
      cps: 1,
      workers: 0,
      image: 'disk',
      speed: 1000,
      faults: [{ node: 'cp-1', kind: 'etcd-leave' }],
      kube: 'model',
    })
    const s = c
    const { sim } = s
    await applyInsecure(sim, 'cp-1')
    await bootstrapWhenReady(sim, 'cp-1')
    await sim.until(() => sim.node('cp-1')!.registered && sim.node('cp-1')!.stage === 'running')
    const k = kubeOf(s)
    const stopped = whenKubeletStops(s, 'cp-1', '127.162.5.11')
    await reset(s, '127.162.5.11')
    const { at: kubeletStopped } = await stopped
    // the abort is logged when the retries are spent
    let said = 0
    while (said === 0) {
      const d = await talosctl(sim, ['dmesg', ...at('127.162.5.11')])
      if (d.stdout.includes('[talos] reset: leave etcd: etcdserver: re-configuration failed')) said = k.clock.now().getTime()
      else await new Promise((r) => setTimeout(r, 20))
    }
    expect(said - kubeletStopped).toBeGreaterThanOrEqual(300_000)
    expect(sim.node('cp-1')).toMatchObject({ stage: 'resetting', configured: true })
  })
})

// `talosctl upgrade-k8s` against the simulator with the real talosctl v1.12.11 and v1.13.9
// (docs/day2-design.md 1.6; sim/talos/k8s.js): the typed COSI resources it reads (KubeletSpecs,
// APIServerConfigs, ControllerManagerConfigs, SchedulerConfigs, StaticPods, Manifests, Services, the
// MachineConfig as proto_spec), the NO_REBOOT config patch per control plane moving each config's
// version and the mirror pods (talos.dev/config-version, the new image), the kubelet restart per node and
// the Node's kubeletVersion, the bootstrap manifests sync; a second run is a no-op (errUpdateSkipped);
// a staged config overwritten by the NO_REBOOT apply; faults: an image the registry lacks (image-pull: the pre-pull fails), a control plane component that
// never becomes Ready at the new version (static-pod with `image`) and a kubelet that does not come back
// at it (kubelet-crashloop with `image`): the real tool waits (its pod wait is 5 min, its kubelet wait
// has no timeout). The same upgrade on the real control plane (SIM_KUBE=real). Range 127.253.x.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startSimulator, type Fault } from '../../sim/index.js'
import { parse, stringify } from 'yaml'
import { at, bringUp, configFile, configOf, kubectl, scenarioOn, sleep, talosctl, type Run, type Started } from './helpers.js'
import { realTool } from '../support/real-tools.js'
import { inTurn, SIDE_BY_SIDE } from '../support/in-turn.js'

const tool = realTool('talosctl')
if (tool.skip) console.warn(`SKIPPED test/sim/upgrade-k8s-api.test.ts: ${tool.skip}`)
const TALOSCTL_113 = resolve('.tools/talosctl-v1.13.9/talosctl')
const has113 = existsSync(TALOSCTL_113)
const COMPONENTS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']

async function start(
  range: string,
  o: { cps: number; workers: number; kubernetesVersion: string; faults?: Fault[]; kube?: 'model' | 'real' },
): Promise<Started> {
  const scenario = scenarioOn(range, { cps: o.cps, workers: o.workers, image: 'disk', vip: false, speed: 40, faults: o.faults ?? [] })
  scenario.cluster.kubernetesVersion = o.kubernetesVersion
  const dir = mkdtempSync(join(tmpdir(), 'sim-test-'))
  const sim = await startSimulator({ scenario, dir, ...(o.kube ? { kube: o.kube } : {}) })
  return {
    sim,
    dir,
    async stop() {
      await sim.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

const names = (cps: number, workers: number) => [
  ...Array.from({ length: cps }, (_, i) => `cp-${i + 1}`),
  ...Array.from({ length: workers }, (_, i) => `wrkr-${i + 1}`),
]

async function readyCluster(s: Started, all: string[], cp1: string): Promise<void> {
  await bringUp(s, all, cp1)
  // readiness follows the Kubernetes side (no node change announces it): polled
  for (let i = 0; i < 1200 && !all.every((n) => s.sim.node(n)?.ready); i++) await sleep(100)
  expect(all.filter((n) => !s.sim.node(n)?.ready)).toEqual([])
}

/** every mirror pod and Node as kubectl sees them: image tag, config-version, Ready */
async function kubeState(s: Started) {
  const pods = JSON.parse((await kubectl(s, ['get', 'pods', '-n', 'kube-system', '-o', 'json'])).stdout).items as any[]
  const nodes = JSON.parse((await kubectl(s, ['get', 'nodes', '-o', 'json'])).stdout).items as any[]
  const ready = (conds: any[] = []) => conds.find((c) => c.type === 'Ready')?.status
  return {
    pods: pods
      .filter((p) => COMPONENTS.includes(p.metadata.labels?.['k8s-app']))
      .map((p) => ({
        name: p.metadata.name,
        image: p.spec.containers[0].image,
        configVersion: p.metadata.annotations?.['talos.dev/config-version'],
        ready: ready(p.status?.conditions),
      }))
      .sort((a, b) => a.name.localeCompare(b.name)),
    nodes: nodes.map((n) => ({ name: n.metadata.name, kubelet: n.status.nodeInfo.kubeletVersion, ready: ready(n.status.conditions) })),
  }
}

/** a typed resource as `talosctl get -o yaml` prints it */
async function getYaml(s: Started, ip: string, type: string, id: string): Promise<string> {
  const r = await talosctl(s.sim, ['get', type, id, '-o', 'yaml', ...at(ip)])
  expect(r.code, r.stderr).toBe(0)
  return r.stdout
}
const versionOf = (yaml: string) => /\n\s*version: (\d+)/.exec(yaml)?.[1]

type ClusterOptions = Parameters<typeof start>[1]
/** the describe's cluster: started and brought to Ready before its tests, stopped after them */
function withCluster(range: string, o: ClusterOptions, set: (s: Started) => void): void {
  let started: Started | undefined
  beforeAll(async () => {
    started = await start(range, o)
    set(started)
    await readyCluster(started, names(o.cps, o.workers), `${range}.11`)
  }, 240_000)
  afterAll(async () => {
    await started?.stop()
  })
}

const upgradeK8s = (
  s: Started,
  ip: string,
  to: string,
  bin?: string,
  timeoutMs = 240_000,
  until?: (output: string) => boolean,
): Promise<Run> =>
  talosctl(s.sim, ['upgrade-k8s', '--to', to, ...at(ip)], { timeoutMs, ...(bin ? { bin } : {}), ...(until ? { until } : {}) })
/** how many times `line` is in `text` */
const times = (text: string, line: string) => text.split(line).length - 1
/** the ApplyConfiguration calls the simulator logged since call number `before` */
const appliesSince = (s: Started, before: number) =>
  s.sim
    .calls()
    .slice(before)
    .filter((c) => c.call === 'apply')

describe.skipIf(!!tool.skip)('talosctl upgrade-k8s against the simulator (real talosctl)', () => {
  // the three describes run side by side, each on its own cluster and range (127.253.1, .2, .3); the tests
  // of each run in turn on its cluster
  describe('1.34 -> 1.35 with talosctl v1.12.11, then a no-op rerun, then with v1.13.9', SIDE_BY_SIDE, () => {
    const with113 = has113 ? inTurn : it.skip
    const R = '127.253.1'
    const [CP1, CP2] = [`${R}.11`, `${R}.12`]
    let s!: Started
    withCluster(R, { cps: 2, workers: 1, kubernetesVersion: 'v1.34.1' }, (started) => (s = started))

    inTurn('the typed resources it reads answer with their versions and proto specs', async () => {
      const api = await getYaml(s, CP1, 'apiserverconfigs.kubernetes.talos.dev', 'kube-apiserver')
      expect(api).toContain('image: registry.k8s.io/kube-apiserver:v1.34.1')
      expect(versionOf(api)).toBe('1')
      const kubelet = await getYaml(s, `${R}.21`, 'kubeletspecs.kubernetes.talos.dev', 'kubelet')
      expect(kubelet).toContain('image: ghcr.io/siderolabs/kubelet:v1.34.1')
      const pod = await getYaml(s, CP2, 'staticpods.kubernetes.talos.dev', 'kube-scheduler')
      expect(pod).toContain('talos.dev/config-version: "1"')
      const manifests = await talosctl(s.sim, ['get', 'manifests', ...at(CP1)])
      expect(manifests.stdout).toContain('00-kubelet-bootstrapping-token')
      // a worker has no control plane configs
      const none = await talosctl(s.sim, ['get', 'apiserverconfigs', ...at(`${R}.21`)])
      expect(none.stdout).not.toContain('kube-apiserver')
      expect((await kubeState(s)).pods.every((p) => p.configVersion === '1' && p.image.endsWith(':v1.34.1'))).toBe(true)
    })

    inTurn(
      'upgrades every control plane component and kubelet to v1.35.0, each node in turn',
      async () => {
        // a config staged on the worker (a reboot pending): upgrade-k8s's NO_REBOOT apply of the active
        // config with the new kubelet overwrites it (design 1.6: the product refuses to run over one)
        const staged = parse(configOf(s.sim, 'wrkr-1'))
        staged.machine.nodeLabels = { ...staged.machine.nodeLabels, staged: 'yes' }
        const st = await talosctl(s.sim, [
          'apply-config',
          '--mode',
          'staged',
          '-f',
          configFile(s.sim, 'staged', stringify(staged)),
          ...at(`${R}.21`),
        ])
        expect(st.code, st.stderr).toBe(0)
        const pending = await talosctl(s.sim, ['get', 'machineconfig', 'persistent', '-o', 'jsonpath={.spec}', ...at(`${R}.21`)])
        // jsonpath prints the config as JSON or YAML text: the label either way
        const label = /\bstaged"?:\s*"?yes/
        expect(pending.stdout).toMatch(label)
        const from = s.sim.calls().length
        const r = await upgradeK8s(s, CP1, '1.35.0')
        expect(r.code, r.stdout + r.stderr).toBe(0)
        const out = r.stdout + r.stderr
        expect(out).toContain('automatically detected the lowest Kubernetes version 1.34.1')
        expect(out).toContain(`discovered controlplane nodes ["${CP1}" "${CP2}"]`)
        expect(out).toContain(`discovered worker nodes ["${R}.21"]`)
        expect(out).toContain('checking for removed Kubernetes component flags')
        for (const c of COMPONENTS) {
          expect(out).toContain(`updating "${c}" to version "1.35.0"`)
          expect(out).toContain(` > update ${c}: v1.34.1 -> 1.35.0`)
        }
        for (const ip of [CP1, CP2]) {
          expect(out).toContain(` > "${ip}": machine configuration patched`)
          expect(out).toContain(` < "${ip}": successfully updated`)
        }
        expect(out).toContain('updating kubelet to version "1.35.0"')
        expect(out).toContain(` > "${R}.21": waiting for kubelet restart`)
        expect(out).toContain(` > "${R}.21": waiting for node update`)
        expect(out).toContain('updating manifests')
        expect(out).toContain('waiting for all manifests to be applied')

        const state = await kubeState(s)
        expect(state.pods).toHaveLength(6)
        for (const p of state.pods)
          expect(p, JSON.stringify(p)).toMatchObject({ image: expect.stringMatching(/:v1\.35\.0$/), ready: 'True' })
        // one config version for each config change: the image (the kube-proxy patch changes no component's config)
        for (const p of state.pods) expect(p.configVersion).toBe('2')
        for (const n of state.nodes) expect(n).toMatchObject({ kubelet: 'v1.35.0', ready: 'True' })
        for (const ip of [CP1, CP2])
          expect(versionOf(await getYaml(s, ip, 'apiserverconfigs.kubernetes.talos.dev', 'kube-apiserver'))).toBe('2')
        // the configs the nodes run now carry the new images (applied NO_REBOOT: no reboot happened)
        const mc = await talosctl(s.sim, ['get', 'machineconfig', 'v1alpha1', '-o', 'jsonpath={.spec}', ...at(CP2)])
        expect(mc.stdout).toContain('registry.k8s.io/kube-scheduler:v1.35.0')
        expect(mc.stdout).toContain('ghcr.io/siderolabs/kubelet:v1.35.0')
        const persistent = await talosctl(s.sim, ['get', 'machineconfig', 'persistent', '-o', 'jsonpath={.spec}', ...at(`${R}.21`)])
        expect(persistent.stdout).toContain('ghcr.io/siderolabs/kubelet:v1.35.0')
        expect(persistent.stdout).not.toMatch(label)
        const applies = s.sim
          .calls()
          .slice(from)
          .filter((c) => c.call === 'apply' && c.outcome === 'ok')
        // three components and kube-proxy per control plane, the kubelet on every node
        expect(applies.filter((c) => c.node === 'cp-1')).toHaveLength(5)
        expect(applies.filter((c) => c.node === 'wrkr-1')).toHaveLength(1)
      },
      300_000,
    )

    inTurn(
      'a second run changes nothing: every step is skipped (errUpdateSkipped), no config is applied',
      async () => {
        const before = s.sim.calls().length
        const r = await upgradeK8s(s, CP1, '1.35.0')
        expect(r.code, r.stdout + r.stderr).toBe(0)
        const out = r.stdout + r.stderr
        expect(out).not.toContain(' > update ')
        expect(out).not.toContain('waiting for kubelet restart')
        // only kube-proxy's patch applies a config (patchKubeProxy has no skip), and it changes nothing
        const applies = appliesSince(s, before)
        expect(applies.map((c) => c.node)).toEqual(['cp-1', 'cp-2'])
        expect((await kubeState(s)).pods.every((p) => p.configVersion === '2')).toBe(true)
      },
      240_000,
    )

    with113(
      'talosctl v1.13.9 against the v1.12 nodes at 1.35.0: the same no-op, through its own client',
      async () => {
        const r = await upgradeK8s(s, CP2, '1.35.0', TALOSCTL_113)
        expect(r.code, r.stdout + r.stderr).toBe(0)
        expect(r.stdout + r.stderr).toContain(`> "${CP2}": Talos version 1.12.11 is compatible with Kubernetes version 1.35.0`)
        expect(r.stdout + r.stderr).not.toContain(' > update ')
      },
      240_000,
    )
    inTurn(
      '1.35 -> 1.36: talosctl v1.12.11 has no such path; v1.13.9 has, and the v1.12 nodes refuse it before any change',
      async () => {
        const before = s.sim.calls().length
        const old = await upgradeK8s(s, CP1, '1.36.0', undefined, 60_000)
        expect(old.code).toBe(1)
        expect(old.stderr).toContain('unsupported upgrade path 1.35->1.36 (from "1.35.0" to "1.36.0")')
        if (has113) {
          const r = await upgradeK8s(s, CP1, '1.36.0', TALOSCTL_113, 60_000)
          expect(r.code).toBe(1)
          expect(r.stderr).toMatch(/node "127\.253\.1\.\d+": version of Kubernetes 1\.36\.0 is too new to be used with Talos 1\.12\.11/)
        }
        expect(appliesSince(s, before)).toEqual([])
      },
      120_000,
    )
  })

  describe.skipIf(!has113)('on the real control plane (SIM_KUBE=real), with talosctl v1.13.9: 1.34 -> 1.35', SIDE_BY_SIDE, () => {
    const R = '127.253.3'
    const CP1 = `${R}.11`
    let s!: Started
    withCluster(R, { cps: 1, workers: 1, kubernetesVersion: 'v1.34.1', kube: 'real' }, (started) => (s = started))

    inTurn(
      'the mirror pods the kubelets write follow the static pods; the Nodes their kubelets; the manifests sync',
      async () => {
        const before = await kubeState(s)
        expect(before.pods.map((p) => [p.image, p.configVersion])).toEqual(COMPONENTS.map((c) => [`registry.k8s.io/${c}:v1.34.1`, '1']))
        const r = await upgradeK8s(s, CP1, '1.35.0', TALOSCTL_113)
        expect(r.code, r.stdout + r.stderr).toBe(0)
        const out = r.stdout + r.stderr
        expect(out).toContain(` < "${CP1}": successfully updated`)
        expect(out).toContain(` > "${R}.21": waiting for node update`)
        expect(out).toContain('updating manifests')
        const state = await kubeState(s)
        for (const p of state.pods)
          expect(p, JSON.stringify(p)).toMatchObject({ image: expect.stringMatching(/:v1\.35\.0$/), configVersion: '2', ready: 'True' })
        for (const n of state.nodes) expect(n).toMatchObject({ kubelet: 'v1.35.0', ready: 'True' })
      },
      300_000,
    )
  })

  describe('faults: the new version never gets Ready; a kubelet that does not come back', SIDE_BY_SIDE, () => {
    const R = '127.253.2'
    const [CP1, W1] = [`${R}.11`, `${R}.21`]
    let s!: Started
    withCluster(
      R,
      {
        cps: 1,
        workers: 1,
        kubernetesVersion: 'v1.34.1',
        faults: [
          { kind: 'static-pod', pod: 'kube-scheduler', restarts: true, image: 'registry.k8s.io/kube-scheduler:v1.35.0' } as Fault,
          { kind: 'kubelet-crashloop', node: 'wrkr-1', image: 'ghcr.io/siderolabs/kubelet:v1.35.0' } as Fault,
          { kind: 'image-pull', image: 'registry.k8s.io/kube-controller-manager:v1.35.0' } as Fault,
        ],
      },
      (started) => (s = started),
    )

    inTurn(
      'an image the registry lacks: the pre-pull fails and nothing changes',
      async () => {
        const before = s.sim.calls().length
        const r = await upgradeK8s(s, CP1, '1.35.0', undefined, 60_000)
        expect(r.code, r.stdout + r.stderr).toBe(1)
        expect(r.stderr).toContain(
          `failed pre-pulling images: error pre-pulling registry.k8s.io/kube-controller-manager:v1.35.0 on ${CP1}: rpc error: code = NotFound desc = error pulling image: failed to pull image "registry.k8s.io/kube-controller-manager:v1.35.0"`,
        )
        expect(appliesSince(s, before)).toEqual([])
        s.sim.clearFault(null, 'image-pull')
      },
      90_000,
    )

    inTurn(
      'kube-scheduler at v1.35.0 crash-loops: upgrade-k8s waits on its pod (5 min in the real tool), the pod stays not Ready',
      async () => {
        // the real tool's wait is 5 min: it is stopped once it has found the pod not ready twice (it polls
        // the pod again and goes on waiting; the fault keeps the pod from ever turning Ready), at most 25 s
        const waiting = ` > "${CP1}": kube-scheduler: pod is not ready, waiting`
        const r = await upgradeK8s(s, CP1, '1.35.0', undefined, 25_000, (out) => times(out, waiting) >= 2)
        expect(r.killed, r.stdout + r.stderr).toBe(true)
        const out = r.stdout + r.stderr
        expect(out).toContain(` < "${CP1}": successfully updated`) // kube-apiserver and kube-controller-manager
        expect(out).toContain(`updating "kube-scheduler" to version "1.35.0"`)
        expect(out).toContain(` > "${CP1}": kube-scheduler: pod is not ready, waiting`)
        expect(out).not.toContain('updating kubelet')
        const pod = (await kubeState(s)).pods.find((p) => p.name === 'kube-scheduler-cp-1')
        expect(pod).toMatchObject({ image: 'registry.k8s.io/kube-scheduler:v1.35.0', configVersion: '2', ready: 'False' })
        const status = await talosctl(s.sim, ['get', 'staticpodstatus', 'kube-system/kube-scheduler-cp-1', '-o', 'yaml', ...at(CP1)])
        expect(status.stdout).toContain('CrashLoopBackOff')
      },
      60_000,
    )

    inTurn(
      'the scheduler fixed: the rerun finishes the control plane, then waits forever on the worker whose kubelet does not come back',
      async () => {
        s.sim.clearFault(null, 'static-pod')
        // the real tool's kubelet wait has no end: it is stopped once it waits for wrkr-1's kubelet and that
        // kubelet, restarted at v1.35.0, is in machined's restart loop (it never comes back), at most 60 s
        const r = await upgradeK8s(
          s,
          CP1,
          '1.35.0',
          undefined,
          60_000,
          (out) => out.includes(` > "${W1}": waiting for kubelet restart`) && s.sim.node('wrkr-1')?.services['kubelet'] === 'Waiting',
        )
        expect(r.killed, r.stdout + r.stderr).toBe(true)
        const out = r.stdout + r.stderr
        expect(out).toContain(` < "${CP1}": successfully updated`)
        expect(out).toContain(` > "${W1}": waiting for kubelet restart`)
        expect(out).not.toContain(` > "${W1}": waiting for node update`)
        const svc = await talosctl(s.sim, ['service', 'kubelet', ...at(W1)])
        expect(svc.stdout).toContain('going to restart forever')
        const node = (await kubeState(s)).nodes.find((n) => n.name === 'wrkr-1')
        expect(node?.kubelet).toBe('v1.34.1')
      },
      120_000,
    )
  })
})

// The real Kubernetes control plane behind a simulated cluster (SIM_KUBE=real, with real etcd,
// sim/kube-real.js, sim/kubelet.js): bootstrapped with the real talosctl, the CNI installed with the
// real helm as the product installs it, and everything read back with the real kubectl. Range 127.251.x.y.
import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { applyInsecure, at, bootstrapWhenReady, startOn, talosctl, type Started } from './helpers.js'

interface Run {
  code: number
  stdout: string
  stderr: string
}
const exec = (cmd: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs = 240_000): Promise<Run> =>
  new Promise((done) =>
    execFile(cmd, args, { encoding: 'utf8', env, timeout: timeoutMs, maxBuffer: 64 << 20 }, (err, stdout, stderr) =>
      done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    ),
  )

interface Cond {
  type: string
  status: string
}
interface Obj {
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> }
  spec?: { podCIDR?: string; nodeName?: string; taints?: { key: string }[]; unschedulable?: boolean }
  status?: { conditions?: Cond[]; phase?: string; certificate?: string }
}
const ready = (o: Obj): boolean => (o.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True')

let c: Started
let pidsAtStart: number[] = []
const env = (): NodeJS.ProcessEnv => ({
  PATH: `${c.sim.binDir}:${process.env.PATH ?? ''}`,
  HOME: c.dir,
  KUBECONFIG: join(c.dir, 'kubeconfig'),
})
const kubectl = (...args: string[]) => exec('kubectl', ['--cache-dir', join(c.dir, 'kube-cache'), ...args], env())
async function items(...args: string[]): Promise<Obj[]> {
  const r = await kubectl('get', ...args, '-o', 'json')
  if (r.code !== 0) throw new Error(`kubectl get ${args.join(' ')}: ${r.stderr}`)
  return (JSON.parse(r.stdout) as { items: Obj[] }).items
}
async function eventually<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 180_000): Promise<T> {
  const end = Date.now() + timeoutMs
  let last: unknown
  for (;;) {
    try {
      const v = await fn()
      if (v) return v
    } catch (e) {
      last = e
    }
    if (Date.now() > end) throw new Error(`never happened: ${what}${last ? ` (${String(last)})` : ''}`)
    await new Promise((r) => setTimeout(r, 500))
  }
}
const NODES = ['cp-1', 'cp-2', 'cp-3', 'wrkr-1', 'wrkr-2']

describe('the real control plane (SIM_KUBE=real)', { timeout: 240_000 }, () => {
  beforeAll(async () => {
    c = await startOn('127.251.1', { cps: 3, workers: 2, image: 'disk', speed: 100, timings: { boot: 6 }, kube: 'real' })
    // booted from disk into maintenance a few simulated seconds after the start, as a node does: an apply before then is refused
    await c.sim.until(() => NODES.every((n) => c.sim.node(n)?.stage === 'maintenance'), 30_000)
    for (const n of NODES) {
      const r = await applyInsecure(c.sim, n)
      expect(r.code, `${n}: ${r.stderr}`).toBe(0)
    }
    const t0 = Date.now()
    expect((await bootstrapWhenReady(c.sim, 'cp-1', 60_000)).code).toBe(0)
    await c.sim.until(() => !!c.sim.realKube?.serving, 180_000)
    pidsAtStart = c.sim.realKube!.pids()
    // the admin kubeconfig `talosctl kubeconfig` hands out (the cluster endpoint: the VIP)
    writeFileSync(join(c.dir, 'kubeconfig'), c.sim.kubeconfigYaml())
    // the CNI as the product installs it (lib/phases/wait-ready.ts): the simulator's chart repository, Talos's cilium values
    const chart = ['cilium', '--repo', c.sim.chartRepo.url, '--ca-file', join(c.sim.clusterDir, 'charts-ca.crt')]
    const values = [
      '--set',
      'ipam.mode=kubernetes',
      '--set',
      'kubeProxyReplacement=true',
      '--set',
      'k8sServiceHost=localhost',
      '--set',
      'k8sServicePort=7445',
    ]
    const helm = await exec(join(c.sim.binDir, 'helm'), ['upgrade', '--install', 'cilium', ...chart, '-n', 'kube-system', ...values], env())
    expect(helm.stderr).toBe('')
    expect(helm.code).toBe(0)
    await eventually('every Node Ready', async () => (await items('nodes')).filter(ready).length === NODES.length)
    // the node-lifecycle controller lifts the not-ready taint after it sees Ready: a moment later
    await eventually('the not-ready taints lifted', async () =>
      (await items('nodes')).every((n) => !(n.spec?.taints ?? []).some((t) => t.key === 'node.kubernetes.io/not-ready')),
    )
    const k = c.sim.realKube!
    // measurements (docs/real-control-plane.md): not asserted, a loaded machine varies them
    console.log(
      `bootstrap accepted to API server ready: ${k.readyAt! - t0} ms (its own start ${k.readyAt! - k.t0!} ms); to every Node Ready: ${Date.now() - t0} ms; RSS kB: ${JSON.stringify(k.rss())}; this test process (the simulator in it) ${Math.round(process.memoryUsage().rss / 1024)}`,
    )
  }, 600_000)
  afterAll(async () => {
    await c?.stop()
  })

  it('registers every node through an approved CSR; each Node Ready with a podCIDR from the pod subnet, the not-ready taint gone', async () => {
    const nodes = await items('nodes')
    expect(nodes.map((n) => n.metadata.name).sort()).toEqual(NODES)
    for (const n of nodes) {
      expect(n.spec?.podCIDR).toMatch(/^127\.244\.\d+\.0\/24$/)
      expect((n.spec?.taints ?? []).map((t) => t.key)).not.toContain('node.kubernetes.io/not-ready')
    }
    expect(nodes.find((n) => n.metadata.name === 'cp-1')?.metadata.labels).toHaveProperty('node-role.kubernetes.io/control-plane')
    const csrs = await items('csr')
    const kubelet = csrs.filter(
      (x) => (x as { spec?: { signerName?: string } }).spec?.signerName === 'kubernetes.io/kube-apiserver-client-kubelet',
    )
    expect(kubelet.length).toBeGreaterThanOrEqual(NODES.length)
    for (const x of kubelet) {
      expect((x.status?.conditions ?? []).map((k) => `${k.type}=${k.status}`)).toContain('Approved=True')
      expect(x.status?.certificate).toBeTruthy()
    }
  })

  it("the critical path counts what this run measured: the API server's start from etcd healthy, the joins", async () => {
    const { sim } = c
    await sim.until(() => sim.etcd.joinsSeconds() !== null, 60_000)
    const k = sim.realKube!
    const { timings: t, speed } = sim.scenario
    const answering = (k.answeringAt! - k.t0!) / 1000
    const ready = (k.readyAt! - k.t0!) / 1000
    const joins = sim.etcd.joinsSeconds()!
    expect(answering).toBeGreaterThan(0)
    expect(ready).toBeGreaterThanOrEqual(answering)
    const path = sim.criticalPathSeconds()
    expect(path).toBeCloseTo((t.boot + t.etcd) / speed + Math.max(ready + (t.kubelet + t.cni) / speed, answering + joins), 6)
    // real seconds, whatever the speed: the API server's start and the third member's 5 s wait (etcd's HealthInterval)
    expect(path).toBeGreaterThan((t.boot + t.etcd + t.kubelet + t.cni) / speed + 5)
  })

  it('runs CoreDNS (Ready on worker nodes or tolerating control planes) and the control plane mirror pods', async () => {
    const dns = await eventually('CoreDNS Ready', async () => {
      const pods = await items('pods', '-n', 'kube-system', '-l', 'k8s-app=kube-dns')
      return pods.length === 2 && pods.every(ready) ? pods : undefined
    })
    expect(dns.every((p) => p.spec?.nodeName)).toBe(true)
    const mirrors = await items('pods', '-n', 'kube-system', '-l', 'tier=control-plane')
    const names = mirrors.map((p) => p.metadata.name).sort()
    expect(names).toEqual(
      ['cp-1', 'cp-2', 'cp-3']
        .flatMap((n) => ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'].map((x) => `${x}-${n}`))
        .sort(),
    )
    for (const p of mirrors) {
      expect(p.metadata.annotations).toHaveProperty('kubernetes.io/config.mirror')
      expect(p.metadata.labels?.['k8s-app']).toBe(p.metadata.name.replace(/-cp-\d$/, ''))
    }
  })

  it('kubectl create deployment works; the real scheduler binds its pods to the workers, the kubelets run them', async () => {
    expect((await kubectl('create', 'deployment', 'web', '--image=registry.k8s.io/pause:3.10', '--replicas=2')).code).toBe(0)
    const pods = await eventually('web pods Ready', async () => {
      const p = await items('pods', '-l', 'app=web')
      return p.length === 2 && p.every(ready) ? p : undefined
    })
    for (const p of pods) expect(p.spec?.nodeName).toMatch(/^wrkr-/)
  })

  it('kubectl drain evicts through pods/eviction, and a PodDisruptionBudget refuses it', async () => {
    const pods = await items('pods', '-l', 'app=web')
    const node = pods[0].spec!.nodeName!
    expect((await kubectl('create', 'pdb', 'web', '--selector=app=web', '--min-available=2')).code).toBe(0)
    await eventually('the budget allows no disruption', async () => {
      const r = await kubectl('get', 'pdb', 'web', '-o', 'jsonpath={.status.disruptionsAllowed}/{.status.expectedPods}')
      return r.stdout === '0/2'
    })
    const refused = await kubectl('drain', node, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=5s')
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain("Cannot evict pod as it would violate the pod's disruption budget")
    expect((await kubectl('delete', 'pdb', 'web')).code).toBe(0)
    const drained = await kubectl('drain', node, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=120s')
    expect(drained.stderr).not.toContain('error')
    expect(drained.code).toBe(0)
    expect(drained.stdout).toContain('evicted')
    // the Deployment's replacement lands on another schedulable node, never the cordoned one
    const after = await eventually('web back to 2 Ready pods', async () => {
      const p = await items('pods', '-l', 'app=web')
      return p.length === 2 && p.every(ready) ? p : undefined
    })
    for (const p of after) expect(p.spec?.nodeName).not.toBe(node)
    expect((await kubectl('uncordon', node)).code).toBe(0)
  })

  it('the real scheduler and controller-manager at work: stopped, nothing binds or creates pods; started again, they do', async () => {
    await c.sim.realKube!.stopComponent('kube-scheduler')
    expect((await kubectl('create', 'deployment', 'late', '--image=registry.k8s.io/pause:3.10')).code).toBe(0)
    const pending = await eventually('the late pod created', async () => {
      const p = await items('pods', '-l', 'app=late')
      return p.length === 1 ? p : undefined
    })
    await new Promise((r) => setTimeout(r, 3000))
    expect((await items('pods', '-l', 'app=late')).map((p) => p.spec?.nodeName ?? null)).toEqual([null])
    expect(pending[0].status?.phase).toBe('Pending')
    await c.sim.realKube!.startComponent('kube-scheduler')
    await eventually('the late pod bound and Ready', async () =>
      (await items('pods', '-l', 'app=late')).every((p) => p.spec?.nodeName && ready(p)),
    )

    await c.sim.realKube!.stopComponent('kube-controller-manager')
    expect((await kubectl('create', 'deployment', 'orphan', '--image=registry.k8s.io/pause:3.10')).code).toBe(0)
    await new Promise((r) => setTimeout(r, 3000))
    expect(await items('replicasets', '-l', 'app=orphan')).toEqual([])
    await c.sim.realKube!.startComponent('kube-controller-manager')
    // a new controller-manager waits for its predecessor's leader lease (15 s) first
    await eventually('the orphan pod Ready', async () => {
      const p = await items('pods', '-l', 'app=orphan')
      return p.length === 1 && p.every(ready)
    })
  })

  it("issue 30's faults as the kubelet meets them: image-pull, a static pod that never starts or crash-loops, CoreDNS never ready, a Node's other address", async () => {
    // the kinds are not in sim/faults.js yet (issue 30's branch adds them): put straight into the fault list
    const faults = (c.sim as unknown as { faults: { add(f: Record<string, unknown>): void } }).faults
    const add = (f: Record<string, unknown>) => faults.add({ on: f.kind, times: null, ms: null, message: null, ...f })
    add({ kind: 'image-pull', node: null, image: 'registry.k8s.io/nginx', message: 'pull access denied' })
    add({ kind: 'static-pod', node: 'cp-2', pod: 'kube-apiserver', restarts: false })
    add({ kind: 'static-pod', node: 'cp-3', pod: 'kube-scheduler', restarts: true, message: 'scheduler: bad config' })
    add({ kind: 'coredns', node: null })
    add({ kind: 'node-ip', node: 'wrkr-1', address: '127.251.1.99' })
    expect((await kubectl('create', 'deployment', 'pulled', '--image=registry.k8s.io/nginx:1.27')).code).toBe(0)
    type Waiting = { state?: { waiting?: { reason?: string; message?: string } }; lastState?: { terminated?: { message?: string } } }
    const waiting = (p: Obj) => (p.status as { containerStatuses?: Waiting[] } | undefined)?.containerStatuses?.[0]
    await eventually('the pulled pod in ImagePullBackOff', async () => {
      const p = await items('pods', '-l', 'app=pulled')
      return (
        p.length === 1 &&
        waiting(p[0])?.state?.waiting?.reason === 'ImagePullBackOff' &&
        // the kubelet's back-off text around the registry's answer (sim/health-faults.js pullBackOff)
        waiting(p[0])?.state?.waiting?.message === 'Back-off pulling image "registry.k8s.io/nginx:1.27": ErrImagePull: pull access denied'
      )
    })
    await eventually('the faulted mirror pods', async () => {
      const pods = await items('pods', '-n', 'kube-system', '-l', 'tier=control-plane')
      const api = pods.find((p) => p.metadata.name === 'kube-apiserver-cp-2')!
      const sched = pods.find((p) => p.metadata.name === 'kube-scheduler-cp-3')!
      return (
        api.status?.phase === 'Pending' &&
        waiting(api)?.state?.waiting?.reason === 'ImagePullBackOff' &&
        waiting(sched)?.state?.waiting?.reason === 'CrashLoopBackOff' &&
        waiting(sched)?.lastState?.terminated?.message === 'scheduler: bad config' &&
        !ready(sched) &&
        pods.filter(ready).length === 7
      )
    })
    await eventually('CoreDNS running, never ready', async () => {
      const p = await items('pods', '-n', 'kube-system', '-l', 'k8s-app=kube-dns')
      return p.length === 2 && p.every((x) => x.status?.phase === 'Running' && !ready(x))
    })
    await eventually("wrkr-1's InternalIP the fault's", async () => {
      const n = (await items('nodes')).find((x) => x.metadata.name === 'wrkr-1') as {
        status?: { addresses?: { type: string; address: string }[] }
      }
      return n.status?.addresses?.find((a) => a.type === 'InternalIP')?.address === '127.251.1.99'
    })
    for (const kind of ['image-pull', 'static-pod', 'coredns', 'node-ip']) c.sim.clearFault(null, kind)
    await eventually('CoreDNS Ready again', async () => (await items('pods', '-n', 'kube-system', '-l', 'k8s-app=kube-dns')).every(ready))
    // the kubelet posts its own address again with its next status: the next case dials it
    await eventually("wrkr-1's InternalIP its own again", async () => {
      const n = (await items('nodes')).find((x) => x.metadata.name === 'wrkr-1') as {
        status?: { addresses?: { type: string; address: string }[] }
      }
      return n.status?.addresses?.find((a) => a.type === 'InternalIP')?.address === '127.251.1.21'
    })
    expect((await kubectl('delete', 'deployment', 'pulled')).code).toBe(0)
  })

  it("kubectl logs through each kubelet's :10250 (the API server dials the Node's InternalIP): a crash's last words, the kubelet's refusals in its own words, a node away refuses the dial", async () => {
    const faults = (c.sim as unknown as { faults: { add(f: Record<string, unknown>): void } }).faults
    const add = (f: Record<string, unknown>) => faults.add({ on: f.kind, times: null, ms: null, message: null, ...f })
    add({ kind: 'static-pod', node: 'cp-3', pod: 'kube-scheduler', restarts: true, message: 'E1127 scheduler: bad config\nexit status 1' })
    add({ kind: 'image-pull', node: null, image: 'registry.k8s.io/nginx', message: 'pull access denied' })
    expect((await kubectl('create', 'deployment', 'logged', '--image=registry.k8s.io/nginx:1.27')).code).toBe(0)
    type Status = { containerStatuses?: { state?: { waiting?: { reason?: string } } }[] }
    await eventually('the crash-looping scheduler and the pulled pod', async () => {
      const sched = (await items('pods', '-n', 'kube-system', '-l', 'tier=control-plane')).find(
        (p) => p.metadata.name === 'kube-scheduler-cp-3',
      )
      const pulled = await items('pods', '-l', 'app=logged')
      return (
        (sched?.status as Status | undefined)?.containerStatuses?.[0]?.state?.waiting?.reason === 'CrashLoopBackOff' &&
        (pulled[0]?.status as Status | undefined)?.containerStatuses?.[0]?.state?.waiting?.reason === 'ImagePullBackOff'
      )
    })
    // the previous container's log, and the current one (the container waits: its last terminated one's)
    for (const args of [['-p'], []]) {
      const r = await kubectl('-n', 'kube-system', 'logs', ...args, 'kube-scheduler-cp-3')
      expect(r.stderr).toBe('')
      expect(r.stdout).toBe('E1127 scheduler: bad config\nexit status 1\n')
    }
    const tail = await kubectl('-n', 'kube-system', 'logs', '-p', '--tail=1', '--timestamps', 'kube-scheduler-cp-3')
    expect(tail.stdout).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z exit status 1\n$/)
    // the kubelet's refusals, passed on by the API server as BadRequest
    const pulled = (await items('pods', '-l', 'app=logged'))[0].metadata.name
    const waiting = await kubectl('logs', pulled)
    expect(waiting.code).not.toBe(0)
    expect(waiting.stderr).toContain(`container "nginx" in pod "${pulled}" is waiting to start: trying and failing to pull image`)
    const healthy = (await items('pods', '-n', 'kube-system', '-l', 'k8s-app=kube-dns')).find(ready)!
    const previous = await kubectl('-n', 'kube-system', 'logs', '-p', healthy.metadata.name)
    expect(previous.stderr).toContain(`previous terminated container "coredns" in pod "${healthy.metadata.name}" not found`)
    // a running container that wrote nothing: an empty log, no error
    const running = await kubectl('-n', 'kube-system', 'logs', healthy.metadata.name)
    expect([running.code, running.stdout]).toEqual([0, ''])
    // a Node registered with an address nothing listens on: the API server's dial is refused
    const onWorker = (await items('pods', '-n', 'kube-system', '-l', 'k8s-app=cilium')).find((p) => p.spec?.nodeName === 'wrkr-2')!
    add({ kind: 'node-ip', node: 'wrkr-2', address: '127.251.1.98' })
    await eventually('the dial to 127.251.1.98:10250 refused', async () => {
      const r = await kubectl('-n', 'kube-system', 'logs', onWorker.metadata.name)
      return r.code !== 0 && r.stderr.includes('dial tcp 127.251.1.98:10250') && r.stderr.includes('connection refused')
    })
    for (const kind of ['static-pod', 'image-pull', 'node-ip']) c.sim.clearFault(null, kind)
    expect((await kubectl('delete', 'deployment', 'logged')).code).toBe(0)
    await eventually(
      "wrkr-2's InternalIP its own again, its kubelet answering",
      async () => (await kubectl('-n', 'kube-system', 'logs', onWorker.metadata.name)).code === 0,
    )
  })

  it("Flux on the real API: flux bootstrap's CRDs accepted, its controllers' pods run on the workers, the root Ready through its status subresource; the flux fault fails it", async () => {
    const flux = (...args: string[]) => exec(join(c.sim.binDir, 'flux'), args, env())
    const key = join(c.sim.clusterDir, 'flux-deploy-key')
    const ok = await flux(
      'bootstrap',
      'git',
      '--url',
      'ssh://git@127.0.0.1/fleet.git',
      '--branch',
      'main',
      '--path',
      'clusters/sim',
      '--private-key-file',
      key,
      '--silent',
    )
    expect(ok.code, ok.stderr).toBe(0)
    const crds = await items('crd', '-l', 'app.kubernetes.io/part-of=flux')
    expect(crds.length).toBe(10)
    // the controllers: a Deployment's pods, placed by the real scheduler off the tainted control planes
    const pods = await items('pods', '-n', 'flux-system')
    expect(pods.length).toBe(4)
    for (const p of pods) {
      expect(ready(p)).toBe(true)
      expect(p.spec?.nodeName).toMatch(/^wrkr-\d$/)
    }
    const root = (await items('kustomizations', '-n', 'flux-system')).find((k) => k.metadata.name === 'flux-system')
    const rootReady = (root?.status?.conditions ?? []).find((x) => x.type === 'Ready') as
      (Cond & { reason?: string; message?: string }) | undefined
    expect(rootReady).toMatchObject({ status: 'True', reason: 'ReconciliationSucceeded' })
    expect(rootReady?.message).toMatch(/^Applied revision: main@sha1:[0-9a-f]{40}$/)
    // the cluster-wide flux fault: the next reconciliation fails with its message, and passes once cleared
    const message = 'kustomization path not found: stat /tmp/kustomization-1/clusters/sim: no such file or directory'
    c.sim.addFault({ kind: 'flux', message })
    const failed = await flux('reconcile', 'kustomization', 'flux-system')
    expect(failed.code).not.toBe(0)
    expect(failed.stderr).toContain(`Kustomization reconciliation failed: ${message}`)
    const after = (await items('kustomizations', '-n', 'flux-system')).find((k) => k.metadata.name === 'flux-system')
    expect((after?.status?.conditions ?? []).find((x) => x.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'BuildFailed',
      message,
    })
    c.sim.clearFault(null, 'flux')
    await eventually('the root Ready again', async () => {
      const again = await flux('reconcile', 'kustomization', 'flux-system')
      return again.code === 0
    })
  })

  it('a worker cut off the network: its kubelet reaches no API server, the node-lifecycle controller marks it Unknown; back, Ready again, its serving CSR (kubelet-serving-csr) Pending, named by the kubelet-csr diagnostic until kubectl certificate approve', async () => {
    const readyOf = async (name: string) =>
      ((await items('nodes')).find((x) => x.metadata.name === name)?.status?.conditions ?? []).find((x) => x.type === 'Ready')?.status
    c.sim.addFault({ node: 'wrkr-1', kind: 'unreachable' })
    await eventually('wrkr-1 Ready=Unknown', async () => (await readyOf('wrkr-1')) === 'Unknown')
    expect(await readyOf('wrkr-2')).toBe('True')
    // issue 30's kubelet-serving-csr (not in sim/faults.js yet: put straight into the list): its kubelet, registering
    // again, asks for a serving certificate that nothing approves
    const faults = (c.sim as unknown as { faults: { add(f: Record<string, unknown>): void } }).faults
    faults.add({ node: 'wrkr-1', on: 'kubelet', kind: 'kubelet-serving-csr', times: null, ms: null, message: null })
    c.sim.clearFault('wrkr-1', 'unreachable')
    await eventually('wrkr-1 Ready again', async () => (await readyOf('wrkr-1')) === 'True')
    const servingCsrs = async () =>
      ((await items('csr')) as (Obj & { spec?: { signerName?: string; username?: string } })[]).filter(
        (x) => x.spec?.signerName === 'kubernetes.io/kubelet-serving' && x.spec?.username === 'system:node:wrkr-1',
      )
    await eventually("wrkr-1's serving CSR", async () => (await servingCsrs()).length > 0)
    await new Promise((r) => setTimeout(r, 3000))
    const serving = await servingCsrs()
    expect(serving.length).toBe(1)
    expect(serving.every((x) => (x.status?.conditions ?? []).length === 0 && !x.status?.certificate)).toBe(true)
    const name = serving[0]?.metadata.name ?? 'none'
    // what the product reads for its hint: the API selects the signer, the requester is spec.username
    const selected = (await items('csr', '--field-selector', 'spec.signerName=kubernetes.io/kubelet-serving')) as typeof serving
    expect(selected.filter((x) => x.spec?.username === 'system:node:wrkr-1').map((x) => x.metadata.name)).toEqual([name])
    // Talos's kubelet-csr diagnostic names that CSR, as the kubelet's credentials list it
    const diagnostics = async () => (await talosctl(c.sim, ['get', 'diagnostics', ...at('127.251.1.21')])).stdout
    await eventually('the kubelet-csr diagnostic names the CSR', async () => (await diagnostics()).includes(`pending CSRs: ${name}`))
    // its kubelet has no serving certificate yet: the API server's handshake on :10250 fails (kubectl logs)
    const onWrkr1 = (await items('pods', '-n', 'kube-system', '-l', 'k8s-app=cilium')).find((p) => p.spec?.nodeName === 'wrkr-1')!
    const logs = () => kubectl('-n', 'kube-system', 'logs', onWrkr1.metadata.name)
    const refused = await logs()
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toMatch(/127\.251\.1\.21:10250.*(tls|handshake|EOF|reset)/i)
    // approved as the product's hint prints it, the diagnostic ends (the fault stays: nothing else approves)
    const approve = await kubectl('certificate', 'approve', name)
    expect(approve.code, approve.stderr).toBe(0)
    await eventually('the kubelet-csr diagnostic gone', async () => !(await diagnostics()).includes('kubelet-csr'))
    // signed by the controller-manager, the certificate is the kubelet's: its API answers
    await eventually("wrkr-1's kubelet serving with its signed certificate", async () => (await logs()).code === 0)
    c.sim.clearFault('wrkr-1', 'kubelet-serving-csr')
  })

  it("Talos's graceful reset of a worker: cordoned, drained through evictions; its kubelet gone, the node-lifecycle controller marks it Unknown", async () => {
    const on = async () => (await items('pods', '-l', 'app in (web,late,orphan)')).filter((p) => p.spec?.nodeName === 'wrkr-2')
    const before = await on()
    const r = await talosctl(c.sim, ['reset', '--graceful=true', '--reboot=false', '--wait=false', ...at('127.251.1.22')])
    expect(r.stderr).toBe('')
    await eventually('wrkr-2 cordoned by Talos', async () => {
      const n = (await items('nodes')).find((x) => x.metadata.name === 'wrkr-2')
      return n?.spec?.unschedulable === true && n.metadata.annotations?.['talos.dev/cordoned'] === 'true'
    })
    if (before.length) await eventually('its pods evicted', async () => (await on()).length === 0)
    // the controller writes the status first and taints in its own pass (node_lifecycle_controller.go
    // doNoExecuteTaintingPass): both are waited for
    await eventually('wrkr-2 Ready=Unknown, then tainted unreachable', async () => {
      const n = (await items('nodes')).find((x) => x.metadata.name === 'wrkr-2')
      const cnd = (n?.status?.conditions ?? []).find((x) => x.type === 'Ready')
      const tainted = (n?.spec?.taints ?? []).some((t) => t.key === 'node.kubernetes.io/unreachable')
      return cnd?.status === 'Unknown' && tainted
    })
  })

  // last but one: what a killed API server leaves behind (a controller-manager that lost its lease,
  // watches resumed) must not reach the other cases
  it('the kubelet restarts a static pod killed from outside: the API server and the scheduler come back after the back-off', async () => {
    const pidOf = (name: string) =>
      new Promise<number>((resolve) =>
        execFile('pgrep', ['-f', `bin/${name} .*${join(c.dir, 'kube')}`], (_e, out) => resolve(Number(out.trim().split('\n')[0]) || 0)),
      )
    for (const name of ['kube-apiserver', 'kube-scheduler']) {
      const pid = await pidOf(name)
      expect(pid, name).toBeGreaterThan(0)
      process.kill(pid, 'SIGKILL')
      await eventually(`${name} started again`, async () => {
        const again = await pidOf(name)
        return again > 0 && again !== pid
      })
    }
    // the API server answers again (every Node listed: the case before reset a worker), and the new scheduler binds pods
    await eventually('every Node listed through the restarted API server', async () => (await items('nodes')).length === NODES.length)
    expect((await kubectl('create', 'deployment', 'after-kill', '--image=registry.k8s.io/pause:3.10')).code).toBe(0)
    await eventually('the after-kill pod bound and Ready', async () => {
      const p = await items('pods', '-l', 'app=after-kill')
      return p.length === 1 && p.every((x) => x.spec?.nodeName && ready(x))
    })
  })

  it('leaves no process behind once stopped', async () => {
    const pids = [...c.sim.realKube!.pids(), ...pidsAtStart]
    expect(pids.length).toBeGreaterThanOrEqual(3)
    await c.stop()
    const alive = (pid: number) => {
      try {
        return !readFileSync(`/proc/${pid}/status`, 'utf8').includes('State:\tZ')
      } catch {
        return false
      }
    }
    expect(pids.filter(alive)).toEqual([])
    const ps = await exec('ps', ['-eo', 'pid,args'], process.env)
    expect(ps.stdout.split('\n').filter((l) => l.includes(c.dir))).toEqual([])
  })
})

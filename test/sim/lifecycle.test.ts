// Node lifecycle observed through the real talosctl (internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_sequencer.go,
// internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go, internal/app/maintenance/server.go). Range 127.23.x.y.
import { readFileSync } from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import {
  applyInsecure,
  at,
  bootstrapWhenReady,
  configFile,
  configOf,
  etcdMembers,
  jsonDocs,
  machineStatus,
  service,
  stageLog,
  startOn,
  talosctl,
  type Member,
  type Started,
} from './helpers.js'

let c: Started | null = null
afterEach(async () => {
  await c?.stop()
  c = null
})
const refused = (ip: string) => `dial tcp ${ip}:50000: connect: connection refused`
const noInstall = (text: string) => text.replace(/\n {4}install:\n(?: {8}.*\n)+/, '\n')

describe('ISO and disk-image nodes', () => {
  it('ISO: maintenance -> booting -> installing -> rebooting -> booting -> running; v1.12 refuses while installing', async () => {
    c = await startOn('127.23.1', { cps: 1, workers: 1, vip: false, timings: { install: 300 } })
    const { sim } = c
    expect(await machineStatus(sim, '127.23.1.21', { insecure: true })).toEqual({
      stage: 'maintenance',
      status: { ready: true, unmetConditions: [] },
    })
    const log = stageLog(sim, 'wrkr-1')
    await applyInsecure(sim, 'cp-1') // its trustd signs the worker's API certificate
    // v1.12's maintenance API answers an apply with no mode details: talosctl prints nothing
    expect(await applyInsecure(sim, 'wrkr-1')).toMatchObject({ code: 0, stdout: '', stderr: '' })
    await sim.until(() => sim.node('wrkr-1')!.stage === 'installing')
    expect(await machineStatus(sim, '127.23.1.21')).toContain(refused('127.23.1.21'))
    expect(await machineStatus(sim, '127.23.1.21', { insecure: true })).toContain(refused('127.23.1.21'))
    await sim.until(() => sim.node('wrkr-1')!.stage === 'running')
    expect(log).toEqual(['maintenance', 'booting', 'installing', 'rebooting', 'booting', 'running'])
    const spec = await machineStatus(sim, '127.23.1.21')
    expect(spec.stage).toBe('running')
    // no API server yet: the kubelet cannot register, so nodeReady is unmet
    expect(spec.status.unmetConditions).toEqual([{ name: 'nodeReady', reason: 'node "wrkr-1" status is not available yet' }])
  })

  it('disk image: maintenance -> booting -> running, no install; the control plane waits in booting for bootstrap', async () => {
    c = await startOn('127.23.2', { cps: 2, workers: 1, image: 'disk', vip: false })
    const { sim } = c
    const wl = stageLog(sim, 'wrkr-1'),
      cl = stageLog(sim, 'cp-1')
    for (const n of ['cp-1', 'cp-2', 'wrkr-1']) expect((await applyInsecure(sim, n)).code).toBe(0)
    await sim.until(() => sim.node('wrkr-1')!.stage === 'running')
    expect(wl).toEqual(['maintenance', 'booting', 'running'])
    // its boot time is over once its CRI runs (sim/node.js bootConfigured, criReady): a control plane
    // then waits in booting for etcd
    await sim.until(() => sim.node('cp-1')!.services.cri === 'Running')
    const spec = await machineStatus(sim, '127.23.2.11')
    expect(spec.stage).toBe('booting')
    expect(spec.status.ready).toBe(false)
    // Talos names a registered-but-waiting required service twice (once per service, once as required)
    expect(spec.status.unmetConditions).toEqual([
      { name: 'services', reason: 'etcd not running, etcd not running' },
      {
        name: 'staticPods',
        reason:
          'kube-system/kube-apiserver-cp-1 pending, kube-system/kube-controller-manager-cp-1 pending, kube-system/kube-scheduler-cp-1 pending',
      },
      { name: 'nodeReady', reason: 'node "cp-1" status is not available yet' },
    ])
    const etcd = await service(sim, '127.23.2.11', 'etcd')
    expect(etcd).toMatchObject({ state: 'Preparing' })
    expect(typeof etcd !== 'string' && etcd.events[0]).toMatch(/^\[Preparing\]: Running pre state \(/)
    const dmesg = await talosctl(sim, ['dmesg', ...at('127.23.2.11')])
    expect(dmesg.stdout).toContain(
      ': [talos] etcd is waiting to join the cluster, if this node is the first node in the cluster, please run `talosctl bootstrap` against one of the following IPs:\n',
    )

    expect((await bootstrapWhenReady(sim, 'cp-1')).code).toBe(0)
    await sim.until(() => sim.node('cp-1')!.stage === 'running' && sim.node('cp-2')!.stage === 'running')
    expect(cl).toEqual(['maintenance', 'booting', 'running'])
    expect((await talosctl(sim, ['bootstrap', ...at('127.23.2.12')])).stderr).toBe(
      'error executing bootstrap: 1 error occurred:\n\t* 127.23.2.12: rpc error: code = AlreadyExists desc = etcd data directory is not empty\n\n\n',
    )
    // each control plane lists both members (one table, a NODE column through the endpoint)
    const members = (await etcdMembers(sim, '127.23.2.11', { nodes: '127.23.2.11,127.23.2.12' })) as Member[]
    const byNode = (node: string) =>
      members
        .filter((m) => m.node === node)
        .map((m) => m.hostname)
        .sort()
    expect([byNode('127.23.2.11'), byNode('127.23.2.12')]).toEqual([
      ['cp-1', 'cp-2'],
      ['cp-1', 'cp-2'],
    ])
    await sim.until(() => ['cp-1', 'cp-2', 'wrkr-1'].every((n) => sim.node(n)!.registered))
    const cp = await machineStatus(sim, '127.23.2.11')
    expect(cp.status.unmetConditions).toEqual([{ name: 'nodeReady', reason: 'node "cp-1" is not ready' }])
  })
})

describe('critical path', () => {
  it('driven as fast as possible, no node registers before install + reboot + boot + etcd + kubelet', async () => {
    c = await startOn('127.23.11', { cps: 2, workers: 1, speed: 500 })
    const { sim } = c
    const t = sim.scenario.timings
    const pathBefore = sim.criticalPathSeconds()
    const t0 = Date.now()
    await Promise.all(['cp-1', 'cp-2', 'wrkr-1'].map((n) => applyInsecure(sim, n)))
    expect((await bootstrapWhenReady(sim, 'cp-1')).code).toBe(0)
    const firstRegistered = await new Promise<number>((resolve) => {
      const stop = sim.watch((v) => {
        if (v.registered) {
          stop()
          resolve(Date.now())
        }
      })
    })
    // the install's reboot keeps the node down at least 2 s of wall clock, whatever the speed (REBOOT_FLOOR_MS)
    const reboot = Math.max((t.reboot * 1000) / sim.scenario.speed, 2000)
    const lowerBound = ((t.install + t.boot + t.etcd + t.kubelet) * 1000) / sim.scenario.speed + reboot
    expect(firstRegistered - t0).toBeGreaterThanOrEqual(lowerBound - 5)
    // before the other control plane has joined (here: asked before the run), the scenario's path
    expect(pathBefore).toBeCloseTo((t.install + t.boot + t.etcd + t.kubelet + t.cni) / sim.scenario.speed + reboot / 1000, 6)
  })

  it('three control planes: their joins, as the real etcd takes them, are on the path once they are measured', async () => {
    c = await startOn('127.23.12', { cps: 3, workers: 0, image: 'disk', vip: false, speed: 500 })
    const { sim } = c
    const t = sim.scenario.timings
    const scenarioPath = (t.boot + t.etcd + t.kubelet + t.cni) / sim.scenario.speed
    expect(sim.etcd.joinsSeconds()).toBeNull()
    expect(sim.criticalPathSeconds()).toBeCloseTo(scenarioPath, 6)
    await Promise.all(['cp-1', 'cp-2', 'cp-3'].map((n) => applyInsecure(sim, n)))
    expect((await bootstrapWhenReady(sim, 'cp-1')).code).toBe(0)
    await sim.until(() => sim.etcd.joinsSeconds() !== null, 60_000)
    // one learner at a time, and the real etcd adds the third member only once the first two have
    // been connected its HealthInterval (5 s of real time, whatever the speed: etcdserver/server.go mayAddMember)
    const joins = sim.etcd.joinsSeconds()!
    expect(joins).toBeGreaterThanOrEqual(5)
    expect(sim.criticalPathSeconds()).toBeCloseTo((t.boot + t.etcd) / sim.scenario.speed + joins, 6)
    expect(sim.criticalPathSeconds()).toBeGreaterThan(scenarioPath + 4)
  })
})

describe('bootstrap checks (v1alpha1_server.go Bootstrap)', () => {
  it('not available before CRI; worker texts per version', async () => {
    c = await startOn('127.23.3', { cps: 1, workers: 1, image: 'disk', vip: false, timings: { boot: 3000 } }) // CRI up after 3 s real
    const { sim } = c
    await applyInsecure(sim, 'cp-1')
    await applyInsecure(sim, 'wrkr-1')
    await sim.until(() => sim.node('cp-1')!.listener === 'secure' && sim.node('wrkr-1')!.listener === 'secure')
    expect((await talosctl(sim, ['bootstrap', ...at('127.23.3.11')])).stderr).toBe(
      'error executing bootstrap: 1 error occurred:\n\t* 127.23.3.11: rpc error: code = FailedPrecondition desc = bootstrap is not available yet\n\n\n',
    )
    // a worker answers for itself (apid handles a call for its own address locally): a plain error
    expect((await bootstrapWhenReady(sim, 'wrkr-1')).stderr).toBe(
      'error executing bootstrap: rpc error: code = FailedPrecondition desc = bootstrap can only be performed on a control plane node\n',
    )
  })

  it('v1.13: worker bootstrap is Unimplemented, apply reports without a reboot, version works in maintenance', async () => {
    c = await startOn('127.23.4', { cps: 1, workers: 1, vip: false, talosVersion: 'v1.13.9', timings: { install: 3000 } }) // installing lasts ~3 s real
    const { sim } = c
    const v = await talosctl(sim, ['version', '--insecure', ...at('127.23.4.21')])
    expect(v.code, v.stderr).toBe(0)
    expect(v.stdout).toMatch(/\nServer:\n\tNODE: +127\.23\.4\.21\n\tTag: +v1\.13\.9\n[^]*\tOS\/Arch: +linux\/amd64\n/)
    await applyInsecure(sim, 'cp-1')
    expect((await applyInsecure(sim, 'wrkr-1')).stderr).toBe('Applied configuration without a reboot\n')
    // apid stays up and switches to mTLS, even while installing
    await sim.until(() => sim.node('wrkr-1')!.stage === 'installing')
    expect(await machineStatus(sim, '127.23.4.21', { insecure: true })).toMatch(/tls: certificate required|broken pipe|connection reset/)
    expect((await machineStatus(sim, '127.23.4.21')).stage).toBe('installing')
    await sim.until(
      () => sim.node('wrkr-1')!.stage === 'running' || (sim.node('wrkr-1')!.stage === 'booting' && sim.node('wrkr-1')!.installed),
    )
    expect((await bootstrapWhenReady(sim, 'wrkr-1')).stderr).toBe(
      'error executing bootstrap: rpc error: code = Unimplemented desc = bootstrap is only available on control plane nodes\n',
    )
  })
})

describe('maintenance API per version', () => {
  it('v1.12: version is Unimplemented, no-reboot refused, validation texts wrapped, bad YAML is Unknown', async () => {
    c = await startOn('127.23.5', { cps: 1, workers: 1, image: 'disk' })
    const { sim } = c
    const W = '127.23.5.21'
    expect((await talosctl(sim, ['version', '--insecure', ...at(W)])).stderr).toContain(
      'error getting version: rpc error: code = Unimplemented desc = API is not implemented in maintenance mode',
    )
    expect((await applyInsecure(sim, 'wrkr-1', ['--mode', 'no-reboot'])).stderr).toBe(
      "error applying new configuration: rpc error: code = Unimplemented desc = apply configuration --mode='no-reboot' is not supported in maintenance mode\n",
    )
    const withoutInstall = noInstall(configOf(sim, 'wrkr-1'))
    expect(withoutInstall).not.toMatch(/install:/)
    expect((await applyInsecure(sim, 'wrkr-1', [], configFile(sim, 'no-install', withoutInstall))).stderr).toBe(
      'error applying new configuration: rpc error: code = InvalidArgument desc = ' +
        'configuration validation failed: 1 error occurred:\n\t* v1alpha1.Config: 1 error occurred:\n\t* install instructions are required in "metal" mode\n\n\n\n\n',
    )
    const bad = await applyInsecure(sim, 'wrkr-1', [], configFile(sim, 'bad', 'version: ['))
    expect(bad.stderr).toMatch(/^error applying new configuration: rpc error: code = Unknown desc = failed to parse config: /)
    const dry = await applyInsecure(sim, 'wrkr-1', ['--dry-run'])
    expect(dry).toMatchObject({
      code: 0,
      stderr: 'Dry run summary:\nNode is running in maintenance mode and does not have a config yet.\n',
    })
    expect(sim.node('wrkr-1')!.stage).toBe('maintenance')
    // sensitive resources are refused to the insecure (reader) caller
    expect((await talosctl(sim, ['get', 'mc', '--insecure', ...at(W)])).stderr).toContain(
      'rpc error: code = PermissionDenied desc = not authorized',
    )
    // talosctl resolves the type through the node's ResourceDefinitions: MachineStatus and MountStatus both abbreviate to `ms`
    expect((await talosctl(sim, ['get', 'ms', '--insecure', ...at(W)])).stderr).toMatch(
      /rpc error: code = InvalidArgument desc = resource type "ms" is ambiguous: \[machinestatuses\.runtime\.talos\.dev mountstatuses\.runtime\.talos\.dev /,
    )
    expect((await talosctl(sim, ['get', 'machinestatus', 'foo', '--insecure', ...at(W)])).stderr).toContain(
      "rpc error: code = NotFound desc = resource MachineStatuses.runtime.talos.dev(runtime/foo@undefined) doesn't exist",
    )
    const disks = jsonDocs((await talosctl(sim, ['get', 'disks', '--insecure', ...at(W), '-o', 'json'])).stdout)
    expect(disks[0]).toMatchObject({
      metadata: { id: 'sda', type: 'Disks.block.talos.dev' },
      spec: { dev_path: '/dev/sda', size: 100e9, pretty_size: '100 GB', model: 'QEMU HARDDISK' },
    })
  })

  it('v1.13: a disk-image node accepts a config without an install section', async () => {
    c = await startOn('127.23.6', { cps: 1, workers: 1, image: 'disk', talosVersion: 'v1.13.9' })
    const file = configFile(c.sim, 'no-install', noInstall(configOf(c.sim, 'wrkr-1')))
    expect(await applyInsecure(c.sim, 'wrkr-1', [], file)).toMatchObject({ code: 0, stderr: 'Applied configuration without a reboot\n' })
  })
})

describe('reset, reboot, proxying, health', () => {
  it('graceful reset --reboot leaves etcd and ends in maintenance; reboot comes back to running', async () => {
    c = await startOn('127.23.7', { cps: 2, workers: 1, image: 'disk', talosVersion: 'v1.13.9' })
    const { sim } = c
    for (const n of ['cp-1', 'cp-2', 'wrkr-1']) await applyInsecure(sim, n)
    await bootstrapWhenReady(sim, 'cp-1')
    await sim.until(() => ['cp-1', 'cp-2', 'wrkr-1'].every((n) => sim.node(n)!.stage === 'running'))
    const wl = stageLog(sim, 'wrkr-1')
    expect(await talosctl(sim, ['reboot', '--wait=false', ...at('127.23.7.11', '127.23.7.21')])).toMatchObject({ code: 0, stderr: '' })
    await sim.until(() => wl.length > 1 && sim.node('wrkr-1')!.stage === 'running')
    expect(wl).toEqual(['running', 'rebooting', 'booting', 'running'])

    const cl = stageLog(sim, 'cp-2')
    expect(await talosctl(sim, ['reset', '--graceful=true', '--reboot', '--wait=false', ...at('127.23.7.12')])).toMatchObject({
      code: 0,
      stderr: '',
    })
    await sim.until(() => sim.node('cp-2')!.stage === 'maintenance')
    // the reset sequence's reboot is not a Reboot sequence: resetting until it boots (controllers/runtime/machine_status.go)
    expect(cl).toEqual(['running', 'resetting', 'booting', 'maintenance'])
    expect(((await etcdMembers(sim, '127.23.7.11')) as Member[]).map((m) => m.hostname)).toEqual(['cp-1'])
  })

  it('reset of an ISO node: a full wipe installs again after the next apply, a STATE/EPHEMERAL wipe does not', async () => {
    c = await startOn('127.23.10', { cps: 1, workers: 2, image: 'iso', vip: false })
    const { sim } = c
    for (const n of ['cp-1', 'wrkr-1', 'wrkr-2']) await applyInsecure(sim, n)
    await sim.until(() => ['wrkr-1', 'wrkr-2'].every((n) => sim.node(n)!.stage === 'running'))
    const reset = ['reset', '--graceful=false', '--reboot', '--wait=false']
    expect((await talosctl(sim, [...reset, ...at('127.23.10.21')])).code).toBe(0)
    expect(
      (await talosctl(sim, [...reset, '--system-labels-to-wipe', 'STATE', '--system-labels-to-wipe', 'EPHEMERAL', ...at('127.23.10.22')]))
        .code,
    ).toBe(0)
    await sim.until(() => ['wrkr-1', 'wrkr-2'].every((n) => sim.node(n)!.stage === 'maintenance'))
    const l1 = stageLog(sim, 'wrkr-1'),
      l2 = stageLog(sim, 'wrkr-2')
    for (const n of ['wrkr-1', 'wrkr-2']) expect((await applyInsecure(sim, n)).code).toBe(0)
    await sim.until(() => ['wrkr-1', 'wrkr-2'].every((n) => sim.node(n)!.stage === 'running'))
    expect(l1).toEqual(['maintenance', 'booting', 'installing', 'rebooting', 'booting', 'running'])
    expect(l2).toEqual(['maintenance', 'booting', 'running'])
  })

  it('proxying: node strings as given, no forwarding via a worker, per-node transport errors, calls logged', async () => {
    c = await startOn('127.23.8', { cps: 1, workers: 2, image: 'disk', vip: false })
    const { sim } = c
    await applyInsecure(sim, 'cp-1')
    await applyInsecure(sim, 'wrkr-1')
    await sim.until(() => sim.node('cp-1')!.listener === 'secure' && sim.node('wrkr-1')!.listener === 'secure')
    const nodes = 'cp-1,127.23.8.21,127.23.8.22'
    const v = await talosctl(sim, ['version', ...at('127.23.8.11', nodes)])
    expect([...v.stdout.matchAll(/^\tNODE: +(\S+)$/gm)].map((m) => m[1])).toEqual(['cp-1', '127.23.8.21'])
    expect(v.stdout).toMatch(/\tNODE: +cp-1\n\tTag: +v1\.12\.11\n/)
    // wrkr-2 is still in maintenance: its certificate is not the cluster CA's
    expect(v.stderr).toContain(
      '127.23.8.22: rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"',
    )
    expect((await talosctl(sim, ['version', ...at('127.23.8.21', '127.23.8.11')])).stderr).toContain(
      'rpc error: code = PermissionDenied desc = no request forwarding',
    )
    // a worker answers a call for itself locally: no node name in the answer, talosctl names the endpoint it dialed
    const local = await talosctl(sim, ['version', ...at('127.23.8.21')])
    expect(local.stdout).toMatch(/\tNODE: +127\.23\.8\.21\n/)
    expect((await talosctl(sim, ['version', ...at('127.23.8.11', '127.23.8.21:50000')])).stderr).toContain(
      'rpc error: code = Internal desc = invalid target "127.23.8.21:50000"',
    )
    const calls = sim.calls().filter((x) => x.command === 'version' && x.args.includes(nodes))
    expect(calls.map((x) => [x.node, x.call, x.outcome.slice(0, 43)])).toEqual([
      ['cp-1', 'get', 'ok'],
      ['wrkr-1', 'get', 'ok'],
      ['wrkr-2', 'get', 'error: rpc error: code = Unavailable desc ='],
    ])
    expect(calls[0]!.args).toEqual(['-e', '127.23.8.11', '-n', nodes])
    const lines = readFileSync(`${c.dir}/calls.jsonl`, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(lines).toEqual(sim.calls())
  })

  it('health (v1.13) streams the default checks to OK once the cluster is up', async () => {
    c = await startOn('127.23.9', { cps: 1, workers: 1, image: 'disk', talosVersion: 'v1.13.9' })
    const { sim } = c
    await applyInsecure(sim, 'cp-1')
    await applyInsecure(sim, 'wrkr-1')
    await bootstrapWhenReady(sim, 'cp-1')
    const h = await talosctl(sim, ['health', '--wait-timeout', '20s', ...at('127.23.9.11')])
    expect(h.code, h.stderr).toBe(0)
    const lines = h.stderr.trimEnd().split('\n')
    expect(lines[0]).toMatch(/^discovered nodes: \[/)
    expect(lines).toContain('waiting for etcd to be healthy: OK')
    expect(lines).toContain('waiting for all k8s nodes to report ready: SKIP')
    expect(lines.at(-1)).toBe('waiting for all k8s nodes to report schedulable: OK')
  })
})

// Node lifecycle observed through the node API (talosctl.md §5). Range 127.23.x.y.
import { afterEach, describe, expect, it } from 'vitest'
import { startOn, talosCall, applyInsecure, bootstrapWhenReady, stageLog, configOf, type Started } from './helpers.js'

let c: Started | null = null
afterEach(async () => { await c?.stop(); c = null })
const ms = async (sim: Started['sim'], ip: string, secure = true) => {
  const r = await talosCall(sim, ip, 'resources.Get', { type: 'machinestatus' }, secure ? { secure: true, nodes: ip } : {})
  return r.socketError ?? r.messages?.[0]?.data?.resources[0].spec
}

describe('ISO and disk-image nodes', () => {
  it('ISO: maintenance -> booting -> installing -> rebooting -> booting -> running; v1.12 refuses while installing', async () => {
    c = await startOn('127.23.1', { cps: 1, workers: 1, vip: false, timings: { install: 300 } })
    const { sim } = c
    expect(await ms(sim, '127.23.1.21', false)).toEqual({ stage: 'maintenance', status: { ready: true, unmetConditions: [] } })
    const log = stageLog(sim, 'wrkr-1')
    await applyInsecure(sim, 'cp-1') // its trustd signs the worker's API certificate
    const r = await applyInsecure(sim, 'wrkr-1')
    expect(r.messages?.[0]).toEqual({ node: '', error: null, data: { modeDetails: '', warnings: [] } })
    await sim.until(() => sim.node('wrkr-1')!.stage === 'installing')
    expect(await ms(sim, '127.23.1.21')).toBe('ECONNREFUSED')
    expect(await ms(sim, '127.23.1.21', false)).toBe('ECONNREFUSED')
    await sim.until(() => sim.node('wrkr-1')!.stage === 'running')
    expect(log).toEqual(['maintenance', 'booting', 'installing', 'rebooting', 'booting', 'running'])
    const spec = await ms(sim, '127.23.1.21')
    expect(spec.stage).toBe('running')
    // no API server yet: the kubelet cannot register, so nodeReady is unmet
    expect(spec.status.unmetConditions).toEqual([{ name: 'nodeReady', reason: 'node "wrkr-1" status is not available yet' }])
  })

  it('disk image: maintenance -> booting -> running, no install; the control plane waits in booting for bootstrap', async () => {
    c = await startOn('127.23.2', { cps: 2, workers: 1, image: 'disk', vip: false })
    const { sim } = c
    const wl = stageLog(sim, 'wrkr-1'), cl = stageLog(sim, 'cp-1')
    for (const n of ['cp-1', 'cp-2', 'wrkr-1']) expect((await applyInsecure(sim, n)).messages?.[0]?.error).toBeNull()
    await sim.until(() => sim.node('wrkr-1')!.stage === 'running')
    expect(wl).toEqual(['maintenance', 'booting', 'running'])
    // its boot time is over once its CRI runs (sim/node.js bootConfigured, criReady): a control plane
    // then waits in booting for etcd
    await sim.until(() => sim.node('cp-1')!.services.cri === 'Running')
    const spec = await ms(sim, '127.23.2.11')
    expect(spec.stage).toBe('booting')
    expect(spec.status.ready).toBe(false)
    // Talos names a registered-but-waiting required service twice (once per service, once as required)
    expect(spec.status.unmetConditions).toEqual([
      { name: 'services', reason: 'etcd not running, etcd not running' },
      { name: 'staticPods', reason: 'kube-system/kube-apiserver-cp-1 pending, kube-system/kube-controller-manager-cp-1 pending, kube-system/kube-scheduler-cp-1 pending' },
      { name: 'nodeReady', reason: 'node "cp-1" status is not available yet' },
    ])
    const svc = await talosCall(sim, '127.23.2.11', 'machine.ServiceList', {}, { secure: true, nodes: '127.23.2.11' })
    const etcd = svc.messages![0]!.data.services.find((s: any) => s.id === 'etcd')
    expect(etcd.state).toBe('Preparing')
    expect(etcd.events.at(-1).msg).toBe('Running pre state')
    const dm = await talosCall(sim, '127.23.2.11', 'machine.Dmesg', {}, { secure: true, nodes: '127.23.2.11' })
    expect(dm.messages![0]!.data.lines.map((l: any) => l.text)).toContain('[talos] etcd is waiting to join the cluster, if this node is the first node in the cluster, please run `talosctl bootstrap` against one of the following IPs:')

    expect((await bootstrapWhenReady(sim, 'cp-1')).messages?.[0]?.error).toBeNull()
    await sim.until(() => sim.node('cp-1')!.stage === 'running' && sim.node('cp-2')!.stage === 'running')
    expect(cl).toEqual(['maintenance', 'booting', 'running'])
    const again = await talosCall(sim, '127.23.2.12', 'machine.Bootstrap', {}, { secure: true, nodes: '127.23.2.12' })
    expect(again.messages?.[0]?.error).toEqual({ code: 'AlreadyExists', message: 'etcd data directory is not empty' })
    const members = await talosCall(sim, '127.23.2.11', 'machine.EtcdMemberList', {}, { secure: true, nodes: '127.23.2.11,127.23.2.12' })
    expect(members.messages!.map((m) => m.data.members.map((x: any) => x.hostname).sort())).toEqual([['cp-1', 'cp-2'], ['cp-1', 'cp-2']])
    await sim.until(() => ['cp-1', 'cp-2', 'wrkr-1'].every((n) => sim.node(n)!.registered))
    const cp = await ms(sim, '127.23.2.11')
    expect(cp.status.unmetConditions).toEqual([{ name: 'nodeReady', reason: 'node "cp-1" is not ready' }])
  })
})

describe('critical path', () => {
  it('driven as fast as possible, no node registers before install + reboot + boot + etcd + kubelet', async () => {
    c = await startOn('127.23.11', { cps: 2, workers: 1, speed: 500 })
    const { sim } = c
    const t = sim.scenario.timings
    const t0 = Date.now()
    await Promise.all(['cp-1', 'cp-2', 'wrkr-1'].map((n) => applyInsecure(sim, n)))
    expect((await bootstrapWhenReady(sim, 'cp-1', 2000)).messages?.[0]?.error).toBeNull()
    const firstRegistered = await new Promise<number>((resolve) => {
      const stop = sim.watch((v) => { if (v.registered) { stop(); resolve(Date.now()) } })
    })
    const lowerBound = ((t.install + t.reboot + t.boot + t.etcd + t.kubelet) * 1000) / sim.scenario.speed
    expect(firstRegistered - t0).toBeGreaterThanOrEqual(lowerBound - 5)
    expect(sim.criticalPathSeconds()).toBeCloseTo((t.install + t.reboot + t.boot + t.etcd + t.kubelet + t.cni) / sim.scenario.speed, 6)
  })
})

describe('bootstrap checks (§3.2)', () => {
  it('not available before CRI; worker texts per version', async () => {
    c = await startOn('127.23.3', { cps: 1, workers: 1, image: 'disk', vip: false, timings: { boot: 600 } }) // CRI up after 600 ms real
    const { sim } = c
    await applyInsecure(sim, 'cp-1'); await applyInsecure(sim, 'wrkr-1')
    await sim.until(() => sim.node('cp-1')!.listener === 'secure' && sim.node('wrkr-1')!.listener === 'secure')
    const early = await talosCall(sim, '127.23.3.11', 'machine.Bootstrap', {}, { secure: true, nodes: '127.23.3.11' })
    expect(early.messages?.[0]?.error).toEqual({ code: 'FailedPrecondition', message: 'bootstrap is not available yet' })
    const w = await bootstrapWhenReady(sim, 'wrkr-1')
    expect(w.messages?.[0]?.error).toEqual({ code: 'FailedPrecondition', message: 'bootstrap can only be performed on a control plane node' })
  })

  it('v1.13: worker bootstrap is Unimplemented, apply reports without a reboot, version works in maintenance', async () => {
    c = await startOn('127.23.4', { cps: 1, workers: 1, vip: false, talosVersion: 'v1.13.9', timings: { install: 800 } }) // installing lasts ~0.8 s real
    const { sim } = c
    const v = await talosCall(sim, '127.23.4.21', 'machine.Version')
    expect(v.messages?.[0]?.data).toMatchObject({ tag: 'v1.13.9', os: 'linux', arch: 'amd64' })
    await applyInsecure(sim, 'cp-1')
    const r = await applyInsecure(sim, 'wrkr-1')
    expect(r.messages?.[0]?.data.modeDetails).toBe('Applied configuration without a reboot')
    // apid stays up and switches to mTLS, even while installing
    await sim.until(() => sim.node('wrkr-1')!.stage === 'installing')
    expect(await ms(sim, '127.23.4.21', false)).toBe('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED')
    expect((await ms(sim, '127.23.4.21')).stage).toBe('installing')
    await sim.until(() => sim.node('wrkr-1')!.stage === 'running' || sim.node('wrkr-1')!.stage === 'booting' && sim.node('wrkr-1')!.installed)
    const w = await bootstrapWhenReady(sim, 'wrkr-1')
    expect(w.messages?.[0]?.error).toEqual({ code: 'Unimplemented', message: 'bootstrap is only available on control plane nodes' })
  })
})

describe('maintenance API per version', () => {
  it('v1.12: version is Unimplemented, no-reboot refused, validation texts wrapped, bad YAML is Unknown', async () => {
    c = await startOn('127.23.5', { cps: 1, workers: 1, image: 'disk' })
    const { sim } = c
    expect((await talosCall(sim, '127.23.5.21', 'machine.Version')).error).toEqual({ code: 'Unimplemented', message: 'API is not implemented in maintenance mode' })
    expect((await applyInsecure(sim, 'wrkr-1', { mode: 'no-reboot' })).error).toEqual({ code: 'Unimplemented', message: "apply configuration --mode='no-reboot' is not supported in maintenance mode" })
    const noInstall = configOf(sim, 'wrkr-1').replace(/\n {4}install:\n(?: {8}.*\n)+/, '\n')
    expect(noInstall).not.toMatch(/install:/)
    const r = await talosCall(sim, '127.23.5.21', 'machine.ApplyConfiguration', { data: noInstall })
    expect(r.error).toEqual({ code: 'InvalidArgument', message: 'configuration validation failed: 1 error occurred:\n\t* v1alpha1.Config: 1 error occurred:\n\t* install instructions are required in "metal" mode\n\n\n\n' })
    const bad = await talosCall(sim, '127.23.5.21', 'machine.ApplyConfiguration', { data: 'version: [' })
    expect(bad.error?.code).toBe('Unknown')
    expect(bad.error?.message).toMatch(/^failed to parse config: /)
    const dry = await applyInsecure(sim, 'wrkr-1', { dryRun: true })
    expect(dry.messages?.[0]?.data.modeDetails).toBe('Dry run summary:\nNode is running in maintenance mode and does not have a config yet.')
    expect(sim.node('wrkr-1')!.stage).toBe('maintenance')
    // sensitive resources are refused to the insecure (reader) caller
    expect((await talosCall(sim, '127.23.5.21', 'resources.Get', { type: 'mc' })).error).toEqual({ code: 'PermissionDenied', message: 'not authorized' })
    expect((await talosCall(sim, '127.23.5.21', 'resources.Get', { type: 'ms' })).error?.message).toMatch(/^resource type "ms" is ambiguous: \[MachineStatuses\.runtime\.talos\.dev /)
    expect((await talosCall(sim, '127.23.5.21', 'resources.Get', { type: 'machinestatus', id: 'foo' })).error).toEqual({ code: 'NotFound', message: "resource MachineStatuses.runtime.talos.dev(runtime/foo@undefined) doesn't exist" })
    const disks = await talosCall(sim, '127.23.5.21', 'resources.Get', { type: 'disks' })
    expect(disks.messages![0]!.data.resources[0]).toMatchObject({ metadata: { id: 'sda', type: 'Disks.block.talos.dev' }, spec: { dev_path: '/dev/sda', size: 100e9, pretty_size: '100 GB', model: 'QEMU HARDDISK' } })
  })

  it('v1.13: a disk-image node accepts a config without an install section', async () => {
    c = await startOn('127.23.6', { cps: 1, workers: 1, image: 'disk', talosVersion: 'v1.13.9' })
    const noInstall = configOf(c.sim, 'wrkr-1').replace(/\n {4}install:\n(?: {8}.*\n)+/, '\n')
    const r = await talosCall(c.sim, '127.23.6.21', 'machine.ApplyConfiguration', { data: noInstall })
    expect(r.messages?.[0]?.error).toBeNull()
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
    expect((await talosCall(sim, '127.23.7.11', 'machine.Reboot', {}, { secure: true, nodes: '127.23.7.21' })).messages?.[0]?.error).toBeNull()
    await sim.until(() => wl.length > 1 && sim.node('wrkr-1')!.stage === 'running')
    expect(wl).toEqual(['running', 'rebooting', 'booting', 'running'])

    const cl = stageLog(sim, 'cp-2')
    const r = await talosCall(sim, '127.23.7.12', 'machine.Reset', { graceful: true, reboot: true }, { secure: true, nodes: '127.23.7.12' })
    expect(r.messages?.[0]?.error).toBeNull()
    await sim.until(() => sim.node('cp-2')!.stage === 'maintenance')
    // the reset sequence's reboot is not a Reboot sequence: resetting until it boots (controllers/runtime/machine_status.go)
    expect(cl).toEqual(['running', 'resetting', 'booting', 'maintenance'])
    const members = await talosCall(sim, '127.23.7.11', 'machine.EtcdMemberList', {}, { secure: true, nodes: '127.23.7.11' })
    expect(members.messages![0]!.data.members.map((m: any) => m.hostname)).toEqual(['cp-1'])
  })

  it('reset of an ISO node: a full wipe installs again after the next apply, a STATE/EPHEMERAL wipe does not', async () => {
    c = await startOn('127.23.10', { cps: 1, workers: 2, image: 'iso', vip: false })
    const { sim } = c
    for (const n of ['cp-1', 'wrkr-1', 'wrkr-2']) await applyInsecure(sim, n)
    await sim.until(() => ['wrkr-1', 'wrkr-2'].every((n) => sim.node(n)!.stage === 'running'))
    await talosCall(sim, '127.23.10.21', 'machine.Reset', { graceful: false, reboot: true }, { secure: true })
    await talosCall(sim, '127.23.10.22', 'machine.Reset', { graceful: false, reboot: true, systemLabelsToWipe: ['STATE', 'EPHEMERAL'] }, { secure: true })
    await sim.until(() => ['wrkr-1', 'wrkr-2'].every((n) => sim.node(n)!.stage === 'maintenance'))
    const l1 = stageLog(sim, 'wrkr-1'), l2 = stageLog(sim, 'wrkr-2')
    for (const n of ['wrkr-1', 'wrkr-2']) expect((await applyInsecure(sim, n)).messages?.[0]?.error).toBeNull()
    await sim.until(() => ['wrkr-1', 'wrkr-2'].every((n) => sim.node(n)!.stage === 'running'))
    expect(l1).toEqual(['maintenance', 'booting', 'installing', 'rebooting', 'booting', 'running'])
    expect(l2).toEqual(['maintenance', 'booting', 'running'])
  })

  it('proxying: node strings as given, no forwarding via a worker, per-node transport errors, calls logged', async () => {
    c = await startOn('127.23.8', { cps: 1, workers: 2, image: 'disk', vip: false })
    const { sim } = c
    await applyInsecure(sim, 'cp-1'); await applyInsecure(sim, 'wrkr-1')
    await sim.until(() => sim.node('cp-1')!.listener === 'secure' && sim.node('wrkr-1')!.listener === 'secure')
    const v = await talosCall(sim, '127.23.8.11', 'machine.Version', {}, { secure: true, nodes: 'cp-1,127.23.8.21,127.23.8.22', argv: ['version', '-e', '127.23.8.11', '-n', 'cp-1,127.23.8.21,127.23.8.22'] })
    expect(v.messages!.map((m) => m.node)).toEqual(['cp-1', '127.23.8.21', '127.23.8.22'])
    expect(v.messages![0]!.data.tag).toBe('v1.12.11')
    expect(v.messages![2]!.error).toEqual({ code: 'Unavailable', message: 'connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"' })
    expect((await talosCall(sim, '127.23.8.21', 'machine.Version', {}, { secure: true, nodes: '127.23.8.11' })).error).toEqual({ code: 'PermissionDenied', message: 'no request forwarding' })
    const local = await talosCall(sim, '127.23.8.21', 'machine.Version', {}, { secure: true, nodes: '127.23.8.21' })
    expect(local.messages?.[0]?.node).toBe('')
    expect((await talosCall(sim, '127.23.8.11', 'machine.Version', {}, { secure: true, nodes: '127.23.8.21:50000' })).error).toEqual({ code: 'Internal', message: 'invalid target "127.23.8.21:50000"' })
    const calls = sim.calls().filter((x) => x.command === 'version' && x.args.includes('cp-1,127.23.8.21,127.23.8.22'))
    expect(calls.map((x) => [x.node, x.call, x.outcome.slice(0, 43)])).toEqual([
      ['cp-1', 'get', 'ok'], ['wrkr-1', 'get', 'ok'], ['wrkr-2', 'get', 'error: rpc error: code = Unavailable desc ='],
    ])
    expect(calls[0]!.args).toEqual(['-e', '127.23.8.11', '-n', 'cp-1,127.23.8.21,127.23.8.22'])
    const { readFileSync } = await import('node:fs')
    const lines = readFileSync(`${c.dir}/calls.jsonl`, 'utf8').trim().split('\n').map((l) => JSON.parse(l))
    expect(lines.length).toBe(sim.calls().length)
  })

  it('health (v1.13) streams the default checks to OK once the cluster is up', async () => {
    c = await startOn('127.23.9', { cps: 1, workers: 1, image: 'disk', talosVersion: 'v1.13.9' })
    const { sim } = c
    await applyInsecure(sim, 'cp-1'); await applyInsecure(sim, 'wrkr-1')
    await bootstrapWhenReady(sim, 'cp-1')
    const https = await import('node:https')
    const { talosCreds } = await import('./helpers.js')
    const body = await new Promise<string>((resolve, reject) => {
      const req = https.request({ host: '127.23.9.11', port: 50000, method: 'POST', path: '/cluster.HealthCheck', agent: false, ...talosCreds(sim),
        checkServerIdentity: () => undefined, headers: { 'x-talos-nodes': '127.23.9.11' } }, (res) => { let b = ''; res.on('data', (d) => { b += d }); res.on('end', () => resolve(b)) })
      req.on('error', reject)
      req.end(JSON.stringify({ waitTimeoutMs: 20000 }))
    })
    const msgs = body.trim().split('\n').map((l) => JSON.parse(l))
    expect(msgs.at(-1)).toEqual({ done: true })
    const lines = msgs.filter((m) => m.line).map((m) => m.line as string)
    expect(lines[0]).toMatch(/^discovered nodes: \["127\.23\.9\.11" "127\.23\.9\.21"\]|^discovered nodes: \[/)
    expect(lines).toContain('waiting for etcd to be healthy: OK')
    expect(lines).toContain('waiting for all k8s nodes to report ready: SKIP')
    expect(lines.at(-1)).toBe('waiting for all k8s nodes to report schedulable: OK')
  })
})

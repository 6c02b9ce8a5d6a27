// Every fault kind of docs/design.md (Fault kinds) acting where it says; `times` counting; clearFault. Range 127.24.x.y.
import { afterEach, describe, expect, it } from 'vitest'
import { startOn, talosCall, applyInsecure, bootstrapWhenReady, stageLog, tlsHandshake, type Started } from './helpers.js'
import type { Fault } from '../../sim/index.js'

let c: Started | null = null
afterEach(async () => { await c?.stop(); c = null })
const start = async (sub: number, faults: Fault[], o: Parameters<typeof startOn>[1] = {}) => (c = await startOn(`127.24.${sub}`, { cps: 1, workers: 1, ...o, faults }))
const probe = (s: Started, ip: string, timeoutMs?: number) => talosCall(s.sim, ip, 'resources.Get', { type: 'machinestatus' }, { timeoutMs })
const refusedText = (ip: string) => `error: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp ${ip}:50000: connect: connection refused"`

describe('transport faults', () => {
  it('refused on apply, times 2: two refusals (as the CLI would see them), then accepted', async () => {
    const s = await start(1, [{ node: 'wrkr-1', on: 'apply', kind: 'refused', times: 2 }])
    expect((await applyInsecure(s.sim, 'wrkr-1')).transportError).toBe('refused')
    expect((await probe(s, '127.24.1.21')).messages?.[0]?.error).toBeNull() // other calls unaffected
    expect((await applyInsecure(s.sim, 'wrkr-1')).transportError).toBe('refused')
    expect((await applyInsecure(s.sim, 'wrkr-1')).messages?.[0]?.error).toBeNull()
    expect(s.sim.calls().filter((x) => x.call === 'apply').map((x) => x.outcome)).toEqual([refusedText('127.24.1.21'), refusedText('127.24.1.21'), 'ok'])
  })

  it("talosctl's version-skew probe neither triggers nor consumes a call fault, and is logged with its purpose", async () => {
    const s = await start(15, [{ node: 'wrkr-1', on: 'get', kind: 'refused', times: 1 }], { image: 'disk', vip: false })
    await applyInsecure(s.sim, 'cp-1'); await applyInsecure(s.sim, 'wrkr-1')
    await s.sim.until(() => s.sim.node('wrkr-1')!.listener === 'secure')
    const https = await import('node:https')
    const { talosCreds } = await import('./helpers.js')
    const versionCheck = await new Promise<any>((resolve) => {
      const req = https.request({ host: '127.24.15.21', port: 50000, method: 'POST', path: '/machine.Version', agent: false, ...talosCreds(s.sim),
        checkServerIdentity: () => undefined, headers: { 'x-sim-purpose': 'version-check', 'x-sim-argv': '["get","machinestatus"]' } },
      (res) => { let b = ''; res.on('data', (d) => { b += d }); res.on('end', () => resolve(JSON.parse(b))) })
      req.end('{}')
    })
    expect(versionCheck.messages[0].error).toBeNull()
    expect((await talosCall(s.sim, '127.24.15.21', 'resources.Get', { type: 'machinestatus' }, { secure: true })).transportError).toBe('refused')
    expect((await talosCall(s.sim, '127.24.15.21', 'resources.Get', { type: 'machinestatus' }, { secure: true })).messages?.[0]?.error).toBeNull()
    expect(s.sim.calls().filter((x) => x.call === 'get').map((x) => [(x as any).purpose ?? '', x.outcome.slice(0, 5)])).toEqual([['version-check', 'ok'], ['', 'error'], ['', 'ok']])
  })

  it('refused on any with times: counted per call whatever its kind, then the node answers', async () => {
    const s = await start(16, [{ node: 'wrkr-1', on: 'any', kind: 'refused', times: 2 }])
    expect((await probe(s, '127.24.16.21')).transportError).toBe('refused')
    expect((await applyInsecure(s.sim, 'wrkr-1')).transportError).toBe('refused')
    expect((await probe(s, '127.24.16.21')).messages?.[0]?.error).toBeNull()
    expect(s.sim.calls().map((x) => [x.call, x.outcome === 'ok'])).toEqual([['probe', false], ['apply', false], ['probe', true]])
  })

  it('refused and unreachable on any: nothing listens until the fault is cleared', async () => {
    const s = await start(2, [{ node: 'wrkr-1', on: 'any', kind: 'unreachable' }, { node: 'cp-1', on: 'any', kind: 'refused' }])
    expect((await probe(s, '127.24.2.21')).socketError).toBe('ECONNREFUSED')
    expect((await probe(s, '127.24.2.11')).socketError).toBe('ECONNREFUSED')
    expect(s.sim.node('wrkr-1')!.stage).toBe('maintenance') // the node itself is fine
    s.sim.clearFault('wrkr-1', 'unreachable')
    await s.sim.settle()
    expect((await tlsHandshake('127.24.2.21', { rejectUnauthorized: false })).result).toBe('ok')
    expect((await probe(s, '127.24.2.11')).socketError).toBe('ECONNREFUSED')
  })

  it('timeout: on any the connection is accepted and never answered; on probe with times 1 only the first call hangs', async () => {
    const s = await start(3, [{ node: 'wrkr-1', on: 'any', kind: 'timeout' }, { node: 'cp-1', on: 'probe', kind: 'timeout', times: 1 }])
    const t0 = Date.now()
    expect((await probe(s, '127.24.3.21', 300)).socketError).toBe('TIMEOUT')
    expect(Date.now() - t0).toBeGreaterThanOrEqual(280)
    expect((await probe(s, '127.24.3.11', 300)).socketError).toBe('TIMEOUT')
    expect((await probe(s, '127.24.3.11', 2000)).messages?.[0]?.error).toBeNull()
  })

  it('unavailable on bootstrap, times 1: rpc Unavailable once', async () => {
    const s = await start(4, [{ node: 'cp-1', on: 'bootstrap', kind: 'unavailable', times: 1 }], { image: 'disk' })
    await applyInsecure(s.sim, 'cp-1')
    const first = await bootstrapWhenReady(s.sim, 'cp-1')
    expect(first.error).toEqual({ code: 'Unavailable', message: 'error reading from server: EOF' })
    expect((await bootstrapWhenReady(s.sim, 'cp-1')).messages?.[0]?.error).toBeNull()
  })

  it('latency: every call to the node takes ms longer', async () => {
    const s = await start(5, [{ node: 'wrkr-1', on: 'any', kind: 'latency', ms: 250 }])
    let t = Date.now()
    await probe(s, '127.24.5.21')
    expect(Date.now() - t).toBeGreaterThanOrEqual(245)
    t = Date.now()
    await probe(s, '127.24.5.11')
    expect(Date.now() - t).toBeLessThan(200)
  })

  it('pki-mismatch: a control plane proxying to the node reports the Go x509 text with the candidate authority', async () => {
    const s = await start(6, [{ node: 'wrkr-1', on: 'any', kind: 'pki-mismatch' }], { image: 'disk', vip: false })
    await applyInsecure(s.sim, 'cp-1'); await applyInsecure(s.sim, 'wrkr-1')
    await s.sim.until(() => s.sim.node('cp-1')!.listener === 'secure' && s.sim.node('wrkr-1')!.listener === 'pki')
    const r = await talosCall(s.sim, '127.24.6.11', 'machine.Version', {}, { secure: true, nodes: '127.24.6.21' })
    expect(r.messages?.[0]?.error?.message).toBe('connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly because of \\"x509: Ed25519 verification failure\\" while trying to verify candidate authority certificate \\"talos\\")"')
    expect((await talosCall(s.sim, '127.24.6.21', 'machine.Version', {}, { secure: true })).socketError).toMatch(/SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE/)
  })
})

describe('apply-time faults', () => {
  it('disk-mismatch: runtime validation names the CEL expression', async () => {
    const s = await start(7, [{ node: 'wrkr-1', on: 'apply', kind: 'disk-mismatch' }])
    const r = await applyInsecure(s.sim, 'wrkr-1')
    expect(r.error).toEqual({ code: 'InvalidArgument', message: 'runtime configuration validation failed: 1 error occurred:\n\t* v1alpha1.Config: 1 error occurred:\n\t* no disks matched the expression: disk.dev_path == "/dev/sda" && disk.transport != "" && !disk.readonly && !disk.cdrom\n\n\n\n' })
    expect(s.sim.node('wrkr-1')!.stage).toBe('maintenance')
  })

  it('config-rejected: validation error, node stays in maintenance', async () => {
    const s = await start(8, [{ node: 'wrkr-1', on: 'apply', kind: 'config-rejected', times: 1 }])
    const r = await applyInsecure(s.sim, 'wrkr-1')
    expect(r.error?.message).toBe("configuration validation failed: 1 error occurred:\n\t* v1alpha1.Config: 1 error occurred:\n\t* install.extraKernelArgs and install.grubUseUKICmdline can't be used together\n\n\n\n")
    expect((await applyInsecure(s.sim, 'wrkr-1')).messages?.[0]?.error).toBeNull()
  })
})

describe('lifecycle faults', () => {
  it('crash (on install, times 1): back to maintenance, a second apply installs', async () => {
    const s = await start(9, [{ node: 'wrkr-1', on: 'install', kind: 'crash', times: 1 }], { vip: false })
    const log = stageLog(s.sim, 'wrkr-1')
    await applyInsecure(s.sim, 'cp-1')
    await applyInsecure(s.sim, 'wrkr-1')
    await s.sim.until(() => log.length > 3 && s.sim.node('wrkr-1')!.stage === 'maintenance')
    expect(log).toEqual(['maintenance', 'booting', 'installing', 'rebooting', 'booting', 'maintenance'])
    expect(s.sim.node('wrkr-1')!.configured).toBe(false)
    await applyInsecure(s.sim, 'wrkr-1')
    await s.sim.until(() => s.sim.node('wrkr-1')!.stage === 'running')
  })

  it('boot-loop: never reaches running, cycles rebooting/booting', async () => {
    const s = await start(10, [{ node: 'wrkr-1', on: 'boot', kind: 'boot-loop' }], { image: 'disk' })
    const log = stageLog(s.sim, 'wrkr-1')
    await applyInsecure(s.sim, 'wrkr-1')
    await s.sim.until(() => log.filter((x) => x === 'rebooting').length >= 3)
    expect(log).not.toContain('running')
    expect(log.slice(0, 6)).toEqual(['maintenance', 'booting', 'rebooting', 'booting', 'rebooting', 'booting'])
  })

  it('bootstrap-not-ready (times 3): three refusals, then bootstrap succeeds', async () => {
    const s = await start(11, [{ node: 'cp-1', on: 'bootstrap', kind: 'bootstrap-not-ready', times: 3 }], { image: 'disk' })
    await applyInsecure(s.sim, 'cp-1')
    await s.sim.until(() => s.sim.node('cp-1')!.services.cri === 'Running')
    const errs = []
    for (let i = 0; i < 4; i++) errs.push((await talosCall(s.sim, '127.24.11.11', 'machine.Bootstrap', {}, { secure: true, nodes: '127.24.11.11' })).messages?.[0]?.error?.message ?? 'ok')
    expect(errs).toEqual(['bootstrap is not available yet', 'bootstrap is not available yet', 'bootstrap is not available yet', 'ok'])
  })

  it('etcd-join: the control plane never joins and stays booting', async () => {
    const s = await start(12, [{ node: 'cp-2', kind: 'etcd-join' }], { cps: 2, workers: 0, image: 'disk' })
    await applyInsecure(s.sim, 'cp-1'); await applyInsecure(s.sim, 'cp-2')
    await bootstrapWhenReady(s.sim, 'cp-1')
    await s.sim.until(() => s.sim.node('cp-1')!.stage === 'running')
    // etcd healthy on cp-1 and cp-2's CRI up: cp-2 has tried to join (sim/cluster.js maybeJoin, called
    // from either; the fault decides then, no timer left), so "never joins" is final from here on
    await s.sim.until(() => s.sim.node('cp-1')!.etcdHealthy && s.sim.node('cp-2')!.services.cri === 'Running')
    expect(s.sim.node('cp-2')!.stage).toBe('booting')
    const m = await talosCall(s.sim, '127.24.12.11', 'machine.EtcdMemberList', {}, { secure: true, nodes: '127.24.12.11' })
    expect(m.messages![0]!.data.members.map((x: any) => x.hostname)).toEqual(['cp-1'])
    // its data dir is empty: Bootstrap's only check (v1alpha1_server.go), so it starts a second etcd cluster
    expect((await talosCall(s.sim, '127.24.12.12', 'machine.Bootstrap', {}, { secure: true, nodes: '127.24.12.12' })).messages?.[0]?.error).toBeNull()
    await s.sim.until(() => s.sim.node('cp-2')!.etcdHealthy)
    const split = await talosCall(s.sim, '127.24.12.11', 'machine.EtcdMemberList', {}, { secure: true, nodes: '127.24.12.11,127.24.12.12' })
    expect(split.messages!.map((x) => x.data.members.map((y: any) => y.hostname))).toEqual([['cp-1'], ['cp-2']])
  })

  it('kubelet: the service fails with a volume mount error, the node never registers', async () => {
    const s = await start(13, [{ node: 'wrkr-1', kind: 'kubelet' }], { image: 'disk' })
    await applyInsecure(s.sim, 'cp-1'); await applyInsecure(s.sim, 'wrkr-1')
    await bootstrapWhenReady(s.sim, 'cp-1')
    await s.sim.until(() => s.sim.node('cp-1')!.registered && s.sim.node('wrkr-1')!.stage === 'running')
    // the kubelet failed at its start (sim/node.js startKubelet); a failed kubelet never registers (sim/cluster.js)
    await s.sim.until(() => s.sim.node('wrkr-1')!.services.kubelet === 'Failed')
    await s.sim.until(() => s.sim.node('cp-1')!.registered)
    expect(s.sim.node('wrkr-1')!.registered).toBe(false)
    const svc = await talosCall(s.sim, '127.24.13.21', 'machine.ServiceList', {}, { secure: true, nodes: '127.24.13.21' })
    const k = svc.messages![0]!.data.services.find((x: any) => x.id === 'kubelet')
    expect(k.state).toBe('Failed')
    expect(k.health.lastMessage).toMatch(/volume mount/)
    expect(s.sim.node('wrkr-1')!.unmetConditions[0]).toEqual({ name: 'services', reason: 'kubelet not running, kubelet not running' })

    // the runner does not retry a failed pre stage (machined system/service_runner.go): clearing the
    // cause alone leaves it Failed; `talosctl service kubelet restart` runs it again and it registers
    s.sim.clearFault('wrkr-1', 'kubelet')
    // a kubelet that ran would register within `kubelet` simulated seconds: give it twice that on the simulator's clock
    await (s.sim as unknown as { clock: { sleep(simSeconds: number): Promise<void> } }).clock.sleep(s.sim.scenario.timings.kubelet * 2)
    expect(s.sim.node('wrkr-1')!.services.kubelet).toBe('Failed')
    expect(s.sim.node('wrkr-1')!.registered).toBe(false)
    await talosCall(s.sim, '127.24.13.21', 'machine.ServiceAction', { id: 'kubelet', action: 'restart' }, { secure: true, nodes: '127.24.13.21' })
    await s.sim.until(() => s.sim.node('wrkr-1')!.registered)
  })

  it('cni and flux: handed to the Kubernetes side through faults.has/message', async () => {
    const s = await start(14, [{ node: 'wrkr-1', kind: 'cni' }, { kind: 'flux', message: 'kustomization path not found' }])
    const f = (s.sim as any).faults
    expect(f.has('wrkr-1', 'cni')).toBe(true)
    expect(f.has('cp-1', 'cni')).toBe(false)
    expect(f.has(null, 'flux')).toBe(true)
    expect(f.message('flux')).toBe('kustomization path not found')
    s.sim.clearFault(null, 'flux')
    expect(f.has(null, 'flux')).toBe(false)
  })
})

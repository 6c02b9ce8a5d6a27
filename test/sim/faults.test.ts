// Every fault kind of docs/design.md (Fault kinds) acting where it says, seen through the real talosctl;
// `times` counting; clearFault. drain-blocked and etcd-leave act on a reset: test/sim/reset-kube.test.ts
// (and talosctl-ops.test.ts); `on: kube` faults: test/sim/kube-faults.test.ts. Range 127.24.x.y.
import { afterEach, describe, expect, it } from 'vitest'
import {
  applyInsecure,
  at,
  bootstrapWhenReady,
  etcdMembers,
  machineStatus,
  service,
  stageLog,
  startOn,
  talosctl,
  tlsHandshake,
  type Member,
  type Started,
} from './helpers.js'
import type { Fault } from '../../sim/index.js'

let c: Started | null = null
afterEach(async () => {
  await c?.stop()
  c = null
})
const start = async (sub: number, faults: Fault[], o: Parameters<typeof startOn>[1] = {}) =>
  (c = await startOn(`127.24.${sub}`, { cps: 1, workers: 1, ...o, faults }))
/** the product's maintenance probe: `get machinestatus --insecure` */
const probe = (s: Started, ip: string, timeoutMs?: number) =>
  machineStatus(s.sim, ip, { insecure: true, ...(timeoutMs ? { timeoutMs } : {}) })
const refused = (ip: string) =>
  `rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp ${ip}:50000: connect: connection refused"`
/** the calls talosctl's commands made, without its own (version check, type resolution) */
const commandCalls = (s: Started) => s.sim.calls().filter((x) => !x.purpose)

describe('transport faults', () => {
  it('refused on apply, times 2: two refusals (as the CLI sees them), then accepted', async () => {
    const s = await start(1, [{ node: 'wrkr-1', on: 'apply', kind: 'refused', times: 2 }])
    expect((await applyInsecure(s.sim, 'wrkr-1')).stderr).toBe(`error applying new configuration: ${refused('127.24.1.21')}\n`)
    expect((await probe(s, '127.24.1.21')).stage).toBe('maintenance') // other calls unaffected
    expect((await applyInsecure(s.sim, 'wrkr-1')).stderr).toContain(refused('127.24.1.21'))
    expect((await applyInsecure(s.sim, 'wrkr-1')).code).toBe(0)
    expect(
      s.sim
        .calls()
        .filter((x) => x.call === 'apply')
        .map((x) => x.outcome),
    ).toEqual([`error: ${refused('127.24.1.21')}`, `error: ${refused('127.24.1.21')}`, 'ok'])
  })

  it("talosctl's own calls (version check, type resolution) neither trigger nor consume a call fault, and are logged with their purpose", async () => {
    const s = await start(15, [{ node: 'wrkr-1', on: 'get', kind: 'refused', times: 1 }], { image: 'disk', vip: false })
    await applyInsecure(s.sim, 'cp-1')
    await applyInsecure(s.sim, 'wrkr-1')
    await s.sim.until(() => s.sim.node('wrkr-1')!.listener === 'secure')
    expect(await machineStatus(s.sim, '127.24.15.21')).toContain(refused('127.24.15.21'))
    expect((await machineStatus(s.sim, '127.24.15.21')).stage).toMatch(/booting|running/)
    const gets = s.sim.calls().filter((x) => x.call === 'get')
    // the one refusal is the command's own call; talosctl's calls before it all answered
    expect(gets.filter((x) => !x.purpose).map((x) => x.outcome.slice(0, 5))).toEqual(['error', 'ok'])
    expect(gets.filter((x) => x.purpose).length).toBeGreaterThan(0)
    expect(gets.filter((x) => x.purpose).every((x) => x.outcome === 'ok')).toBe(true)
    // `talosctl version` is itself talosctl's version check: logged with that purpose, never faulted
    s.sim.addFault({ node: 'wrkr-1', on: 'get', kind: 'refused', times: 1 })
    expect((await talosctl(s.sim, ['version', ...at('127.24.15.21')])).code).toBe(0)
    const versions = s.sim.calls().filter((x) => x.command === 'version')
    expect(versions.length).toBeGreaterThan(0)
    expect(versions.every((x) => x.purpose === 'version-check' && x.outcome === 'ok')).toBe(true)
    expect(await machineStatus(s.sim, '127.24.15.21')).toContain(refused('127.24.15.21'))
  })

  it('refused on any with times: counted per call whatever its kind, then the node answers', async () => {
    const s = await start(16, [{ node: 'wrkr-1', on: 'any', kind: 'refused', times: 2 }])
    expect(await probe(s, '127.24.16.21')).toContain(refused('127.24.16.21'))
    expect((await applyInsecure(s.sim, 'wrkr-1')).stderr).toContain(refused('127.24.16.21'))
    expect((await probe(s, '127.24.16.21')).stage).toBe('maintenance')
    expect(commandCalls(s).map((x) => [x.call, x.outcome === 'ok'])).toEqual([
      ['probe', false],
      ['apply', false],
      ['probe', true],
    ])
  })

  it('refused and unreachable on any: nothing listens until the fault is cleared', async () => {
    const s = await start(2, [
      { node: 'wrkr-1', on: 'any', kind: 'unreachable' },
      { node: 'cp-1', on: 'any', kind: 'refused' },
    ])
    expect(await probe(s, '127.24.2.21')).toContain(refused('127.24.2.21'))
    expect(await probe(s, '127.24.2.11')).toContain(refused('127.24.2.11'))
    expect(s.sim.node('wrkr-1')!.stage).toBe('maintenance') // the node itself is fine
    s.sim.clearFault('wrkr-1', 'unreachable')
    await s.sim.settle()
    expect((await tlsHandshake('127.24.2.21', { rejectUnauthorized: false })).result).toBe('ok')
    expect((await probe(s, '127.24.2.21')).stage).toBe('maintenance')
    expect(await probe(s, '127.24.2.11')).toContain(refused('127.24.2.11'))
  })

  it('timeout: on any the connection is accepted and never answered; on probe with times 1 only the first call hangs', async () => {
    const s = await start(3, [
      { node: 'wrkr-1', on: 'any', kind: 'timeout' },
      { node: 'cp-1', on: 'probe', kind: 'timeout', times: 1 },
    ])
    const t0 = Date.now()
    expect(await probe(s, '127.24.3.21', 1500)).toBe('TIMEOUT')
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1450)
    expect(await probe(s, '127.24.3.11', 1500)).toBe('TIMEOUT')
    expect(
      s.sim
        .calls()
        .filter((x) => x.node === 'cp-1' && !x.purpose)
        .map((x) => x.outcome),
    ).toEqual(['error: no answer (timeout)'])
    expect((await probe(s, '127.24.3.11')).stage).toBe('maintenance')
  })

  it('unavailable on bootstrap, times 1: rpc Unavailable once', async () => {
    const s = await start(4, [{ node: 'cp-1', on: 'bootstrap', kind: 'unavailable', times: 1 }], { image: 'disk' })
    await applyInsecure(s.sim, 'cp-1')
    expect((await bootstrapWhenReady(s.sim, 'cp-1')).stderr).toBe(
      'error executing bootstrap: rpc error: code = Unavailable desc = error reading from server: EOF\n',
    )
    expect((await bootstrapWhenReady(s.sim, 'cp-1')).code).toBe(0)
  })

  it('latency: every call to the node takes ms longer', async () => {
    const s = await start(5, [{ node: 'wrkr-1', on: 'any', kind: 'latency', ms: 600 }])
    await probe(s, '127.24.5.11') // a first run warms the page cache
    const slow = await talosctl(s.sim, ['get', 'machinestatus', '--insecure', ...at('127.24.5.21')])
    const fast = await talosctl(s.sim, ['get', 'machinestatus', '--insecure', ...at('127.24.5.11')])
    expect(slow.code).toBe(0)
    expect(slow.ms).toBeGreaterThanOrEqual(600)
    expect(slow.ms - fast.ms).toBeGreaterThanOrEqual(400)
  })

  it('pki-mismatch: a control plane proxying to the node reports the Go x509 text with the candidate authority', async () => {
    const s = await start(6, [{ node: 'wrkr-1', on: 'any', kind: 'pki-mismatch' }], { image: 'disk', vip: false })
    await applyInsecure(s.sim, 'cp-1')
    await applyInsecure(s.sim, 'wrkr-1')
    await s.sim.until(() => s.sim.node('cp-1')!.listener === 'secure' && s.sim.node('wrkr-1')!.listener === 'pki')
    const unknownAuthority =
      'connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly because of \\"x509: Ed25519 verification failure\\" while trying to verify candidate authority certificate \\"talos\\")"'
    expect((await talosctl(s.sim, ['version', ...at('127.24.6.11', '127.24.6.21')])).stderr).toContain(
      `127.24.6.21: rpc error: code = Unavailable desc = ${unknownAuthority}`,
    )
    expect((await talosctl(s.sim, ['version', ...at('127.24.6.21')])).stderr).toContain(
      `rpc error: code = Unavailable desc = ${unknownAuthority}`,
    )
  })
})

describe('apply-time faults', () => {
  it('disk-mismatch: runtime validation names the CEL expression', async () => {
    const s = await start(7, [{ node: 'wrkr-1', on: 'apply', kind: 'disk-mismatch' }])
    expect((await applyInsecure(s.sim, 'wrkr-1')).stderr).toBe(
      'error applying new configuration: rpc error: code = InvalidArgument desc = runtime configuration validation failed: ' +
        '1 error occurred:\n\t* v1alpha1.Config: 1 error occurred:\n\t* no disks matched the expression: disk.dev_path == "/dev/sda" && disk.transport != "" && !disk.readonly && !disk.cdrom\n\n\n\n\n',
    )
    expect(s.sim.node('wrkr-1')!.stage).toBe('maintenance')
  })

  it('config-rejected: validation error, node stays in maintenance', async () => {
    const s = await start(8, [{ node: 'wrkr-1', on: 'apply', kind: 'config-rejected', times: 1 }])
    expect((await applyInsecure(s.sim, 'wrkr-1')).stderr).toBe(
      'error applying new configuration: rpc error: code = InvalidArgument desc = configuration validation failed: ' +
        "1 error occurred:\n\t* v1alpha1.Config: 1 error occurred:\n\t* install.extraKernelArgs and install.grubUseUKICmdline can't be used together\n\n\n\n\n",
    )
    expect(s.sim.node('wrkr-1')!.stage).toBe('maintenance')
    expect((await applyInsecure(s.sim, 'wrkr-1')).code).toBe(0)
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
    const outcomes = []
    for (let i = 0; i < 4; i++) {
      const r = await talosctl(s.sim, ['bootstrap', ...at('127.24.11.11')])
      outcomes.push(r.code === 0 ? 'ok' : /desc = (.*)$/m.exec(r.stderr)?.[1])
    }
    expect(outcomes).toEqual(['bootstrap is not available yet', 'bootstrap is not available yet', 'bootstrap is not available yet', 'ok'])
  })

  it('etcd-join: the control plane never joins and stays booting', async () => {
    const s = await start(12, [{ node: 'cp-2', kind: 'etcd-join' }], { cps: 2, workers: 0, image: 'disk' })
    await applyInsecure(s.sim, 'cp-1')
    await applyInsecure(s.sim, 'cp-2')
    await bootstrapWhenReady(s.sim, 'cp-1')
    await s.sim.until(() => s.sim.node('cp-1')!.stage === 'running')
    // etcd healthy on cp-1 and cp-2's CRI up: cp-2 has tried to join (sim/etcd.js maybeJoin, called
    // from either; the fault decides then, no timer left), so "never joins" is final from here on
    await s.sim.until(() => s.sim.node('cp-1')!.etcdHealthy && s.sim.node('cp-2')!.services.cri === 'Running')
    expect(s.sim.node('cp-2')!.stage).toBe('booting')
    expect(((await etcdMembers(s.sim, '127.24.12.11')) as Member[]).map((x) => x.hostname)).toEqual(['cp-1'])
    // its data dir is empty: Bootstrap's only check (v1alpha1_server.go), so it starts a second etcd cluster
    expect((await talosctl(s.sim, ['bootstrap', ...at('127.24.12.12')])).code).toBe(0)
    await s.sim.until(() => s.sim.node('cp-2')!.etcdHealthy)
    const split = (await etcdMembers(s.sim, '127.24.12.11', { nodes: '127.24.12.11,127.24.12.12' })) as Member[]
    expect(split.map((x) => [x.node, x.hostname])).toEqual([
      ['127.24.12.11', 'cp-1'],
      ['127.24.12.12', 'cp-2'],
    ])
  })

  it('kubelet: the service fails with a volume mount error, the node never registers', async () => {
    const s = await start(13, [{ node: 'wrkr-1', kind: 'kubelet' }], { image: 'disk' })
    await applyInsecure(s.sim, 'cp-1')
    await applyInsecure(s.sim, 'wrkr-1')
    await bootstrapWhenReady(s.sim, 'cp-1')
    await s.sim.until(() => s.sim.node('cp-1')!.registered && s.sim.node('wrkr-1')!.stage === 'running')
    // the kubelet failed at its start (sim/node.js startKubelet); a failed kubelet never registers (sim/cluster.js)
    await s.sim.until(() => s.sim.node('wrkr-1')!.services.kubelet === 'Failed')
    await s.sim.until(() => s.sim.node('cp-1')!.registered)
    expect(s.sim.node('wrkr-1')!.registered).toBe(false)
    const k = await service(s.sim, '127.24.13.21', 'kubelet')
    expect(k).toMatchObject({ state: 'Failed' })
    expect(typeof k !== 'string' && k.events[0]).toMatch(
      /^\[Failed\]: Failed to run pre stage: failed to create kubelet volume mounts: .*volume mount|mounting/,
    )
    expect(s.sim.node('wrkr-1')!.unmetConditions[0]).toEqual({ name: 'services', reason: 'kubelet not running, kubelet not running' })

    // the runner does not retry a failed pre stage (machined system/service_runner.go): clearing the
    // cause alone leaves it Failed; `talosctl service kubelet restart` runs it again and it registers
    s.sim.clearFault('wrkr-1', 'kubelet')
    // a kubelet that ran would register within `kubelet` simulated seconds: give it twice that on the simulator's clock
    await (s.sim as unknown as { clock: { sleep(simSeconds: number): Promise<void> } }).clock.sleep(s.sim.scenario.timings.kubelet * 2)
    expect(s.sim.node('wrkr-1')!.services.kubelet).toBe('Failed')
    expect(s.sim.node('wrkr-1')!.registered).toBe(false)
    expect((await talosctl(s.sim, ['service', 'kubelet', 'restart', ...at('127.24.13.21')])).code).toBe(0)
    await s.sim.until(() => s.sim.node('wrkr-1')!.registered)
  })

  it('kubelet-crashloop: a `service kubelet restart` replaces the crash loop, it does not add one', async () => {
    const s = await start(17, [{ node: 'wrkr-1', kind: 'kubelet-crashloop' }], { image: 'disk', speed: 20 })
    await applyInsecure(s.sim, 'cp-1')
    await applyInsecure(s.sim, 'wrkr-1')
    await bootstrapWhenReady(s.sim, 'cp-1')
    await s.sim.until(() => s.sim.node('wrkr-1')!.stage === 'running' && s.sim.node('wrkr-1')!.services.kubelet === 'Waiting')
    for (let i = 0; i < 3; i++) expect((await talosctl(s.sim, ['service', 'kubelet', 'restart', ...at('127.24.17.21')])).code).toBe(0)
    // eight of the runner's restart intervals (sim/node.js KUBELET_RESTART_S, 15 s) on the simulator's clock
    await (s.sim as unknown as { clock: { sleep(simSeconds: number): Promise<void> } }).clock.sleep(8 * 15)
    const log = await talosctl(s.sim, ['logs', 'kubelet', ...at('127.24.17.21')])
    // each start's klog time (simulated): one runner starts it every 15 s; four would start it four times as often
    const starts = log.stdout
      .split('\n')
      .filter((l) => l.includes('"Kubelet version"'))
      .map((l) => / I\d{4} (\d\d):(\d\d):(\d\d\.\d+)/.exec(l)!.slice(1).map(Number))
      .map(([h, m, sec]) => h! * 3600 + m! * 60 + sec!)
    const gaps = starts.slice(-4).flatMap((t, i, all) => (i ? [(t - all[i - 1]! + 86_400) % 86_400] : []))
    expect(gaps).toHaveLength(3)
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(14)
  })

  it('cni and flux: handed to the Kubernetes side through faults.has/message', async () => {
    const s = await start(14, [
      { node: 'wrkr-1', kind: 'cni' },
      { kind: 'flux', message: 'kustomization path not found' },
    ])
    const f = (s.sim as any).faults
    expect(f.has('wrkr-1', 'cni')).toBe(true)
    expect(f.has('cp-1', 'cni')).toBe(false)
    expect(f.has(null, 'flux')).toBe(true)
    expect(f.message('flux')).toBe('kustomization path not found')
    s.sim.clearFault(null, 'flux')
    expect(f.has(null, 'flux')).toBe(false)
  })
})

// A worker's authenticated API waits for a control plane's trustd (sim/trustd.js); etcd registers late. Range 127.33.x.y.
// Follows internal/app/machined/pkg/controllers/secrets/api.go (generateJoin: a worker's apid certificate
// comes from trustd at the ControlPlaneEndpoints), k8s/static_endpoint.go (the endpoint's host),
// network/operator/vip.go (the VIP is campaigned for through etcd) and
// internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_sequencer_tasks.go (StartAllServices loads trustd and etcd).
import { afterEach, describe, expect, it } from 'vitest'
import { applyInsecure, at, bootstrapWhenReady, configOf, machineStatus, sleep, startOn, talosctl, type Started } from './helpers.js'

let c: Started | null = null
afterEach(async () => {
  await c?.stop()
  c = null
})

/** the node's stage, or what talosctl printed */
const stageOf = async (c: Started, ip: string): Promise<string> => {
  const ms = await machineStatus(c.sim, ip)
  return typeof ms === 'string' ? ms : ms.stage
}
const refused = (ip: string) => `dial tcp ${ip}:50000: connect: connection refused`
/** the control plane waits for the bootstrap (CRI up, etcd Preparing), and the worker had time to boot */
async function bothBooted(c: Started): Promise<void> {
  await c.sim.until(() => c.sim.node('cp-1')!.services.etcd === 'Preparing')
  await sleep((c.sim.scenario.timings.boot * 3000) / c.sim.scenario.speed)
}

describe("a worker's apid waits for trustd", () => {
  it('endpoint a VIP, discovery disabled: nothing listens on the worker until the VIP is up after the bootstrap', async () => {
    c = await startOn('127.33.1', { cps: 1, workers: 1, image: 'disk' })
    expect(configOf(c.sim, 'wrkr-1')).toMatch(/\n {4}discovery:\n {8}enabled: false\n/)
    for (const n of ['cp-1', 'wrkr-1']) expect((await applyInsecure(c.sim, n)).code).toBe(0)
    await bothBooted(c)
    expect(c.sim.node('wrkr-1')).toMatchObject({ stage: 'booting', listener: 'off' })
    expect(await stageOf(c, '127.33.1.21')).toContain(refused('127.33.1.21'))
    expect(await machineStatus(c.sim, '127.33.1.21', { insecure: true })).toContain(refused('127.33.1.21'))
    // through the control plane the worker is refused too (apid proxies to it)
    const proxied = await talosctl(c.sim, ['get', 'machinestatus', ...at('127.33.1.11', '127.33.1.21')])
    expect(proxied.stderr).toContain(refused('127.33.1.21'))
    // the worker's apid comes up only after etcd (and with it the VIP) did
    let etcdWhenOpened: boolean | undefined
    c.sim.watch((v) => {
      if (v.name === 'wrkr-1' && v.listener === 'secure' && etcdWhenOpened === undefined) etcdWhenOpened = c!.sim.node('cp-1')!.etcdHealthy
    })
    expect((await bootstrapWhenReady(c.sim, 'cp-1')).code).toBe(0)
    await c.sim.until(() => c.sim.node('wrkr-1')!.stage === 'running')
    expect(etcdWhenOpened).toBe(true)
    expect(await stageOf(c, '127.33.1.21')).toBe('running')
  })

  it('endpoint a control plane address: the worker answers once that control plane boots, before any bootstrap', async () => {
    c = await startOn('127.33.2', { cps: 1, workers: 1, image: 'disk', vip: false })
    for (const n of ['cp-1', 'wrkr-1']) await applyInsecure(c.sim, n)
    await c.sim.until(() => c.sim.node('wrkr-1')!.stage === 'running')
    expect(c.sim.node('cp-1')).toMatchObject({ stage: 'booting', etcdHealthy: false })
    expect(await stageOf(c, '127.33.2.21')).toBe('running')
  })

  it('the worker waits while its control plane is not configured (no trustd)', async () => {
    c = await startOn('127.33.3', { cps: 1, workers: 1, image: 'disk', vip: false })
    await applyInsecure(c.sim, 'wrkr-1')
    await sleep((c.sim.scenario.timings.boot * 3000) / c.sim.scenario.speed)
    expect(await stageOf(c, '127.33.3.21')).toContain(refused('127.33.3.21'))
    await applyInsecure(c.sim, 'cp-1')
    await c.sim.until(() => c.sim.node('wrkr-1')!.stage === 'running')
  })

  it('discovery enabled: the worker finds a booting control plane without the VIP', async () => {
    c = await startOn('127.33.4', { cps: 1, workers: 1, image: 'disk', discovery: 'enabled' })
    expect(configOf(c.sim, 'wrkr-1')).toMatch(/\n {4}discovery:\n {8}enabled: true\n/)
    for (const n of ['cp-1', 'wrkr-1']) await applyInsecure(c.sim, n)
    await c.sim.until(() => c.sim.node('wrkr-1')!.stage === 'running')
    expect(c.sim.node('cp-1')!.etcdHealthy).toBe(false)
    expect(await stageOf(c, '127.33.4.21')).toBe('running')
  })
})

describe('etcd registers late', () => {
  it('a booting control plane answers before StartAllServices: etcd is not registered, then Waiting, then Preparing', async () => {
    c = await startOn('127.33.5', { cps: 1, workers: 0, image: 'disk', vip: false, speed: 20, timings: { boot: 80 } }) // half the boot: 2 s real
    const seen: string[] = []
    c.sim.watch((v) => {
      if (v.name === 'cp-1' && v.listener === 'secure') {
        const s = v.services.etcd ?? 'not registered'
        if (seen.at(-1) !== s) seen.push(s)
      }
    })
    await applyInsecure(c.sim, 'cp-1')
    await c.sim.until(() => c.sim.node('cp-1')!.listener === 'secure')
    const list = await talosctl(c.sim, ['service', ...at('127.33.5.11')])
    expect(list.code, list.stderr).toBe(0)
    const ids = list.stdout
      .trimEnd()
      .split('\n')
      .slice(1)
      .map((l) => l.split(/\s+/)[1])
    expect(ids).toContain('apid')
    expect(ids).not.toContain('etcd')
    expect(ids).not.toContain('trustd')
    await c.sim.until(() => c.sim.node('cp-1')!.services.etcd === 'Preparing', 10000)
    expect(seen).toEqual(['not registered', 'Waiting', 'Preparing'])
    expect((await talosctl(c.sim, ['service', 'etcd', ...at('127.33.5.11')])).stdout).toMatch(
      /^NODE +127\.33\.5\.11\nID +etcd\nSTATE +Preparing\n/,
    )
  })
})

// The talosconfig's role decides what it may call (internal/app/machined/pkg/system/services/machined.go
// rules; pkg/grpc/middleware/authz/authorizer.go: PermissionDenied "not authorized"). Range 127.35.x.y.
import { afterEach, describe, expect, it } from 'vitest'
import { applyInsecure, scenarioOn, startOn, talosCall, type Started } from './helpers.js'
import { loadScenario } from '../../sim/index.js'

let c: Started | null = null
afterEach(async () => { await c?.stop(); c = null })

describe('talosconfig roles', () => {
  it('os:reader reads, but apply, bootstrap, kubeconfig and reset are not authorized', async () => {
    const s = scenarioOn('127.35.1', { cps: 1, workers: 0, image: 'disk', vip: false })
    s.cluster.talosconfigRole = 'os:reader'
    const { startSimulator } = await import('../../sim/index.js')
    const { mkdtempSync, rmSync } = await import('node:fs')
    const dir = mkdtempSync('/tmp/sim-roles-')
    const sim = await startSimulator({ scenario: s, dir })
    c = { sim, dir, async stop() { await sim.stop(); rmSync(dir, { recursive: true, force: true }) } }
    await applyInsecure(sim, 'cp-1') // maintenance: no client certificate, no role
    await sim.until(() => sim.node('cp-1')!.listener === 'secure')
    const ip = '127.35.1.11'
    const read = await talosCall(sim, ip, 'resources.Get', { type: 'machinestatus' }, { secure: true, nodes: ip })
    expect(read.messages?.[0]?.error).toBeNull()
    for (const method of ['machine.ApplyConfiguration', 'machine.Bootstrap', 'machine.Kubeconfig', 'machine.Reset']) {
      expect((await talosCall(sim, ip, method, {}, { secure: true, nodes: ip })).error, method).toEqual({ code: 'PermissionDenied', message: 'not authorized' })
    }
  })

  it('os:admin is the default; an unknown role is refused by the scenario', async () => {
    c = await startOn('127.35.2', { cps: 1, workers: 0, image: 'disk', vip: false })
    expect(c.sim.scenario.cluster).toMatchObject({ talosconfigRole: 'os:admin' })
    const bad = scenarioOn('127.35.3', { cps: 1, workers: 0 })
    bad.cluster.talosconfigRole = 'os:root' as never
    expect(() => loadScenario(bad)).toThrow(/cluster\.talosconfigRole: "os:root" must be one of os:admin, os:operator, os:reader, os:etcd:backup/)
  })
})

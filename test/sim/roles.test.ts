// The talosconfig's role decides what it may call (internal/app/machined/pkg/system/services/machined.go
// rules; pkg/grpc/middleware/authz/authorizer.go: PermissionDenied "not authorized"), seen through
// the real talosctl with the talosconfig the simulator writes. Range 127.35.x.y.
import { afterEach, describe, expect, it } from 'vitest'
import { applyInsecure, at, configPath, scenarioOn, startOn, talosctl, type Started } from './helpers.js'
import { loadScenario } from '../../sim/index.js'

let c: Started | null = null
afterEach(async () => {
  await c?.stop()
  c = null
})

describe('talosconfig roles', () => {
  it('os:reader reads, but apply, bootstrap, kubeconfig and reset are not authorized', async () => {
    const s = scenarioOn('127.35.1', { cps: 1, workers: 0, image: 'disk', vip: false })
    s.cluster.talosconfigRole = 'os:reader'
    const { startSimulator } = await import('../../sim/index.js')
    const { mkdtempSync, rmSync } = await import('node:fs')
    const dir = mkdtempSync('/tmp/sim-roles-')
    const sim = await startSimulator({ scenario: s, dir })
    c = {
      sim,
      dir,
      async stop() {
        await sim.stop()
        rmSync(dir, { recursive: true, force: true })
      },
    }
    await applyInsecure(sim, 'cp-1') // maintenance: no client certificate, no role
    await sim.until(() => sim.node('cp-1')!.listener === 'secure')
    const ip = '127.35.1.11'
    expect((await talosctl(sim, ['get', 'machinestatus', ...at(ip)])).code).toBe(0)
    const denied = 'rpc error: code = PermissionDenied desc = not authorized'
    for (const args of [
      ['apply-config', '-f', configPath(sim, 'cp-1')],
      ['bootstrap'],
      ['kubeconfig', `${dir}/kubeconfig`, '--force'],
      ['reset', '--wait=false'],
      ['etcd', 'remove-member', '0123456789abcdef'],
    ]) {
      const r = await talosctl(sim, [...args, ...at(ip)])
      expect(r.code, args.join(' ')).toBe(1)
      expect(r.stderr, args.join(' ')).toContain(denied)
    }
    expect(sim.node('cp-1')!.stage).toBe('booting') // nothing happened
  })

  it('os:admin is the default; an unknown role is refused by the scenario', async () => {
    c = await startOn('127.35.2', { cps: 1, workers: 0, image: 'disk', vip: false })
    expect(c.sim.scenario.cluster).toMatchObject({ talosconfigRole: 'os:admin' })
    const bad = scenarioOn('127.35.3', { cps: 1, workers: 0 })
    bad.cluster.talosconfigRole = 'os:root' as never
    expect(() => loadScenario(bad)).toThrow(
      /cluster\.talosconfigRole: "os:root" must be one of os:admin, os:operator, os:reader, os:etcd:backup/,
    )
  })
})

// A simulator started in a directory where the one before it never stopped (the machine rebooted, the
// daemon was killed): the new cluster starts fresh, as its scenario says, not on the old etcd data.
// Found on `task demo` after a reboot: the bootstrap answered "already bootstrapped" and no API came up.
// Range 127.248.6.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { startSimulator, type Simulator } from '../../sim/index.js'
import { applyInsecure, bootstrapWhenReady, etcdMembers, scenarioOn, type Member } from './helpers.js'

const dir = mkdtempSync(join(tmpdir(), 'sim-stale-'))
let sims: Simulator[] = []
afterEach(async () => {
  for (const sim of sims) await sim.stop()
  sims = []
  rmSync(dir, { recursive: true, force: true })
})

async function bootstrapped(): Promise<Simulator> {
  const sim = await startSimulator({
    scenario: scenarioOn('127.248.6', { cps: 1, workers: 0, image: 'disk', vip: false, speed: 20, timings: { boot: 6 } }),
    dir,
  })
  sims.push(sim)
  expect((await applyInsecure(sim, 'cp-1')).code).toBe(0)
  const boot = await bootstrapWhenReady(sim, 'cp-1')
  expect(boot.stderr).not.toMatch(/already/i)
  expect(boot.code).toBe(0)
  await sim.until(() => sim.node('cp-1')!.etcdHealthy, 60_000)
  const members = (await etcdMembers(sim, '127.248.6.11')) as Member[]
  expect(members.map((m) => [m.hostname, m.isLearner])).toEqual([['cp-1', false]])
  return sim
}

describe('a simulator started over one that never stopped', () => {
  it('bootstraps a fresh etcd, not the members the one before left in its directory', async () => {
    const first = await bootstrapped()
    // as a kill -9 or a reboot leaves it: the members killed, their data left behind
    await first.stop()
    // the second bootstrap is a first one again (before: "already bootstrapped", and no member answered)
    await bootstrapped()
  })
})

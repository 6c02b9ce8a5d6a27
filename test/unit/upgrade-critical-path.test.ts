// The rolling upgrade's critical path (sim/critical-path.js upgradeCriticalPathSeconds, the upgrade
// benchmark's yardstick): per node the installer's pull, the sequence, the reboot (at least 2 s of
// wall clock), the boot, a control plane's etcd, the kubelet and the CNI; control planes one after
// another, then ceil(workers / CONCURRENCY) batches of workers. No addresses.
import { describe, expect, it } from 'vitest'
import { loadScenario, REBOOT_FLOOR_MS, upgradeCriticalPathSeconds, type ScenarioInput } from '../../sim/index.js'

const TIMINGS = { install: 120, reboot: 40, boot: 30, etcd: 20, kubelet: 15, cni: 20, pull: 20, upgrade: 10 }

function cluster(cps: number, workers: number, speed: number): ScenarioInput {
  const node = (i: number) => ({
    name: i < cps ? `cp-${i + 1}` : `wrkr-${i - cps + 1}`,
    ip: `127.0.99.${i + 1}`,
    role: i < cps ? ('controlplane' as const) : ('worker' as const),
    image: 'disk' as const,
  })
  return { cluster: { name: 'c' }, speed, timings: TIMINGS, nodes: Array.from({ length: cps + workers }, (_, i) => node(i)) }
}

const path = (cps: number, workers: number, speed: number, k: number): number => {
  const s = loadScenario(cluster(cps, workers, speed))
  return upgradeCriticalPathSeconds(s, s.speed, k)
}

describe('upgradeCriticalPathSeconds', () => {
  it('3 control planes and 30 workers at speed 6: three control planes one after another, then ceil(30/k) batches', () => {
    // a worker: (pull 20 + upgrade 10 + boot 30 + kubelet 15 + cni 20) / 6 + reboot 40 / 6 = 22.5 s; a control plane + etcd 20 / 6
    const worker = 95 / 6 + 40 / 6
    const cp = worker + 20 / 6
    expect(path(3, 30, 6, 10)).toBeCloseTo(3 * cp + 3 * worker, 6)
    expect(path(3, 30, 6, 10)).toBeCloseTo(145, 6)
    expect(path(3, 30, 6, 5)).toBeCloseTo(3 * cp + 6 * worker, 6)
    // a last batch that is not full counts whole; more CONCURRENCY than workers is one batch
    expect(path(3, 30, 6, 7)).toBeCloseTo(3 * cp + 5 * worker, 6)
    expect(path(3, 30, 6, 64)).toBeCloseTo(3 * cp + worker, 6)
  })

  it('the reboot counts at least the reboot floor of wall clock whatever the speed', () => {
    const speed = 120
    expect(40 / speed).toBeLessThan(REBOOT_FLOOR_MS / 1000)
    const worker = 95 / speed + REBOOT_FLOOR_MS / 1000
    expect(path(1, 2, speed, 1)).toBeCloseTo(worker + 20 / speed + 2 * worker, 6)
  })

  it('a cluster without workers is its control planes; CONCURRENCY must be a whole number > 0', () => {
    expect(path(3, 0, 6, 4)).toBeCloseTo(3 * (115 / 6 + 40 / 6), 6)
    const s = loadScenario(cluster(3, 3, 6))
    expect(() => upgradeCriticalPathSeconds(s, s.speed, 0)).toThrow(/concurrency must be a whole number > 0/)
    expect(() => upgradeCriticalPathSeconds(s, s.speed, 1.5)).toThrow(/concurrency must be a whole number > 0/)
  })
})

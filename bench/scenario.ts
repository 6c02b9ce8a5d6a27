// Scenarios for the benchmark: 3 control planes behind a VIP (1 when the cluster has fewer than
// 3 nodes), the rest workers; the bootstrap's cases boot every node from the ISO (the slowest path:
// install and reboot), the upgrade's (bench/upgrade.ts) from a pre-installed disk image.
// Each case has its own /16 inside the benchmark range 127.100.0.0 – 127.120.255.255.
import { REBOOT_FLOOR_MS, type ScenarioInput } from '../sim/index.js'

/** simulated seconds, as in sim/scenarios/demo.yaml */
export const TIMINGS = { install: 120, reboot: 40, boot: 30, etcd: 20, kubelet: 15, cni: 20 } as const

/** install + reboot + boot + etcd + kubelet + cni: the critical path of a clean ISO cluster (docs/design.md, Scenario schema) */
export const CRITICAL_SIMULATED_S = Object.values(TIMINGS).reduce((a, b) => a + b, 0)

/** every reboot keeps a node down at least this much wall clock whatever the speed */
const REBOOT_FLOOR_S = REBOOT_FLOOR_MS / 1000

/**
 * The speed that makes the critical path last `seconds` of real time, as the simulator counts it
 * (criticalPathSeconds): the install's reboot lasts max(reboot/speed, REBOOT_FLOOR_S), so below
 * 2 s of reboot the rest of the path takes what remains.
 */
export function speedFor(seconds: number): number {
  const scaled = CRITICAL_SIMULATED_S / seconds
  if (TIMINGS.reboot / scaled >= REBOOT_FLOOR_S) return scaled
  if (seconds <= REBOOT_FLOOR_S) throw new Error(`a critical path of ${seconds}s is shorter than the ${REBOOT_FLOOR_S}s reboot floor`)
  return (CRITICAL_SIMULATED_S - TIMINGS.reboot) / (seconds - REBOOT_FLOOR_S)
}

/** node i (0-based) of the case whose second octet is `octet`: 127.<octet>.<1+i/250>.<1+i%250> */
export function nodeIp(octet: number, i: number): string {
  if (octet < 100 || octet > 120) throw new Error(`127.${octet}.x.y is outside the benchmark range 127.100–127.120`)
  return `127.${octet}.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`
}

export function benchScenario(octet: number, nodes: number, criticalPathS: number): ScenarioInput {
  return clusterScenario(octet, nodes, speedFor(criticalPathS), 'iso')
}

/** `nodes` nodes on the case's /16 at `speed`, booted from `image` (iso: install and reboot first; disk: pre-installed) */
export function clusterScenario(octet: number, nodes: number, speed: number, image: 'iso' | 'disk'): ScenarioInput {
  const cps = nodes >= 3 ? 3 : 1
  const vip = `127.${octet}.0.10`
  const disks = [{ dev: '/dev/sda', size: '100GB', model: 'QEMU HARDDISK' }]
  return {
    cluster: {
      name: 'bench',
      endpoint: `https://${vip}:6443`,
      talosVersion: 'v1.12.11',
      kubernetesVersion: 'v1.35.0',
      vip: { address: vip, up: 'after-bootstrap' },
    },
    speed,
    timings: { ...TIMINGS },
    nodes: Array.from({ length: nodes }, (_, i) => {
      const cp = i < cps
      return {
        name: cp ? `cp-${i + 1}` : `wrkr-${i - cps + 1}`,
        ip: nodeIp(octet, i),
        role: cp ? ('controlplane' as const) : ('worker' as const),
        image,
        disks,
      }
    }),
    faults: [],
  }
}

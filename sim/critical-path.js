// The critical path of a clean bootstrap in real seconds, for the running simulator
// (Simulator.criticalPathSeconds) and for a scenario file (`sim/cli.js critical-path --scenario`).
import { REBOOT_FLOOR_MS } from './node.js'

/**
 * (install + boot + etcd + kubelet + cni)/speed plus the install's reboot when a node boots from the
 * ISO; that reboot keeps the node down max(reboot/speed, REBOOT_FLOOR_MS of wall clock) (sim/node.js
 * afterDown), so at a high speed the floor, not the timing, is its share.
 */
export function criticalPathSeconds({ timings: t, nodes }, speed) {
  const iso = nodes.some((n) => n.image === 'iso')
  const reboot = Math.max(t.reboot / speed, REBOOT_FLOOR_MS / 1000)
  return (iso ? t.install / speed + reboot : 0) + (t.boot + t.etcd + t.kubelet + t.cni) / speed
}

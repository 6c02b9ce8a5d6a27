// The critical path of a clean bootstrap in real seconds, for the running simulator
// (Simulator.criticalPathSeconds) and for a scenario file (`sim/cli.js critical-path --scenario`).
import { REBOOT_FLOOR_MS } from './node.js'

/**
 * The earliest finish of a clean bootstrap in real seconds. The scenario's part: install + reboot +
 * boot + etcd, divided by `speed`, the install's reboot only when a node boots from the ISO and at
 * least REBOOT_FLOOR_MS of wall clock (sim/node.js afterDown), so at a high speed the floor, not the
 * timing, is its share. From etcd healthy two chains go on side by side, and the later one ends the
 * path: the other control planes' joins, from the API server answering (they learn the members
 * through it) for `joinsS`; the kubelets and the CNI, (kubelet + cni)/speed from the API server ready.
 * `measured` (real seconds, as the running simulator saw them; unknown before the run, then left
 * out): `joinsS` (sim/etcd.js joinsSeconds: Talos adds one learner at a time, the real etcd adds none
 * until its members have been connected 5 s), and with the real control plane its API server's start
 * from etcd healthy to answering (`apiAnsweringS`) and to ready (`apiReadyS`, sim/kube-real.js).
 */
export function criticalPathSeconds({ timings: t, nodes }, speed, measured = {}) {
  const { joinsS = null, apiAnsweringS = 0, apiReadyS = 0 } = measured
  const iso = nodes.some((n) => n.image === 'iso')
  const reboot = Math.max(t.reboot / speed, REBOOT_FLOOR_MS / 1000)
  const toEtcd = (iso ? t.install / speed + reboot : 0) + (t.boot + t.etcd) / speed
  const joins = joinsS === null ? 0 : apiAnsweringS + joinsS
  return toEtcd + Math.max(apiReadyS + (t.kubelet + t.cni) / speed, joins)
}

/**
 * The critical path of a rolling Talos upgrade (MachineService.Upgrade, sim/talos/upgrade.js) in real
 * seconds: control planes one after another, then the workers in ceil(workers/concurrency) batches.
 * One node: the installer's pull, the sequence's phases (`upgrade`; its cordonAndDrainNode among
 * them), the reboot (max(reboot/speed, REBOOT_FLOOR_MS of wall clock): sim/node.js afterDown), the
 * boot (sim/node.js bootConfigured), on a control plane its etcd member healthy again (sim/etcd.js
 * restart: the health check `etcd` seconds after the start), the kubelet registering the Node
 * (`kubelet`, sim/cluster.js scheduleKubelet) and its CNI pod restarting (`cni`: the Node Ready).
 * A kubectl drain's evictions take no simulated time (an allowed eviction deletes the pod).
 */
export function upgradeCriticalPathSeconds({ timings: t, nodes }, speed, concurrency) {
  if (!(Number.isInteger(concurrency) && concurrency > 0)) throw new Error(`concurrency must be a whole number > 0, not ${concurrency}`)
  const reboot = Math.max(t.reboot / speed, REBOOT_FLOOR_MS / 1000)
  const worker = (t.pull + t.upgrade + t.boot + t.kubelet + t.cni) / speed + reboot
  const controlPlane = worker + t.etcd / speed
  const cps = nodes.filter((n) => n.role === 'controlplane').length
  const batches = Math.ceil((nodes.length - cps) / concurrency)
  return cps * controlPlane + batches * worker
}

// What the real control plane (SIM_KUBE=real, docs/real-control-plane.md "CPU") costs in CPU, per
// process: a fresh cluster brought up as an operator does (bringUp: talosctl apply and bootstrap, the
// CNI DaemonSet with kubectl), its CPU read from /proc at the API server's ready, once every Node is
// Ready, and after an idle window (the steady cost of the kubelets, leases, controllers, polls).
//   unshare -n bash -c 'ip link set lo up && npx tsx bench/kube-cpu.ts [runs] [control planes] [workers] [idle s]'
// Range 127.254.20.x (one cluster at a time). Prints one line per run and the medians; asserts nothing.
import { printMedians, printRun } from './runs.js'
import { bringUp, startOn } from '../test/sim/helpers.js'

const runs = Number(process.argv[2] ?? 3)
const cps = Number(process.argv[3] ?? 3)
const workers = Number(process.argv[4] ?? 2)
const idleS = Number(process.argv[5] ?? 20)
const sum = (o: Record<string, number>, re: RegExp): number =>
  Object.entries(o)
    .filter(([k]) => re.test(k))
    .reduce((a, [, v]) => a + v, 0)
const cpuOf = (u: NodeJS.CpuUsage): number => Math.round((u.user + u.system) / 1000)

const rows: Array<Record<string, number>> = []
for (let i = 0; i < runs; i++) {
  const names = [...Array.from({ length: cps }, (_, n) => `cp-${n + 1}`), ...Array.from({ length: workers }, (_, n) => `wrkr-${n + 1}`)]
  const c = await startOn(`127.254.${20 + i}`, { cps, workers, image: 'disk', speed: 100, timings: { boot: 6 }, kube: 'real' })
  try {
    const p0 = process.cpuUsage()
    await bringUp(c, names, c.sim.node('cp-1')!.ip)
    const k = c.sim.realKube!
    await c.sim.until(() => names.every((n) => k.nodeReady(n)), 120_000)
    const up = k.cpu()
    const pUp = process.cpuUsage(p0)
    await new Promise((r) => setTimeout(r, idleS * 1000))
    const idle = k.cpu()
    const pIdle = process.cpuUsage(p0)
    const ready = k.cpuAtReady as Record<string, number>
    const row = {
      'apiserver to ready': ready['kube-apiserver'] ?? 0,
      'apiserver to all Ready': up['kube-apiserver'] ?? 0,
      'controller-manager to all Ready': up['kube-controller-manager'] ?? 0,
      'scheduler to all Ready': up['kube-scheduler'] ?? 0,
      'etcd to all Ready': sum(up, /^etcd-/),
      'simulator to all Ready': cpuOf(pUp),
      [`apiserver idle ${idleS}s`]: (idle['kube-apiserver'] ?? 0) - (up['kube-apiserver'] ?? 0),
      [`controller-manager idle ${idleS}s`]: (idle['kube-controller-manager'] ?? 0) - (up['kube-controller-manager'] ?? 0),
      [`scheduler idle ${idleS}s`]: (idle['kube-scheduler'] ?? 0) - (up['kube-scheduler'] ?? 0),
      [`etcd idle ${idleS}s`]: sum(idle, /^etcd-/) - sum(up, /^etcd-/),
      [`simulator idle ${idleS}s`]: cpuOf(pIdle) - cpuOf(pUp),
    }
    printRun(rows, row)
  } finally {
    await c.stop()
  }
}
printMedians(rows, ' (CPU ms)')

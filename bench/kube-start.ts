// The real control plane's start (SIM_KUBE=real, docs/real-control-plane.md): from the bootstrap the
// real talosctl sends to the API server's first ready /readyz, broken down, over a few fresh clusters.
//   unshare -n bash -c 'ip link set lo up && npx tsx bench/kube-start.ts [runs] [control planes]'
// Range 127.254.9.x (one cluster at a time). Prints one line per run and the medians; asserts nothing.
import { readFileSync } from 'node:fs'
import { printMedians, printRun } from './runs.js'
import { applyInsecure, bootstrapWhenReady, startOn } from '../test/sim/helpers.js'

const runs = Number(process.argv[2] ?? 3)
const cps = Number(process.argv[3] ?? 1)
const rows: Array<Record<string, number>> = []
for (let i = 0; i < runs; i++) {
  const c = await startOn(`127.254.${9 + i}`, { cps, workers: 0, image: 'disk', speed: 100, timings: { boot: 6 }, kube: 'real' })
  try {
    for (let n = 1; n <= cps; n++) if ((await applyInsecure(c.sim, `cp-${n}`)).code !== 0) throw new Error(`apply-config cp-${n} failed`)
    const t0 = Date.now()
    const b = await bootstrapWhenReady(c.sim, 'cp-1', 60_000)
    if (b.code !== 0) throw new Error(`bootstrap: ${b.stderr}`)
    const accepted = Date.now()
    const k = c.sim.realKube!
    await c.sim.until(() => k.readyAt !== undefined || k.error !== undefined, 180_000)
    if (k.error) throw k.error
    // the API server's CPU time until ready (user + system, clock ticks of 10 ms): a loaded machine stretches
    // the wall time, much less the CPU a start costs
    const stat = readFileSync(`/proc/${k.pids()[0]}/stat`, 'utf8').split(') ')[1]!.split(' ')
    const row = {
      'bootstrap call': accepted - t0,
      'accepted to start': k.t0! - accepted,
      'start to spawn (pki)': k.spawnedAt! - k.t0!,
      'spawn to listening': k.answeringAt! - k.spawnedAt!,
      'listening to ready': k.readyAt! - k.answeringAt!,
      'accepted to ready': k.readyAt! - accepted,
      'API server CPU': (Number(stat[11]) + Number(stat[12])) * 10,
    }
    printRun(rows, row)
  } finally {
    await c.stop()
  }
}
printMedians(rows)

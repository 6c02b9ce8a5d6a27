// `npx tsx bench/unreachable.ts`: how long `task -x bootstrap:preflight` takes, with default
// settings, to declare 3 unreachable nodes unreachable (nothing listens on their addresses). Prints
// the wall time and each node's result; README "How long an unreachable node takes" quotes it.
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { E2eCluster } from '../test/e2e/harness.js'

const nodes = ['cp-1', 'wrkr-1', 'wrkr-2']
const cluster = await E2eCluster.start('127.98.1', {
  cps: 1,
  workers: 2,
  speed: 3000,
  faults: nodes.map((node) => ({ node, on: 'any' as const, kind: 'unreachable' as const })),
})
try {
  // the simulator writes waits scaled to its speed: the defaults are what is measured
  rmSync(join(cluster.clusterDir, 'bootstrap.yaml'))
  const started = performance.now()
  const result = await cluster.task('bootstrap:preflight')
  const seconds = (performance.now() - started) / 1000
  const phase = cluster.report().phases.find((p) => p.name === 'preflight')
  console.log(
    JSON.stringify({
      exit: result.code,
      seconds: Math.round(seconds * 10) / 10,
      nodes: phase?.nodes.map((n) => ({
        name: n.name,
        status: n.status,
        attempts: n.attempts,
        seconds: Math.round(n.durationMs / 100) / 10,
      })),
    }),
  )
} finally {
  await cluster.stop()
}

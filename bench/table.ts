// Prints bench/results.json (or the file given) as the Markdown table of the README's Benchmark section.
//   npx tsx bench/table.ts [bench/results.json]
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ROOT } from './measure.js'

interface Row {
  nodes: number
  concurrency: number
  product?: string
  exitCode: number | null
  interruptedAtS?: number
  wallS: number
  criticalPathS: number
  ratio: number
  cpuS: number
  cpuAllS: number
  toolCpuS: number
  peakRssMB: number
  simCpuS: number
  toolCpuPerInvocationMs: number
  invocations: Record<string, number>
  statusReadsPerNodePerInterval: { max: number; mean: number }
  loadAvg: { before: number; after: number }
}
interface UpgradeRow {
  name: string
  nodes: number
  concurrency: number
  product?: string
  exitCode: number | null
  interruptedAtS?: number
  speed: number
  wallS: number
  criticalPathS: number
  ratio: number
  cpuAllS: number
  simCpuS: number
  invocations: Record<string, number>
  breakdown: {
    beforeFirstNodeS: number
    controlPlanes: { sinceLastS: number; beforeSendS: number; upgradeCallS: number; afterS: number }[]
    workers: { wallS: number; beforeSendS: number; upgradeCallS: number; afterS: number }
  }
  loadAvg: { before: number; after: number }
}
interface Results {
  machine: { cpu: string; cores: number; memGB: number; os: string; node: string; talosctl?: string; helm?: string }
  date: string
  cases: Row[]
  upgrade?: UpgradeRow[]
  baseline?: { nodes: number; wallS: number; speedup?: number; speedupAgainst?: string; cpuAllS: number }
}

const r = JSON.parse(readFileSync(process.argv[2] ?? join(ROOT, 'bench', 'results.json'), 'utf8')) as Results
const m = r.machine
const lines = [
  `Last case measured ${r.date.slice(0, 16).replace('T', ' ')} UTC, on ${m.cpu} ×${m.cores}, ${m.memGB} GB, ${m.os}, Node ${m.node}, ${m.talosctl ? `the real talosctl ${m.talosctl} and helm ${m.helm ?? '?'}` : 'clients not recorded'}.`,
  '',
  '| nodes | CONCURRENCY | wall s | critical path s | ratio | orchestrator CPU s | CPU s incl. tools | simulator CPU s | tool processes | peak RSS MB | status reads / node / interval | load avg (1 min) | exit | product |',
  '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |',
  ...r.cases.map((c) => {
    const procs = Object.values(c.invocations).reduce((a, b) => a + b, 0)
    const exit = c.interruptedAtS ? `interrupted at ${c.interruptedAtS} s` : String(c.exitCode)
    return `| ${c.nodes} | ${c.concurrency} | ${c.wallS.toFixed(1)} | ${c.criticalPathS.toFixed(0)} | ${c.ratio.toFixed(2)} | ${c.cpuS.toFixed(1)} | ${c.cpuAllS.toFixed(1)} | ${c.simCpuS.toFixed(1)} | ${procs} (${c.toolCpuPerInvocationMs} ms CPU each) | ${c.peakRssMB.toFixed(0)} | ${c.statusReadsPerNodePerInterval.max} | ${c.loadAvg.before}–${c.loadAvg.after} | ${exit} | ${c.product ?? 'not recorded'} |`
  }),
]
if (r.baseline) {
  const b = r.baseline
  lines.push(
    '',
    `Baseline (the seed's way: apply one node, wait until it is up, then the next), ${b.nodes} nodes: ${b.wallS.toFixed(1)} s wall, ${b.cpuAllS.toFixed(1)} s CPU incl. tools${b.speedup ? `; \`bootstrap:talos\` (${b.speedupAgainst}) was ${b.speedup}× faster` : ''}.`,
  )
}
if (r.upgrade?.length) {
  const cpMean = (c: UpgradeRow, f: (x: UpgradeRow['breakdown']['controlPlanes'][number]) => number): string =>
    (c.breakdown.controlPlanes.reduce((a, x) => a + f(x), 0) / Math.max(1, c.breakdown.controlPlanes.length)).toFixed(1)
  lines.push(
    '',
    'Rolling upgrade (`upgrade:talos`, 3 control planes then the workers CONCURRENCY at a time):',
    '',
    '| nodes | CONCURRENCY | speed | wall s | critical path s | ratio | CPU s incl. tools | simulator CPU s | tool processes | before the first node s | control plane: gate / before send / upgrade call / after s (means) | worker: before send / upgrade call / after s (means) | load avg (1 min) | exit | product |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | --- | --- |',
    ...r.upgrade.map((c) => {
      const procs = Object.values(c.invocations).reduce((a, b) => a + b, 0)
      const w = c.breakdown.workers
      const exit = c.interruptedAtS ? `interrupted at ${c.interruptedAtS} s` : String(c.exitCode)
      return `| ${c.nodes} | ${c.concurrency} | ${c.speed} | ${c.wallS.toFixed(1)} | ${c.criticalPathS.toFixed(1)} | ${c.ratio.toFixed(2)} | ${c.cpuAllS.toFixed(1)} | ${c.simCpuS.toFixed(1)} | ${procs} | ${c.breakdown.beforeFirstNodeS} | ${cpMean(c, (x) => x.sinceLastS)} / ${cpMean(c, (x) => x.beforeSendS)} / ${cpMean(c, (x) => x.upgradeCallS)} / ${cpMean(c, (x) => x.afterS)} | ${w.beforeSendS} / ${w.upgradeCallS} / ${w.afterS} | ${c.loadAvg.before}–${c.loadAvg.after} | ${exit} | ${c.product ?? 'not recorded'} |`
    }),
  )
}
process.stdout.write(`${lines.join('\n')}\n`)

// The benches' per-run lines and their medians (bench/kube-start.ts, bench/kube-cpu.ts).
import { loadavg } from 'node:os'

/** one run's figures, with the load average it ran at */
export function printRun(rows: Array<Record<string, number>>, row: Record<string, number>): void {
  rows.push(row)
  console.log(`run ${rows.length}: ${JSON.stringify(row)} load ${loadavg()[0]!.toFixed(1)}`)
}

/** each figure's median over the runs */
export function printMedians(rows: Array<Record<string, number>>, unit = ''): void {
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const keys = Object.keys(rows[0] ?? {})
  console.log(
    `median of ${rows.length}${unit}: ${JSON.stringify(Object.fromEntries(keys.map((k) => [k, median(rows.map((r) => r[k]!))])))}`,
  )
}

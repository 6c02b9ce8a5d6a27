import { mkdirSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Redactor } from './redact.js'
import type { PhaseResult } from './results.js'

export interface Report {
  version: 1
  command: string
  ok: boolean
  interrupted?: boolean
  dryRun?: boolean
  startedAt: string
  finishedAt: string
  settings: Record<string, unknown>
  phases: PhaseResult[]
  plan?: Array<{ node?: string; command: string }>
}

export function stateDir(clusterDir: string): string {
  return join(clusterDir, '.bootstrap')
}

/** Writes runs/<time>-<command>.json and last-run.json (atomically), redacted. Returns the run file. */
export function writeReport(clusterDir: string, report: Report, redactor: Redactor): string {
  const dir = stateDir(clusterDir)
  const runs = join(dir, 'runs')
  mkdirSync(runs, { recursive: true })
  const text = redactor.redact(JSON.stringify(report, null, 2)) + '\n'
  const stamp = report.startedAt.replace(/[:.]/g, '-')
  const runFile = join(runs, `${stamp}-${report.command}.json`)
  writeFileSync(runFile, text)
  const tmp = join(dir, `last-run.json.${process.pid}`)
  writeFileSync(tmp, text)
  renameSync(tmp, join(dir, 'last-run.json'))
  return runFile
}

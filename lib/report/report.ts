import { join } from 'node:path'
import type { Redactor } from '../input/redact.js'
import type { PhaseResult } from '../core/results.js'
import { safeName, writeStateFile } from '../state/state-files.js'

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

/** runs/<time>-<command>, the name of a report and its picture; only sanitized characters (a report read back may be forged). */
export function runName(report: Pick<Report, 'startedAt' | 'command'>): string {
  return safeName(`${String(report.startedAt).replace(/[:.]/g, '-')}-${String(report.command)}`)
}

/** Writes runs/<time>-<command>.json and last-run.json (atomically, never through a link), redacted. Returns the run file. */
export function writeReport(clusterDir: string, report: Report, redactor: Redactor): string {
  const dir = stateDir(clusterDir)
  // every string redacted on its own: a short secret ("1234") masks text, never a number or the JSON's shape
  const text = JSON.stringify(report, (_key, value: unknown) => (typeof value === 'string' ? redactor.redact(value) : value), 2) + '\n'
  const runFile = join(dir, 'runs', `${runName(report)}.json`)
  writeStateFile(clusterDir, runFile, text)
  writeStateFile(clusterDir, join(dir, 'last-run.json'), text)
  return runFile
}

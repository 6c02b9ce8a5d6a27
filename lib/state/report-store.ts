// The one place that writes and reads run reports under .bootstrap/ (docs/report.md).
import { existsSync, readdirSync } from 'node:fs'
import { join, relative } from 'node:path'
import { InputError } from '../core/errors.ts'
import type { Report } from '../core/results.ts'
import type { Redactor } from '../input/redact.ts'
import { statePaths } from './paths.ts'
import { openedStateDir, safeName, writeStateFile } from './state-files.ts'
import { readRegularFile } from '../core/files.ts'

/** runs/<time>-<command>, the name of a report and its picture; only sanitized characters (a report read back may be forged). */
export function runName(report: Pick<Report, 'startedAt' | 'command'>): string {
  return safeName(`${String(report.startedAt).replace(/[:.]/g, '-')}-${String(report.command)}`)
}

/** Writes runs/<time>-<command>.json and last-run.json (atomically, never through a link), redacted. Returns the run file. */
export function writeReport(clusterDir: string, report: Report, redactor: Redactor): string {
  const paths = statePaths(clusterDir)
  // every string redacted on its own: a short secret ("1234") masks text, never a number or the JSON's shape
  const text = JSON.stringify(report, (_key, value: unknown) => (typeof value === 'string' ? redactor.redact(value) : value), 2) + '\n'
  const runFile = join(paths.runs, `${runName(report)}.json`)
  writeStateFile(clusterDir, runFile, text)
  writeStateFile(clusterDir, paths.lastRun, text)
  // the directory this run opened may have been moved during the run (a link put in its place):
  // the report is where the run wrote it
  const opened = openedStateDir(clusterDir)
  return opened ? join(opened, relative(paths.dir, runFile)) : runFile
}

const NOT_A_REPORT_FIX = 'name a report written by a bootstrap task (.bootstrap/runs/*.json)'

/** A report file as written by writeReport; InputError naming the file otherwise. */
export function readReport(file: string): Report {
  let doc: unknown
  try {
    doc = JSON.parse(readRegularFile(file))
  } catch (err) {
    throw new InputError(`not a JSON report: ${err instanceof Error ? err.message : String(err)}`, { file, fix: NOT_A_REPORT_FIX })
  }
  const r = doc as Partial<Report> | null
  if (!r || r.version !== 1 || !Array.isArray(r.phases) || typeof r.startedAt !== 'string') {
    throw new InputError('not a bootstrap report (version 1 with phases expected)', { file, fix: NOT_A_REPORT_FIX })
  }
  return r as Report
}

/** The report, or undefined when it is missing or unreadable. */
export function tryReadReport(file: string): Report | undefined {
  try {
    return existsSync(file) ? readReport(file) : undefined
  } catch {
    return undefined
  }
}

/** The report files under runs/, newest first (at most `limit`). */
export function recentRunFiles(clusterDir: string, limit = Infinity): string[] {
  const runs = statePaths(clusterDir).runs
  if (!existsSync(runs)) return []
  return readdirSync(runs)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .reverse()
    .slice(0, limit)
    .map((f) => join(runs, f))
}

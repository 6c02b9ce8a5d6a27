// task bootstrap:report: draws a run report as a timeline, in the terminal and as an SVG beside it.
import { existsSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { runWrapped } from './command.ts'
import { ExitCode, InputError } from '../core/errors.ts'
import { formatDuration } from '../core/duration.ts'
import { output } from '../cli/output.ts'
import type { Report } from '../core/results.ts'
import { statePaths } from '../state/paths.ts'
import { readReport, recentRunFiles, runName } from '../state/report-store.ts'
import { writeStateFile } from '../state/state-files.ts'
import { buildTimeline, renderSvg, renderText, resultWidth, type Timeline } from '../report/timeline.ts'
import { escapeControlsDeep } from '../core/text.ts'

export const REPORT_USAGE = 'task bootstrap:report [CLUSTER_DIR=dir] [RUN=<report file, or its name under .bootstrap/runs>]'

/** The report to draw and where its SVG goes: runs/<same name>.svg. */
export function locateReport(clusterDir: string, run: string | undefined): { file: string; svg: (report: Report) => string } {
  const { runs, lastRun, dir } = statePaths(clusterDir)
  if (!run) {
    if (!existsSync(lastRun)) {
      throw new InputError('no run recorded yet', {
        file: dir,
        fix: 'run a bootstrap task first (e.g. task bootstrap:talos), or name a report with RUN=<file>',
      })
    }
    // last-run.json is a copy of runs/<startedAt>-<command>.json (writeReport in lib/state/report-store.ts)
    return { file: lastRun, svg: (r) => join(runs, `${runName(r)}.svg`) }
  }
  const candidates = [resolve(run), join(runs, run), join(runs, `${run}.json`)]
  const file = candidates.find((f) => existsSync(f) && f.endsWith('.json'))
  if (!file) {
    const known = recentRunFiles(clusterDir, 5)
      .map((f) => basename(f))
      .reverse()
    throw new InputError(`no report ${JSON.stringify(run)}`, {
      file: runs,
      fix: known.length ? `name one of: ${known.join(', ')}` : 'run a bootstrap task first',
    })
  }
  return { file, svg: () => join(dirname(file), `${basename(file, '.json')}.svg`) }
}

/** Bar columns that fit `columns`: the node names, the result column and a day-2 run's versions take the rest. */
export function barWidth(timeline: Timeline, columns: number): number {
  const name = Math.max(4, ...timeline.lanes.map((l) => l.name.length)) + 2
  const result = Math.max(6, ...timeline.lanes.map((l) => l.result.length)) + 3
  const versions = resultWidth(timeline) ? Math.max(...timeline.lanes.map((l) => l.versions?.length ?? 0)) + 3 : 0
  return Math.min(120, Math.max(20, columns - name - result - versions))
}

export function headline(timeline: Timeline): string {
  const outcome = timeline.interrupted ? 'interrupted' : timeline.ok ? 'ok' : 'failed'
  const failed = timeline.lanes.filter((l) => l.failed).map((l) => l.name)
  return `${timeline.command} run of ${timeline.startedAt}: ${outcome} in ${formatDuration(timeline.totalMs)}${failed.length ? `; failed: ${failed.join(', ')}` : ''}`
}

/** The body of scripts/report.ts. Read-only but for the SVG it writes; no lock. */
export async function reportCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return runWrapped({ usage: REPORT_USAGE }, argv, env, async ({ args }) => {
    const { file, svg } = locateReport(args.clusterDir, args.run)
    // a report file is outside text too: its names and messages are printed with controls made visible
    const report = escapeControlsDeep(readReport(file))
    const timeline = buildTimeline(report)
    const colour = process.stdout.isTTY === true && !env.NO_COLOR && env.TERM !== 'dumb'
    const columns = process.stdout.isTTY === true ? (process.stdout.columns ?? 100) : 100
    const svgFile = svg(report)
    writeStateFile(args.clusterDir, svgFile, renderSvg(timeline, headline(timeline)))
    output.table([headline(timeline), '', renderText(timeline, { width: barWidth(timeline, columns), colour }), ''].join('\n'), { colour })
    output.info(`report: ${file}`)
    output.info(`svg: ${svgFile}`)
    return ExitCode.ok
  })
}

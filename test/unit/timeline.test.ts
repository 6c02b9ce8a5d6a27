// Issue item 7: the run as a per-node timeline (terminal text and SVG), from a hand-made report.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { Report } from '../../lib/core/results.js'
import type { NodeResult, PhaseResult } from '../../lib/core/results.js'
import { barWidth, locateReport, reportCommand } from '../../lib/commands/report-command.js'
import { buildTimeline, cellsOf, renderSvg, renderText, tickLabel, tickStep } from '../../lib/report/timeline.js'

const node = (name: string, ip: string, role: 'controlplane' | 'worker', rest: Partial<NodeResult>): NodeResult => ({
  name,
  ip,
  role,
  status: 'ok',
  attempts: 1,
  durationMs: 0,
  ...rest,
})

/**
 * 7 s run. cp-1: preflight 0–1 s, apply 1–3 s, verify 3–7 s. wrkr-1: preflight 0–1 s, apply 1–2 s
 * (half of cp-1's), verify 3–5 s. wrkr-2: preflight from 0, two retries, fails at 1.4 s; not run after.
 */
function handMade(): Report {
  const phases: PhaseResult[] = [
    {
      name: 'preflight',
      ok: false,
      durationMs: 1400,
      steps: [],
      nodes: [
        node('cp-1', '127.0.0.11', 'controlplane', { startedAtMs: 0, durationMs: 1000 }),
        node('wrkr-1', '127.0.0.21', 'worker', { startedAtMs: 0, durationMs: 1000 }),
        node('wrkr-2', '127.0.0.22', 'worker', {
          status: 'failed',
          attempts: 3,
          startedAtMs: 0,
          durationMs: 1400,
          retries: [
            { attempt: 1, kind: 'unreachable', message: 'connection refused', delayMs: 300, atMs: 100 },
            { attempt: 2, kind: 'unreachable', message: 'connection refused', delayMs: 600, atMs: 500 },
          ],
          error: {
            kind: 'unreachable',
            message: 'dial tcp 127.0.0.22:50000: connect: connection refused',
            hint: 'task bootstrap:node NODE=wrkr-2',
          },
        }),
      ],
    },
    {
      name: 'apply',
      ok: true,
      durationMs: 2000,
      steps: [],
      nodes: [
        node('cp-1', '127.0.0.11', 'controlplane', { startedAtMs: 1000, durationMs: 2000 }),
        node('wrkr-1', '127.0.0.21', 'worker', { startedAtMs: 1000, durationMs: 1000 }),
        node('wrkr-2', '127.0.0.22', 'worker', { status: 'not-run', attempts: 0, detail: 'failed in preflight' }),
      ],
    },
    {
      name: 'verify',
      ok: true,
      durationMs: 4000,
      steps: [],
      nodes: [
        node('cp-1', '127.0.0.11', 'controlplane', { startedAtMs: 3000, durationMs: 4000 }),
        node('wrkr-1', '127.0.0.21', 'worker', { startedAtMs: 3000, durationMs: 2000 }),
        node('wrkr-2', '127.0.0.22', 'worker', { status: 'not-run', attempts: 0, detail: 'failed in preflight' }),
      ],
    },
  ]
  return {
    version: 1,
    command: 'talos',
    ok: false,
    startedAt: '2026-11-25T21:00:00.000Z',
    finishedAt: '2026-11-25T21:00:07.000Z',
    settings: { concurrency: 3 },
    phases,
  }
}

/** the bar columns of a node's row in the plain text (between the name and the result) */
function track(text: string, name: string, width: number): string {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `))
  if (!line) throw new Error(`no row for ${name} in:\n${text}`)
  const nameWidth = text.split('\n')[1]?.indexOf('+') ?? 0
  return line.slice(nameWidth, nameWidth + width)
}

const count = (s: string, ch: string): number => s.split(ch).length - 1

describe('timeline of a run', () => {
  it('builds one lane per node with its bars, retries and first failure', () => {
    const t = buildTimeline(handMade())
    expect(t.totalMs).toBe(7000)
    expect(t.phases).toEqual(['preflight', 'apply', 'verify'])
    expect(t.lanes.map((l) => [l.name, l.result])).toEqual([
      ['cp-1', 'ok'],
      ['wrkr-1', 'ok'],
      ['wrkr-2', 'failed in preflight (unreachable)'],
    ])
    const wrkr2 = t.lanes[2]
    expect(wrkr2?.bars).toHaveLength(1) // not-run phases draw nothing
    expect(wrkr2?.bars[0]?.retries.map((r) => r.atMs)).toEqual([100, 500])
  })

  it('estimates retry times from the delays when the report has no atMs', () => {
    const report = handMade()
    const wrkr2 = report.phases[0]?.nodes[2]
    if (!wrkr2?.retries) throw new Error('fixture')
    for (const r of wrkr2.retries) delete r.atMs
    expect(buildTimeline(report).lanes[2]?.bars[0]?.retries.map((r) => r.atMs)).toEqual([0, 300])
  })

  it('draws bars proportional to time on one axis, the failed node marked, without colour', () => {
    const t = buildTimeline(handMade())
    const text = renderText(t, { width: 70, colour: false })
    expect(text).not.toContain('\u001b[')
    // 70 columns for 7 s: 100 ms a column
    const cp1 = track(text, 'cp-1', 70)
    const w1 = track(text, 'wrkr-1', 70)
    const w2 = track(text, 'wrkr-2', 70)
    expect(count(cp1, 'p')).toBe(10)
    expect(count(cp1, 'a')).toBe(20)
    expect(count(cp1, 'v')).toBe(40)
    expect(count(w1, 'a')).toBe(10)
    expect(count(w1, 'v')).toBe(20)
    expect(cp1.indexOf('a')).toBe(10)
    expect(cp1.indexOf('v')).toBe(30)
    // wrkr-2: retries at 100 ms and 500 ms, failure at the end of its 1.4 s bar, then nothing
    expect(w2.indexOf('!')).toBe(1)
    expect(w2.lastIndexOf('!')).toBe(5)
    expect(w2.indexOf('X')).toBe(13)
    expect(w2.slice(14).trim()).toBe('')
    expect(cp1).not.toContain('X')
    expect(text).toMatch(/^wrkr-2 .*FAILED in preflight \(unreachable\)$/m)
    expect(text).toMatch(/^cp-1 .*   ok$/m)
    // the axis: round ticks (2 s at this width), 0s at the first bar column, 6s at column 60
    const [labels, ruler] = text.split('\n')
    expect(labels).toBe(`NODE    0s${' '.repeat(18)}2s${' '.repeat(18)}4s${' '.repeat(18)}6s`)
    expect(ruler?.slice(8)).toBe(`+${'-'.repeat(19)}+${'-'.repeat(19)}+${'-'.repeat(19)}+${'-'.repeat(9)}   RESULT`)
    expect(text).toMatch(/p preflight {2}a apply {2}v verify {2}\. skipped {2}! retried {2}X failed/)
  })

  it('colours the bars on a terminal', () => {
    const text = renderText(buildTimeline(handMade()), { width: 70, colour: true })
    expect(text).toContain('\u001b[31m') // red: the failure
    expect(text).toMatch(/\u001b\[\d+mX/)
  })

  it('writes an SVG with proportional bars, retries and the failed node marked', () => {
    const svg = renderSvg(buildTimeline(handMade()), 'talos run <failed>')
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true)
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true)
    expect(svg).not.toMatch(/href=|<script|<image|@import|url\(/) // self-contained
    expect(svg).toContain('talos run &lt;failed&gt;')
    expect(count(svg, '<g')).toBe(count(svg, '</g>'))
    const bar = (nodeName: string, phase: string): number => {
      const lane = new RegExp(`<g class="lane[^"]*" data-node="${nodeName}"[\\s\\S]*?</g>`).exec(svg)?.[0] ?? ''
      const width = new RegExp(`data-phase="${phase}"[^>]*width="([\\d.]+)"`).exec(lane)?.[1]
      if (!width) throw new Error(`no ${phase} bar for ${nodeName}`)
      return Number(width)
    }
    expect(bar('cp-1', 'apply') / bar('wrkr-1', 'apply')).toBeCloseTo(2, 3)
    expect(bar('cp-1', 'verify') / bar('cp-1', 'preflight')).toBeCloseTo(4, 3)
    const failedLane =
      /<g class="lane failed" data-node="wrkr-2" data-result="failed in preflight \(unreachable\)">[\s\S]*?<\/g>/.exec(svg)?.[0] ?? ''
    expect(failedLane).toContain('data-status="failed"')
    expect(failedLane).toContain('class="failure"')
    expect(count(failedLane, 'class="retry"')).toBe(2)
    expect(failedLane).toContain('connect: connection refused')
    expect(svg).not.toMatch(/<g class="lane failed" data-node="cp-1"/)
  })

  it('keeps a phase shorter than a column and a failure right after a retry visible (a long run, a narrow picture)', () => {
    // 7 s on 10 columns: 700 ms a column. wrkr-2's two retries and its failure fall within its bar's two columns
    const narrow = (report: Report): string => renderText(buildTimeline(report), { width: 10, colour: false })
    expect(track(narrow(handMade()), 'wrkr-2', 10)).toBe('!!X       ')
    expect(track(narrow(handMade()), 'cp-1', 10)).toBe('paaavvvvvv')
    // cp-1's apply 1–1.1 s, verify from 1.1 s: both start in the second column, the apply keeps it
    const report = handMade()
    Object.assign(report.phases[1]?.nodes[0] ?? {}, { startedAtMs: 1000, durationMs: 100 })
    Object.assign(report.phases[2]?.nodes[0] ?? {}, { startedAtMs: 1100, durationMs: 5900 })
    expect(track(narrow(report), 'cp-1', 10)).toBe('pavvvvvvvv')
  })

  it('puts cluster-wide steps on their own lane, named in the SVG', () => {
    const report = handMade()
    report.phases[1]?.steps.push({ name: 'etcd-bootstrap', status: 'ok', durationMs: 3000, startedAtMs: 1000 })
    const t = buildTimeline(report)
    expect(t.lanes.map((l) => l.name)).toEqual(['cp-1', 'wrkr-1', 'wrkr-2', '(cluster)'])
    expect(track(renderText(t, { width: 70, colour: false }), '(cluster)', 70).trim()).toBe('a'.repeat(30))
    expect(renderSvg(t, 'run')).toMatch(/<g class="lane" data-node="\(cluster\)"[\s\S]*?<text class="step"[^>]*>etcd-bootstrap<\/text>/)
  })

  it('picks round ticks', () => {
    expect(tickStep(7000, 7)).toBe(1000)
    expect(tickStep(95_000, 10)).toBe(10_000)
    expect(tickStep(2600, 10)).toBe(500)
    expect(['0s', '500ms', '2.5s', '30s', '1m', '1m30s']).toEqual([0, 500, 2500, 30_000, 60_000, 90_000].map(tickLabel))
    expect(cellsOf(0, 1, 7000, 70)).toEqual([0, 0]) // a short phase still shows
    expect(cellsOf(6990, 7000, 7000, 70)).toEqual([69, 69])
  })
})

describe('task bootstrap:report files', () => {
  let dir: string | undefined
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true })
    dir = undefined
  })

  it('draws last-run.json and writes runs/<same name>.svg; --run picks a named report', async () => {
    dir = mkdtempSync(join(tmpdir(), 'tb-timeline-'))
    const runs = join(dir, '.bootstrap', 'runs')
    mkdirSync(runs, { recursive: true })
    const report = handMade()
    writeFileSync(join(dir, '.bootstrap', 'last-run.json'), JSON.stringify(report))
    writeFileSync(join(runs, '2026-11-25T21-00-00-000Z-talos.json'), JSON.stringify(report))
    const older = {
      ...handMade(),
      ok: true,
      command: 'apply',
      startedAt: '2026-11-25T20:00:00.000Z',
      finishedAt: '2026-11-25T20:00:03.000Z',
      phases: [handMade().phases[1] as PhaseResult],
    }
    writeFileSync(join(runs, '2026-11-25T20-00-00-000Z-apply.json'), JSON.stringify(older))

    const last = locateReport(dir, undefined)
    expect(last.svg(report)).toBe(join(runs, '2026-11-25T21-00-00-000Z-talos.svg'))
    const named = locateReport(dir, '2026-11-25T20-00-00-000Z-apply')
    expect(named.file).toBe(join(runs, '2026-11-25T20-00-00-000Z-apply.json'))
    expect(named.svg(older)).toBe(join(runs, '2026-11-25T20-00-00-000Z-apply.svg'))
    expect(() => locateReport(dir as string, 'nope.json')).toThrow(/no report "nope.json"/)

    const writes: string[] = []
    const original = process.stdout.write.bind(process.stdout)
    process.stdout.write = ((chunk: string) => (writes.push(String(chunk)), true)) as typeof process.stdout.write
    let code: number
    try {
      code = await reportCommand(['--cluster-dir', dir, '--run', ''], { NO_COLOR: '1' })
    } finally {
      process.stdout.write = original
    }
    expect(code).toBe(0)
    const printed = writes.join('')
    expect(printed).toMatch(/^talos run of 2026-11-25T21:00:00.000Z: failed in 7\.0s; failed: wrkr-2$/m)
    expect(printed).toMatch(/^wrkr-2 .*X.*FAILED in preflight/m)
    expect(readFileSync(join(runs, '2026-11-25T21-00-00-000Z-talos.svg'), 'utf8')).toContain('data-node="wrkr-2"')
  })

  it('is bad input (exit 2) when there is no run yet', async () => {
    dir = mkdtempSync(join(tmpdir(), 'tb-timeline-'))
    const errors: string[] = []
    const original = process.stderr.write.bind(process.stderr)
    process.stderr.write = ((chunk: string) => (errors.push(String(chunk)), true)) as typeof process.stderr.write
    let code: number
    try {
      code = await reportCommand(['--cluster-dir', dir], {})
    } finally {
      process.stderr.write = original
    }
    expect(code).toBe(2)
    expect(errors.join('')).toMatch(/\.bootstrap: no run recorded yet \(fix: run a bootstrap task first/)
  })

  it('fits the bars to the terminal width', () => {
    const t = buildTimeline(handMade())
    expect(barWidth(t, 100)).toBe(100 - 8 - 36)
    expect(barWidth(t, 10)).toBe(20)
  })
})

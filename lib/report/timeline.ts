// The picture of one run (task bootstrap:report): every node's phases and retries as bars on one
// time axis, failures marked; drawn as text for the terminal and as a self-contained SVG. A day-2
// run's report adds each node's versions beside its result and, when it left the cluster at mixed
// versions, the summary's line saying so under the picture.
import { Chalk, type ChalkInstance } from 'chalk'
import type { ClusterVersions, Report } from '../core/results.ts'
import type { NodeResult, NodeStatus } from '../core/results.ts'
import { UNKNOWN, versionsLine } from './versions.ts'

export interface RetryMark {
  /** ms since the run started; estimated from the delays when the report predates `atMs` */
  atMs: number
  attempt: number
  kind: string
  message: string
  delayMs: number
}

export interface Bar {
  phase: string
  /** the cluster step's name, on the cluster lane */
  step?: string
  startMs: number
  endMs: number
  status: NodeStatus
  retries: RetryMark[]
  error?: { kind: string; message: string }
}

export interface Lane {
  name: string
  ip?: string
  role?: string
  bars: Bar[]
  /** the first phase the node failed in */
  failed?: { phase: string; kind: string; message: string }
  /** `ok`, `failed in apply (unreachable)`, `not run`, `skipped` */
  result: string
  /** a day-2 report's: `Talos v1.12.11 -> v1.13.9, Kubernetes v1.35.0` (before -> after; each as far as known) */
  versions?: string
}

export interface Timeline {
  command: string
  ok: boolean
  interrupted: boolean
  startedAt: string
  totalMs: number
  /** phases in run order */
  phases: string[]
  lanes: Lane[]
  /** the report's `versions` left the cluster mixed: the summary's `cluster left at mixed versions: …` */
  mixed?: string
}

export const CLUSTER_LANE = '(cluster)'

/** One letter per phase, so the bars read without colour. */
const PHASE_CHAR: Record<string, string> = {
  preflight: 'p',
  reset: 'r',
  apply: 'a',
  verify: 'v',
  bootstrap: 'b',
  'wait-ready': 'w',
  flux: 'f',
  'cluster-apply': 'c',
  'upgrade-talos': 'u',
  'upgrade-k8s': 'k',
}
const PHASE_FILL: Record<string, string> = {
  preflight: '#5b9bd5',
  reset: '#a5a5a5',
  apply: '#4472c4',
  verify: '#70ad47',
  bootstrap: '#ffc000',
  'wait-ready': '#9e7cc1',
  flux: '#43b5a0',
  'cluster-apply': '#c55a11',
  'upgrade-talos': '#8c564b',
  'upgrade-k8s': '#17becf',
}
const FAILED = '#d62728'
const RETRY = '#ff7f0e'

const phaseChar = (phase: string): string => PHASE_CHAR[phase] ?? phase.charAt(0)

function retryMarks(node: NodeResult, startMs: number): RetryMark[] {
  let elapsed = startMs
  return (node.retries ?? []).map((r) => {
    // older reports have no atMs: the failed attempts were back to back, separated by their delays
    const atMs = r.atMs ?? elapsed
    elapsed = atMs + r.delayMs
    return { atMs, attempt: r.attempt, kind: r.kind, message: r.message, delayMs: r.delayMs }
  })
}

/** The version `byVersion` (a report's `versions.talos` or `.kubernetes`) lists the node under. */
function versionOf(byVersion: Record<string, string[]>, name: string): string | undefined {
  return Object.entries(byVersion).find(([, nodes]) => nodes.includes(name))?.[0]
}

/**
 * A node's versions: Talos as the run found it (upgrade:talos's `day2.from`) -> as read at the end,
 * one version when unchanged or not known before; Kubernetes as read at the end. Undefined when none is known.
 */
function laneVersions(name: string, before: string | undefined, versions: ClusterVersions): string | undefined {
  const after = versionOf(versions.talos, name) ?? UNKNOWN
  const talos = before ? (before === after ? before : `${before} -> ${after}`) : after === UNKNOWN ? undefined : after
  const kubernetes = versionOf(versions.kubernetes, name)
  const parts = [...(talos ? [`Talos ${talos}`] : []), ...(kubernetes && kubernetes !== UNKNOWN ? [`Kubernetes ${kubernetes}`] : [])]
  return parts.length > 0 ? parts.join(', ') : undefined
}

function laneResult(lane: Lane, statuses: NodeStatus[]): string {
  if (lane.failed) return `failed in ${lane.failed.phase} (${lane.failed.kind})`
  if (statuses.includes('not-run')) return 'not run'
  if (statuses.length > 0 && statuses.every((s) => s === 'skipped')) return 'skipped'
  return 'ok'
}

/** The report as lanes of bars: one lane per node (inventory order), one for cluster-wide steps. */
export function buildTimeline(report: Report): Timeline {
  const lanes = new Map<string, Lane>()
  const statuses = new Map<string, NodeStatus[]>()
  const cluster: Lane = { name: CLUSTER_LANE, bars: [], result: 'ok' }
  /** the Talos version each node ran when upgrade:talos planned it */
  const before = new Map<string, string>()
  let end = 0
  for (const phase of report.phases) {
    for (const node of phase.nodes) {
      let lane = lanes.get(node.name)
      if (!lane) {
        lane = { name: node.name, ip: node.ip, role: node.role, bars: [], result: '' }
        lanes.set(node.name, lane)
        statuses.set(node.name, [])
      }
      statuses.get(node.name)?.push(node.status)
      if (node.day2 && !before.has(node.name)) before.set(node.name, node.day2.from.talos)
      if (node.status === 'failed' && !lane.failed) {
        lane.failed = { phase: phase.name, kind: node.error?.kind ?? 'unknown', message: node.error?.message ?? '' }
      }
      // a node that never started here (not-run, or blocked by a cluster step) has no bar
      if (node.startedAtMs === undefined) continue
      const startMs = node.startedAtMs
      const bar: Bar = {
        phase: phase.name,
        startMs,
        endMs: startMs + node.durationMs,
        status: node.status,
        retries: retryMarks(node, startMs),
      }
      if (node.error) bar.error = { kind: node.error.kind, message: node.error.message }
      lane.bars.push(bar)
      end = Math.max(end, bar.endMs, ...bar.retries.map((r) => r.atMs))
    }
    for (const step of phase.steps) {
      if (step.startedAtMs === undefined) continue
      const bar: Bar = {
        phase: phase.name,
        step: step.name,
        startMs: step.startedAtMs,
        endMs: step.startedAtMs + step.durationMs,
        status: step.status,
        retries: [],
      }
      if (step.error) bar.error = { kind: step.error.kind, message: step.error.message }
      if (step.status === 'failed' && !cluster.failed)
        cluster.failed = { phase: phase.name, kind: step.error?.kind ?? 'unknown', message: step.error?.message ?? '' }
      cluster.bars.push(bar)
      end = Math.max(end, bar.endMs)
    }
  }
  for (const lane of lanes.values()) {
    lane.result = laneResult(lane, statuses.get(lane.name) ?? [])
    const versions = report.versions && laneVersions(lane.name, before.get(lane.name), report.versions)
    if (versions) lane.versions = versions
  }
  if (cluster.failed) cluster.result = `failed in ${cluster.failed.phase} (${cluster.failed.kind})`
  const wall = Date.parse(report.finishedAt) - Date.parse(report.startedAt)
  return {
    command: report.command,
    ok: report.ok,
    interrupted: report.interrupted === true,
    startedAt: report.startedAt,
    totalMs: Math.max(1, end, Number.isFinite(wall) ? wall : 0),
    phases: report.phases.map((p) => p.name),
    lanes: [...lanes.values(), ...(cluster.bars.length > 0 ? [cluster] : [])],
    ...(report.versions?.mixed ? { mixed: versionsLine(report.versions) } : {}),
  }
}

/** The result column's width when a versions column follows it (else undefined: nothing is padded). */
export function resultWidth(timeline: Timeline): number | undefined {
  if (!timeline.lanes.some((l) => l.versions)) return undefined
  return Math.max('RESULT'.length, ...timeline.lanes.map((l) => l.result.length))
}

/** A round step (1, 2 or 5 times a power of ten, in ms) giving about `count` ticks. */
export function tickStep(totalMs: number, count: number): number {
  const raw = totalMs / Math.max(1, count)
  const power = 10 ** Math.floor(Math.log10(Math.max(raw, 1)))
  for (const factor of [1, 2, 5, 10]) if (factor * power >= raw) return factor * power
  return 10 * power
}

/** Tick labels: 0s, 500ms, 2.5s, 30s, 1m, 1m30s. */
export function tickLabel(ms: number): string {
  if (ms === 0) return '0s'
  if (ms < 1000) return `${ms}ms`
  if (ms < 60_000) return `${Number((ms / 1000).toFixed(1))}s`
  const minutes = Math.floor(ms / 60_000)
  const seconds = Math.round((ms % 60_000) / 1000)
  return seconds ? `${minutes}m${seconds}s` : `${minutes}m`
}

function ticks(totalMs: number, count: number): number[] {
  const step = tickStep(totalMs, count)
  const out: number[] = []
  for (let t = 0; t <= totalMs; t += step) out.push(t)
  return out
}

export interface TextOptions {
  /** columns of the bar area */
  width: number
  /** ANSI colours (a terminal without NO_COLOR) */
  colour: boolean
}

/** Cells [first, last] a time span covers on `width` columns; at least one cell. */
export function cellsOf(startMs: number, endMs: number, totalMs: number, width: number): [number, number] {
  const first = Math.min(width - 1, Math.floor((startMs / totalMs) * width))
  const last = Math.min(width - 1, Math.max(first, Math.ceil((endMs / totalMs) * width) - 1))
  return [first, last]
}

/**
 * One line per node: a letter per phase over the time it took (`.` skipped), `!` where an attempt
 * failed and was retried, `X` where the node failed; then the node's result. A time axis on top.
 */
export function renderText(timeline: Timeline, options: TextOptions): string {
  const c: ChalkInstance = new Chalk({ level: options.colour ? 1 : 0 })
  const paint: Record<string, (s: string) => string> = {
    preflight: c.cyan,
    reset: c.gray,
    apply: c.blue,
    verify: c.green,
    bootstrap: c.yellow,
    'wait-ready': c.magenta,
    flux: c.white,
    'cluster-apply': c.red,
    'upgrade-talos': c.yellowBright,
  }
  const width = Math.max(10, options.width)
  const { totalMs } = timeline
  const nameWidth = Math.max(4, ...timeline.lanes.map((l) => l.name.length)) + 2
  const lines: string[] = []

  // axis: labels above a ruler with a `+` at each tick
  const labels = Array<string>(width + 12).fill(' ')
  const ruler = Array<string>(width).fill('-')
  let free = 0
  for (const t of ticks(totalMs, Math.max(2, Math.floor(width / 12)))) {
    const col = Math.min(width - 1, Math.round((t / totalMs) * width))
    ruler[col] = '+'
    const text = tickLabel(t)
    if (col < free) continue
    for (let i = 0; i < text.length; i++) labels[col + i] = text.charAt(i)
    free = col + text.length + 1
  }
  lines.push(`${'NODE'.padEnd(nameWidth)}${labels.join('').trimEnd()}`)
  const results = resultWidth(timeline)
  lines.push(`${''.padEnd(nameWidth)}${ruler.join('')}   ${results ? `${'RESULT'.padEnd(results)}   VERSIONS` : 'RESULT'}`)

  for (const lane of timeline.lanes) {
    const cells: Array<{ ch: string; paint: (s: string) => string }> = Array.from({ length: width }, () => ({
      ch: ' ',
      paint: (s: string) => s,
    }))
    // a bar or mark shorter than a column is never drawn over by the next: it is pushed one column
    // right (a long run draws many short phases within one column), so every phase a node went
    // through keeps its letter, and a failure right after a retry its `X` after the `!`
    let free = 0
    for (const bar of lane.bars) {
      const [start, end] = cellsOf(bar.startMs, bar.endMs, totalMs, width)
      const first = Math.min(width - 1, Math.max(start, free))
      let last = Math.max(first, end)
      const ch = bar.status === 'skipped' ? '.' : phaseChar(bar.phase)
      const fn = paint[bar.phase] ?? ((s: string) => s)
      for (let i = first; i <= last; i++) cells[i] = { ch, paint: fn }
      let mark = first
      for (const retry of bar.retries) {
        const [at] = cellsOf(retry.atMs, retry.atMs, totalMs, width)
        mark = Math.min(width - 1, Math.max(at, mark))
        cells[mark] = { ch: '!', paint: c.yellow.bold }
        mark++
      }
      if (bar.status === 'failed') {
        last = Math.min(width - 1, Math.max(last, mark))
        cells[last] = { ch: 'X', paint: c.red.bold }
      }
      free = first + 1
    }
    const track = cells.map((cell) => (cell.ch === ' ' ? ' ' : cell.paint(cell.ch))).join('')
    const result = lane.failed ? c.red.bold(`FAILED ${lane.result.replace(/^failed /, '')}`) : lane.result
    // `FAILED …` is as long as `failed …`: the padding counts the plain result
    const versions = results && lane.versions ? `${' '.repeat(results - lane.result.length)}   ${lane.versions}` : ''
    lines.push(
      `${(lane.failed ? c.red.bold(lane.name) : lane.name) + ' '.repeat(nameWidth - lane.name.length)}${track}   ${result}${versions}`,
    )
  }
  const legend = timeline.phases.map((p) => `${paint[p]?.(phaseChar(p)) ?? phaseChar(p)} ${p}`)
  lines.push('', `${legend.join('  ')}  . skipped  ${c.yellow.bold('!')} retried  ${c.red.bold('X')} failed`)
  if (timeline.mixed) lines.push(c.yellow.bold(timeline.mixed))
  return lines.join('\n')
}

function xml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
}

const num = (n: number): string => String(Math.round(n * 100) / 100)

/**
 * The same picture as an SVG document: no scripts, fonts or links, so it opens anywhere. Each
 * bar and mark carries a <title> (hover text) and data-* attributes naming node, phase and status.
 */
export function renderSvg(timeline: Timeline, title: string): string {
  const { totalMs } = timeline
  const labelW = 14 + 8 * Math.max(8, ...timeline.lanes.map((l) => l.name.length + (l.failed ? 2 : 0)))
  const chartW = 900
  const resultW = Math.max(260, 20 + 8 * Math.max(0, ...timeline.lanes.map((l) => l.result.length)))
  const versionsW = Math.max(0, ...timeline.lanes.map((l) => (l.versions ? 20 + 8 * l.versions.length : 0)))
  const rowH = 26
  const barH = 16
  const top = 64
  // the mixed line names every node: the picture is as wide as it
  const width = Math.max(labelW + chartW + resultW + versionsW, 20 + 8 * (timeline.mixed?.length ?? 0))
  const height = top + rowH * timeline.lanes.length + 56 + (timeline.mixed ? 24 : 0)
  const x = (ms: number): number => labelW + (ms / totalMs) * chartW
  const out: string[] = []
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="monospace" font-size="12">`,
  )
  out.push(`<title>${xml(title)}</title>`)
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`)
  out.push(`<text x="10" y="20" font-size="14" font-weight="bold"${timeline.ok ? '' : ` fill="${FAILED}"`}>${xml(title)}</text>`)

  // time axis: a gridline and a label per tick
  out.push('<g class="axis">')
  for (const t of ticks(totalMs, 10)) {
    out.push(`<line x1="${num(x(t))}" y1="${top - 8}" x2="${num(x(t))}" y2="${top + rowH * timeline.lanes.length}" stroke="#dddddd"/>`)
    out.push(`<text x="${num(x(t))}" y="${top - 12}" text-anchor="middle" fill="#555555">${tickLabel(t)}</text>`)
  }
  out.push('</g>')

  timeline.lanes.forEach((lane, i) => {
    const y = top + i * rowH
    const barY = y + (rowH - barH) / 2
    const versions = lane.versions ? ` data-versions="${xml(lane.versions)}"` : ''
    out.push(`<g class="lane${lane.failed ? ' failed' : ''}" data-node="${xml(lane.name)}" data-result="${xml(lane.result)}"${versions}>`)
    if (i % 2 === 1) out.push(`<rect x="0" y="${y}" width="${width}" height="${rowH}" fill="#000000" fill-opacity="0.03"/>`)
    const name = lane.failed ? `✕ ${lane.name}` : lane.name
    out.push(
      `<text x="10" y="${y + rowH / 2 + 4}"${lane.failed ? ` fill="${FAILED}" font-weight="bold"` : ''}>${xml(name)}<title>${xml(`${lane.name}${lane.ip ? ` (${lane.ip}, ${lane.role})` : ''}`)}</title></text>`,
    )
    for (const bar of lane.bars) {
      const bx = x(bar.startMs)
      const bw = Math.max(1, x(bar.endMs) - bx)
      const failed = bar.status === 'failed'
      const hover = `${lane.name} ${bar.step ? `${bar.phase}/${bar.step}` : bar.phase}: ${bar.status}, ${tickLabel(Math.round(bar.endMs - bar.startMs))} from ${tickLabel(Math.round(bar.startMs))}${bar.error ? `; ${bar.error.kind}: ${bar.error.message}` : ''}`
      const fill = bar.status === 'skipped' ? '#e0e0e0' : (PHASE_FILL[bar.phase] ?? '#888888')
      const stroke = failed ? ` stroke="${FAILED}" stroke-width="2"` : ''
      out.push(
        `<rect class="bar" data-phase="${xml(bar.phase)}" data-status="${bar.status}" x="${num(bx)}" y="${num(barY)}" width="${num(bw)}" height="${barH}" rx="2" fill="${fill}"${stroke}><title>${xml(hover)}</title></rect>`,
      )
      // cluster steps share one lane: name them where the bar has room
      if (bar.step && bw > bar.step.length * 7 + 6) {
        out.push(`<text class="step" x="${num(bx + 3)}" y="${num(barY + barH - 4)}" font-size="10" fill="#222222">${xml(bar.step)}</text>`)
      }
      for (const r of bar.retries) {
        const rx = x(r.atMs)
        out.push(
          `<path class="retry" d="M${num(rx)} ${num(barY - 2)} l4 -6 h-8 z" fill="${RETRY}"><title>${xml(`${lane.name} ${bar.phase}: attempt ${r.attempt} failed (${r.kind}: ${r.message}); retried after ${tickLabel(r.delayMs)}`)}</title></path>`,
        )
      }
      if (failed) {
        const fx = bx + bw
        const cy = barY + barH / 2
        out.push(
          `<path class="failure" d="M${num(fx - 5)} ${num(cy - 5)} l10 10 m0 -10 l-10 10" stroke="${FAILED}" stroke-width="3"><title>${xml(hover)}</title></path>`,
        )
      }
    }
    out.push(
      `<text x="${labelW + chartW + 10}" y="${y + rowH / 2 + 4}"${lane.failed ? ` fill="${FAILED}" font-weight="bold"` : ''}>${xml(lane.result)}</text>`,
    )
    if (lane.versions)
      out.push(`<text class="versions" x="${labelW + chartW + resultW + 10}" y="${y + rowH / 2 + 4}">${xml(lane.versions)}</text>`)
    out.push('</g>')
  })

  // legend
  let lx = 10
  const ly = top + rowH * timeline.lanes.length + 30
  out.push('<g class="legend">')
  const entries: Array<[string, string]> = [
    ...timeline.phases.map((p): [string, string] => [p, PHASE_FILL[p] ?? '#888888']),
    ['skipped', '#e0e0e0'],
  ]
  for (const [label, fill] of entries) {
    out.push(`<rect x="${lx}" y="${ly - 10}" width="12" height="12" fill="${fill}"/><text x="${lx + 16}" y="${ly}">${xml(label)}</text>`)
    lx += 28 + label.length * 8
  }
  out.push(`<path d="M${lx + 6} ${ly - 2} l4 -6 h-8 z" fill="${RETRY}"/><text x="${lx + 16}" y="${ly}">retried</text>`)
  lx += 90
  out.push(
    `<path d="M${lx} ${ly - 10} l10 10 m0 -10 l-10 10" stroke="${FAILED}" stroke-width="3"/><text x="${lx + 16}" y="${ly}">failed</text>`,
  )
  out.push('</g>')
  if (timeline.mixed) out.push(`<text class="versions-line" x="10" y="${ly + 24}" font-weight="bold">${xml(timeline.mixed)}</text>`)
  out.push('</svg>')
  return `${out.join('\n')}\n`
}

// What a rolling day-2 run (upgrade:talos) did, in time, from the simulator's calls log and a gate
// command's marks: each node's down window (its Upgrade call to the first answer from a new boot, the
// calls log's `boot`) and the order of gate runs and Upgrade calls.
import { readFileSync } from 'node:fs'
import { expect } from 'vitest'
import type { CallRecord, Simulator } from '../../sim/index.js'

/** A GATE_COMMAND that appends `<ms since the epoch> <NODE> <NODE_ROLE>` to `file` on each run (both empty before the first node). */
export function markingGate(file: string): string {
  return `echo "$(date +%s%3N) $NODE $NODE_ROLE" >> '${file}'`
}

export interface GateMark {
  /** ms since the epoch (the machine's clock, as the calls log's `time`) */
  at: number
  /** '' for the run before the first node */
  node: string
  role: string
}

/** The marks markingGate wrote, in the order written. */
export function gateMarks(file: string): GateMark[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [at = '', node = '', role = ''] = line.split(' ')
      return { at: Number(at), node, role }
    })
}

export interface DownWindow {
  node: string
  /** the Upgrade call's record (the node answered it from the boot it then leaves) */
  from: number
  /** the first record of a call the node answered from another boot; Infinity: none in the log */
  to: number
}

const ms = (c: CallRecord): number => Date.parse(c.time)
/** the upgrade calls a node took (the legacy Upgrade, or v1.13's lifecycle one), answered */
const sentUpgrade = (c: CallRecord): boolean =>
  c.tool === 'talosctl' && (c.call === 'upgrade' || c.call === 'lifecycle') && c.outcome === 'ok'

/**
 * Each accepted upgrade call of `nodes` in `calls`, with the window the node was down in as far as the
 * calls log can tell: from the call (its sequence starts there) to the first call the node answered
 * from a boot other than the one that took the upgrade (not before its new boot serves its API).
 */
export function downWindows(calls: CallRecord[], nodes: string[]): DownWindow[] {
  return calls.flatMap((c, i) => {
    if (!sentUpgrade(c) || !c.node || !nodes.includes(c.node) || !c.boot) return []
    const back = calls.slice(i + 1).find((b) => b.tool === 'talosctl' && b.node === c.node && b.boot !== undefined && b.boot !== c.boot)
    return [{ node: c.node, from: ms(c), to: back ? ms(back) : Infinity }]
  })
}

/** Every two windows of different nodes that overlap, as text (none: []). */
export function overlapping(windows: DownWindow[]): string[] {
  const text = (w: DownWindow): string =>
    `${w.node} ${new Date(w.from).toISOString()}..${Number.isFinite(w.to) ? new Date(w.to).toISOString() : 'never back'}`
  return windows.flatMap((a, i) =>
    windows.slice(i + 1).flatMap((b) => (a.node !== b.node && a.from < b.to && b.from < a.to ? [`${text(a)} overlaps ${text(b)}`] : [])),
  )
}

/**
 * Gate runs and upgrade calls in time order: `gate -` (before the first node), `gate <node>`,
 * `upgrade <node>` (every upgrade call, refused ones too).
 */
export function gateTimeline(calls: CallRecord[], marks: GateMark[]): string[] {
  const events = [
    ...marks.map((m) => ({ at: m.at, what: `gate ${m.node || '-'}` })),
    ...calls
      .filter((c) => c.tool === 'talosctl' && (c.call === 'upgrade' || (c.call === 'lifecycle' && c.outcome === 'ok')))
      .map((c) => ({ at: ms(c), what: `upgrade ${c.node ?? '?'}` })),
  ]
  return events.sort((a, b) => a.at - b.at).map((e) => e.what)
}

/**
 * The gate ran before each node, in `batches` (the nodes that go together, in order: a control plane
 * alone; workers CONCURRENCY at a time): for every node of batch i, each gate mark of batch i-1 (the
 * mark before the first node for i = 0) is older than the node's upgrade call, and the node's own mark
 * younger than its return (the first answer from its new boot). Batches of one make the whole order
 * gate - < upgrade n1 < gate n1 < upgrade n2 < gate n2 …; two workers of one batch are not ordered
 * against each other.
 */
export function expectGateBeforeEachNode(calls: CallRecord[], marks: GateMark[], batches: string[][]): void {
  const timeline = gateTimeline(calls, marks)
  const nodes = batches.flat()
  const windows = downWindows(calls, nodes)
  const markOf = (node: string): number => {
    const found = marks.filter((m) => m.node === node)
    expect(found, `one gate mark for ${node || '-'} in ${JSON.stringify(timeline)}`).toHaveLength(1)
    return found[0]!.at
  }
  batches.forEach((batch, i) => {
    const before = i === 0 ? [''] : batches[i - 1]!
    for (const node of batch) {
      const mine = windows.filter((w) => w.node === node)
      expect(mine, `one accepted upgrade call of ${node}: ${JSON.stringify(timeline)}`).toHaveLength(1)
      const { from, to } = mine[0]!
      for (const b of before) expect(markOf(b) < from, `gate ${b || '-'} before upgrade ${node}: ${JSON.stringify(timeline)}`).toBe(true)
      expect(to < markOf(node), `${node} back (a new boot answering) before its gate: ${JSON.stringify(timeline)}`).toBe(true)
    }
  })
  // the whole order, of these nodes' gate runs and upgrade calls
  if (batches.every((b) => b.length === 1))
    expect(timeline.filter((e) => e === 'gate -' || nodes.includes(e.split(' ')[1]!))).toEqual([
      'gate -',
      ...nodes.flatMap((n) => [`upgrade ${n}`, `gate ${n}`]),
    ])
}

/**
 * In process: the control planes `cps` down at once (any stage but running), the most seen while
 * `body` runs, and the order they went down in.
 */
export async function watchingDown<T>(
  sim: Simulator,
  cps: string[],
  body: () => Promise<T>,
): Promise<{ value: T; most: number; downs: string[] }> {
  const down = new Set<string>()
  const downs: string[] = []
  let most = 0
  const stop = sim.watch((v) => {
    if (!cps.includes(v.name)) return
    if (v.stage === 'running') down.delete(v.name)
    else if (!down.has(v.name)) {
      down.add(v.name)
      downs.push(v.name)
    }
    most = Math.max(most, down.size)
  })
  try {
    return { value: await body(), most, downs }
  } finally {
    stop()
  }
}

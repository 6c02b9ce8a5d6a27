// bootstrap:status's LAST RUN column: each node's latest result, also after a one-node run.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect, it } from 'vitest'
import type { Report } from '../../lib/core/results.js'
import type { NodeResult, NodeStatus } from '../../lib/core/results.js'
import { lastRunLines, latestResults } from '../../lib/commands/status.js'

let dir: string | undefined
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true })
  dir = undefined
})

const result = (name: string, status: NodeStatus): NodeResult => ({
  name,
  ip: `127.0.0.${name.length}`,
  role: 'worker',
  status,
  attempts: 1,
  durationMs: 10,
  startedAtMs: 0,
  ...(status === 'failed' ? { error: { kind: 'unreachable', message: 'connection refused', hint: '' } } : {}),
})

function report(command: string, startedAt: string, nodes: NodeResult[], extra: Partial<Report> = {}): Report {
  const ok = nodes.every((n) => n.status !== 'failed')
  return {
    version: 1,
    command,
    ok,
    startedAt,
    finishedAt: startedAt,
    settings: {},
    phases: [{ name: 'preflight', ok, durationMs: 10, nodes, steps: [] }],
    ...extra,
  }
}

function write(file: string, r: Report): void {
  writeFileSync(file, JSON.stringify(r))
}

it('takes each node from the newest run that selected it; dry runs and broken files do not count', () => {
  dir = mkdtempSync(join(tmpdir(), 'tb-status-'))
  const runs = join(dir, '.bootstrap', 'runs')
  mkdirSync(runs, { recursive: true })
  const talos = report('talos', '2026-11-25T20:00:00.000Z', [result('cp-1', 'ok'), result('wrkr-1', 'ok'), result('wrkr-2', 'failed')])
  const node = report('node', '2026-11-25T21:00:00.000Z', [result('wrkr-2', 'ok')])
  const dry = report('talos', '2026-11-25T22:00:00.000Z', [result('cp-1', 'ok'), result('wrkr-1', 'ok'), result('wrkr-2', 'ok')], {
    dryRun: true,
  })
  write(join(runs, '2026-11-25T20-00-00-000Z-talos.json'), talos)
  write(join(runs, '2026-11-25T21-00-00-000Z-node.json'), node)
  write(join(runs, '2026-11-25T22-00-00-000Z-talos.json'), dry)
  writeFileSync(join(runs, '2026-11-25T23-00-00-000Z-apply.json'), '{ not json')
  write(join(dir, '.bootstrap', 'last-run.json'), node)

  const { lanes, used } = latestResults(dir, ['cp-1', 'wrkr-1', 'wrkr-2'])
  expect(Object.fromEntries([...lanes].map(([name, lane]) => [name, lane.result]))).toEqual({
    'wrkr-2': 'ok',
    'cp-1': 'ok',
    'wrkr-1': 'ok',
  })
  // the node run (last-run.json, also in runs/) counts once, then the talos run for the others
  expect(used.map((u) => [u.report.command, u.nodes])).toEqual([
    ['node', ['wrkr-2']],
    ['talos', ['cp-1', 'wrkr-1']],
  ])

  // only the selected nodes, and a failure shows as such
  const one = latestResults(dir, ['wrkr-1'])
  expect(one.used.map((u) => u.report.command)).toEqual(['talos'])
  write(join(dir, '.bootstrap', 'last-run.json'), talos)
  expect(latestResults(dir, ['wrkr-2']).lanes.get('wrkr-2')?.result).toBe('failed in preflight (unreachable)')
})

it('names the nodes that failed in the last run, not the ones that succeeded', () => {
  const talos = report('talos', '2026-11-25T20:00:00.000Z', [result('cp-1', 'ok'), result('cp-2', 'ok'), result('wrkr-1', 'failed')])
  expect(lastRunLines([{ report: talos, nodes: ['cp-1', 'cp-2', 'wrkr-1'] }])).toBe(
    'last run: talos of 2026-11-25T20:00:00.000Z: failed: wrkr-1',
  )
  // rows from two runs: each line says which rows it gave, apart from what failed in it
  const node = report('node', '2026-11-25T21:00:00.000Z', [result('wrkr-2', 'failed')])
  expect(
    lastRunLines([
      { report: node, nodes: ['wrkr-2'] },
      { report: talos, nodes: ['cp-1', 'cp-2'] },
    ]),
  ).toBe(
    'last run: node of 2026-11-25T21:00:00.000Z: failed: wrkr-2 (the LAST RUN of wrkr-2)\nlast run: talos of 2026-11-25T20:00:00.000Z: failed: wrkr-1 (the LAST RUN of cp-1, cp-2)',
  )
})

it('has nothing to say before the first run', () => {
  dir = mkdtempSync(join(tmpdir(), 'tb-status-'))
  expect(latestResults(dir, ['cp-1'])).toEqual({ lanes: new Map(), used: [] })
})

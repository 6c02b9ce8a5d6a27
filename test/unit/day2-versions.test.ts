// docs/day2-design.md 2.8: the versions a cluster runs, grouped for the report, as the summary's and
// `task status`'s line, the status table's TALOS and K8S columns, and the day-2 phases' timeline letters.
import { describe, expect, it } from 'vitest'
import type { ClusterNode } from '../../lib/core/model.js'
import type { NodeResult, PhaseResult, Report } from '../../lib/core/results.js'
import { statusTable, type NodeRow } from '../../lib/commands/status.js'
import { groupVersions, versionsLine } from '../../lib/report/versions.js'
import { buildTimeline, renderText } from '../../lib/report/timeline.js'

const SCHEMATIC = '376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba'

describe('the versions a cluster runs', () => {
  it('groups the nodes by version, in the order given; the unread under unknown, no schematic under none', () => {
    const v = groupVersions([
      { name: 'cp-1', talos: 'v1.13.9', kubernetes: 'v1.35.0', schematic: null },
      { name: 'cp-2', talos: 'v1.13.9', kubernetes: 'v1.35.0', schematic: null },
      { name: 'wrkr-1', talos: 'v1.12.11', kubernetes: 'v1.35.0', schematic: SCHEMATIC },
      { name: 'wrkr-2', kubernetes: 'v1.35.0' },
    ])
    expect(v).toEqual({
      talos: { 'v1.13.9': ['cp-1', 'cp-2'], 'v1.12.11': ['wrkr-1'], unknown: ['wrkr-2'] },
      kubernetes: { 'v1.35.0': ['cp-1', 'cp-2', 'wrkr-1', 'wrkr-2'] },
      schematics: { none: ['cp-1', 'cp-2'], [SCHEMATIC]: ['wrkr-1'], unknown: ['wrkr-2'] },
      mixed: true,
    })
    expect(versionsLine(v)).toBe('cluster left at mixed versions: Talos v1.13.9 (cp-1, cp-2), v1.12.11 (wrkr-1), unknown (wrkr-2)')
    expect(versionsLine(v, false)).toBe('cluster at mixed versions: Talos v1.13.9 (cp-1, cp-2), v1.12.11 (wrkr-1), unknown (wrkr-2)')
  })

  it('is mixed by Talos or Kubernetes, never by schematics or an unread node; the newest version first', () => {
    const same = groupVersions([
      { name: 'cp-1', talos: 'v1.13.9', kubernetes: 'v1.35.0', schematic: null },
      { name: 'wrkr-1', talos: 'v1.13.9', kubernetes: 'v1.35.0', schematic: SCHEMATIC },
    ])
    expect(same.mixed).toBe(false)
    expect(versionsLine(same)).toBe('cluster at Talos v1.13.9 (cp-1, wrkr-1), Kubernetes v1.35.0 (cp-1, wrkr-1)')
    const unread = groupVersions([
      { name: 'cp-1', talos: 'v1.13.9', kubernetes: 'v1.35.0' },
      { name: 'wrkr-1', kubernetes: 'v1.35.0' },
    ])
    expect(unread.mixed).toBe(false)
    expect(versionsLine(unread)).toBe('cluster at Talos v1.13.9 (cp-1), unknown (wrkr-1), Kubernetes v1.35.0 (cp-1, wrkr-1)')
    const k8s = groupVersions([
      { name: 'cp-1', talos: 'v1.13.9', kubernetes: 'v1.34.1' },
      { name: 'cp-2', talos: 'v1.13.9', kubernetes: 'v1.35.0' },
      { name: 'wrkr-1', talos: 'v1.12.11', kubernetes: 'v1.34.1' },
    ])
    expect(k8s.mixed).toBe(true)
    // sorted by version, not as text (v1.12.11 < v1.13.9; v1.34.1 < v1.35.0)
    expect(versionsLine(k8s)).toBe(
      'cluster left at mixed versions: Talos v1.13.9 (cp-1, cp-2), v1.12.11 (wrkr-1); Kubernetes v1.35.0 (cp-2), v1.34.1 (cp-1, wrkr-1)',
    )
  })
})

describe('the status table', () => {
  const node = (name: string, role: 'controlplane' | 'worker', address: string): ClusterNode =>
    ({ name, role, address, configFile: `${name}.yaml` }) as ClusterNode
  const row = (n: ClusterNode, talos: string, k8sVersion: string, kubernetes: string): NodeRow => ({
    node: n,
    talos,
    stage: talos === '-' ? 'unreachable' : 'running',
    ready: talos === '-' ? '-' : 'yes',
    etcd: n.role === 'controlplane' ? 'member' : '-',
    kubelet: talos === '-' ? '-' : 'running',
    k8sVersion,
    kubernetes,
    lastRun: 'ok',
    lastError: '-',
    note: '',
    healthy: kubernetes === 'Ready',
  })

  it('has a TALOS and a K8S column per node, the Node readiness beside it', () => {
    const text = statusTable({
      rows: [
        row(node('cp-1', 'controlplane', '127.0.0.11'), 'v1.13.9', 'v1.35.0', 'Ready'),
        row(node('wrkr-1', 'worker', '127.0.0.21'), 'v1.12.11', 'v1.34.1', 'Ready'),
        row(node('wrkr-2', 'worker', '127.0.0.22'), '-', '-', 'not registered'),
      ],
      lastRun: undefined,
      warnings: [],
    })
    const [header, ...lines] = text.split('\n').map((l) => l.split(/\s{3,}/))
    // the versions beside the node's name and role; the Node's readiness right after the kubelet's version
    expect([header?.[3], header?.[8], header?.[9]]).toEqual(['TALOS', 'K8S', 'K8S NODE'])
    expect(lines.map((l) => [l[0], l[3], l[8], l[9]])).toEqual([
      ['cp-1', 'v1.13.9', 'v1.35.0', 'Ready'],
      ['wrkr-1', 'v1.12.11', 'v1.34.1', 'Ready'],
      ['wrkr-2', '-', '-', 'not registered'],
    ])
  })
})

describe('the timeline of day-2 phases', () => {
  const n = (name: string, startedAtMs: number, durationMs: number): NodeResult => ({
    name,
    ip: '127.0.0.11',
    role: 'controlplane',
    status: 'ok',
    attempts: 1,
    startedAtMs,
    durationMs,
  })
  const phase = (name: string, node: NodeResult): PhaseResult =>
    ({ name, ok: true, durationMs: node.durationMs, nodes: [node], steps: [] }) as PhaseResult

  it('draws cluster-apply as c, upgrade-talos as u and upgrade-k8s as k, named in the legend', () => {
    const report: Report = {
      version: 1,
      command: 'mixed',
      ok: true,
      startedAt: '2026-11-28T00:00:00.000Z',
      finishedAt: '2026-11-28T00:00:04.000Z',
      settings: {},
      // upgrade-k8s comes from the upgrade:k8s command; a report names it as a plain string
      phases: [
        phase('cluster-apply', n('cp-1', 0, 1000)),
        phase('upgrade-talos', n('cp-1', 1000, 2000)),
        phase('upgrade-k8s', n('cp-1', 3000, 1000)),
      ],
    }
    const text = renderText(buildTimeline(report), { width: 40, colour: false })
    const line = text.split('\n').find((l) => l.startsWith('cp-1 ')) ?? ''
    expect(line).toMatch(/^cp-1 +c{10}u{20}k{10} +ok$/)
    expect(text).toMatch(/c cluster-apply {2}u upgrade-talos {2}k upgrade-k8s/)
  })
})

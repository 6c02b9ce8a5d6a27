// docs/day2-design.md 2.8: the versions a cluster runs, grouped for the report, as the summary's and
// `task status`'s line, the status table's TALOS and K8S columns, and the day-2 phases' timeline letters.
import { describe, expect, it } from 'vitest'
import type { ClusterNode } from '../../lib/core/model.js'
import type { NodeResult, PhaseResult, Report } from '../../lib/core/results.js'
import { statusTable, type NodeRow } from '../../lib/commands/status.js'
import { groupVersions, versionsLine } from '../../lib/report/versions.js'
import { buildTimeline, renderSvg, renderText } from '../../lib/report/timeline.js'
import { barWidth } from '../../lib/commands/report-command.js'

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

  /**
   * upgrade:talos NODES=cp-1,wrkr-1 on a cluster of three: cp-1 upgraded v1.12.11 -> v1.13.9,
   * wrkr-1 rolled back (still v1.12.11); wrkr-2 was not selected and its Kubernetes not read.
   */
  function leftMixed(): Report {
    const day2 = (state: 'upgraded' | 'rolled back'): NodeResult['day2'] => ({
      state,
      from: { talos: 'v1.12.11' },
      to: { talos: 'v1.13.9', image: 'ghcr.io/siderolabs/installer:v1.13.9' },
    })
    const wrkr1: NodeResult = {
      ...n('wrkr-1', 2000, 2000),
      role: 'worker',
      status: 'failed',
      day2: day2('rolled back'),
      error: { kind: 'rolled-back', message: 'wrkr-1 rebooted but runs v1.12.11', hint: 'task upgrade:talos NODES=wrkr-1' },
    }
    return {
      version: 1,
      command: 'upgrade-talos',
      ok: false,
      startedAt: '2026-11-28T00:00:00.000Z',
      finishedAt: '2026-11-28T00:00:04.000Z',
      settings: {},
      phases: [
        {
          name: 'upgrade-talos',
          ok: false,
          durationMs: 4000,
          nodes: [{ ...n('cp-1', 0, 2000), day2: day2('upgraded') }, wrkr1],
          steps: [],
        },
      ],
      versions: {
        talos: { 'v1.13.9': ['cp-1'], 'v1.12.11': ['wrkr-1', 'wrkr-2'] },
        kubernetes: { 'v1.35.0': ['cp-1', 'wrkr-1'], unknown: ['wrkr-2'] },
        schematics: { none: ['cp-1', 'wrkr-1', 'wrkr-2'] },
        mixed: true,
      },
    }
  }

  it('gives each node its versions (Talos before -> after, Kubernetes when read) beside its result, and the mixed line under the picture', () => {
    const report = leftMixed()
    const t = buildTimeline(report)
    expect(t.lanes.map((l) => [l.name, l.versions])).toEqual([
      ['cp-1', 'Talos v1.12.11 -> v1.13.9, Kubernetes v1.35.0'],
      ['wrkr-1', 'Talos v1.12.11, Kubernetes v1.35.0'],
    ])
    const text = renderText(t, { width: 40, colour: false })
    const lines = text.split('\n')
    // the result column padded to its widest, the versions after it, a VERSIONS header over them
    const at = (name: string): string => lines.find((l) => l.startsWith(`${name} `)) ?? ''
    expect(at('cp-1')).toMatch(/^cp-1 +u{20} {23}ok {38}Talos v1\.12\.11 -> v1\.13\.9, Kubernetes v1\.35\.0$/)
    expect(at('wrkr-1')).toMatch(/ {3}FAILED in upgrade-talos \(rolled-back\) {3}Talos v1\.12\.11, Kubernetes v1\.35\.0$/)
    const ruler = lines[1] ?? ''
    expect(ruler.indexOf('VERSIONS')).toBe(at('cp-1').indexOf('Talos'))
    expect(ruler).toMatch(/ {3}RESULT {34}VERSIONS$/)
    // the summary's own line, the whole cluster's (wrkr-2 too), last
    expect(lines.at(-1)).toBe(versionsLine(report.versions!))
    expect(lines.at(-1)).toBe('cluster left at mixed versions: Talos v1.13.9 (cp-1), v1.12.11 (wrkr-1, wrkr-2)')
    // the bars keep their room: the versions column is counted off the terminal's width
    expect(barWidth(t, 150)).toBe(150 - 8 - (37 + 3) - (45 + 3))

    const svg = renderSvg(t, 'upgrade-talos run')
    expect(svg).toMatch(
      /<g class="lane" data-node="cp-1" data-result="ok" data-versions="Talos v1\.12\.11 -&gt; v1\.13\.9, Kubernetes v1\.35\.0">/,
    )
    expect(svg).toMatch(/<text class="versions"[^>]*>Talos v1\.12\.11 -&gt; v1\.13\.9, Kubernetes v1\.35\.0<\/text>/)
    expect(svg).toContain('<text class="versions-line"')
    expect(svg).toMatch(/>cluster left at mixed versions: Talos v1\.13\.9 \(cp-1\), v1\.12\.11 \(wrkr-1, wrkr-2\)<\/text>/)
  })

  it('says nothing of versions for a report without them, and no mixed line for a cluster left at one version', () => {
    const report = leftMixed()
    report.versions = {
      talos: { 'v1.13.9': ['cp-1', 'wrkr-1'] },
      kubernetes: { 'v1.35.0': ['cp-1', 'wrkr-1'] },
      schematics: { none: ['cp-1', 'wrkr-1'] },
      mixed: false,
    }
    const one = renderText(buildTimeline(report), { width: 40, colour: false })
    expect(one).toMatch(/^cp-1 .*Talos v1\.12\.11 -> v1\.13\.9, Kubernetes v1\.35\.0$/m)
    expect(one).not.toContain('mixed')
    expect(one.split('\n').at(-1)).toMatch(/X failed$/)
    delete report.versions
    const none = buildTimeline(report)
    expect(none.lanes.map((l) => l.versions)).toEqual([undefined, undefined])
    const text = renderText(none, { width: 40, colour: false })
    expect(text).not.toMatch(/VERSIONS|Talos v/)
    expect(text).toMatch(/^cp-1 +u{20} +ok$/m)
    expect(renderSvg(none, 'run')).not.toMatch(/data-versions|class="versions/)
  })
})

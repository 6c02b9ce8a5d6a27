// docs/day2-design.md 2.6 and 2.8 end to end, on one simulated cluster of one control plane and one
// worker (real talosctl v1.12.11, kubectl and task): the readiness gates and GATE_COMMAND before the
// first node of upgrade:talos, the etcd snapshot before the only control plane goes down
// (--accept-downtime), the report's `versions` and the summary's line at the end of the day-2
// commands, `task status` with its TALOS and K8S columns and the mixed line, and the timeline's
// letter, versions per node and mixed line. The cases run in order on the same shared(). Range 127.249.1.0/24.
// vitest sets MODE=test, which cluster:apply would take as its MODE
delete process.env.MODE

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { nodeIn, sharedCluster } from './harness.js'
import { fastWith } from '../faults/helpers.js'

const R = '127.249.1'
const CASE_TIMEOUT = 300_000
const TARGET = 'v1.13.9'
/** faults/helpers.ts's waits, with room for a loaded machine: the cases wait for no timeout to run out but the gate command's */
const SLOW_OK = fastWith('--ready-timeout', '60s', fastWith('--call-timeout', '20s'))
const FLAGS = [...SLOW_OK, '--upgrade-timeout', '2m', '--gate-timeout', '3s', '--gate-interval', '500ms']

describe('day 2: the gate before the first node, the snapshot, the versions in the report and the status', () => {
  const shared = sharedCluster(R, { cps: 1, workers: 1, image: 'disk', speed: 60, kube: 'model' }, SLOW_OK)
  const step = (name: string): { status: string; error?: { kind: string; message: string } } | undefined =>
    shared()
      .report()
      .phases.find((p) => p.name === 'upgrade-talos')
      ?.steps.find((s) => s.name === name)
  const upgradeCalls = (from: number): Array<{ node: string | null; time: string }> =>
    shared()
      .calls()
      .slice(from)
      .filter((c) => c.call === 'upgrade')

  it(
    'a gate command failing before the first node touches nothing; the report still says which versions run',
    async () => {
      const marks = join(shared().dir, 'marks-before')
      const from = shared().calls().length
      const r = await shared().task(
        'upgrade:talos',
        { TALOS_VERSION: TARGET, GATE_COMMAND: `echo "[$NODE]" >> ${marks}; [ -n "$NODE" ] || { echo "volumes degraded"; exit 4; }` },
        [...FLAGS, '--accept-downtime'],
      )
      expect(r.code, r.stdout + r.stderr).toBe(1)
      expect(upgradeCalls(from)).toEqual([])
      // it ran with NODE empty, and only there
      expect(new Set(readFileSync(marks, 'utf8').trim().split('\n'))).toEqual(new Set(['[]']))
      const gate = step('before-first-node')
      expect(gate?.status).toBe('failed')
      expect(gate?.error?.kind).toBe('gate-command')
      expect(gate?.error?.message).toMatch(
        /^the gate command before the first node \(nothing was touched\) did not pass within \d+s .*volumes degraded/,
      )
      // no node was cordoned
      for (const name of ['cp-1', 'wrkr-1']) {
        const node = JSON.parse((await shared().kubectl(['get', 'node', name, '-o', 'json'])).stdout) as {
          spec?: { unschedulable?: boolean }
        }
        expect(node.spec?.unschedulable).toBeFalsy()
      }
      const versions = shared().report().versions
      expect(versions?.talos).toEqual({ 'v1.12.11': ['cp-1', 'wrkr-1'] })
      expect(versions?.kubernetes).toEqual({ 'v1.35.0': ['cp-1', 'wrkr-1'] })
      expect(
        Object.values(versions?.schematics ?? {})
          .flat()
          .sort(),
      ).toEqual(['cp-1', 'wrkr-1'])
      expect(versions?.mixed).toBe(false)
      expect(r.stdout).toContain('cluster at Talos v1.12.11 (cp-1, wrkr-1), Kubernetes v1.35.0 (cp-1, wrkr-1)')
      for (const name of ['cp-1', 'wrkr-1'])
        expect(nodeIn(shared().report(), 'upgrade-talos', name).day2).toMatchObject({
          state: 'not started',
          from: { talos: 'v1.12.11' },
          to: { talos: TARGET, image: `ghcr.io/siderolabs/installer:${TARGET}` },
        })
    },
    CASE_TIMEOUT,
  )

  it(
    'the only control plane with --accept-downtime: the gate before it and after it, an etcd snapshot in the state directory, a cluster left at mixed versions',
    async () => {
      const marks = join(shared().dir, 'marks-run')
      const from = shared().calls().length
      const r = await shared().task(
        'upgrade:talos',
        { TALOS_VERSION: TARGET, NODES: 'cp-1', GATE_COMMAND: `echo "\${NODE:-before} $(date +%s%3N)" >> ${marks}` },
        [...FLAGS, '--accept-downtime'],
      )
      expect(r.code, r.stdout + r.stderr).toBe(0)
      const sent = upgradeCalls(from)
      expect(sent.map((c) => c.node)).toEqual(['cp-1'])
      const sentAt = Date.parse(sent[0]!.time)
      // one mark before the Upgrade call, one after the node was back
      const lines = readFileSync(marks, 'utf8').trim().split('\n')
      expect(lines.map((l) => l.split(' ')[0])).toEqual(['before', 'cp-1'])
      expect(Number(lines[0]!.split(' ')[1])).toBeLessThan(sentAt)
      expect(Number(lines[1]!.split(' ')[1])).toBeGreaterThan(sentAt)
      expect(step('before-first-node')?.status).toBe('ok')

      const cp = shared()
        .report()
        .phases.find((p) => p.name === 'upgrade-talos')
        ?.nodes.find((n) => n.name === 'cp-1')
      expect(cp?.detail).toMatch(
        /^upgraded v1\.12\.11 -> v1\.13\.9; gate: 1\/1 members healthy.*; gate command passed; etcd snapshot: \S+\.db$/,
      )
      const file = /etcd snapshot: (\S+\.db)$/.exec(cp?.detail ?? '')?.[1] ?? ''
      const dir = join(shared().clusterDir, '.bootstrap', 'snapshots')
      expect(file.startsWith(`${dir}/`)).toBe(true)
      expect(existsSync(file)).toBe(true)
      expect(statSync(file).size).toBeGreaterThan(0)
      // talosctl renamed its .part into place (it checked the sha256): nothing else left there
      expect(readdirSync(dir)).toEqual([file.slice(dir.length + 1)])
      // a bbolt file: its first meta page carries bbolt's magic 0xED0CDAED after the page header
      expect(readFileSync(file).readUInt32LE(16)).toBe(0xed0cdaed)

      expect(cp?.day2).toEqual({
        state: 'upgraded',
        from: { talos: 'v1.12.11' },
        to: { talos: TARGET, image: `ghcr.io/siderolabs/installer:${TARGET}` },
        snapshot: file,
      })
      const versions = shared().report().versions
      expect(versions?.talos).toEqual({ 'v1.13.9': ['cp-1'], 'v1.12.11': ['wrkr-1'] })
      expect(versions?.mixed).toBe(true)
      expect(r.stdout).toContain('cluster left at mixed versions: Talos v1.13.9 (cp-1), v1.12.11 (wrkr-1)')
    },
    CASE_TIMEOUT,
  )

  it(
    'cluster:apply ends with the versions too; task status shows TALOS and K8S per node and the mixed line; the timeline draws u',
    async () => {
      const apply = await shared().task('cluster:apply', {}, SLOW_OK)
      expect(apply.code, apply.stdout + apply.stderr).toBe(0)
      expect(shared().report().command).toBe('cluster-apply')
      expect(shared().report().versions?.talos).toEqual({ 'v1.13.9': ['cp-1'], 'v1.12.11': ['wrkr-1'] })
      expect(apply.stdout).toContain('cluster left at mixed versions: Talos v1.13.9 (cp-1), v1.12.11 (wrkr-1)')

      const status = await shared().task('status')
      expect(status.code, status.stdout + status.stderr).toBe(0)
      const lines = status.stdout.split('\n')
      const header = lines.findIndex((l) => l.startsWith('NODE '))
      const columns = lines[header]?.split(/\s{3,}/) ?? []
      expect(columns.slice(0, 4)).toEqual(['NODE', 'IP', 'ROLE', 'TALOS'])
      const cell = (row: string, column: string): string | undefined => row.split(/\s{3,}/)[columns.indexOf(column)]
      const rows = new Map(lines.slice(header + 1, header + 3).map((l) => [l.split(/\s{3,}/)[0], l]))
      expect(cell(rows.get('cp-1') ?? '', 'TALOS')).toBe('v1.13.9')
      expect(cell(rows.get('wrkr-1') ?? '', 'TALOS')).toBe('v1.12.11')
      for (const name of ['cp-1', 'wrkr-1']) {
        expect(cell(rows.get(name) ?? '', 'K8S')).toBe('v1.35.0')
        expect(cell(rows.get(name) ?? '', 'K8S NODE')).toBe('Ready')
      }
      expect(status.stdout).toMatch(/^cluster at mixed versions: Talos v1\.13\.9 \(cp-1\), v1\.12\.11 \(wrkr-1\)$/m)

      // the upgrade run drawn: its phase as u, named in the legend; cp-1's versions beside its result, the mixed line under the picture
      const runs = readdirSync(join(shared().clusterDir, '.bootstrap', 'runs'))
        .filter((f) => f.endsWith('-upgrade-talos.json'))
        .sort()
      const picture = await shared().task('bootstrap:report', { RUN: join(shared().clusterDir, '.bootstrap', 'runs', runs.at(-1) ?? '') })
      expect(picture.code, picture.stdout + picture.stderr).toBe(0)
      expect(picture.stdout).toMatch(/^cp-1 +p+[ .]*u+ +ok +Talos v1\.12\.11 -> v1\.13\.9, Kubernetes v1\.35\.0$/m)
      expect(picture.stdout).toContain('u upgrade-talos')
      expect(picture.stdout).toMatch(/^cluster left at mixed versions: Talos v1\.13\.9 \(cp-1\), v1\.12\.11 \(wrkr-1\)$/m)
    },
    CASE_TIMEOUT,
  )
})

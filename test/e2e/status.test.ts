// Issue item 3: `task bootstrap:status`, one live table of every node, against the simulator.
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { CLUSTER_CASE_TIMEOUT, E2eCluster, ROOT } from './harness.js'

let cluster: E2eCluster | undefined
afterEach(async () => {
  await cluster?.stop()
  cluster = undefined
})

const COLUMNS = [
  'NODE',
  'IP',
  'ROLE',
  'TALOS',
  'STAGE',
  'READY',
  'ETCD',
  'KUBELET',
  'K8S',
  'K8S NODE',
  'LAST RUN',
  'ERROR',
  'NOTE',
] as const
type Row = Record<(typeof COLUMNS)[number], string>

/** The status table by node name (cells are at least three spaces apart, as lib/cli/table.ts writes them). */
function table(stdout: string): Record<string, Row> {
  const lines = stdout.split('\n')
  const start = lines.findIndex((l) => l.startsWith('NODE '))
  if (start < 0) throw new Error(`no table in:\n${stdout}`)
  expect(lines[start]?.split(/\s{3,}/)).toEqual([...COLUMNS])
  const rows: Record<string, Row> = {}
  for (const line of lines.slice(start + 1)) {
    if (!line.trim() || line.startsWith('last run:')) break
    const cells = line.split(/\s{3,}/)
    const row = Object.fromEntries(COLUMNS.map((c, i) => [c, cells[i] ?? ''])) as Row
    rows[row.NODE] = row
  }
  return rows
}

describe('task bootstrap:status', () => {
  it('after a run with one failed node: the table matches the simulator, exit 1', { timeout: CLUSTER_CASE_TIMEOUT }, async () => {
    cluster = await E2eCluster.start('127.80.1', { cps: 1, workers: 2, faults: [{ node: 'wrkr-2', on: 'any', kind: 'unreachable' }] })
    const run = await cluster.task('bootstrap:talos', {}, ['--retries', '1'])
    expect(run.code).toBe(1)

    const before = cluster.calls().length
    const started = performance.now()
    const status = await cluster.task('bootstrap:status')
    const tookMs = performance.now() - started
    expect(status.code).toBe(1)
    const rows = table(status.stdout)
    expect(Object.keys(rows)).toEqual(['cp-1', 'wrkr-1', 'wrkr-2'])
    for (const name of ['cp-1', 'wrkr-1']) {
      const sim = cluster.sim.node(name)
      if (!sim) throw new Error(name)
      expect(rows[name]).toMatchObject({
        STAGE: sim.stage,
        READY: sim.ready ? 'yes' : 'no',
        ETCD: sim.role === 'controlplane' ? (sim.etcdMember ? 'member' : 'no') : '-',
        KUBELET: sim.services.kubelet === 'Running' ? 'running' : 'not running',
        TALOS: 'v1.12.11',
        K8S: 'v1.35.0',
        'K8S NODE': sim.registered ? 'Ready' : 'not registered',
        'LAST RUN': 'ok',
        ERROR: '-',
      })
      expect(rows[name]?.STAGE).toBe('running')
    }
    expect(cluster.sim.node('wrkr-2')?.listener).toBe('off')
    expect(cluster.sim.node('wrkr-2')?.registered).toBe(false)
    expect(rows['wrkr-2']).toMatchObject({
      STAGE: 'unreachable',
      READY: '-',
      ETCD: '-',
      KUBELET: '-',
      TALOS: '-',
      K8S: '-',
      'K8S NODE': 'not registered',
      'LAST RUN': 'failed in preflight',
      ERROR: 'unreachable',
      NOTE: 'connection refused',
    })
    expect(status.stdout).toMatch(/^last run: talos of \S+: failed: wrkr-2$/m)
    // read-only and batched: one MachineStatus read and one kubelet read for every node that
    // answers (through cp-1, listed first), one etcd member list; wrkr-2 alone is asked on its own
    const calls = cluster.calls().slice(before)
    expect(calls.filter((c) => !['get', 'etcd', 'probe', 'version'].includes(c.call))).toEqual([])
    // the real talosctl reads a batch as one COSI call per node through the endpoint (its
    // helpers/resources.go ForEachResource), after its own version check and type resolution (`purpose`)
    const invocations = [...new Set(calls.filter((c) => c.node !== 'wrkr-2' && !c.purpose).map((c) => `${c.command} ${c.args.join(' ')}`))]
    expect(invocations.sort()).toEqual([
      'etcd members -e 127.80.1.11 -n 127.80.1.11',
      'get machinestatuses -e 127.80.1.11 -n 127.80.1.11',
      'get machinestatuses -e 127.80.1.11 -n 127.80.1.21',
      'get services kubelet -e 127.80.1.11 -n 127.80.1.11',
      'get services kubelet -e 127.80.1.11 -n 127.80.1.21',
    ])
    // (the TALOS column's one batched `talosctl version` is among the Version calls the simulator
    // marks `version-check`: it cannot tell them from talosctl's own check before a `get`)
    // the status deadline (3 s per call), not the 30 s callTimeout: a wait for that would pass 30 s
    expect(tookMs).toBeLessThan(30_000)

    // the same run as a picture: wrkr-2 retried, then failed; the SVG beside the run's report
    const picture = await cluster.task('bootstrap:report')
    expect(picture.code).toBe(0)
    expect(picture.stdout).toMatch(/^talos run of \S+: failed in [\d.]+m?s; failed: wrkr-2$/m)
    expect(picture.stdout).toMatch(/^wrkr-2 +p*!p*X +FAILED in preflight \(unreachable\)$/m)
    expect(picture.stdout).toMatch(/^cp-1 +p+ *a+ *v+ *b+ *w+ +ok$/m) // gaps: waiting on other nodes or cluster steps
    const svgFile = /^svg: (.*)$/m.exec(picture.stdout)?.[1] ?? ''
    const report = cluster.report()
    expect(svgFile).toBe(join(cluster.clusterDir, '.bootstrap', 'runs', `${report.startedAt.replace(/[:.]/g, '-')}-talos.svg`))
    const svg = readFileSync(svgFile, 'utf8')
    expect(svg).toMatch(/<g class="lane failed" data-node="wrkr-2"/)
    expect(svg).toContain('class="retry"')
  })

  it('after a clean bootstrap:talos: every row running and Ready, exit 0', { timeout: CLUSTER_CASE_TIMEOUT }, async () => {
    cluster = await E2eCluster.start('127.80.2', { cps: 1, workers: 1 })
    const run = await cluster.task('bootstrap:talos')
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0)
    const status = await cluster.task('bootstrap:status')
    expect(status.stderr).toBe('')
    expect(status.code).toBe(0)
    const rows = table(status.stdout)
    expect(
      Object.values(rows).map((r) => [r.NODE, r.TALOS, r.STAGE, r.READY, r.ETCD, r.KUBELET, r.K8S, r['K8S NODE'], r['LAST RUN']]),
    ).toEqual([
      ['cp-1', 'v1.12.11', 'running', 'yes', 'member', 'running', 'v1.35.0', 'Ready', 'ok'],
      ['wrkr-1', 'v1.12.11', 'running', 'yes', '-', 'running', 'v1.35.0', 'Ready', 'ok'],
    ])
    // one version everywhere: no mixed-versions line
    expect(status.stdout).not.toContain('mixed versions')
    // NODES selects rows
    const one = await cluster.task('bootstrap:status', { NODES: 'wrkr-1' })
    expect(one.code).toBe(0)
    expect(Object.keys(table(one.stdout))).toEqual(['wrkr-1'])
  })

  it('shows unreachable and hung nodes as such within seconds; --watch repeats until Ctrl-C', async () => {
    cluster = await E2eCluster.start('127.80.3', {
      cps: 1,
      workers: 2,
      faults: [
        { node: 'wrkr-1', on: 'any', kind: 'unreachable' },
        { node: 'wrkr-2', on: 'any', kind: 'timeout' },
      ],
    })
    const started = performance.now()
    const status = await cluster.task('bootstrap:status')
    const tookMs = performance.now() - started
    expect(status.code).toBe(1)
    const rows = table(status.stdout)
    expect(rows['cp-1']).toMatchObject({
      TALOS: '-',
      STAGE: 'maintenance',
      READY: '-',
      ETCD: '?',
      K8S: '-',
      'K8S NODE': '-',
      'LAST RUN': '-',
    })
    expect(rows['wrkr-1']).toMatchObject({ STAGE: 'unreachable', NOTE: 'connection refused' })
    expect(rows['wrkr-2']).toMatchObject({ STAGE: 'timeout', NOTE: 'no answer within 3s' })
    // a 3 s deadline per call, not the 30 s callTimeout (nor talosctl's own, which has none)
    expect(tookMs).toBeLessThan(30_000)
    expect(status.stdout).not.toMatch(/^last run:/m)

    // --watch in a pipe: one table after the other, until interrupted
    const child = spawn(
      'node',
      [
        '--import',
        'tsx/esm',
        'scripts/status.ts',
        '--cluster-dir',
        cluster.clusterDir,
        '--nodes',
        'cp-1,wrkr-1',
        '--watch',
        '--poll-interval',
        '200ms',
      ],
      {
        cwd: ROOT,
        env: cluster.env(),
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    )
    let out = ''
    let interrupted = false
    const code = await new Promise<number | null>((done) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString()
        // one Ctrl-C (a second one, after the first table's handler is gone, kills outright)
        if (!interrupted && (out.match(/^NODE /gm) ?? []).length === 2) {
          interrupted = true
          child.kill('SIGINT')
        }
      })
      child.on('close', (c) => done(c))
    })
    expect(code).toBe(1) // the last table's verdict: not every node running and Ready
    expect(out).toMatch(/^\S+Z {2}e2e: 0\/2 running and Ready \(every 0\.2s; Ctrl-C stops\)$/m)
    expect(Object.keys(table(out))).toEqual(['cp-1', 'wrkr-1'])
  })
})

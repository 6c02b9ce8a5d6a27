// `npm run bench`: bootstrap time against the critical path, from 3 to 300 nodes (issue 7), and a
// rolling Talos upgrade of 3 control planes and 30 workers against its own (issue 31, bench/upgrade.ts).
// Each case: a fresh simulator in its own process, `task -x bootstrap:talos` (or, after an unmeasured
// bootstrap, `task -x upgrade:talos`) against it, measured (measure.ts); then the seed's sequential
// approach at 6 nodes as the baseline (baseline.ts).
// Writes bench/results.json (a partial run with --cases writes bench/out/results.json instead).
//   npm run bench                         every case (about 20 minutes on 2 cores)
//   npm run bench -- --cases 6x4,6x16 --no-baseline
//   npm run bench -- --cases upgrade      the upgrade's cases only (upgrade-33x5, upgrade-33x10; no baseline)
//   npm run bench -- --cases 300x16 --no-baseline --merge --out bench/results.json   (re-measure one case)
//   --deadline-x N: interrupt a case at N times its critical path (default 8)
import { execFileSync } from 'node:child_process'
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { parse } from 'yaml'
import type { CallRecord } from '../sim/index.js'
import {
  commandLog,
  criticalPathS,
  invocations,
  statusReadsByNode,
  type Invocation,
  measured,
  ROOT,
  simCalls,
  startSim,
  stopSim,
  type RunMeasure,
  type SimHandle,
} from './measure.js'
import { benchScenario, speedFor } from './scenario.js'
import {
  breakdown,
  nodeSpans,
  parseCommandLog,
  UPGRADE_CASES,
  UPGRADE_TO,
  upgradeCalls,
  upgradeCriticalPathS,
  upgradeScenario,
  type UpgradeCase,
} from './upgrade.js'

interface CaseSpec {
  nodes: number
  concurrency: number
  criticalPathS: number
  octet: number
}

const SMALL = [3, 6, 30].flatMap((nodes) => [1, 4, 16].map((concurrency) => ({ nodes, concurrency, criticalPathS: 20 })))
const LARGE = [100, 300].map((nodes) => ({ nodes, concurrency: 16, criticalPathS: 120 }))
const ALL: CaseSpec[] = [...SMALL, ...LARGE].map((c, i) => ({ ...c, octet: 100 + i }))
const BASELINE: CaseSpec = { nodes: 6, concurrency: 1, criticalPathS: 20, octet: 100 + ALL.length }

const { values } = parseArgs({
  options: {
    cases: { type: 'string' },
    'no-baseline': { type: 'boolean' },
    out: { type: 'string' },
    merge: { type: 'boolean' },
    'deadline-x': { type: 'string', default: '8' },
  },
})
/** a case still running at this many times its critical path is interrupted (Ctrl-C) and recorded as such */
const DEADLINE_X = Number(values['deadline-x'])
if (!(DEADLINE_X > 0)) throw new Error(`--deadline-x: "${values['deadline-x']}" must be a number > 0`)
const names = values.cases?.split(',') ?? []
const upgradeNames = names.filter((c) => c.startsWith('upgrade'))
const selected = values.cases
  ? names
      .filter((c) => !c.startsWith('upgrade'))
      .map((c) => {
        const [n, k] = c.split('x').map(Number)
        const found = ALL.find((a) => a.nodes === n && a.concurrency === k)
        if (!found)
          throw new Error(
            `--cases: no case ${c} (cases: ${[...ALL.map((a) => `${a.nodes}x${a.concurrency}`), 'upgrade', ...UPGRADE_CASES.map((u) => u.name)].join(',')})`,
          )
        return found
      })
  : ALL
/** `upgrade` names every upgrade case */
const selectedUpgrades: UpgradeCase[] = values.cases
  ? upgradeNames.flatMap((c) => {
      if (c === 'upgrade') return UPGRADE_CASES
      const found = UPGRADE_CASES.find((u) => u.name === c)
      if (!found) throw new Error(`--cases: no case ${c} (upgrade cases: upgrade, ${UPGRADE_CASES.map((u) => u.name).join(', ')})`)
      return [found]
    })
  : UPGRADE_CASES
const outFile = values.out ?? (values.cases ? join(ROOT, 'bench', 'out', 'results.json') : join(ROOT, 'bench', 'results.json'))
const work = join(ROOT, 'bench', 'out')
mkdirSync(work, { recursive: true })

const round = (x: number, d = 2): number => Math.round(x * 10 ** d) / 10 ** d
const ms = (d: string): number => {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(d)
  if (!m) throw new Error(`not a duration: ${d}`)
  return Number(m[1]) * { ms: 1, s: 1000, m: 60000 }[m[2] as 'ms' | 's' | 'm']
}

/** the product as measured: the commit, and whether lib/, scripts/ or the Taskfile had uncommitted changes */
function productVersion(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim()
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'lib', 'scripts', 'Taskfile.yaml'], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim()
    return dirty ? `${head}+uncommitted` : head
  } catch {
    return 'unknown'
  }
}

// CPU incl. tools comes from GNU time's rusage of the whole process tree (measure.ts)
if (!existsSync('/usr/bin/time')) {
  process.stderr.write('npm run bench needs GNU time at /usr/bin/time (Debian/Ubuntu: apt-get install time)\n')
  process.exit(2)
}

/** a compiled program (the real clients are Go binaries; a script answering to the name is not one) */
function isElf(path: string): boolean {
  const fd = openSync(path, 'r')
  try {
    const head = Buffer.alloc(4)
    readSync(fd, head, 0, 4, 0)
    return head.toString('latin1') === '\x7fELF'
  } finally {
    closeSync(fd)
  }
}

/**
 * The real talosctl and helm `task tools` put in .tools/bin (the simulator's env puts them first on
 * PATH): without them the bench would time whatever else answers to those names, so it stops.
 */
function realClients(): { talosctl: string; helm: string } {
  const version = (tool: string, args: string[], pattern: RegExp): string | undefined => {
    const bin = join(ROOT, '.tools', 'bin', tool)
    if (!existsSync(bin) || !isElf(bin)) return undefined
    try {
      return pattern.exec(execFileSync(bin, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }))?.[1]
    } catch {
      return undefined
    }
  }
  const talosctl = version('talosctl', ['version', '--client'], /Tag:\s+(v1\.12\.\S+)/)
  const helm = version('helm', ['version', '--short'], /^(v[34]\.[^+\s]+)/)
  if (!talosctl || !helm) {
    process.stderr.write(
      `npm run bench measures the real talosctl (v1.12) and helm (v3 or v4) in .tools/bin; missing: ${[talosctl ? '' : 'talosctl', helm ? '' : 'helm'].filter(Boolean).join(', ')} (fix: run \`task tools\` first)\n`,
    )
    process.exit(3)
  }
  return { talosctl, helm }
}

const machine = {
  cpu: os.cpus()[0]?.model ?? 'unknown',
  cores: os.cpus().length,
  memGB: round(os.totalmem() / 2 ** 30, 1),
  os: `${os.type()} ${os.release()}`,
  node: process.version,
  ...realClients(),
}

function perNode(calls: CallRecord[], nodes: number): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const c of calls) counts[c.call] = (counts[c.call] ?? 0) + 1
  return Object.fromEntries(
    Object.entries(counts)
      .sort()
      .map(([k, n]) => [k, round(n / nodes)]),
  )
}

/** status reads per node per poll interval over the run's waiting phases: the busiest node, and the mean */
function statusRate(log: Invocation[], waitS: number, pollS: number, nodes: number): { max: number; mean: number } {
  const intervals = waitS / pollS
  const counts = [...statusReadsByNode(log).values()]
  return { max: round(Math.max(0, ...counts) / intervals), mean: round(counts.reduce((a, b) => a + b, 0) / nodes / intervals) }
}

function phaseSeconds(clusterDir: string): Record<string, number> {
  try {
    const report = JSON.parse(readFileSync(join(clusterDir, '.bootstrap', 'last-run.json'), 'utf8')) as {
      phases: { name: string; durationMs: number }[]
    }
    return Object.fromEntries(report.phases.map((p) => [p.name, round(p.durationMs / 1000, 1)]))
  } catch {
    return {}
  }
}

let live: SimHandle | undefined
process.on('SIGINT', () => {
  if (live) stopSim(live)
  process.exit(130)
})

function start(spec: CaseSpec, name: string): SimHandle {
  live = startSim(benchScenario(spec.octet, spec.nodes, spec.criticalPathS), join(work, name))
  return live
}

function stop(sim: SimHandle): void {
  stopSim(sim)
  live = undefined
}

function cpuFigures(m: RunMeasure) {
  return {
    cpuS: round(m.cpuS),
    cpuAllS: round(m.cpuAllS),
    toolCpuS: round(m.cpuAllS - m.cpuS),
    peakRssMB: round(m.peakRssMB, 1),
    simCpuS: round(m.simCpuS),
  }
}

const header = `${'nodes'.padStart(5)} ${'conc'.padStart(4)} ${'wall s'.padStart(7)} ${'crit s'.padStart(7)} ${'ratio'.padStart(6)} ${'cpu s'.padStart(6)} ${'all s'.padStart(6)} ${'rss MB'.padStart(7)} ${'sim s'.padStart(6)} ${'load'.padStart(9)}  status/node/interval  calls per node`
process.stdout.write(
  `bench on ${machine.cpu} x${machine.cores}, ${machine.memGB} GB, ${machine.os}, node ${machine.node}, talosctl ${machine.talosctl}, helm ${machine.helm}\n${header}\n`,
)

// --merge: keep the cases (and baseline) of an earlier run that this one does not measure again
const earlier =
  values.merge && existsSync(outFile)
    ? (JSON.parse(readFileSync(outFile, 'utf8')) as {
        cases: Record<string, unknown>[]
        upgrade?: Record<string, unknown>[]
        baseline?: Record<string, unknown>
      })
    : undefined
const key = (c: Record<string, unknown>): string => `${String(c.nodes)}x${String(c.concurrency)}`
const rerun = new Set(selected.map((c) => `${c.nodes}x${c.concurrency}`))
const cases: Record<string, unknown>[] = []
const upgrades: Record<string, unknown>[] = []
const rerunUpgrades = new Set(selectedUpgrades.map((u) => u.name))
let baseline: Record<string, unknown> | undefined = values['no-baseline'] ? earlier?.baseline : undefined
const save = (): void => {
  const all = [...(earlier?.cases ?? []).filter((c) => !rerun.has(key(c))), ...cases]
  const order = ALL.map((a) => `${a.nodes}x${a.concurrency}`)
  all.sort((a, b) => order.indexOf(key(a)) - order.indexOf(key(b)))
  // the speed-up is always against the 6-node CONCURRENCY 16 case in the file
  const against = all.find((c) => key(c) === '6x16')
  if (baseline && against)
    Object.assign(baseline, { speedup: round(Number(baseline.wallS) / Number(against.wallS)), speedupAgainst: '6 nodes, CONCURRENCY 16' })
  const upgrade = [...(earlier?.upgrade ?? []).filter((u) => !rerunUpgrades.has(String(u.name))), ...upgrades]
  upgrade.sort((a, b) => UPGRADE_CASES.findIndex((u) => u.name === a.name) - UPGRADE_CASES.findIndex((u) => u.name === b.name))
  writeFileSync(
    outFile,
    `${JSON.stringify({ machine, date: new Date().toISOString(), cases: all, ...(upgrade.length > 0 ? { upgrade } : {}), ...(baseline ? { baseline } : {}) }, null, 2)}\n`,
  )
}

for (const spec of selected) {
  const name = `case-${spec.nodes}x${spec.concurrency}`
  const sim = start(spec, name)
  try {
    // the scenario's path before the run; after it, with the control planes' joins as the run measured them
    const scenarioPathS = criticalPathS(sim)
    const load0 = round(os.loadavg()[0] ?? 0)
    const pollS = ms((parse(readFileSync(join(sim.clusterDir, 'bootstrap.yaml'), 'utf8')) as { pollInterval: string }).pollInterval) / 1000
    const m = await measured(
      sim,
      'task',
      ['-x', 'bootstrap:talos', `CLUSTER_DIR=${sim.clusterDir}`, `CONCURRENCY=${spec.concurrency}`],
      join(work, name),
      DEADLINE_X * scenarioPathS,
    )
    const crit = criticalPathS(sim)
    const calls = simCalls(sim)
    const log = commandLog(sim.clusterDir)
    const phasesS = phaseSeconds(sim.clusterDir)
    // the phases that poll node status: verify, bootstrap (etcd members), wait-ready (kubelet)
    // (an interrupted run may have no waiting phase in its report: then the whole run)
    const waitS = (phasesS.verify ?? 0) + (phasesS.bootstrap ?? 0) + (phasesS['wait-ready'] ?? 0) || m.wallS
    const rate = statusRate(log, waitS, pollS, spec.nodes)
    const row = {
      nodes: spec.nodes,
      concurrency: spec.concurrency,
      product: productVersion(),
      exitCode: m.code,
      ...(m.interrupted ? { interruptedAtS: round(DEADLINE_X * scenarioPathS) } : {}),
      speed: round(speedFor(spec.criticalPathS), 3),
      pollIntervalS: pollS,
      wallS: round(m.wallS),
      criticalPathS: crit,
      scenarioPathS,
      ratio: round(m.wallS / crit, 3),
      ...cpuFigures(m),
      callsPerNode: perNode(calls, spec.nodes),
      invocations: invocations(log),
      // task, tsx, settings, `talosctl version`, the summary and the report: none of it in a phase
      outsidePhasesS: round(m.wallS - Object.values(phasesS).reduce((a, b) => a + b, 0), 1),
      toolCpuPerInvocationMs: Math.round(((m.cpuAllS - m.cpuS) / Math.max(1, log.length)) * 1000),
      statusReadsPerNodePerInterval: rate,
      phasesS,
      loadAvg: { before: load0, after: round(os.loadavg()[0] ?? 0) },
    }
    cases.push(row)
    save()
    const kinds = Object.entries(row.callsPerNode)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')
    process.stdout.write(
      `${String(spec.nodes).padStart(5)} ${String(spec.concurrency).padStart(4)} ${row.wallS.toFixed(1).padStart(7)} ${crit.toFixed(1).padStart(7)} ${row.ratio.toFixed(2).padStart(6)} ${row.cpuS.toFixed(1).padStart(6)} ${row.cpuAllS.toFixed(1).padStart(6)} ${row.peakRssMB.toFixed(0).padStart(7)} ${row.simCpuS.toFixed(1).padStart(6)} ${`${load0.toFixed(1)}-${row.loadAvg.after.toFixed(1)}`.padStart(9)}  ${`${rate.max} max, ${rate.mean} mean`.padEnd(20)}  ${kinds}${m.code === 0 ? '' : `  EXIT ${m.code} (see bench/out/${name}/)`}\n`,
    )
  } finally {
    stop(sim)
  }
}

for (const spec of selectedUpgrades) {
  const scenario = upgradeScenario(spec.octet)
  const dir = join(work, `case-${spec.name}`)
  const sim = (live = startSim(scenario, dir))
  try {
    const crit = round(upgradeCriticalPathS(scenario, spec.concurrency))
    const task = (name: string, extra: string[]): string[] => ['-x', name, `CLUSTER_DIR=${sim.clusterDir}`, ...extra]
    // the cluster to upgrade, bootstrapped as fast as the product goes (not measured)
    const bootDir = join(dir, 'bootstrap')
    mkdirSync(bootDir, { recursive: true })
    const boot = await measured(sim, 'task', task('bootstrap:talos', ['CONCURRENCY=16']), bootDir)
    if (boot.code !== 0) throw new Error(`${spec.name}: the bootstrap before the upgrade failed (exit ${boot.code}): see ${bootDir}`)
    const logFile = join(sim.clusterDir, '.bootstrap', 'commands.log')
    const logFrom = readFileSync(logFile, 'utf8').length
    const callsFrom = simCalls(sim).length
    const load0 = round(os.loadavg()[0] ?? 0)
    const pollS = ms((parse(readFileSync(join(sim.clusterDir, 'bootstrap.yaml'), 'utf8')) as { pollInterval: string }).pollInterval) / 1000
    const m = await measured(
      sim,
      'task',
      task('upgrade:talos', [`TALOS_VERSION=${UPGRADE_TO}`, `CONCURRENCY=${spec.concurrency}`, 'GATE_COMMAND=true']),
      dir,
      DEADLINE_X * crit,
    )
    const calls = simCalls(sim).slice(callsFrom)
    const log = parseCommandLog(readFileSync(logFile, 'utf8').slice(logFrom))
    const spans = nodeSpans(
      log,
      (scenario.nodes ?? []).map((n) => ({ name: n.name, ip: n.ip, role: n.role === 'controlplane' ? 'controlplane' : 'worker' })),
    )
    let versions: unknown
    try {
      versions = (JSON.parse(readFileSync(join(sim.clusterDir, '.bootstrap', 'last-run.json'), 'utf8')) as { versions?: unknown }).versions
    } catch {
      versions = undefined
    }
    const row = {
      name: spec.name,
      nodes: scenario.nodes.length,
      concurrency: spec.concurrency,
      to: UPGRADE_TO,
      product: productVersion(),
      exitCode: m.code,
      ...(m.interrupted ? { interruptedAtS: round(DEADLINE_X * crit) } : {}),
      speed: scenario.speed,
      pollIntervalS: pollS,
      bootstrapWallS: round(boot.wallS),
      wallS: round(m.wallS),
      criticalPathS: crit,
      ratio: round(m.wallS / crit, 3),
      ...cpuFigures(m),
      callsPerNode: perNode(calls, scenario.nodes.length),
      invocations: invocations(log.map((c) => ({ tool: c.tool, args: c.args }))),
      upgradeOrder: upgradeCalls(calls),
      breakdown: breakdown(spans, log),
      versions,
      loadAvg: { before: load0, after: round(os.loadavg()[0] ?? 0) },
    }
    upgrades.push(row)
    save()
    process.stdout.write(
      `upgrade ${scenario.nodes.length} nodes CONCURRENCY ${spec.concurrency}: ${row.wallS.toFixed(1)} s against ${crit.toFixed(1)} s, ratio ${row.ratio.toFixed(2)}; cpu ${row.cpuS.toFixed(1)} s, all ${row.cpuAllS.toFixed(1)} s, sim ${row.simCpuS.toFixed(1)} s; load ${load0.toFixed(1)}-${row.loadAvg.after.toFixed(1)}${m.code === 0 ? '' : `  EXIT ${m.code} (see bench/out/case-${spec.name}/)`}\n`,
    )
    const b = row.breakdown
    process.stdout.write(
      [
        `  before the first node ${b.beforeFirstNodeS} s (validation, plan, gates); after the last ${b.afterLastNodeS} s (versions)`,
        ...b.controlPlanes.map(
          (c) =>
            `  ${c.node}: ${c.sinceLastS} s since the one before (quorum gate), ${c.beforeSendS} s before the send, upgrade call ${c.upgradeCallS} s, ${c.afterS} s after it`,
        ),
        `  workers: ${b.workers.wallS} s; per worker ${b.workers.beforeSendS} s before the send, upgrade call ${b.workers.upgradeCallS} s, ${b.workers.afterS} s after it (means)`,
      ].join('\n') + '\n',
    )
  } finally {
    stop(sim)
  }
}

if (!values['no-baseline'] && (!values.cases || selected.length > 0)) {
  const sim = start(BASELINE, 'baseline-6')
  try {
    const m = await measured(
      sim,
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'bench', 'baseline.ts'), '--cluster-dir', sim.clusterDir],
      join(work, 'baseline-6'),
    )
    if (m.code !== 0) throw new Error(`baseline failed (exit ${m.code}): ${m.stderr.slice(-2000)}`)
    const against = cases.find((c) => c.nodes === 6 && c.concurrency === 16) ?? cases.find((c) => c.nodes === 6)
    const wallS = round(m.wallS)
    baseline = {
      nodes: 6,
      product: productVersion(),
      wallS,
      criticalPathS: criticalPathS(sim),
      ...cpuFigures(m),
      callsPerNode: perNode(simCalls(sim), 6),
      ...(against
        ? { speedup: round(wallS / Number(against.wallS)), speedupAgainst: `6 nodes, CONCURRENCY ${String(against.concurrency)}` }
        : {}),
    }
    save()
    process.stdout.write(
      `baseline (seed: one node at a time), 6 nodes: ${wallS.toFixed(1)} s${against ? `; bootstrap:talos at CONCURRENCY ${String(against.concurrency)} is ${String(baseline.speedup)}x faster` : ''}\n`,
    )
  } finally {
    stop(sim)
  }
}
process.stdout.write(`results: ${outFile}\n`)

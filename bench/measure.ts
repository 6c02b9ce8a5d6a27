// One measured run: a simulator started as its own process (`node sim/cli.js up`), then a command
// (the real `task`, or the baseline script) run against it under GNU time. The figures are kept apart:
// the orchestrator's own process (rusage-hook.mjs), everything the command started (GNU time: the
// rusage of every descendant that was waited for), and the simulator's daemon (/proc, before/after).
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { delimiter, join, resolve } from 'node:path'
import { stringify } from 'yaml'
import type { CallRecord, ScenarioInput } from '../sim/index.js'
import { goBin } from '../test/support/go-bin.js'

export const ROOT = resolve(import.meta.dirname, '..')
const HOOK = join(ROOT, 'bench', 'rusage-hook.mjs')
const TICK = 100 // USER_HZ: /proc/<pid>/stat counts CPU in 1/100 s on Linux

export interface SimHandle {
  dir: string
  pid: number
  env: NodeJS.ProcessEnv
  clusterDir: string
}

const GO_BIN = goBin()

/** `export K='v'` lines of <dir>/env (the simulator's), PATH prepended to ours */
function readSimEnv(dir: string): Record<string, string> {
  const env: Record<string, string> = {}
  for (const line of readFileSync(join(dir, 'env'), 'utf8').split('\n')) {
    const m = /^export (\w+)=(.*)$/.exec(line)
    if (!m?.[1] || m[2] === undefined) continue
    const parts = [...m[2].matchAll(/'((?:[^']|'\\'')*)'|"\$(\w+)"|:/g)].map((p) =>
      p[1] !== undefined ? p[1].replace(/'\\''/g, "'") : p[2] ? (process.env[p[2]] ?? '') : ':',
    )
    env[m[1]] = parts.join('')
  }
  return env
}

export function startSim(scenario: ScenarioInput, dir: string): SimHandle {
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  const file = join(dir, 'scenario.yaml')
  writeFileSync(file, stringify(scenario, { lineWidth: 0, aliasDuplicateObjects: false }))
  const simDir = join(dir, 'sim')
  try {
    execFileSync(process.execPath, [join(ROOT, 'sim', 'cli.js'), 'up', '--scenario', file, '--dir', simDir], {
      stdio: ['ignore', 'ignore', 'inherit'],
    })
  } catch (err) {
    // a daemon that started but was not seen ready must not outlive the bench
    execFileSync(process.execPath, [join(ROOT, 'sim', 'cli.js'), 'down', '--dir', simDir], { stdio: 'ignore' })
    throw err
  }
  const pid = Number(readFileSync(join(simDir, 'sim.pid'), 'utf8').trim())
  const simEnv = readSimEnv(simDir)
  const { CI: _ci, NODES: _n, CONCURRENCY: _c, DRY_RUN: _d, NODE_OPTIONS: _o, ...base } = process.env
  const env = { ...base, ...simEnv, PATH: [simEnv.PATH ?? '', GO_BIN].join(delimiter), NO_COLOR: '1' }
  return { dir: simDir, pid, env, clusterDir: simEnv.CLUSTER_DIR ?? join(simDir, 'cluster') }
}

export function stopSim(sim: SimHandle): void {
  execFileSync(process.execPath, [join(ROOT, 'sim', 'cli.js'), 'down', '--dir', sim.dir], { stdio: 'ignore' })
}

export function criticalPathS(sim: SimHandle): number {
  return Number(
    execFileSync(process.execPath, [join(ROOT, 'sim', 'cli.js'), 'critical-path', '--dir', sim.dir], { encoding: 'utf8' }).trim(),
  )
}

/** CPU seconds and peak RSS (MB) of a live process, from /proc */
export function procUsage(pid: number): { cpuS: number; peakRssMB: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
  return { cpuS: (Number(f[11]) + Number(f[12])) / TICK, peakRssMB: Number(hwm ?? 0) / 1024 }
}

export interface RunMeasure {
  code: number | null
  /** stopped at the deadline */
  interrupted: boolean
  wallS: number
  /** the orchestrator's own node process */
  cpuS: number
  peakRssMB: number
  /** the command and every process it started (task, the orchestrator, talosctl/kubectl/helm) */
  cpuAllS: number
  /** the simulator daemon's CPU during the run (not part of either figure above) */
  simCpuS: number
  simPeakRssMB: number
  stdout: string
  stderr: string
}

/** runs `command args` against the simulator, measured; interrupted (SIGINT, as Ctrl-C) after deadlineS */
export async function measured(sim: SimHandle, command: string, args: string[], outDir: string, deadlineS = Infinity): Promise<RunMeasure> {
  const rusageFile = join(outDir, 'orchestrator-rusage.json')
  const timeFile = join(outDir, 'time.txt')
  rmSync(rusageFile, { force: true })
  const env = { ...sim.env, NODE_OPTIONS: `--import=${HOOK}`, BENCH_RUSAGE_OUT: rusageFile }
  let interrupted = false
  const simBefore = procUsage(sim.pid)
  const t0 = performance.now()
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((res, rej) => {
    // its own process group, so the deadline interrupts the whole tree as Ctrl-C would
    const child = spawn('/usr/bin/time', ['-f', '%e %U %S %M', '-o', timeFile, command, ...args], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    })
    const signal = (sig: NodeJS.Signals): void => {
      try {
        if (child.pid) process.kill(-child.pid, sig)
      } catch {
        /* already gone */
      }
    }
    const timers = Number.isFinite(deadlineS)
      ? [
          setTimeout(() => {
            interrupted = true
            signal('SIGINT')
          }, deadlineS * 1000),
          setTimeout(() => signal('SIGKILL'), deadlineS * 1000 + 30_000),
        ]
      : []
    let out = ''
    let err = ''
    child.stdout.on('data', (d: Buffer) => (out += d.toString()))
    child.stderr.on('data', (d: Buffer) => (err += d.toString()))
    child.on('error', rej)
    child.on('close', (c) => {
      for (const t of timers) clearTimeout(t)
      res({ code: c, stdout: out, stderr: err })
    })
  })
  const wallS = (performance.now() - t0) / 1000
  const simAfter = procUsage(sim.pid)
  writeFileSync(join(outDir, 'stdout.txt'), stdout)
  writeFileSync(join(outDir, 'stderr.txt'), stderr)
  const [, user, sys] = readFileSync(timeFile, 'utf8').trim().split('\n').at(-1)?.split(' ').map(Number) ?? []
  if (!existsSync(rusageFile))
    throw new Error(`the orchestrator wrote no rusage (${rusageFile}); exit ${code}; stderr: ${stderr.slice(-2000)}`)
  const own = JSON.parse(readFileSync(rusageFile, 'utf8')) as { userUs: number; systemUs: number; maxRssKb: number }
  return {
    code,
    interrupted,
    wallS,
    cpuS: (own.userUs + own.systemUs) / 1e6,
    peakRssMB: own.maxRssKb / 1024,
    cpuAllS: (user ?? NaN) + (sys ?? NaN),
    simCpuS: simAfter.cpuS - simBefore.cpuS,
    simPeakRssMB: simAfter.peakRssMB,
    stdout,
    stderr,
  }
}

export function simCalls(sim: SimHandle): CallRecord[] {
  const f = join(sim.dir, 'calls.jsonl')
  if (!existsSync(f)) return []
  return readFileSync(f, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as CallRecord)
}

export interface Invocation {
  tool: string
  args: string[]
}

/** the processes the orchestrator started, from its (redacted) command log */
export function commandLog(clusterDir: string): Invocation[] {
  const f = join(clusterDir, '.bootstrap', 'commands.log')
  if (!existsSync(f)) return []
  return readFileSync(f, 'utf8')
    .split('\n')
    .flatMap((line) => {
      const m = /^\S+ exit \S+ \S+ (\S+) ?(.*)$/.exec(line)
      return m?.[1] ? [{ tool: m[1], args: (m[2] ?? '').split(' ') }] : []
    })
}

/** processes started, by tool */
export function invocations(log: Invocation[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const { tool } of log) counts[tool] = (counts[tool] ?? 0) + 1
  return counts
}

/**
 * Authenticated status reads (talosctl get machinestatus, service, etcd members) per node address:
 * what the orchestrator asked, including the calls a node never saw (refused while it reboots).
 * A batched call (-n a,b,c) counts once for each node it names.
 */
export function statusReadsByNode(log: Invocation[]): Map<string, number> {
  const byIp = new Map<string, number>()
  for (const { tool, args } of log) {
    if (tool !== 'talosctl' || args.includes('--insecure')) continue
    const status =
      (args[0] === 'get' && args[1] === 'machinestatus') || args[0] === 'service' || (args[0] === 'etcd' && args[1] === 'members')
    const n = args.indexOf('-n')
    if (!status || n < 0) continue
    for (const ip of (args[n + 1] ?? '').split(',')) byIp.set(ip, (byIp.get(ip) ?? 0) + 1)
  }
  return byIp
}

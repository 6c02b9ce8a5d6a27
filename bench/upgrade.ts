// The rolling upgrade's cases of `npm run bench` (issue 31): a cluster of 3 control planes and 30
// workers bootstrapped with `task bootstrap:talos` (not measured), then `task -x upgrade:talos`
// v1.12.11 -> v1.13.9 at CONCURRENCY k (drain on, GATE_COMMAND `true`) measured against the critical
// path the simulator's timings give (sim/critical-path.js upgradeCriticalPathSeconds: control planes
// one after another, then ceil(30/k) worker batches). Also where the time went: per node, from the
// product's command log, what came before its `talosctl upgrade`, the upgrade call itself (the pull,
// the sequence, the reboot, the boot: talosctl's own --wait), and what came after it up to its last
// command; and per step of the roll (one control plane, one batch) the idle time between the end of
// one and the start of the next.
import { loadScenario, type ScenarioInput, upgradeCriticalPathSeconds } from '../sim/index.js'
import type { CallRecord } from '../sim/index.js'
import { clusterScenario, TIMINGS } from './scenario.js'

export const UPGRADE_FROM = 'v1.12.11'
export const UPGRADE_TO = 'v1.13.9'
/** simulated seconds per real second: a worker's upgrade lasts about 22 s of real time, a control plane's 26 s */
export const UPGRADE_SPEED = 6
export const UPGRADE_WORKERS = 30
/** the installer's pull and the upgrade sequence's phases (the simulator's defaults, written out) */
export const UPGRADE_TIMINGS = { ...TIMINGS, pull: 20, upgrade: 10 } as const

export interface UpgradeCase {
  name: string
  concurrency: number
  octet: number
}

/** upgrade-33x5 and upgrade-33x10 on 127.113 and 127.114 (the bootstrap's cases and baseline take 127.100–127.112) */
export const UPGRADE_CASES: UpgradeCase[] = [5, 10].map((concurrency, i) => ({
  name: `upgrade-${3 + UPGRADE_WORKERS}x${concurrency}`,
  concurrency,
  octet: 113 + i,
}))

export function upgradeScenario(octet: number): ScenarioInput {
  const scenario = clusterScenario(octet, 3 + UPGRADE_WORKERS, UPGRADE_SPEED, 'disk')
  return { ...scenario, cluster: { ...scenario.cluster, talosVersion: UPGRADE_FROM }, timings: { ...UPGRADE_TIMINGS } }
}

export function upgradeCriticalPathS(scenario: ScenarioInput, concurrency: number): number {
  const s = loadScenario(scenario)
  return upgradeCriticalPathSeconds(s, s.speed, concurrency)
}

/** one line of the product's command log (.bootstrap/commands.log): when it ended, how long it ran, what */
export interface LoggedCommand {
  endMs: number
  durationMs: number
  tool: string
  args: string[]
}

export function parseCommandLog(text: string): LoggedCommand[] {
  return text.split('\n').flatMap((line) => {
    const m = /^(\S+) \S+ \S+ (\d+)ms (\S+) ?(.*)$/.exec(line)
    if (!m?.[1] || !m[2] || !m[3]) return []
    return [{ endMs: Date.parse(m[1]), durationMs: Number(m[2]), tool: m[3].split('/').at(-1) ?? m[3], args: (m[4] ?? '').split(' ') }]
  })
}

/** the node a command is about: talosctl's `-n <ip>` (one node), kubectl's node name among its arguments */
function nodeOf(c: LoggedCommand, byIp: Map<string, string>, names: Set<string>): string | undefined {
  if (c.tool === 'talosctl') {
    const n = c.args.indexOf('-n')
    const ip = n >= 0 ? c.args[n + 1] : undefined
    return ip && !ip.includes(',') ? byIp.get(ip) : undefined
  }
  if (c.tool === 'kubectl') return c.args.find((a) => names.has(a) || names.has(a.replace(/^node\//, '')))?.replace(/^node\//, '')
  return undefined
}

export interface NodeSpan {
  node: string
  role: 'controlplane' | 'worker'
  /** ms since the run's first command: the node's first boot ID read (before its cordon), its upgrade call's start and end, its last command */
  startMs: number
  sendMs: number
  upgradeEndMs: number
  endMs: number
}

const isBootIdRead = (c: LoggedCommand): boolean =>
  c.tool === 'talosctl' && c.args[0] === 'read' && c.args.includes('/proc/sys/kernel/random/boot_id')

/**
 * Each upgraded node's span in the roll, from the command log: from its first boot ID read (the
 * rolling step reads it before the cordon; the plan reads none) to the last patch of its Node (the
 * uncordon), with its `talosctl upgrade` call inside. Times are ms since the log's first command.
 */
export function nodeSpans(log: LoggedCommand[], nodes: { name: string; ip: string; role: 'controlplane' | 'worker' }[]): NodeSpan[] {
  const byIp = new Map(nodes.map((n) => [n.ip, n.name]))
  const names = new Set(nodes.map((n) => n.name))
  const t0 = Math.min(...log.map((c) => c.endMs - c.durationMs))
  const per = new Map<string, LoggedCommand[]>()
  for (const c of log) {
    const node = nodeOf(c, byIp, names)
    if (node) per.set(node, [...(per.get(node) ?? []), c])
  }
  const startOf = (c: LoggedCommand): number => c.endMs - c.durationMs - t0
  return nodes.flatMap((n) => {
    const mine = per.get(n.name) ?? []
    const upgrade = mine.find((c) => c.tool === 'talosctl' && c.args[0] === 'upgrade')
    const first = mine.find(isBootIdRead)
    // the uncordon: the last patch of its Node (the final versions' reads come after every node)
    const last = mine.findLast((c) => c.tool === 'kubectl' && c.args.includes('patch'))
    if (!upgrade || !first || !last) return []
    return [
      {
        node: n.name,
        role: n.role,
        startMs: startOf(first),
        sendMs: startOf(upgrade),
        upgradeEndMs: upgrade.endMs - t0,
        endMs: last.endMs - t0,
      },
    ]
  })
}

/** the simulator's Upgrade (v1.12) and LifecycleService (v1.13) calls, node names in the order they came */
export function upgradeCalls(calls: CallRecord[]): string[] {
  return calls.filter((c) => c.call === 'upgrade' || c.call === 'lifecycle').map((c) => c.node ?? '')
}

const s1 = (ms: number): number => Math.round(ms / 100) / 10
const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length)

export interface UpgradeBreakdown {
  /** from the run's first command to the first node's first (validation, plan, gates before the first node) */
  beforeFirstNodeS: number
  /** each control plane in order: the time since the one before ended (the quorum gate), before its send (cordon, drain), the upgrade call, after it (checks, uncordon, gate command) */
  controlPlanes: { node: string; sinceLastS: number; beforeSendS: number; upgradeCallS: number; afterS: number }[]
  /** the workers: from the last control plane's end to the last worker's, and the mean of each part per worker */
  workers: { wallS: number; beforeSendS: number; upgradeCallS: number; afterS: number }
  /** from the last node's last command to the log's last (the versions read at the end) */
  afterLastNodeS: number
}

/** Where the time of the roll went (seconds), from the spans. */
export function breakdown(spans: NodeSpan[], log: LoggedCommand[]): UpgradeBreakdown {
  const t0 = Math.min(...log.map((c) => c.endMs - c.durationMs))
  const logEnd = Math.max(...log.map((c) => c.endMs)) - t0
  const cps = spans.filter((s) => s.role === 'controlplane').sort((a, b) => a.startMs - b.startMs)
  const workers = spans.filter((s) => s.role === 'worker')
  const firstStart = Math.min(...spans.map((s) => s.startMs))
  const cpEnd = Math.max(firstStart, ...cps.map((s) => s.endMs))
  let prev = firstStart
  return {
    beforeFirstNodeS: s1(firstStart),
    controlPlanes: cps.map((s) => {
      const row = {
        node: s.node,
        sinceLastS: s1(s.startMs - prev),
        beforeSendS: s1(s.sendMs - s.startMs),
        upgradeCallS: s1(s.upgradeEndMs - s.sendMs),
        afterS: s1(s.endMs - s.upgradeEndMs),
      }
      prev = s.endMs
      return row
    }),
    workers: {
      wallS: s1(Math.max(cpEnd, ...workers.map((s) => s.endMs)) - cpEnd),
      beforeSendS: s1(mean(workers.map((s) => s.sendMs - s.startMs))),
      upgradeCallS: s1(mean(workers.map((s) => s.upgradeEndMs - s.sendMs))),
      afterS: s1(mean(workers.map((s) => s.endMs - s.upgradeEndMs))),
    },
    afterLastNodeS: s1(logEnd - Math.max(...spans.map((s) => s.endMs))),
  }
}

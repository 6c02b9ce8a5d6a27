// Shared by the fault matrix: the short waits a failing case sits out, and the per-row assertions
// (every node's status and kind in one phase, a hint naming the recovery command).
import { expect } from 'vitest'
import type { Report } from '../../lib/core/results.js'
import type { CallRecord } from '../../sim/index.js'
import { E2eCluster, nodeIn, statuses, type ClusterShape } from '../e2e/harness.js'

/**
 * Short waits for the matrix: few retries, a short call deadline. The phase waits stay generous
 * (a healthy node needs ~1 s of each at speed 600, more on a loaded CI machine); a row shortens
 * only the one wait its failing node must sit out (e.g. `fastWith('--ready-timeout', '6s')`).
 * With SIM_KUBE=real the bootstrap's wait for the endpoint (`--bootstrap-timeout`), wait-ready's for
 * the API's /readyz (`--ready-timeout`) and Flux's are 60 s: a real kube-apiserver starts in about
 * 3 s of CPU, 4 s idle and up to 25 s on a 2-core machine with several clusters starting at once
 * (docs/real-control-plane.md); sim/kube answers at once, so 20 s keep its failing rows short.
 */
const KUBE_WAIT = process.env.SIM_KUBE === 'real' ? '60s' : '20s'
export const FAST = [
  '--verify-timeout',
  '20s',
  '--bootstrap-timeout',
  KUBE_WAIT,
  '--ready-timeout',
  KUBE_WAIT,
  '--flux-timeout',
  KUBE_WAIT,
  '--call-timeout',
  '10s',
  '--retries',
  '2',
]

/**
 * A row's own deadline: its run on a loaded machine. Waiting for a slot is not in it: vitest's
 * `maxConcurrency` (vitest.config.ts) starts a queued row, and its timeout, only once a slot is free.
 */
export const ROW_TIMEOUT = 180_000

/**
 * One row's own simulated cluster, stopped whatever happens. The rows of a file run concurrently
 * (describe.concurrent, each on its own range), at most vitest's `maxConcurrency` at a time.
 */
export async function withCluster(range: string, shape: ClusterShape, row: (cluster: E2eCluster) => Promise<void>): Promise<void> {
  const cluster = await E2eCluster.start(range, shape)
  try {
    await row(cluster)
  } finally {
    await cluster.stop()
  }
}

/** Replaces one flag's value in FAST, or in `base` (e.g. a longer call timeout for the latency row). */
export function fastWith(flag: string, value: string, base: string[] = FAST): string[] {
  const out = [...base]
  const at = out.indexOf(flag)
  if (at >= 0) out[at + 1] = value
  else out.push(flag, value)
  return out
}

/** A VIP that never answers: its wait (`--bootstrap-timeout`) only has to run out, FAST's 60 s are for a real API server's start. */
export const VIP_NEVER = fastWith('--bootstrap-timeout', '20s')

export type Expected = Record<string, string>

/**
 * Every node of the phase has the expected status; a `failed:<kind>` entry also checks the kind
 * and that the hint names `recovery` (a string or a per-node function).
 */
export function expectPhase(report: Report, phase: string, expected: Expected, recovery?: (node: string) => string): void {
  const plain = Object.fromEntries(Object.entries(expected).map(([n, s]) => [n, s.split(':')[0]]))
  const why = report.phases
    .find((p) => p.name === phase)
    ?.nodes.filter((n) => n.error)
    .map((n) => `${n.name}: ${n.error?.kind}: ${n.error?.message}`)
    .join('; ')
  expect(statuses(report, phase), `statuses in ${phase} (${why})`).toEqual(plain)
  for (const [name, want] of Object.entries(expected)) {
    const [status, kind] = want.split(':')
    const node = nodeIn(report, phase, name)
    if (status === 'failed') {
      expect(node.error?.kind, `${name} kind in ${phase}: ${node.error?.message ?? ''}`).toBe(kind)
      if (recovery) expect(node.error?.hint, `${name} hint in ${phase}`).toContain(recovery(name))
      if (recovery)
        expect(node.error?.hint, `${name} hint names the repository and the cluster`).toMatch(/task -d \S+ bootstrap:node CLUSTER_DIR=\S+ /)
    } else if (status === 'ok') {
      expect(node.error, `${name} has no error in ${phase}`).toBeUndefined()
    }
  }
}

/** the recovery command names the node (test/e2e/hints.test.ts runs each one as written) */
export const nodeRecovery = (name: string): string => `NODE=${name}`

/** ok/fail outcome of each call of one kind to one node, in order */
export function outcomes(calls: CallRecord[], node: string, call: string): string[] {
  return calls.filter((c) => c.node === node && c.call === call).map((c) => (c.outcome.startsWith('ok') ? 'ok' : 'error'))
}

export function phaseNames(report: Report): string[] {
  return report.phases.map((p) => p.name)
}

/** the cluster step of a phase (etcd-bootstrap, kubeconfig, api, cni, flux-install, ...) */
export function stepIn(report: Report, phase: string, step: string) {
  const found = report.phases.find((p) => p.name === phase)?.steps.find((s) => s.name === step)
  if (!found) throw new Error(`step ${step} not in phase ${phase}`)
  return found
}

/** A lasting fault clears (the node is back), then `task bootstrap:talos` again must succeed: its report and the calls it made. */
export async function rerunWhenBack(cluster: E2eCluster, node: string, kind: string): Promise<{ report: Report; after: CallRecord[] }> {
  cluster.sim.clearFault(node, kind)
  const before = cluster.calls().length
  const rerun = await cluster.task('bootstrap:talos', {}, FAST)
  expect(rerun.code, rerun.stderr).toBe(0)
  return { report: cluster.report(), after: cluster.calls().slice(before) }
}

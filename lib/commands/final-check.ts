// The check before a multi-phase command exits 0: the rule bootstrap:status applies (every selected
// node running and Ready, on the node API and in Kubernetes), and every control plane's etcd running
// and healthy. Phases wait for what they started; this reads what is true when the run ends (a
// service that stopped after its step, a node that rebooted during a later phase).
import { setTimeout as sleep } from 'node:timers/promises'
import { NodeError } from '../core/errors.js'
import { controlPlanes, type ClusterNode } from '../core/model.js'
import { taskCommand } from '../cli/hints.js'
import type { Run } from '../engine/run.js'
import { readStatus, type NodeRow } from './status.js'

export interface FinalProblem {
  node: ClusterNode
  message: string
  hint: string
}

function rowProblem(row: NodeRow): string | undefined {
  if (row.healthy) return undefined
  const parts = [`stage ${row.stage}`, `ready ${row.ready}`, `Kubernetes ${row.kubernetes}`]
  return `not running and Ready at the end of the run (${parts.join(', ')}${row.note ? `; ${row.note}` : ''})`
}

/**
 * A control plane's etcd: Running and its health check OK. One the run did not select is judged
 * only when it answers (an unselected node not set up yet is no failure of this run).
 */
async function etcdProblem(run: Run, cp: ClusterNode, selected: boolean): Promise<string | undefined> {
  try {
    const etcd = await run.talosctl.serviceStatus(cp, 'etcd')
    if (etcd.state === 'Running' && etcd.health === 'OK') return undefined
    return `etcd is not running and healthy at the end of the run (etcd ${etcd.state}, health ${etcd.health}${etcd.lastEvent ? `: ${etcd.lastEvent}` : ''})`
  } catch (err) {
    if (!(err instanceof NodeError)) throw err
    return selected ? `its etcd service could not be read at the end of the run (${err.kind}: ${err.message})` : undefined
  }
}

async function readProblems(run: Run): Promise<FinalProblem[]> {
  const selected = new Set(run.nodes.map((n) => n.name))
  const table = await readStatus(
    {
      inventory: run.inventory,
      runner: run.tools,
      talosctl: run.talosctl,
      kubectl: run.kubectl,
      kubeconfig: run.kubeconfig,
      deadlineMs: run.settings.callTimeoutMs,
    },
    run.nodes,
  )
  const problems: FinalProblem[] = []
  const hintOf = (node: ClusterNode): string =>
    `see ${taskCommand('bootstrap:status')}; once the cause is fixed: ${taskCommand('bootstrap:node', { NODE: node.name })}`
  for (const cp of controlPlanes(run.inventory)) {
    const message = await etcdProblem(run, cp, selected.has(cp.name))
    if (message) problems.push({ node: cp, message, hint: hintOf(cp) })
  }
  for (const row of table.rows) {
    const message = rowProblem(row)
    if (message && !problems.some((p) => p.node.name === row.node.name)) problems.push({ node: row.node, message, hint: hintOf(row.node) })
  }
  return problems
}

/** A reading that flickers under load (a slow kubectl, a batched read that timed out) is no failure: re-read for this long. */
const SETTLE_MS = 10_000

/** The problems left once the run ended: re-read every poll interval (at least three reads, for at least SETTLE_MS) while any is left. */
export async function finalCheck(run: Run): Promise<FinalProblem[]> {
  const until = Date.now() + Math.max(3 * run.settings.pollIntervalMs, SETTLE_MS)
  let problems = await readProblems(run)
  for (let reads = 1; problems.length > 0 && !run.signal.aborted && (reads < 3 || Date.now() < until); reads++) {
    await sleep(run.settings.pollIntervalMs, undefined, { signal: run.signal }).catch(() => undefined)
    if (run.signal.aborted) break
    problems = await readProblems(run)
  }
  return problems
}

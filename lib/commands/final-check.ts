// The check before a multi-phase command exits 0: the rule bootstrap:status applies (every selected
// node running and Ready, on the node API and in Kubernetes), and every control plane's etcd running
// and healthy. Phases wait for what they started; this reads what is true when the run ends (a
// service that stopped after its step, a node that rebooted during a later phase).
import { setTimeout as sleep } from 'node:timers/promises'
import { NodeError } from '../core/errors.ts'
import { controlPlanes, type ClusterNode } from '../core/model.ts'
import { taskCommand } from '../cli/hints.ts'
import type { Run } from '../engine/run.ts'
import type { NodeAnswer, ServiceStatus } from '../tools/talosctl.ts'
import { readStatus, type NodeRow } from './status.ts'

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
 * Every control plane's etcd: Running and its health check OK. One batched `talosctl service etcd`
 * through `via` (the control plane that answered the status reads); a control plane that batch could
 * not tell about (the endpoint down, the call timed out, an error) is asked alone. One the run did not select
 * is judged only when it answers (an unselected node not set up yet is no failure of this run).
 */
async function etcdProblems(run: Run, via: ClusterNode | undefined, selected: Set<string>): Promise<Map<string, string>> {
  const cps = controlPlanes(run.inventory)
  const batched =
    via && cps.length > 1 ? await run.talosctl.serviceStatuses(cps, via, 'etcd') : new Map<string, NodeAnswer<ServiceStatus>>()
  const problems = new Map<string, string>()
  const answers = await Promise.all(
    cps.map(async (cp): Promise<NodeAnswer<ServiceStatus>> => {
      // an error in the batch may be the endpoint's proxying, not the node: asked alone, as before
      const answer = batched.get(cp.address)
      if (answer?.value) return answer
      try {
        return { value: await run.talosctl.serviceStatus(cp, 'etcd') }
      } catch (err) {
        if (!(err instanceof NodeError)) throw err
        return { error: err }
      }
    }),
  )
  cps.forEach((cp, i) => {
    const answer = answers[i]
    if (!answer) return
    if (answer.error) {
      if (selected.has(cp.name))
        problems.set(cp.name, `its etcd service could not be read at the end of the run (${answer.error.kind}: ${answer.error.message})`)
      return
    }
    const etcd = answer.value
    if (etcd.state === 'Running' && etcd.health === 'OK') return
    problems.set(
      cp.name,
      `etcd is not running and healthy at the end of the run (etcd ${etcd.state}, health ${etcd.health}${etcd.lastEvent ? `: ${etcd.lastEvent}` : ''})`,
    )
  })
  return problems
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
  const etcd = await etcdProblems(run, table.via ?? controlPlanes(run.inventory)[0], selected)
  for (const cp of controlPlanes(run.inventory)) {
    const message = etcd.get(cp.name)
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
/** Reads within SETTLE_MS: a flicker clears by the next one; more only load the cluster (every poll interval at 200 ms: 50 rounds of reads). */
const SETTLE_READS = 4

/**
 * The problems left once the run ended: re-read every poll interval, but no more often than
 * SETTLE_READS times in SETTLE_MS (at least three reads, for at least SETTLE_MS) while any is left.
 */
export async function finalCheck(run: Run): Promise<FinalProblem[]> {
  const interval = Math.max(run.settings.pollIntervalMs, SETTLE_MS / SETTLE_READS)
  const until = Date.now() + Math.max(3 * interval, SETTLE_MS)
  let problems = await readProblems(run)
  for (let reads = 1; problems.length > 0 && !run.signal.aborted && (reads < 3 || Date.now() < until); reads++) {
    await sleep(interval, undefined, { signal: run.signal }).catch(() => undefined)
    if (run.signal.aborted) break
    problems = await readProblems(run)
  }
  return problems
}

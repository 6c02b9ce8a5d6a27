import { createInterface } from 'node:readline/promises'
import { NodeError } from '../classify.js'
import { InputError } from '../errors.js'
import { formatDuration } from '../duration.js'
import { hintFor, taskCommand } from '../hints.js'
import type { ClusterNode } from '../inventory.js'
import type { NodeOutcome, Phase, StepReporter } from '../phase.js'
import { pollUntil, PollTimeout, type PollAnswer } from '../poll.js'
import { withRetry } from '../retry.js'
import type { Run } from '../run.js'
import type { EtcdMember } from '../tools/talosctl.js'

function isMember(node: ClusterNode, m: EtcdMember): boolean {
  return m.hostname === node.name || m.peerUrls.some((u) => u.includes(`//${node.ip}:`))
}

/** The etcd members as another, healthy control plane sees them (undefined: no other answers). */
async function membersSeenByOthers(node: ClusterNode, run: Run): Promise<{ via: ClusterNode; members: EtcdMember[] } | undefined> {
  for (const cp of run.inventory.nodes.filter((n) => n.role === 'controlplane' && n.name !== node.name)) {
    try {
      return { via: cp, members: await run.talosctl.etcdMembers(cp) }
    } catch (err) {
      if (!(err instanceof NodeError)) throw err
    }
  }
  return undefined
}

/**
 * Refuses to take away the last etcd member, or one whose loss leaves fewer healthy members than
 * a quorum of what remains.
 */
async function guardQuorum(node: ClusterNode, run: Run, seen: { via: ClusterNode; members: EtcdMember[] } | undefined): Promise<EtcdMember | undefined> {
  if (node.role !== 'controlplane') return undefined
  if (!seen) {
    // no other control plane answers: if this node is the only one left, resetting it destroys etcd
    const others = run.inventory.nodes.filter((n) => n.role === 'controlplane' && n.name !== node.name)
    if (others.length === 0) throw new NodeError('etcd-join', `${node.name} is the only control plane: resetting it destroys the cluster's etcd`, 'restore etcd from a snapshot instead (talosctl bootstrap --recover-from)')
    return undefined
  }
  const member = seen.members.find((m) => isMember(node, m))
  if (!member) return undefined
  const remaining = seen.members.length - 1
  if (remaining === 0) throw new NodeError('etcd-join', `${node.name} is the last etcd member: resetting it destroys the cluster's data`, 'restore etcd from a snapshot instead (talosctl bootstrap --recover-from)')
  let healthyOthers = 0
  for (const m of seen.members.filter((x) => x !== member)) {
    const cp = run.inventory.nodes.find((n) => isMember(n, m))
    if (!cp) continue
    const etcd = await run.talosctl.serviceStatus(cp, 'etcd').catch(() => undefined)
    if (etcd?.state === 'Running') healthyOthers++
  }
  const quorum = Math.floor(remaining / 2) + 1
  if (healthyOthers < quorum) {
    throw new NodeError('etcd-join', `resetting ${node.name} would break etcd quorum: ${healthyOthers} healthy of ${remaining} remaining members, ${quorum} needed`, `bring the other control planes back first (${taskCommand('bootstrap:status')}), then run: ${taskCommand('bootstrap:node', { NODE: node.name, RESET: 'true' }, ['--yes'])}`)
  }
  return member
}

async function resetNode(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  const facts = run.facts.of(node.name)
  if (facts.state === 'maintenance') return { status: 'skipped', detail: 'already in maintenance' }
  const retry = { settings: run.settings, signal: run.signal, onRetry: (e: { attempt: number; error: NodeError; delayMs: number }) => report.retrying(e.attempt, e.error, e.delayMs) }
  const seen = await membersSeenByOthers(node, run)
  const member = await guardQuorum(node, run, seen)
  const answers = await run.talosctl.machineStatus(node).then(
    () => true,
    () => false,
  )
  if (answers) {
    report.progress('talosctl reset --graceful (leaves etcd), wiping STATE and EPHEMERAL, rebooting')
    await withRetry(() => run.talosctl.reset(node, true), retry)
  } else {
    if (member && seen) {
      report.progress(`removing etcd member ${member.id} through ${seen.via.name}`)
      await withRetry(() => run.talosctl.etcdRemoveMember(seen.via, member.id), retry)
    }
    report.progress('talosctl reset --graceful=false')
    await withRetry(() => run.talosctl.reset(node, false), retry)
  }
  try {
    await pollUntil(
      async (): Promise<PollAnswer<true>> => {
        const probe = await run.talosctl.probe(node).catch((err: unknown) => {
          if (err instanceof NodeError && err.transient) return undefined
          throw err
        })
        return probe?.state === 'maintenance' ? { done: true, value: true } : { done: false, state: probe ? 'still configured' : 'rebooting' }
      },
      { intervalMs: run.settings.pollIntervalMs, timeoutMs: run.settings.verifyTimeoutMs, signal: run.signal, onState: (s) => report.progress(s) },
    )
  } catch (err) {
    if (err instanceof PollTimeout) throw new NodeError('stuck', `not back in maintenance within ${formatDuration(err.waitedMs)} after the reset (${err.lastState})`, hintFor('stuck', node))
    throw err
  }
  facts.state = 'maintenance'
  facts.status = undefined
  run.journal.forget(node.name)
  return { status: 'ok', detail: 'reset to maintenance' }
}

async function confirm(run: Run): Promise<void> {
  if (run.options.yes || run.options.dryRun) return
  const names = run.nodes.map((n) => n.name).join(', ')
  if (!process.stdin.isTTY) {
    throw new InputError(`RESET=true wipes ${names} and needs confirmation`, { fix: `confirm on the command line: ${taskCommand('bootstrap:node', { NODE: run.nodes.map((n) => n.name).join(','), RESET: 'true' }, ['--yes'])}` })
  }
  const rl = createInterface({ input: process.stdin, output: process.stderr })
  try {
    const answer = await rl.question(`Reset ${names}: wipe STATE and EPHEMERAL and reboot into maintenance? [y/N] `)
    if (!/^y(es)?$/i.test(answer.trim())) throw new InputError('reset not confirmed', { fix: 'answer y, or pass -- --yes' })
  } finally {
    rl.close()
  }
}

export const reset: Phase = {
  name: 'reset',
  title: 'Reset the node back to maintenance',
  check: confirm,
  steps: () => [{ kind: 'node', title: 'Reset', would: 'would reset it to maintenance (wipe STATE and EPHEMERAL)', run: resetNode }],
}

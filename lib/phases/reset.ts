import { existsSync } from 'node:fs'
import { createInterface } from 'node:readline/promises'
import { NodeError } from '../core/errors.ts'
import { blockedEvictions, describeBlocked, TALOS_DRAIN_TIMEOUT, type BlockedEviction } from './shared/drain.ts'
import { InputError } from '../core/errors.ts'
import { formatDuration } from '../core/duration.ts'
import { hintFor, talosctlCommand, taskCommand } from '../cli/hints.ts'
import type { NodeFacts } from '../engine/facts.ts'
import { controlPlanes, kubeNodeName, type ClusterNode } from '../core/model.ts'
import type { NodeOutcome, Phase, StepReporter } from '../engine/phase.ts'
import { PollTimeout, type PollAnswer } from '../wait/poll.ts'
import type { Run } from '../engine/run.ts'
import { bootIdOf, condition } from '../tools/kubectl.ts'
import type { EtcdMember } from '../tools/talosctl.ts'
import { describeElsewhere, isMemberOf, namedElsewhere } from './shared/etcd-members.ts'
import { keepsQuorumWithout, quorumOf } from './shared/quorum.ts'

interface MemberList {
  via: ClusterNode
  members: EtcdMember[]
}

const snapshotHint = 'restore etcd from a snapshot instead (talosctl bootstrap --recover-from)'

/**
 * Each control plane's etcd service, the others first and this node last: whose etcd runs (and
 * can count toward a quorum), and in that order whom to ask for the member list (a stopped etcd
 * leaves the list call waiting for a connection). An unanswered read is its reason.
 */
async function etcdServices(node: ClusterNode, run: Run): Promise<{ cp: ClusterNode; running: boolean; why: string }[]> {
  const cps = controlPlanes(run.inventory)
  const order = [...cps.filter((n) => n.name !== node.name), ...cps.filter((n) => n.name === node.name)]
  const out: { cp: ClusterNode; running: boolean; why: string }[] = []
  for (const cp of order) {
    const etcd = await run.talosctl.serviceStatus(cp, 'etcd').catch((err: unknown) => {
      if (err instanceof NodeError) return err
      throw err
    })
    if (etcd instanceof NodeError) out.push({ cp, running: false, why: etcd.message })
    else out.push({ cp, running: etcd.state === 'Running' && etcd.health !== 'Fail', why: `etcd ${etcd.state}` })
  }
  return out
}

/**
 * A control plane is reset only when a member list was read, the member this node's by its address
 * (a member named after it at another address is a contradiction: refused, never removed), and the
 * remaining voters' health established: each one's etcd service running, its etcd API answering
 * (its own member list read), started, not a learner, and without an etcd alarm. A removal is a proposal the current N
 * voters commit, so the healthy voters left must be a quorum of N: healthy - 1 >= floor(N/2) + 1.
 */
async function guardQuorum(node: ClusterNode, run: Run): Promise<{ list: MemberList; member: EtcdMember | undefined } | undefined> {
  if (node.role !== 'controlplane') return undefined
  const others = controlPlanes(run.inventory).filter((n) => n.name !== node.name)
  if (others.length === 0)
    throw new NodeError('etcd-join', `${node.name} is the only control plane: resetting it destroys the cluster's etcd`, snapshotHint)
  const services = await etcdServices(node, run)
  let list: MemberList | undefined
  const failures = new Map<string, string>(services.filter((s) => !s.running).map((s) => [s.cp.name, `${s.cp.name}: ${s.why}`]))
  // whose etcd API answered: every other control plane is asked, not only the first that answers
  const answered = new Set<string>()
  for (const s of services.filter((x) => x.running)) {
    // this node's own list is needed only when no other control plane gave one
    if (s.cp.name === node.name && list) continue
    try {
      const members = await run.talosctl.etcdMembers(s.cp)
      answered.add(s.cp.name)
      list ??= { via: s.cp, members }
    } catch (err) {
      if (!(err instanceof NodeError)) throw err
      failures.set(s.cp.name, `${s.cp.name}: ${err.message}`)
    }
  }
  const again = taskCommand('bootstrap:node', { NODE: node.name, RESET: 'true' }, ['--yes'])
  if (!list) {
    // the other control planes' etcd not running is a cause of its own, whether or not this node's
    // member still answers its list (without a quorum it stops answering): counted from the inventory
    const othersRunning = services.filter((x) => x.running && x.cp.name !== node.name).length
    if (!keepsQuorumWithout(others.length + 1, othersRunning))
      throw new NodeError(
        'etcd-join',
        `resetting ${node.name} would break etcd quorum: ${othersRunning} healthy of ${others.length} remaining voting members, ${quorumOf(others.length + 1)} needed of ${others.length + 1} (counted from the inventory: no etcd member list could be read: ${[...failures.values()].join('; ')})`,
        `bring the other control planes' etcd back first (${taskCommand('bootstrap:status')}, \`${talosctlCommand(others[0]!, 'etcd members')}\`), then run: ${again}`,
      )
    const ask = others.map((cp) => `\`${talosctlCommand(cp, 'service etcd')}\``).join(', ')
    throw new NodeError(
      'etcd-join',
      `no etcd member list could be read (${[...failures.values()].join('; ')}): without one a reset of ${node.name} could wipe the last running etcd member`,
      `check etcd on the other control planes (${ask}); once one answers \`${talosctlCommand(others[0]!, 'etcd members')}\`, run: ${again}`,
    )
  }
  const elsewhere = namedElsewhere(node, list.members)
  if (elsewhere) {
    throw new NodeError(
      'etcd-join',
      `not reset: ${describeElsewhere(node, elsewhere)} (read through ${list.via.name}); the inventory and the cluster disagree about where ${node.name} runs, and removing that member could throw a running control plane out of etcd`,
      `correct ${node.name}'s address in the inventory (talconfig.yaml / nodes.yaml) to the one its member carries, or remove the member yourself once you know that machine is gone (\`${talosctlCommand(list.via, 'etcd members')}\`); then run: ${again}`,
    )
  }
  const member = list.members.find((m) => isMemberOf(node, m))
  // not a member, or a learner: its removal changes no quorum
  if (!member || member.isLearner) return { list, member }
  const voters = list.members.filter((m) => !m.isLearner && m !== member)
  if (voters.length === 0)
    throw new NodeError('etcd-join', `${node.name} is the last etcd member: resetting it destroys the cluster's data`, snapshotHint)
  // a voter is healthy when it started (a member that never started holds no data), the control
  // plane at its address runs etcd and answered (a member at no inventory address cannot be read),
  // and it has no alarm (NOSPACE: etcd takes no writes; CORRUPT: its data is not to be trusted)
  const cpOf = (m: EtcdMember): ClusterNode | undefined => others.find((cp) => isMemberOf(cp, m))
  const alarmOf = await memberAlarms(list.via, run)
  const healthy = voters.filter((m) => {
    const cp = cpOf(m)
    return m.hostname !== '' && cp !== undefined && answered.has(cp.name) && alarmOf(m.id) === undefined
  })
  // the one quorum rule (shared/quorum.ts): this member plus the voters make N; the healthy others must be a quorum of N
  const quorum = quorumOf(voters.length + 1)
  if (!keepsQuorumWithout(voters.length + 1, healthy.length)) {
    // in inventory order: etcd lists its members by ID, which says nothing to the operator
    const inventoryIndex = (m: EtcdMember): number => {
      const cp = cpOf(m)
      return cp ? others.indexOf(cp) : others.length
    }
    const unread = voters
      .filter((m) => !healthy.includes(m))
      .sort((a, b) => inventoryIndex(a) - inventoryIndex(b))
      .map((m) => {
        const cp = cpOf(m)
        if (!cp) return `member ${m.id}${m.hostname ? ` (${m.hostname})` : ''}: at no control plane's inventory address`
        if (m.hostname === '') return `${cp.name}: member ${m.id} not started`
        const alarm = alarmOf(m.id)
        if (alarm && answered.has(cp.name)) return `${cp.name}: etcd alarm ${alarm} on member ${m.id}`
        return failures.get(cp.name) ?? `${cp.name}: etcd not read`
      })
    throw new NodeError(
      'etcd-join',
      `resetting ${node.name} would break etcd quorum: ${healthy.length} healthy of ${voters.length} remaining voting members, ${quorum} needed of ${voters.length + 1} (not established: ${unread.join('; ')})`,
      unread.some((why) => / etcd alarm [A-Z]/.test(why))
        ? // NOSPACE lasts until space is freed (compaction, defrag) and the alarm disarmed
          `clear the alarms first: see \`${talosctlCommand(list.via, 'etcd alarm list')}\`, free space on the members named (\`${talosctlCommand(list.via, 'etcd defrag')}\` on each), then \`${talosctlCommand(list.via, 'etcd alarm disarm')}\`; then run: ${again}`
        : `bring the other control planes' etcd back first (${taskCommand('bootstrap:status')}, \`${talosctlCommand(list.via, 'etcd members')}\`), then run: ${again}`,
    )
  }
  return { list, member }
}

/**
 * A member's alarms (`NOSPACE`, `CORRUPT`), or undefined, read through the control plane whose member
 * list was read. An unreadable alarm list establishes nothing: every voter has the read's failure.
 */
async function memberAlarms(via: ClusterNode, run: Run): Promise<(memberId: string) => string | undefined> {
  try {
    const alarms = await run.talosctl.etcdAlarms(via)
    return (id) =>
      alarms
        .filter((a) => a.memberId === id)
        .map((a) => a.alarm)
        .join(', ') || undefined
  } catch (err) {
    if (!(err instanceof NodeError)) throw err
    return () => `unknown (its alarms could not be read through ${via.name}: ${err.message})`
  }
}

/**
 * Whether the node answers: true, or false only when it is classified unreachable after the
 * retries. Anything else (a timeout, an unknown answer) refuses: a live node wiped without its
 * graceful leave and drain loses etcd data and ignores disruption budgets. A node this run's
 * preflight already gave its retries to (and found not answering) is read once more, not given a
 * second series of them: with the default backoff that series alone is minutes.
 */
async function answers(node: ClusterNode, run: Run, report: StepReporter): Promise<boolean> {
  const read = () => run.talosctl.machineStatus(node)
  try {
    await (run.facts.of(node.name).state === 'unreachable' ? read() : report.retry(read))
    return true
  } catch (err) {
    if (!(err instanceof NodeError)) throw err
    if (err.kind === 'unreachable') return false
    throw new NodeError(
      err.kind,
      `not reset: ${node.name} did not answer its status read (${err.message}), and a forced reset (--graceful=false) is only for an unreachable node`,
      `check the node (\`${talosctlCommand(node, 'get machinestatus')}\`, \`${talosctlCommand(node, 'dmesg')}\`), then run: ${taskCommand('bootstrap:node', { NODE: node.name, RESET: 'true' }, ['--yes'])}`,
    )
  }
}

/**
 * The Kubernetes Node as it is before the reset: a reset keeps the object (cordoned, then Unknown),
 * so wait-ready needs what its kubelet registers after the reset to tell the two apart.
 */
async function nodeBeforeReset(node: ClusterNode, run: Run): Promise<NodeFacts['kubeBeforeReset']> {
  if (run.options.dryRun || !existsSync(run.kubeconfig)) return undefined
  const self = await run.kubectl.get('node', kubeNodeName(node)).catch((err: unknown) => {
    // an API that does not answer cannot say; wait-ready then has only the kubelet to go by
    if (err instanceof NodeError) return undefined
    throw err
  })
  const bootId = bootIdOf(self)
  return self ? { ...(bootId ? { bootId } : {}), readySince: condition(self, 'Ready')?.lastTransitionTime } : undefined
}

/**
 * Pods a budget keeps on the node while Talos drains it: the node cordoned and its kubelet still
 * running (the reset's cleanup stops the kubelet once the drain is over; the pods' objects stay).
 */
async function drainBlockedNow(node: ClusterNode, run: Run): Promise<BlockedEviction[]> {
  if (run.options.dryRun || !existsSync(run.kubeconfig)) return []
  try {
    const self = await run.kubectl.get('node', kubeNodeName(node))
    const blocked = self?.spec?.unschedulable === true ? await blockedEvictions(run.kubectl, kubeNodeName(node)) : []
    if (blocked.length === 0) return []
    const kubelet = await run.talosctl.serviceStatus(node, 'kubelet')
    return kubelet.state === 'Running' ? blocked : []
  } catch (err) {
    if (err instanceof NodeError) return []
    throw err
  }
}

async function resetNode(node: ClusterNode, run: Run, report: StepReporter): Promise<NodeOutcome> {
  const facts = run.facts.of(node.name)
  if (facts.state === 'maintenance') return { status: 'skipped', detail: 'already in maintenance' }
  const etcd = await guardQuorum(node, run)
  // the rejoin is proven by a new member ID and this one gone (a leave can leave it behind)
  if (etcd?.member) facts.replacedEtcdMember = etcd.member.id
  facts.kubeBeforeReset = await nodeBeforeReset(node, run)
  facts.resetInRun = true
  if (await answers(node, run, report)) {
    report.progress('talosctl reset --graceful (leaves etcd), wiping STATE and EPHEMERAL, rebooting')
    await report.retry(() => run.talosctl.reset(node, true))
  } else {
    let removed: string | undefined
    if (etcd?.member) {
      const { member, list } = etcd
      report.progress(`removing etcd member ${member.id} through ${list.via.name}`)
      // a retry whose first reply was lost meets NotFound: the member is gone, which is what was asked
      await report.retry(() => run.talosctl.etcdRemoveMember(list.via, member.id))
      removed = `etcd member ${member.id} was removed through ${list.via.name}`
    }
    report.progress('talosctl reset --graceful=false')
    try {
      await report.retry(() => run.talosctl.reset(node, false))
    } catch (err) {
      if (!(err instanceof NodeError) || !removed) throw err
      // half done: out of etcd, not wiped. Only the reset finishes it (a plain rejoin would find
      // the node configured with its old etcd data and wait for a member that no longer exists)
      throw new NodeError(
        err.kind,
        `the reset is half done: ${removed}, but ${node.name} was not wiped (${err.message})`,
        `power ${node.name} on or make it reachable (\`${talosctlCommand(node, 'version')}\`), then finish the reset; run: ${taskCommand('bootstrap:node', { NODE: node.name, RESET: 'true' }, ['--yes'])}`,
      )
    }
  }
  // a budget-blocked drain seen while it was still configured (Talos gives up on it after 5m)
  let blocked: BlockedEviction[] = []
  try {
    await report.poll(async (): Promise<PollAnswer<true>> => {
      const probe = await run.talosctl.probe(node).catch((err: unknown) => {
        if (err instanceof NodeError && err.transient) return undefined
        throw err
      })
      if (probe?.state === 'maintenance') return { done: true, value: true }
      if (!probe) return { done: false, state: 'rebooting' }
      const now = await drainBlockedNow(node, run)
      if (now.length > 0) blocked = now
      return { done: false, state: now.length > 0 ? `still configured, draining: ${describeBlocked(now)}` : 'still configured' }
    }, run.settings.resetTimeoutMs)
  } catch (err) {
    if (!(err instanceof PollTimeout)) throw err
    const status = await run.talosctl.machineStatus(node).catch(() => undefined)
    const still = status ? await drainBlockedNow(node, run) : []
    if (still.length > 0) {
      throw new NodeError(
        'drain-blocked',
        `the reset's drain of ${node.name} is blocked: ${describeBlocked(still)} (evictions refused); still configured (stage ${status?.stage ?? 'unknown'}) ${formatDuration(err.waitedMs)} after the reset, cordoned`,
        hintFor('drain-blocked', node),
      )
    }
    if (status?.stage === 'resetting' || status?.stage === 'running') {
      // a graceful reset aborts when its etcd leave fails (etcd's strict reconfiguration checks),
      // after the cordon, the drain and the kubelet stop: half done, and --wait=false said success
      const again = taskCommand('bootstrap:node', { NODE: node.name, RESET: 'true' }, ['--yes'])
      throw new NodeError(
        node.role === 'controlplane' ? 'etcd-join' : 'stuck',
        `the reset stopped half-way: ${node.name} is still configured (stage ${status.stage}) ${formatDuration(err.waitedMs)} after it, cordoned with its kubelet stopped${node.role === 'controlplane' ? '; its etcd leave was likely refused (etcdserver: re-configuration failed due to not enough started members, or etcdserver: unhealthy cluster for the 5 min Talos retries it: another member down or never connected for 5 s)' : ''}`,
        `see why in \`${talosctlCommand(node, 'dmesg')}\`${node.role === 'controlplane' ? ` and the members (\`${talosctlCommand(node, 'etcd members')}\`)` : ''}; either put it back in service (\`${talosctlCommand(node, 'service kubelet start')}\`, then \`kubectl uncordon ${node.name}\`), or fix the cause (the other members' etcd) and run: ${again}`,
      )
    }
    throw new NodeError(
      'stuck',
      `not back in maintenance within ${formatDuration(err.waitedMs)} after the reset (${err.lastState})`,
      hintFor('stuck', node),
    )
  }
  facts.state = 'maintenance'
  run.journal.forget(node.name)
  // Talos's drain gave up after its timeout and removed those pods anyway: the budget was not kept
  const drained =
    blocked.length > 0
      ? `; the drain was blocked (${describeBlocked(blocked)}): Talos removed the pods after its ${TALOS_DRAIN_TIMEOUT} drain timeout regardless`
      : ''
  return { status: 'ok', detail: `reset to maintenance${drained}` }
}

async function confirm(run: Run): Promise<void> {
  if (run.options.yes || run.options.dryRun) return
  const names = run.nodes.map((n) => n.name).join(', ')
  if (!process.stdin.isTTY) {
    throw new InputError(`RESET=true wipes ${names} and needs confirmation`, {
      fix: `confirm on the command line: ${taskCommand('bootstrap:node', { NODE: run.nodes.map((n) => n.name).join(','), RESET: 'true' }, ['--yes'])}`,
    })
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

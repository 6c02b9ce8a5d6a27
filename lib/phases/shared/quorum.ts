// The etcd quorum gate (issue 31, docs/day2-design.md 2.3): before a control plane is taken down
// (upgraded, rebooted), every rule Q1–Q9 must hold on a fresh read, or the gate fails with kind
// `quorum` after readyTimeout naming each rule that still fails and the control plane it concerns.
// The rules are pure functions over parsed reads (`etcd status` per control plane, `etcd members`,
// `etcd alarm list`); `waitForQuorum` reads them through the run's one poll helper. The arithmetic
// (`quorumOf`, `keepsQuorumWithout`) is the one quorum rule of the product: reset's guard uses it too.
import { NodeError } from '../../core/errors.ts'
import { hintForMemberBack, hintForMemberCount, hintForQuorum, type MemberCountWayOut } from '../../cli/hints.ts'
import { controlPlanes, type ClusterNode } from '../../core/model.ts'
import type { StepReporter } from '../../engine/phase.ts'
import type { Run } from '../../engine/run.ts'
import type { EtcdMember, EtcdStatus, NodeAnswer } from '../../tools/talosctl.ts'
import { lastErrorNote, PollTimeout, type PollAnswer } from '../../wait/poll.ts'
import { describeElsewhere, isMemberOf, namedElsewhere } from './etcd-members.ts'

/** etcd's quorum of `members` voting members: a majority, ⌊N/2⌋ + 1. */
export function quorumOf(members: number): number {
  return Math.floor(members / 2) + 1
}

/**
 * Whether `members` voting members keep a quorum with one of them taken out, when `healthyOthers` of
 * the others are healthy: the change (a removal, a reboot) is committed by the current N, so the
 * healthy ones left must be a quorum of N (`healthy − 1 ≥ ⌊N/2⌋ + 1` when the one taken out is healthy).
 */
export function keepsQuorumWithout(members: number, healthyOthers: number): boolean {
  return healthyOthers >= quorumOf(members)
}

/** etcd's ID for "no leader" (`etcd.FormatMemberID(0)`). */
const NO_LEADER = '0000000000000000'

export type QuorumRule = 'Q1' | 'Q2' | 'Q3' | 'Q4' | 'Q5' | 'Q6' | 'Q7' | 'Q8' | 'Q9'

/** A rule that does not hold, and the control plane it concerns (none when it concerns no one machine). */
export interface RuleFailure {
  rule: QuorumRule
  controlPlane?: string
  text: string
  /** no wait changes it (the member count): the gate refuses at once */
  lasting?: boolean
}

/** One read of everything the gate looks at. */
export interface QuorumReads {
  /** the inventory's control planes */
  controlPlanes: ClusterNode[]
  /** `etcd status` per control plane address (talosctl.etcdStatus): its row or its own error */
  status: Map<string, NodeAnswer<EtcdStatus>>
  /** `etcd members` through one control plane, or why no list could be read */
  members: { via: string; list: EtcdMember[] } | { error: string }
  /** `etcd alarm list` (cluster-wide), or why it could not be read */
  alarms: { list: Array<{ memberId: string; alarm: string }> } | { error: string }
  /** the leader's RAFT INDEX from the previous read, one poll interval earlier (undefined on the first read) */
  previousLeaderIndex?: number
}

export interface QuorumVerdict {
  failures: RuleFailure[]
  /** members (N) and those passing Q1–Q8 */
  members: number
  healthy: number
  /** the leader every member agrees on, and the control plane it is (when one is) */
  leader?: { id: string; controlPlane?: string; raftIndex: number }
}

/** What the gate is for: the control plane about to go down; `acceptDowntime` lets a single member pass (its API goes down). */
export interface QuorumTarget {
  node: ClusterNode
  acceptDowntime?: boolean
  /** what the hint offers when the member count refuses every control plane (a run's own commands) */
  instead?: MemberCountWayOut
}

/** The control plane a member is, by its peer URL address (Q7). */
function controlPlaneOf(member: EtcdMember, cps: ClusterNode[]): ClusterNode | undefined {
  return cps.find((cp) => isMemberOf(cp, member))
}

/**
 * Q1–Q9 on one read. Healthy members are those passing every rule Q1–Q8 (answering, no errors, no
 * alarm, no learner, started, following the agreed leader, a control plane's, caught up); Q9 counts them.
 */
export function evaluateQuorum(reads: QuorumReads, target: QuorumTarget): QuorumVerdict {
  const failures: RuleFailure[] = []
  const fail = (rule: QuorumRule, cp: ClusterNode | undefined, text: string, lasting = false): void => {
    failures.push({ rule, ...(cp ? { controlPlane: cp.name } : {}), text, ...(lasting ? { lasting } : {}) })
  }
  const cps = reads.controlPlanes
  const rows = new Map<string, EtcdStatus>()
  /** members (by ID) failing a rule */
  const unhealthy = new Set<string>()

  // Q1: every control plane answers etcd status (a node named in the WARNING has its own error)
  for (const cp of cps) {
    const answer = reads.status.get(cp.address)
    if (answer?.value) rows.set(cp.name, answer.value)
    else fail('Q1', cp, `etcd status: ${answer?.error?.message ?? 'no answer'}`)
  }

  const list = 'list' in reads.members ? reads.members.list : undefined
  if (!list) fail('Q7', undefined, `the member list could not be read: ${'error' in reads.members ? reads.members.error : ''}`)
  const members = list ?? []
  const memberOfCp = new Map<string, EtcdMember[]>()
  for (const m of members) {
    const cp = controlPlaneOf(m, cps)
    if (cp) memberOfCp.set(cp.name, [...(memberOfCp.get(cp.name) ?? []), m])
  }

  // Q7: members = control planes, by peer URL address; a member carrying a control plane's name elsewhere is refused
  if (list) {
    for (const m of members) {
      if (!controlPlaneOf(m, cps)) {
        fail(
          'Q7',
          undefined,
          `member ${m.id}${m.hostname ? ` (${m.hostname})` : ''} at ${m.peerUrls.join(', ') || 'no peer URL'} is no control plane of the inventory`,
        )
        unhealthy.add(m.id)
      }
    }
    for (const cp of cps) {
      const elsewhere = namedElsewhere(cp, members)
      if (elsewhere) {
        fail('Q7', cp, describeElsewhere(cp, elsewhere))
        unhealthy.add(elsewhere.id)
      }
      const own = memberOfCp.get(cp.name) ?? []
      if (own.length === 0) fail('Q7', cp, `no etcd member at ${cp.address}`)
      else if (own.length > 1) {
        fail('Q7', cp, `${own.length} etcd members at ${cp.address}: ${own.map((m) => m.id).join(', ')}`)
        for (const m of own) unhealthy.add(m.id)
      }
      const row = rows.get(cp.name)
      if (row && own.length === 1 && own[0]!.id !== row.memberId) {
        fail('Q7', cp, `answers as member ${row.memberId}, but the member at its address is ${own[0]!.id}`)
        unhealthy.add(own[0]!.id)
      }
    }
  }

  // Q5: every member started, with Talos's own text (internal/pkg/etcd/etcd.go ValidateForUpgrade)
  for (const m of members) {
    if (m.hostname === '') {
      fail('Q5', controlPlaneOf(m, cps), `etcd member ${m.id} is not started, all members must be running to perform an upgrade`)
      unhealthy.add(m.id)
    }
  }

  // Q2, Q4 on each answer; Q4 also on the member list
  for (const cp of cps) {
    const row = rows.get(cp.name)
    if (!row) continue
    if (row.errors) {
      fail('Q2', cp, `member ${row.memberId} reports errors: ${row.errors}`)
      unhealthy.add(row.memberId)
    }
    if (row.learner) {
      fail('Q4', cp, `member ${row.memberId} is a learner`)
      unhealthy.add(row.memberId)
    }
  }
  for (const m of members) {
    if (m.isLearner && ![...rows.values()].some((r) => r.memberId === m.id && r.learner)) {
      fail('Q4', controlPlaneOf(m, cps), `member ${m.id} is a learner`)
      unhealthy.add(m.id)
    }
  }

  // Q3: no alarms (NOSPACE: no writes; CORRUPT: its data is not to be trusted)
  if ('error' in reads.alarms) fail('Q3', undefined, `the alarm list could not be read: ${reads.alarms.error}`)
  else
    for (const a of reads.alarms.list) {
      const m = members.find((x) => x.id === a.memberId)
      fail('Q3', m ? controlPlaneOf(m, cps) : undefined, `etcd alarm ${a.alarm} on member ${a.memberId}`)
      unhealthy.add(a.memberId)
    }

  // Q6: one leader: every answer follows the same non-zero ID, and it is a member's
  let leader: QuorumVerdict['leader']
  for (const cp of cps) {
    const row = rows.get(cp.name)
    if (row?.leader === NO_LEADER) {
      fail('Q6', cp, `member ${row.memberId} knows no leader`)
      unhealthy.add(row.memberId)
    }
  }
  const named = [...new Set([...rows.values()].map((r) => r.leader))].filter((id) => id !== NO_LEADER)
  if (named.length > 1) {
    const says = cps.flatMap((cp) => {
      const row = rows.get(cp.name)
      return row ? [`${cp.name} follows ${row.leader}`] : []
    })
    fail('Q6', undefined, `the members disagree on the leader: ${says.join(', ')}`)
    for (const r of rows.values()) unhealthy.add(r.memberId)
  } else if (named.length === 1) {
    const id = named[0]!
    const member = members.find((m) => m.id === id)
    const cp = member ? controlPlaneOf(member, cps) : undefined
    const leaderRow = [...rows.values()].find((r) => r.memberId === id)
    if (list && !member) fail('Q6', undefined, `the leader ${id} is not in the member list`)
    // its RAFT INDEX is what the next read's Q8 measures against
    else if (!leaderRow) fail('Q6', cp, `the leader ${id}${cp ? ` (${cp.name})` : ''} did not answer etcd status`)
    else leader = { id, raftIndex: leaderRow.raftIndex, ...(cp ? { controlPlane: cp.name } : {}) }
  }

  // Q8: caught up: every member has applied what the leader had one poll interval earlier
  if (reads.previousLeaderIndex === undefined)
    fail('Q8', undefined, 'caught up: not established yet (needs a second read one poll interval later)')
  else
    for (const cp of cps) {
      const row = rows.get(cp.name)
      if (row && !(row.raftAppliedIndex >= reads.previousLeaderIndex)) {
        fail(
          'Q8',
          cp,
          `member ${row.memberId} has applied ${row.raftAppliedIndex}, behind the leader's ${reads.previousLeaderIndex} of the previous read`,
        )
        unhealthy.add(row.memberId)
      }
    }

  // Q9: healthy = members passing Q1–Q8 (a control plane's member whose etcd status was read)
  const answeredIds = new Set([...rows.values()].map((r) => r.memberId))
  const healthyMembers = members.filter((m) => !unhealthy.has(m.id) && answeredIds.has(m.id) && controlPlaneOf(m, cps))
  const caughtUpKnown = reads.previousLeaderIndex !== undefined
  const n = members.length
  const targetMember = (memberOfCp.get(target.node.name) ?? [])[0]
  const healthyOthers = healthyMembers.filter((m) => m !== targetMember).length
  if (list) {
    if (n === 2)
      // Talos's own refusal (internal/pkg/etcd/etcd.go ValidateForUpgrade)
      fail('Q9', target.node, `etcd member count(2) is insufficient to maintain quorum if upgrade commences`, true)
    else if (n === 1 && target.acceptDowntime !== true)
      fail(
        'Q9',
        target.node,
        `${target.node.name} is the only etcd member: taking it down stops the cluster's API (accept the downtime to go on)`,
        true,
      )
    else if (n > 2 && caughtUpKnown && !keepsQuorumWithout(n, healthyOthers))
      fail('Q9', target.node, `taking ${target.node.name} down leaves ${healthyOthers} healthy of ${n} members, ${quorumOf(n)} needed`)
  }
  // in rule order (a stable sort keeps the control planes in inventory order within a rule)
  failures.sort((a, b) => Number(a.rule.slice(1)) - Number(b.rule.slice(1)))
  return { failures, members: n, healthy: caughtUpKnown ? healthyMembers.length : 0, ...(leader ? { leader } : {}) }
}

/** `Q1 cp-2: etcd status: …` */
export function describeFailure(f: RuleFailure): string {
  return `${f.rule}${f.controlPlane ? ` ${f.controlPlane}` : ''}: ${f.text}`
}

/**
 * A control plane to read the member list and alarms through: those that answered etcd status, the
 * one asked already (`likely`) first among them, the target last.
 */
function readOrder(
  cps: ClusterNode[],
  target: ClusterNode,
  status: Map<string, NodeAnswer<EtcdStatus>>,
  likely: ClusterNode,
): ClusterNode[] {
  const answered = (cp: ClusterNode): number => (status.get(cp.address)?.value ? 0 : 1)
  const last = (cp: ClusterNode): number => Number(cp.name === target.name)
  const asked = (cp: ClusterNode): number => Number(cp !== likely)
  return [...cps].sort((a, b) => last(a) - last(b) || answered(a) - answered(b) || asked(a) - asked(b))
}

/** One fresh read of every input of the gate; a read that fails becomes the rule failure that names it. */
export async function readQuorum(
  run: Run,
  target: ClusterNode,
  previousLeaderIndex: number | undefined,
  /** the control plane the previous read's member list came through */
  answeredBefore?: ClusterNode,
): Promise<QuorumReads> {
  const cps = controlPlanes(run.inventory)
  const via = cps.find((cp) => cp.name !== target.name) ?? target
  // the member list and alarms are read beside etcd status, not after it (three reads in turn were most
  // of a gate's time), through the control plane likely to answer: the one that did last time, else `via`
  const likely = answeredBefore ?? via
  const early = { members: run.talosctl.etcdMembers(likely), alarms: run.talosctl.etcdAlarms(likely) }
  // awaited below only when the loop gets to `likely`: a failure is never an unhandled rejection
  for (const read of Object.values(early)) read.catch(() => undefined)
  const status = await run.talosctl.etcdStatus(cps, via)
  let members: QuorumReads['members'] = { error: 'no control plane answered `etcd members`' }
  let alarms: QuorumReads['alarms'] = { error: 'not read' }
  const errors: string[] = []
  for (const cp of readOrder(cps, target, status, likely)) {
    const fromEarly = cp === likely
    try {
      members = { via: cp.name, list: fromEarly ? await early.members : await run.talosctl.etcdMembers(cp) }
    } catch (err) {
      if (!(err instanceof NodeError)) throw err
      errors.push(`${cp.name}: ${err.message}`)
      continue
    }
    try {
      alarms = { list: fromEarly ? await early.alarms : await run.talosctl.etcdAlarms(cp) }
    } catch (err) {
      if (!(err instanceof NodeError)) throw err
      alarms = { error: `through ${cp.name}: ${err.message}` }
    }
    break
  }
  if ('error' in members && errors.length > 0) members = { error: errors.join('; ') }
  return { controlPlanes: cps, status, members, alarms, ...(previousLeaderIndex !== undefined ? { previousLeaderIndex } : {}) }
}

/**
 * How soon after the gate's first read the second is taken: Q8 (caught up) compares every member with
 * the leader's index of the read before, so the first read can never pass. A gap shorter than the poll
 * interval is stricter, not kinder (a member must have applied what the leader had a moment ago); if it
 * does not pass, the gate polls on at the run's interval as before.
 */
export const CATCH_UP_GAP_MS = 250

/**
 * Reads the gate's inputs afresh on each call, carrying what the next read needs: the leader's index
 * (Q8 compares with the read before) and the control plane the member list came through last.
 */
class QuorumReader {
  private previousLeaderIndex: number | undefined
  /** the control plane whose member list the last read got: the hint's reads go through it */
  answered: ClusterNode | undefined
  private readonly run: Run
  private readonly target: QuorumTarget
  constructor(run: Run, target: QuorumTarget) {
    this.run = run
    this.target = target
  }
  /** one read and its verdict; `againInMs` when the next read should come sooner than the run's interval */
  async read(): Promise<{ verdict: QuorumVerdict; againInMs?: number }> {
    const reads = await readQuorum(this.run, this.target.node, this.previousLeaderIndex, this.answered)
    const via = 'via' in reads.members ? reads.members.via : undefined
    this.answered = reads.controlPlanes.find((cp) => cp.name === via)
    const verdict = evaluateQuorum(reads, this.target)
    const firstWithLeader = this.previousLeaderIndex === undefined && verdict.leader !== undefined
    this.previousLeaderIndex = verdict.leader?.raftIndex
    return { verdict, ...(firstWithLeader ? { againInMs: CATCH_UP_GAP_MS } : {}) }
  }
}

/**
 * The gate before `target` goes down: Q1–Q9 read fresh on every poll (the run's poll helper, every
 * poll interval) until all hold; kind `quorum` after `timeoutMs` (readyTimeout by default), naming
 * each rule that still fails and its control plane. Returns the step's detail
 * (`3/3 members healthy, leader cp-2, raft 18233`).
 */
export async function waitForQuorum(
  report: StepReporter,
  run: Run,
  target: QuorumTarget,
  /** the command the hint offers to run again once the gate's cause is gone */
  rerun: string,
  timeoutMs: number = run.settings.readyTimeoutMs,
): Promise<string> {
  const reader = new QuorumReader(run, target)
  try {
    const verdict = await report.poll(async (): Promise<PollAnswer<QuorumVerdict>> => {
      const { verdict, againInMs } = await reader.read()
      // the member count does not change while the gate waits: refused at once, with what to do instead
      const lasting = verdict.failures.find((f) => f.lasting)
      if (lasting)
        throw new NodeError(
          'quorum',
          `etcd quorum gate before ${target.node.name}: ${describeFailure(lasting)}`,
          hintForMemberCount(verdict.members, target.node, rerun, target.instead),
        )
      if (verdict.failures.length === 0) return { done: true, value: verdict }
      const state = verdict.failures.map(describeFailure).join('; ')
      return againInMs === undefined ? { done: false, state } : { done: false, state, againInMs }
    }, timeoutMs)
    const leader = verdict.leader
    return `${verdict.healthy}/${verdict.members} members healthy, leader ${leader?.controlPlane ?? leader?.id ?? 'none'}, raft ${leader?.raftIndex ?? '?'}`
  } catch (err) {
    if (!(err instanceof PollTimeout)) throw err
    throw new NodeError(
      'quorum',
      `etcd quorum gate before ${target.node.name} not passed within ${Math.round(err.waitedMs / 1000)}s: ${err.lastState}${lastErrorNote(err.lastError)}`,
      hintForQuorum(reader.answered ?? controlPlanes(run.inventory).find((cp) => cp.name !== target.node.name) ?? target.node, rerun),
    )
  }
}

/**
 * What still concerns `node`'s own member once it is back: the rules Q1–Q8 failing on it, and those
 * naming no control plane (no member list, no leader agreed, caught up not established yet), without
 * which no member can be judged. Another member's trouble and Q9 are the next gate's to judge.
 */
export function ownMemberFailures(verdict: QuorumVerdict, node: ClusterNode): RuleFailure[] {
  return verdict.failures.filter((f) => f.rule !== 'Q9' && (f.controlPlane === undefined || f.controlPlane === node.name))
}

/**
 * After a control plane's reboot (upgrade:talos, cluster:apply): its own etcd member answering,
 * started, no learner, no errors or alarm, following the leader and caught up (Q1–Q8 on it), before the
 * node counts as done. The next control plane's gate would see a member still behind, but the last
 * control plane has none after it: the workers would start beside a member still catching up.
 * Kind `etcd` after `timeoutMs`; returns the node's detail (`etcd member healthy and caught up (leader cp-2, raft 18233)`).
 */
export async function waitForOwnMember(
  report: StepReporter,
  run: Run,
  node: ClusterNode,
  /** the command the hint offers to run again (the node is done: a rerun goes on with the rest) */
  rerun: string,
  timeoutMs: number = run.settings.readyTimeoutMs,
): Promise<string> {
  // the member count is not this check's to judge (Q9 is filtered out): a single member passes too
  const reader = new QuorumReader(run, { node, acceptDowntime: true })
  try {
    const verdict = await report.poll(async (): Promise<PollAnswer<QuorumVerdict>> => {
      const { verdict, againInMs } = await reader.read()
      const mine = ownMemberFailures(verdict, node)
      if (mine.length === 0) return { done: true, value: verdict }
      const state = mine.map(describeFailure).join('; ')
      return againInMs === undefined ? { done: false, state } : { done: false, state, againInMs }
    }, timeoutMs)
    return `etcd member healthy and caught up (leader ${verdict.leader?.controlPlane ?? verdict.leader?.id ?? 'none'}, raft ${verdict.leader?.raftIndex ?? '?'})`
  } catch (err) {
    if (!(err instanceof PollTimeout)) throw err
    throw new NodeError(
      'etcd',
      `${node.name}'s etcd member not healthy and caught up within ${Math.round(err.waitedMs / 1000)}s after its reboot: ${err.lastState}${lastErrorNote(err.lastError)}`,
      hintForMemberBack(node, reader.answered ?? controlPlanes(run.inventory).find((cp) => cp.name !== node.name) ?? node, rerun),
    )
  }
}

// The etcd quorum gate (lib/phases/shared/quorum.ts, docs/day2-design.md 2.3): each rule Q1–Q9 on
// parsed reads, for 1, 2, 3 and 5 control planes, and waitForQuorum through the run's poll helper.
// The N = 2 text is Talos's own (internal/pkg/etcd/etcd.go ValidateForUpgrade, both tags).
import { describe, expect, it } from 'vitest'
import { NodeError } from '../../lib/core/errors.js'
import type { ClusterNode } from '../../lib/core/model.js'
import type { StepReporter } from '../../lib/engine/phase.js'
import type { Run } from '../../lib/engine/run.js'
import { loadInventory } from '../../lib/input/inventory.js'
import {
  CATCH_UP_GAP_MS,
  describeFailure,
  evaluateQuorum,
  keepsQuorumWithout,
  ownMemberFailures,
  quorumOf,
  waitForOwnMember,
  waitForQuorum,
  type QuorumReads,
  type QuorumRule,
} from '../../lib/phases/shared/quorum.js'
import type { EtcdMember, EtcdStatus, NodeAnswer } from '../../lib/tools/talosctl.js'
import { PollTimeout, type PollAnswer } from '../../lib/wait/poll.js'
import { clusterDir } from './fixtures.js'

function cluster(n: number): ClusterNode[] {
  const inventory = loadInventory(
    clusterDir([
      ...Array.from({ length: n }, (_, i) => ({ hostname: `cp-${i + 1}`, ip: `10.5.0.${11 + i}`, cp: true })),
      { hostname: 'wrkr-1', ip: '10.5.0.21', cp: false },
    ]),
  )
  return inventory.nodes.filter((node) => node.role === 'controlplane')
}

const idOf = (i: number): string => `${(i + 1).toString(16)}`.padStart(4, '0').repeat(4)
const member = (cp: ClusterNode, i: number): EtcdMember => ({
  id: idOf(i),
  hostname: cp.name,
  peerUrls: [`https://${cp.address}:2380`],
  isLearner: false,
})
const row = (cp: ClusterNode, i: number, leader = 0, index = 100): EtcdStatus => ({
  node: cp.address,
  memberId: idOf(i),
  leader: idOf(leader),
  raftIndex: index,
  raftTerm: 2,
  raftAppliedIndex: index,
  learner: false,
  protocol: '3.6.11',
  errors: '',
  dbSize: '20 kB',
  inUse: '16 kB (80.00%)',
})
const failed = (message: string): NodeAnswer<EtcdStatus> => ({ error: new NodeError('unreachable', message, 'h') })

/** a healthy read of `n` control planes, cp-1 the leader, caught up since the previous read */
function healthy(n: number): QuorumReads {
  const cps = cluster(n)
  return {
    controlPlanes: cps,
    status: new Map(cps.map((cp, i) => [cp.address, { value: row(cp, i) }])),
    members: { via: 'cp-1', list: cps.map(member) },
    alarms: { list: [] },
    previousLeaderIndex: 90,
  }
}

const rules = (reads: QuorumReads, target = reads.controlPlanes[0]!, acceptDowntime = false) =>
  evaluateQuorum(reads, { node: target, acceptDowntime }).failures.map(describeFailure)
const ruleIds = (reads: QuorumReads, target = reads.controlPlanes[0]!): QuorumRule[] => [
  ...new Set(evaluateQuorum(reads, { node: target }).failures.map((f) => f.rule)),
]
const statusOf = (reads: QuorumReads, name: string): EtcdStatus => {
  const cp = reads.controlPlanes.find((c) => c.name === name)!
  return reads.status.get(cp.address)!.value!
}

describe('the quorum arithmetic (one rule for the gate and reset)', () => {
  it('quorum of N is ⌊N/2⌋+1; one member may go down only when the healthy others are still a quorum of N', () => {
    expect([1, 2, 3, 4, 5].map(quorumOf)).toEqual([1, 2, 2, 3, 3])
    // healthy − 1 ≥ ⌊N/2⌋+1 with every member healthy: N = 1 and N = 2 cannot lose one, 3 and 5 can
    expect([1, 2, 3, 4, 5].map((n) => keepsQuorumWithout(n, n - 1))).toEqual([false, false, true, true, true])
    expect(keepsQuorumWithout(5, 2)).toBe(false)
    expect(keepsQuorumWithout(3, 1)).toBe(false)
  })
})

describe('evaluateQuorum: all rules hold', () => {
  it.each([3, 5])('N = %i, all healthy and caught up: passes, leader named', (n) => {
    const reads = healthy(n)
    const verdict = evaluateQuorum(reads, { node: reads.controlPlanes[1]! })
    expect(verdict.failures).toEqual([])
    expect(verdict).toMatchObject({ members: n, healthy: n, leader: { id: idOf(0), controlPlane: 'cp-1', raftIndex: 100 } })
  })
})

describe('Q1 every control plane answers etcd status', () => {
  it('a control plane named in the WARNING fails with its own error; taking another down then breaks quorum (Q9)', () => {
    const reads = healthy(3)
    reads.status.set('10.5.0.12', failed('rpc error: code = Unavailable desc = connection refused'))
    expect(rules(reads)).toEqual([
      'Q1 cp-2: etcd status: rpc error: code = Unavailable desc = connection refused',
      'Q9 cp-1: taking cp-1 down leaves 1 healthy of 3 members, 2 needed',
    ])
  })

  it('a control plane with no row at all fails too (exit 0 proves nothing)', () => {
    const reads = healthy(3)
    reads.status.delete('10.5.0.13')
    expect(rules(reads)).toContain('Q1 cp-3: etcd status: no answer')
  })
})

describe('Q2 no member reports errors', () => {
  it('an ERRORS cell fails its control plane', () => {
    const reads = healthy(3)
    statusOf(reads, 'cp-3').errors = 'etcdserver: mvcc: database space exceeded'
    expect(rules(reads)[0]).toBe(`Q2 cp-3: member ${idOf(2)} reports errors: etcdserver: mvcc: database space exceeded`)
  })
})

describe('Q3 no alarms', () => {
  it('an alarm is named with the member and its control plane', () => {
    const reads = healthy(3)
    reads.alarms = { list: [{ memberId: idOf(1), alarm: 'NOSPACE' }] }
    expect(rules(reads)).toEqual([
      `Q3 cp-2: etcd alarm NOSPACE on member ${idOf(1)}`,
      'Q9 cp-1: taking cp-1 down leaves 1 healthy of 3 members, 2 needed',
    ])
  })

  it('an alarm list that cannot be read establishes nothing', () => {
    const reads = healthy(3)
    reads.alarms = { error: 'through cp-1: i/o timeout' }
    expect(rules(reads)).toEqual(['Q3: the alarm list could not be read: through cp-1: i/o timeout'])
  })
})

describe('Q4 no learner', () => {
  it('a learner in etcd status fails', () => {
    const reads = healthy(3)
    statusOf(reads, 'cp-3').learner = true
    expect(ruleIds(reads)).toEqual(['Q4', 'Q9'])
    expect(rules(reads)[0]).toBe(`Q4 cp-3: member ${idOf(2)} is a learner`)
  })

  it('a learner only the member list shows fails too', () => {
    const reads = healthy(3)
    const list = (reads.members as { list: EtcdMember[] }).list
    list[2] = { ...list[2]!, isLearner: true }
    expect(rules(reads)[0]).toBe(`Q4 cp-3: member ${idOf(2)} is a learner`)
  })
})

describe('Q5 every member started', () => {
  it('a member without a name has not started (Talos: all members must be running)', () => {
    const reads = healthy(3)
    const list = (reads.members as { list: EtcdMember[] }).list
    list[2] = { ...list[2]!, hostname: '' }
    reads.status.set('10.5.0.13', failed('failed to create etcd client'))
    expect(ruleIds(reads)).toEqual(['Q1', 'Q5', 'Q9'])
    expect(rules(reads)).toContain(`Q5 cp-3: etcd member ${idOf(2)} is not started, all members must be running to perform an upgrade`)
  })
})

describe('Q6 one leader', () => {
  it('a member that knows no leader', () => {
    const reads = healthy(3)
    statusOf(reads, 'cp-2').leader = '0000000000000000'
    expect(rules(reads)[0]).toBe(`Q6 cp-2: member ${idOf(1)} knows no leader`)
  })

  it('members that disagree on the leader', () => {
    const reads = healthy(3)
    statusOf(reads, 'cp-3').leader = idOf(2)
    expect(rules(reads)[0]).toBe(
      `Q6: the members disagree on the leader: cp-1 follows ${idOf(0)}, cp-2 follows ${idOf(0)}, cp-3 follows ${idOf(2)}`,
    )
  })

  it('a leader that is no member of the list', () => {
    const reads = healthy(3)
    for (const name of ['cp-1', 'cp-2', 'cp-3']) statusOf(reads, name).leader = 'ffffffffffffffff'
    expect(rules(reads)).toContain('Q6: the leader ffffffffffffffff is not in the member list')
  })
})

describe('Q7 members = control planes', () => {
  it('a member at no control plane’s address, and a control plane without a member', () => {
    const reads = healthy(3)
    const list = (reads.members as { list: EtcdMember[] }).list
    list[2] = { ...list[2]!, hostname: 'old-cp', peerUrls: ['https://10.5.0.99:2380'] }
    expect(rules(reads)).toEqual(
      expect.arrayContaining([
        `Q7: member ${idOf(2)} (old-cp) at https://10.5.0.99:2380 is no control plane of the inventory`,
        'Q7 cp-3: no etcd member at 10.5.0.13',
      ]),
    )
  })

  it('a member carrying a control plane’s name at another address is refused, as reset refuses it', () => {
    const reads = healthy(3)
    const list = (reads.members as { list: EtcdMember[] }).list
    list[2] = { ...list[2]!, peerUrls: ['https://10.5.0.43:2380'] }
    expect(rules(reads)).toContain(
      `Q7 cp-3: etcd member ${idOf(2)} is named cp-3 but its peer URL is at 10.5.0.43, not cp-3's inventory address 10.5.0.13`,
    )
  })

  it('no member list: nothing establishes membership', () => {
    const reads = healthy(3)
    reads.members = { error: 'cp-2: connection refused; cp-3: connection refused' }
    expect(rules(reads)).toEqual(['Q7: the member list could not be read: cp-2: connection refused; cp-3: connection refused'])
  })
})

describe('Q8 caught up', () => {
  it('the first read cannot tell: a second read one poll interval later is needed', () => {
    const reads = healthy(3)
    delete reads.previousLeaderIndex
    expect(rules(reads)).toEqual(['Q8: caught up: not established yet (needs a second read one poll interval later)'])
  })

  it('a member whose applied index is behind the leader’s index of the previous read', () => {
    const reads = healthy(3)
    statusOf(reads, 'cp-3').raftAppliedIndex = 80
    expect(rules(reads)).toEqual([
      `Q8 cp-3: member ${idOf(2)} has applied 80, behind the leader's 90 of the previous read`,
      'Q9 cp-1: taking cp-1 down leaves 1 healthy of 3 members, 2 needed',
    ])
  })
})

describe('Q9 quorum survives, by cluster size', () => {
  it('N = 1: refused unless the downtime is accepted', () => {
    const reads = healthy(1)
    expect(rules(reads)).toEqual([
      "Q9 cp-1: cp-1 is the only etcd member: taking it down stops the cluster's API (accept the downtime to go on)",
    ])
    expect(rules(reads, reads.controlPlanes[0], true)).toEqual([])
  })

  it('N = 2: refused with Talos’s own text, all healthy or not', () => {
    const reads = healthy(2)
    expect(rules(reads)).toEqual(['Q9 cp-1: etcd member count(2) is insufficient to maintain quorum if upgrade commences'])
    expect(rules(reads, reads.controlPlanes[1], true)).toEqual([
      'Q9 cp-2: etcd member count(2) is insufficient to maintain quorum if upgrade commences',
    ])
  })

  it('N = 3: one down leaves no room for another', () => {
    const reads = healthy(3)
    reads.status.set('10.5.0.13', failed('connection refused'))
    expect(ruleIds(reads, reads.controlPlanes[1])).toEqual(['Q1', 'Q9'])
    expect(rules(reads, reads.controlPlanes[1])).toContain('Q9 cp-2: taking cp-2 down leaves 1 healthy of 3 members, 2 needed')
  })

  it('N = 5: one down still leaves a quorum (only Q1 fails); two down do not', () => {
    const reads = healthy(5)
    reads.status.set('10.5.0.15', failed('connection refused'))
    expect(ruleIds(reads)).toEqual(['Q1'])
    reads.status.set('10.5.0.14', failed('connection refused'))
    expect(rules(reads)).toContain('Q9 cp-1: taking cp-1 down leaves 2 healthy of 5 members, 3 needed')
  })

  it('the target itself down (N = 3): the others are counted, and both healthy keep a quorum', () => {
    const reads = healthy(3)
    reads.status.set('10.5.0.11', failed('connection refused'))
    // cp-1 is the leader in this read and did not answer: Q6 says so too
    expect(ruleIds(reads)).toEqual(['Q1', 'Q6'])
  })
})

describe('waitForQuorum through the poll helper', () => {
  function fakeRun(n: number, read: (poll: number) => QuorumReads) {
    let polls = 0
    let current = read(0)
    const cps = current.controlPlanes
    const talosctl = {
      etcdStatus: () => {
        current = read(polls++)
        return Promise.resolve(current.status)
      },
      etcdMembers: () =>
        'list' in current.members
          ? Promise.resolve(current.members.list)
          : Promise.reject(new NodeError('unreachable', current.members.error, 'h')),
      etcdAlarms: () =>
        'list' in current.alarms
          ? Promise.resolve(current.alarms.list)
          : Promise.reject(new NodeError('timeout', current.alarms.error, 'h')),
    }
    const run = { inventory: { nodes: cps }, talosctl, settings: { readyTimeoutMs: 60_000 } } as unknown as Run
    // the run's poller, counted in reads rather than time (deterministic on a loaded machine): at most 6 reads
    /** how soon each answer not done asked to be asked again (undefined: the run's interval) */
    const againIn: Array<number | undefined> = []
    const report = {
      poll: async <T>(check: (ms: number) => Promise<PollAnswer<T>>, timeoutMs: number) => {
        let state = 'not checked yet'
        for (let read = 0; read < 6; read++) {
          const answer = await check(0)
          if (answer.done) return answer.value
          state = answer.state
          againIn.push(answer.againInMs)
        }
        throw new PollTimeout(state, timeoutMs)
      },
    } as unknown as StepReporter
    return { run, report, cps, polls: () => polls, againIn }
  }

  it('passes on the second read once every rule holds (the first cannot tell Q8), with the step detail', async () => {
    const { run, report, cps, polls } = fakeRun(3, (poll) => {
      const reads = healthy(3)
      for (const name of ['cp-1', 'cp-2', 'cp-3']) {
        statusOf(reads, name).raftIndex = 100 + poll
        statusOf(reads, name).raftAppliedIndex = 100 + poll
      }
      // cp-3 is down on the first two reads
      if (poll < 2) reads.status.set('10.5.0.13', failed('connection refused'))
      return reads
    })
    const detail = await waitForQuorum(report, run, { node: cps[1]! }, 'task upgrade:talos')
    expect(detail).toBe('3/3 members healthy, leader cp-1, raft 102')
    expect(polls()).toBe(3)
  })

  it('fails with kind quorum after the deadline, each failing rule named with its control plane', async () => {
    const { run, report, cps } = fakeRun(3, () => {
      const reads = healthy(3)
      reads.alarms = { list: [{ memberId: idOf(2), alarm: 'NOSPACE' }] }
      return reads
    })
    const gate = waitForQuorum(report, run, { node: cps[0]! }, 'task upgrade:talos', 30_000)
    await expect(gate).rejects.toBeInstanceOf(NodeError)
    await expect(gate).rejects.toMatchObject({
      kind: 'quorum',
      message: expect.stringMatching(
        new RegExp(
          `^etcd quorum gate before cp-1 not passed within 30s: Q3 cp-3: etcd alarm NOSPACE on member ${idOf(2)}; Q9 cp-1: taking cp-1 down leaves 1 healthy of 3 members, 2 needed`,
        ),
      ),
      hint: expect.stringMatching(/etcd alarm list.*nothing was taken down, so then run again: task upgrade:talos$/),
    })
  })

  it('the member count (N = 2, N = 1) refuses on the first read, no wait: the hint names the way out, its command last', async () => {
    const two = fakeRun(2, () => healthy(2))
    const gate = waitForQuorum(
      two.report,
      two.run,
      { node: two.cps[0]!, instead: { workersAlone: 'task upgrade:talos NODES=wrkr-1' } },
      'task upgrade:talos NODES=cp-1',
    )
    await expect(gate).rejects.toMatchObject({
      kind: 'quorum',
      message: 'etcd quorum gate before cp-1: Q9 cp-1: etcd member count(2) is insufficient to maintain quorum if upgrade commences',
      hint: expect.stringMatching(
        /^etcd of 2 members loses its quorum with either one down.*add a third control plane.*then run again: task upgrade:talos NODES=cp-1; .*run: task upgrade:talos NODES=wrkr-1$/,
      ),
    })
    expect(two.polls()).toBe(1)
    const one = fakeRun(1, () => healthy(1))
    await expect(
      waitForQuorum(
        one.report,
        one.run,
        { node: one.cps[0]!, instead: { acceptDowntime: 'task upgrade:talos -- --accept-downtime' } },
        'r',
      ),
    ).rejects.toMatchObject({
      kind: 'quorum',
      hint: expect.stringMatching(/^cp-1 is the only etcd member.*run: task upgrade:talos -- --accept-downtime$/),
    })
    expect(one.polls()).toBe(1)
  })

  it('the member list read through another control plane when the first cannot answer it', async () => {
    const reads = healthy(3)
    const asked: string[] = []
    const run = {
      inventory: { nodes: reads.controlPlanes },
      settings: { readyTimeoutMs: 60_000 },
      talosctl: {
        etcdStatus: () => Promise.resolve(reads.status),
        etcdMembers: (cp: ClusterNode) => {
          asked.push(cp.name)
          return cp.name === 'cp-2'
            ? Promise.reject(new NodeError('unreachable', 'connection refused', 'h'))
            : Promise.resolve((reads.members as { list: EtcdMember[] }).list)
        },
        etcdAlarms: () => Promise.resolve([]),
      },
    } as unknown as Run
    const { readQuorum } = await import('../../lib/phases/shared/quorum.js')
    const read = await readQuorum(run, reads.controlPlanes[0]!, 90)
    // the target last: cp-2 first, then cp-3
    expect(asked).toEqual(['cp-2', 'cp-3'])
    expect(read.members).toMatchObject({ via: 'cp-3' })
    expect(evaluateQuorum(read, { node: reads.controlPlanes[0]! }).failures).toEqual([])
  })

  it('the second read comes after the short catch-up gap, not a whole interval; later ones at the interval', async () => {
    // cp-3 applies nothing new: Q8 fails on every read after the first
    const { run, report, cps, againIn } = fakeRun(3, (poll) => {
      const reads = healthy(3)
      for (const name of ['cp-1', 'cp-2']) {
        statusOf(reads, name).raftIndex = 100 + poll
        statusOf(reads, name).raftAppliedIndex = 100 + poll
      }
      statusOf(reads, 'cp-3').raftIndex = 99
      statusOf(reads, 'cp-3').raftAppliedIndex = 99
      return reads
    })
    await expect(waitForQuorum(report, run, { node: cps[0]! }, 'r', 30_000)).rejects.toMatchObject({
      message: expect.stringContaining('Q8 cp-3: member'),
    })
    expect(CATCH_UP_GAP_MS).toBeLessThan(1000)
    expect(againIn).toEqual([CATCH_UP_GAP_MS, undefined, undefined, undefined, undefined, undefined])
  })

  it('the member list and alarms are asked while etcd status is read, through the control plane that answered before', async () => {
    const reads = healthy(3)
    const asked: string[] = []
    let askedBeforeStatus: string[] = []
    const run = {
      inventory: { nodes: reads.controlPlanes },
      settings: { readyTimeoutMs: 60_000 },
      talosctl: {
        etcdStatus: () => {
          askedBeforeStatus = [...asked]
          return Promise.resolve(reads.status)
        },
        etcdMembers: (cp: ClusterNode) => {
          asked.push(`members ${cp.name}`)
          return Promise.resolve((reads.members as { list: EtcdMember[] }).list)
        },
        etcdAlarms: (cp: ClusterNode) => {
          asked.push(`alarms ${cp.name}`)
          return Promise.resolve([])
        },
      },
    } as unknown as Run
    const { readQuorum } = await import('../../lib/phases/shared/quorum.js')
    const [cp1, , cp3] = reads.controlPlanes
    const first = await readQuorum(run, cp1!, undefined)
    expect(askedBeforeStatus).toEqual(['members cp-2', 'alarms cp-2'])
    expect(first.members).toMatchObject({ via: 'cp-2' })
    asked.length = 0
    const second = await readQuorum(run, cp1!, 100, cp3)
    // one read of each, through cp-3
    expect(asked).toEqual(['members cp-3', 'alarms cp-3'])
    expect(second.members).toMatchObject({ via: 'cp-3' })
  })

  it("after a control plane's reboot its own member is waited for: caught up (a second read), then done; another member's trouble is the next gate's", async () => {
    const { run, report, cps, polls } = fakeRun(3, (poll) => {
      const reads = healthy(3)
      for (const name of ['cp-1', 'cp-2', 'cp-3']) statusOf(reads, name).raftIndex = 100 + 10 * poll
      statusOf(reads, 'cp-1').raftAppliedIndex = 100 + 10 * poll
      // cp-2 just came back: behind the leader on the first two reads (Q8), then caught up
      statusOf(reads, 'cp-2').raftAppliedIndex = poll < 2 ? 95 : 100 + 10 * poll
      // cp-3 is a learner all along: not cp-2's to wait for
      statusOf(reads, 'cp-3').learner = true
      return reads
    })
    const detail = await waitForOwnMember(report, run, cps[1]!, 'task upgrade:talos TALOS_VERSION=v1.13.9')
    expect(detail).toBe('etcd member healthy and caught up (leader cp-1, raft 120)')
    expect(polls()).toBe(3)
  })

  it("fails with kind etcd naming its member's rule, the hint's reads and the rerun last; a single member passes (no Q9)", async () => {
    const behind = fakeRun(3, (poll) => {
      const reads = healthy(3)
      statusOf(reads, 'cp-3').raftAppliedIndex = 50 + poll
      return reads
    })
    const wait = waitForOwnMember(behind.report, behind.run, behind.cps[2]!, 'task upgrade:talos TALOS_VERSION=v1.13.9', 30_000)
    await expect(wait).rejects.toMatchObject({
      kind: 'etcd',
      message: `cp-3's etcd member not healthy and caught up within 30s after its reboot: Q8 cp-3: member ${idOf(2)} has applied 55, behind the leader's 100 of the previous read`,
      hint: expect.stringMatching(
        /etcd members.*service etcd.*cp-3 itself is done and no further node was started: once its member is healthy, run again: task upgrade:talos TALOS_VERSION=v1\.13\.9$/,
      ),
    })
    const one = fakeRun(1, () => healthy(1))
    await expect(waitForOwnMember(one.report, one.run, one.cps[0]!, 'task upgrade:talos')).resolves.toContain('healthy and caught up')
  })

  it('ownMemberFailures keeps the rules on the node and those naming none, never Q9', () => {
    const reads = healthy(3)
    delete reads.previousLeaderIndex
    statusOf(reads, 'cp-1').learner = true
    statusOf(reads, 'cp-3').errors = 'NOSPACE'
    const verdict = evaluateQuorum(reads, { node: reads.controlPlanes[0]!, acceptDowntime: true })
    expect(ownMemberFailures(verdict, reads.controlPlanes[0]!).map(describeFailure)).toEqual([
      `Q4 cp-1: member ${idOf(0)} is a learner`,
      'Q8: caught up: not established yet (needs a second read one poll interval later)',
    ])
    expect(ownMemberFailures(verdict, reads.controlPlanes[1]!).map(describeFailure)).toEqual([
      'Q8: caught up: not established yet (needs a second read one poll interval later)',
    ])
  })
})

import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { NodeError, StepError } from '../../lib/core/errors.js'
import type { ClusterNode } from '../../lib/core/model.js'
import type { NodeResult, PhaseResult } from '../../lib/core/results.js'
import type { NodeStep, Phase } from '../../lib/engine/phase.js'
import type { Run } from '../../lib/engine/run.js'
import { runPhases } from '../../lib/engine/runner.js'

function nodes(count: number): ClusterNode[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `n-${i + 1}`,
    address: `127.0.0.${i + 1}`,
    role: i === 0 ? 'controlplane' : 'worker',
    configFile: '/dev/null',
  }))
}

function fakeRun(nodeList: ClusterNode[], concurrency: number, failFast = false): Run {
  return {
    command: 'test',
    nodes: nodeList,
    settings: { concurrency },
    options: { dryRun: false, failFast, reapply: false },
    signal: new AbortController().signal,
    failed: new Map(),
    journal: { record: () => undefined, recordNode: () => undefined, save: () => undefined },
  } as unknown as Run
}

/** a phase of one node step, `work`, with the step's other fields as given */
function nodePhase(name: Phase['name'], run: NodeStep['run'], step: Partial<NodeStep> = {}): Phase {
  return { name, title: 'test', steps: () => [{ kind: 'node', title: 'work', run, ...step }] }
}

function nodesByName(results: PhaseResult[]): Record<string, NodeResult | undefined> {
  return Object.fromEntries((results[0]?.nodes ?? []).map((n) => [n.name, n]))
}

/** the nodes a stopOnFailure step never started after `failed` failed */
function expectNotStarted(byName: Record<string, NodeResult | undefined>, names: string[], failed: string): void {
  for (const name of names) {
    expect(byName[name]?.status).toBe('not-run')
    expect(byName[name]?.detail).toBe(`not started (stopped after ${failed} failed)`)
  }
}

describe('runPhases', () => {
  it('never has more than CONCURRENCY nodes in flight, and reports every node', async () => {
    let inFlight = 0
    let peak = 0
    const phase = nodePhase('apply', async () => {
      inFlight++
      peak = Math.max(peak, inFlight)
      await sleep(20)
      inFlight--
    })
    const results = await runPhases(fakeRun(nodes(10), 3), [phase])
    expect(peak).toBe(3)
    expect(results[0]?.nodes.map((n) => n.status)).toEqual(Array(10).fill('ok'))
  })

  it('runs one node at a time with CONCURRENCY 1', async () => {
    const order: string[] = []
    const phase = nodePhase('apply', async (node) => {
      order.push(`start ${node.name}`)
      await sleep(5)
      order.push(`end ${node.name}`)
    })
    await runPhases(fakeRun(nodes(3), 1), [phase])
    expect(order).toEqual(['start n-1', 'end n-1', 'start n-2', 'end n-2', 'start n-3', 'end n-3'])
  })

  it('lets the other nodes carry on after one fails, and marks it not-run in later phases', async () => {
    const seen: string[] = []
    const first = nodePhase('apply', async (node) => {
      if (node.name === 'n-2') throw new NodeError('unreachable', 'refused', 'task bootstrap:node NODE=n-2')
    })
    const second = nodePhase('verify', async (node) => {
      seen.push(node.name)
    })
    const results = await runPhases(fakeRun(nodes(3), 2), [first, second])
    expect(results[0]?.nodes.map((n) => n.status)).toEqual(['ok', 'failed', 'ok'])
    expect(results[0]?.nodes[1]?.error).toEqual({ kind: 'unreachable', message: 'refused', hint: 'task bootstrap:node NODE=n-2' })
    expect(results[0]?.ok).toBe(false)
    expect(results[1]?.nodes.map((n) => n.status)).toEqual(['ok', 'not-run', 'ok'])
    expect(results[1]?.nodes[1]?.detail).toBe('failed in apply')
    expect(seen.sort()).toEqual(['n-1', 'n-3'])
  })

  it('with --fail-fast starts no further node after a failure', async () => {
    const started: string[] = []
    const phase = nodePhase('apply', async (node) => {
      started.push(node.name)
      if (node.name === 'n-1') throw new NodeError('config-invalid', 'bad', 'fix it')
    })
    const results = await runPhases(fakeRun(nodes(3), 1, true), [phase])
    expect(started).toEqual(['n-1'])
    expect(results[0]?.nodes.map((n) => n.status)).toEqual(['failed', 'not-run', 'not-run'])
  })

  it('names a failed cluster step as the cause for the nodes it blocks', async () => {
    const phase: Phase = {
      name: 'bootstrap',
      title: 'test',
      steps: () => [
        {
          kind: 'cluster',
          name: 'etcd-bootstrap',
          title: 'bootstrap etcd',
          blocks: (n) => n.role === 'controlplane',
          run: async () => {
            throw new NodeError('not-ready-yet', 'bootstrap is not available yet', 'retry later')
          },
        },
        { kind: 'node', title: 'join', run: async () => undefined },
      ],
    }
    const results = await runPhases(fakeRun(nodes(2), 2), [phase])
    expect(results[0]?.steps[0]).toMatchObject({ name: 'etcd-bootstrap', status: 'failed', error: { kind: 'not-ready-yet' } })
    expect(results[0]?.nodes[0]).toMatchObject({ status: 'failed', detail: 'etcd-bootstrap failed', error: { kind: 'not-ready-yet' } })
    expect(results[0]?.nodes[0]?.error?.message).toBe('etcd-bootstrap: bootstrap is not available yet')
    expect(results[0]?.nodes[1]?.status).toBe('ok')
  })

  it('a cluster step that names each node wrong gives each blocked node its own message and hint', async () => {
    const phase: Phase = {
      name: 'wait-ready',
      title: 'test',
      steps: () => [
        {
          kind: 'cluster',
          name: 'memory-sizes',
          title: 'memory',
          blocks: () => true,
          run: async () => {
            throw new StepError(
              'hardware',
              'n-2 short; n-3 short',
              'for n-2: fix n-2 | for n-3: fix n-3',
              new Map([
                ['n-2', { kind: 'hardware' as const, message: 'n-2 short', hint: 'fix n-2' }],
                ['n-3', { kind: 'hardware' as const, message: 'n-3 short', hint: 'fix n-3' }],
              ]),
            )
          },
        },
      ],
    }
    const results = await runPhases(fakeRun(nodes(3), 3), [phase])
    const [n1, n2, n3] = results[0]?.nodes ?? []
    expect(n2?.error).toEqual({ kind: 'hardware', message: 'memory-sizes: n-2 short', hint: 'fix n-2' })
    expect(n3?.error).toEqual({ kind: 'hardware', message: 'memory-sizes: n-3 short', hint: 'fix n-3' })
    // a node the step blocks without naming it: the step's own error
    expect(n1?.error).toEqual({
      kind: 'hardware',
      message: 'memory-sizes: n-2 short; n-3 short',
      hint: 'for n-2: fix n-2 | for n-3: fix n-3',
    })
  })

  it('with --fail-fast, a later phase that never ran is not ok and says why for every node', async () => {
    const failing = nodePhase('apply', async (node) => {
      if (node.name === 'n-1') throw new NodeError('config-invalid', 'bad', 'fix it')
    })
    const later: Phase = { name: 'verify', title: 'second', steps: () => [{ kind: 'node', title: 'work', run: async () => undefined }] }
    const last: Phase = {
      name: 'bootstrap',
      title: 'third',
      steps: () => [{ kind: 'cluster', name: 'etcd-bootstrap', title: 'etcd', run: async () => 'done' }],
    }
    const results = await runPhases(fakeRun(nodes(3), 1, true), [failing, later, last])
    expect(results.map((p) => [p.name, p.ok])).toEqual([
      ['apply', false],
      ['verify', false],
      ['bootstrap', false],
    ])
    expect(results[1]?.nodes.map((n) => [n.status, n.detail])).toEqual([
      ['not-run', 'failed in apply'],
      ['not-run', 'stopped by --fail-fast'],
      ['not-run', 'stopped by --fail-fast'],
    ])
  })

  it("a step's own concurrency bounds it whatever CONCURRENCY; stopOnFailure takes no new node after the first failure", async () => {
    let inFlight = 0
    let peak = 0
    const started: string[] = []
    const phase: Phase = {
      name: 'cluster-apply',
      title: 'test',
      steps: () => [
        {
          kind: 'node',
          title: 'one at a time',
          concurrency: () => 1,
          stopOnFailure: true,
          run: async (node) => {
            started.push(node.name)
            inFlight++
            peak = Math.max(peak, inFlight)
            await sleep(10)
            inFlight--
            if (node.name === 'n-2') throw new NodeError('quorum', 'gate not passed', 'fix it')
          },
        },
      ],
    }
    const results = await runPhases(fakeRun(nodes(4), 4), [phase])
    expect(peak).toBe(1)
    expect(started).toEqual(['n-1', 'n-2'])
    const byName = nodesByName(results)
    expect(byName['n-1']?.status).toBe('ok')
    expect(byName['n-2']?.status).toBe('failed')
    expectNotStarted(byName, ['n-3', 'n-4'], 'n-2')
  })

  it("stopOnFailure 'phase': a failure in the first such step starts no node of the next (upgrade:talos: a control plane failed, no worker starts); order decides who goes first", async () => {
    const started: string[] = []
    const phase: Phase = {
      name: 'upgrade-talos',
      title: 'test',
      steps: () => [
        {
          kind: 'node',
          title: 'control planes, the last listed first',
          applies: (node) => node.name !== 'n-4' && node.name !== 'n-5',
          concurrency: () => 1,
          stopOnFailure: 'phase',
          order: (list) => [...list].reverse(),
          run: async (node) => {
            started.push(node.name)
            await sleep(5)
            if (node.name === 'n-2') throw new NodeError('rolled-back', 'rolled back: runs the old version', 'fix it')
          },
        },
        {
          kind: 'node',
          title: 'workers',
          applies: (node) => node.name === 'n-4' || node.name === 'n-5',
          stopOnFailure: 'phase',
          run: (node) => {
            started.push(node.name)
            return Promise.resolve()
          },
        },
      ],
    }
    const results = await runPhases(fakeRun(nodes(5), 4), [phase])
    // n-3 first (the order reversed), then n-2 failed: n-1 and both workers never start
    expect(started).toEqual(['n-3', 'n-2'])
    const byName = nodesByName(results)
    expect(byName['n-3']?.status).toBe('ok')
    expect(byName['n-2']?.error?.kind).toBe('rolled-back')
    expectNotStarted(byName, ['n-1', 'n-4', 'n-5'], 'n-2')
  })

  it('stopOnFailure true stays scoped to its step: the next step still starts its nodes', async () => {
    const started: string[] = []
    const phase: Phase = {
      name: 'cluster-apply',
      title: 'test',
      steps: () => [
        {
          kind: 'node',
          title: 'first',
          applies: (node) => node.name === 'n-1',
          stopOnFailure: true,
          run: () => Promise.reject(new NodeError('quorum', 'gate not passed', 'fix it')),
        },
        {
          kind: 'node',
          title: 'second',
          applies: (node) => node.name !== 'n-1',
          stopOnFailure: true,
          run: (node) => {
            started.push(node.name)
            return Promise.resolve()
          },
        },
      ],
    }
    await runPhases(fakeRun(nodes(3), 1), [phase])
    expect(started).toEqual(['n-2', 'n-3'])
  })
})

// talosctl health's "all nodes memory sizes" and "all nodes disk sizes" as wait-ready's steps read them
// (siderolabs/talos pkg/cluster/check/nodes.go, pkg/minimal/limits.go): each node against the minimum
// of its type, a node below it failing at once (kind hardware) with its figure, the minimum and its own
// hint, a figure not there yet waited for, a node in a container left out as talosctl health leaves it.
import { describe, expect, it } from 'vitest'
import type { ClusterNode } from '../../lib/core/model.js'
import { HEALTH_CHECKS, HealthReads } from '../../lib/phases/shared/health.js'
import type { Kubectl } from '../../lib/tools/kubectl.js'
import type { NodeAnswer, Talosctl } from '../../lib/tools/talosctl.js'

const node = (name: string, address: string, role: ClusterNode['role']): ClusterNode => ({
  name,
  address,
  role,
  configFile: `/cluster/clusterconfig/${name}.yaml`,
})
const CP = node('cp-1', '127.0.0.11', 'controlplane')
const W1 = node('wrkr-1', '127.0.0.21', 'worker')
const W2 = node('wrkr-2', '127.0.0.22', 'worker')
const NODES = [CP, W1, W2]
const MiB = 1024 * 1024

/** what each node answers: MemTotal (kB), its volumes, its platform */
interface Machine {
  memTotalKiB?: number
  ephemeralBytes?: number
  platform?: string
}

function reads(machines: Record<string, Machine>): HealthReads {
  const answers = <T>(pick: (m: Machine) => T): Map<string, NodeAnswer<T>> =>
    new Map(NODES.map((n) => [n.address, { value: pick(machines[n.name] ?? {}) }]))
  const talosctl = {
    memoryTotals: async () =>
      new Map(
        NODES.flatMap((n) => (machines[n.name]?.memTotalKiB === undefined ? [] : [[n.address, { value: machines[n.name]?.memTotalKiB }]])),
      ),
    resources: async (_order: ClusterNode[], _via: ClusterNode, type: string) => {
      if (type === 'platformmetadata')
        return answers((m) => [{ metadata: { id: 'platformmetadata' }, spec: { platform: m.platform ?? 'metal' } }])
      if (type === 'volumestatus')
        return answers((m) =>
          m.ephemeralBytes === undefined
            ? [{ metadata: { id: 'STATE' }, spec: { size: 100 * MiB, location: '/dev/sda5' } }]
            : [{ metadata: { id: 'EPHEMERAL' }, spec: { size: m.ephemeralBytes, location: '/dev/sda6', parentLocation: '/dev/sda' } }],
        )
      throw new Error(`unexpected read of ${type}`)
    },
  } as unknown as Talosctl
  return new HealthReads({
    talosctl,
    kubectl: {} as Kubectl,
    nodes: NODES,
    controlPlanes: [CP],
    allNodes: true,
    via: () => CP,
    maxAgeMs: 0,
  })
}

const check = (name: string) => {
  const found = HEALTH_CHECKS.find((c) => c.name === name)
  if (!found) throw new Error(`no check ${name}`)
  return found
}

describe("talosctl health's memory and disk sizes", () => {
  it("come right after apid, in talosctl health's order", () => {
    const names = HEALTH_CHECKS.map((c) => c.name)
    expect(names.slice(names.indexOf('apid-ready'), names.indexOf('apid-ready') + 4)).toEqual([
      'apid-ready',
      'memory-sizes',
      'disk-sizes',
      'diagnostics',
    ])
  })

  it("memory: each node against its type's minimum; the ones below it fail at once, each with its own figure and hint", async () => {
    const result = await check('memory-sizes').run(
      reads({ 'cp-1': { memTotalKiB: 1697 * 1024 }, 'wrkr-1': { memTotalKiB: 874 * 1024 }, 'wrkr-2': { memTotalKiB: 873 * 1024 + 1023 } }),
    )
    // a control plane needs 1698 MiB, a worker 874 MiB: exactly the minimum passes
    expect(result.results).toEqual([
      { node: 'cp-1', ok: false, text: '1697 MiB, less than 1698 MiB' },
      { node: 'wrkr-1', ok: true, text: '874 MiB (minimum 874 MiB)' },
      { node: 'wrkr-2', ok: false, text: '873 MiB, less than 874 MiB' },
    ])
    expect(result.failures.map((f) => [f.node, f.kind, f.permanent])).toEqual([
      ['cp-1', 'hardware', true],
      ['wrkr-2', 'hardware', true],
    ])
    expect(result.failures[0]?.message).toBe(
      'cp-1 (127.0.0.11) does not meet memory requirements: expected at least 1698 MiB for a control plane, actual 1697 MiB (MemTotal)',
    )
    expect(result.failures[0]?.hint).toContain('a control plane needs at least 1848 MiB of RAM (4 GiB recommended)')
    expect(result.failures[0]?.hint).toContain('-e 127.0.0.11 -n 127.0.0.11 memory')
    expect(result.failures[1]?.hint).toContain('give wrkr-2 more memory')
    expect(result.failures[1]?.hint).toContain('-e 127.0.0.22 -n 127.0.0.22 memory')
  })

  it('a node that did not answer is not taken for a small one: unreadable, waited for', async () => {
    const result = await check('memory-sizes').run(reads({ 'cp-1': { memTotalKiB: 4000 * 1024 }, 'wrkr-2': { memTotalKiB: 4000 * 1024 } }))
    expect(result.failures).toEqual([
      expect.objectContaining({ node: 'wrkr-1', kind: 'unreachable', message: expect.stringContaining('wrkr-1 not readable') }),
    ])
    expect(result.failures[0]?.permanent).toBeUndefined()
  })

  it('disk: EPHEMERAL against 3932 MiB; a node without EPHEMERAL yet is waited for, not failed at once', async () => {
    const result = await check('disk-sizes').run(
      reads({ 'cp-1': { ephemeralBytes: 3932 * MiB }, 'wrkr-1': { ephemeralBytes: 3931 * MiB }, 'wrkr-2': {} }),
    )
    expect(result.results).toEqual([
      { node: 'cp-1', ok: true, text: 'EPHEMERAL /dev/sda6 3932 MiB (minimum 3932 MiB)' },
      { node: 'wrkr-1', ok: false, text: 'EPHEMERAL /dev/sda6 3931 MiB, less than 3932 MiB' },
      { node: 'wrkr-2', ok: false, text: 'no EPHEMERAL volume yet' },
    ])
    const [small, missing] = result.failures
    expect(small).toMatchObject({ node: 'wrkr-1', kind: 'hardware', permanent: true })
    expect(small?.message).toBe(
      'the ephemeral partition /dev/sda6 of wrkr-1 (127.0.0.21) is too small: expected at least 3932 MiB, actual 3931 MiB (on /dev/sda)',
    )
    expect(small?.hint).toContain('/cluster/clusterconfig/wrkr-1.yaml')
    expect(small?.hint).toMatch(/bootstrap:node.* NODE=wrkr-1 RESET=true -- --yes$/)
    expect(missing).toMatchObject({ node: 'wrkr-2', kind: 'stuck' })
    expect(missing?.permanent).toBeUndefined()
  })

  it('a node in a container is left out of both, as talosctl health leaves it out', async () => {
    const machines = {
      'cp-1': { memTotalKiB: 4000 * 1024, ephemeralBytes: 90_000 * MiB },
      'wrkr-1': { platform: 'container' },
      'wrkr-2': { memTotalKiB: 100 * 1024, ephemeralBytes: MiB, platform: 'container' },
    }
    for (const name of ['memory-sizes', 'disk-sizes']) {
      const result = await check(name).run(reads(machines))
      expect(result.failures, name).toEqual([])
      expect(
        result.results.filter((r) => r.node !== 'cp-1'),
        name,
      ).toEqual([
        { node: 'wrkr-1', ok: true, text: 'skipped: a container' },
        { node: 'wrkr-2', ok: true, text: 'skipped: a container' },
      ])
    }
  })
})

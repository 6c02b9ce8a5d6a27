// The owned cordon of day 2 (lib/tools/kubectl.ts cordonOwned, uncordonOwned): one merge patch with
// the resourceVersion read, so another client's cordon is never taken over and our mark never lost;
// a Conflict (the Node's status changed in between: its kubelet writes every few seconds, seen with the
// real API server in test/e2e/cluster-apply.test.ts) is read and decided on again. A fake kubectl answers.
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { ToolCall, ToolResult, ToolRunner } from '../../lib/tools/exec.js'
import { CORDONED_BY, Kubectl, type KubeObject } from '../../lib/tools/kubectl.js'

const CONFLICT =
  'Error from server (Conflict): Operation cannot be fulfilled on nodes "wrkr-1": the object has been modified; please apply your changes to the latest version and try again\n'

function setup(nodes: KubeObject[], patchAnswers: Array<'ok' | 'conflict'>) {
  const patches: unknown[] = []
  let read = 0
  const runner = {
    dryRun: false,
    run: (call: ToolCall): Promise<ToolResult> => {
      const verb = call.args.find((a) => a === 'get' || a === 'patch')
      const answer = (exitCode: number, stdout: string, stderr = ''): Promise<ToolResult> =>
        Promise.resolve({ call, ok: exitCode === 0, exitCode, stdout, stderr, durationMs: 1, timedOut: false, aborted: false })
      if (verb === 'get') return answer(0, JSON.stringify(nodes[Math.min(read++, nodes.length - 1)]))
      patches.push(JSON.parse(call.args[call.args.indexOf('-p') + 1] ?? '{}'))
      return patchAnswers.shift() === 'conflict' ? answer(1, '', CONFLICT) : answer(0, '{}')
    },
  } as unknown as ToolRunner
  const dir = mkdtempSync(join(tmpdir(), 'tb-unit-'))
  const kubeconfig = join(dir, 'kubeconfig')
  writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n')
  const kubectl = new Kubectl(runner, { kubeconfig, clusterName: 'c', cacheDir: dir })
  return { kubectl, patches }
}

const node = (rv: string, unschedulable?: boolean, annotations?: Record<string, string>): KubeObject => ({
  metadata: { name: 'wrkr-1', resourceVersion: rv, ...(annotations ? { annotations } : {}) },
  spec: unschedulable ? { unschedulable } : {},
})

describe('cordonOwned / uncordonOwned', () => {
  it('cordons with our mark in one patch carrying the resourceVersion read; a Conflict is read again', async () => {
    const { kubectl, patches } = setup([node('10'), node('11')], ['conflict', 'ok'])
    expect(await kubectl.cordonOwned('wrkr-1', 'cluster:apply')).toBe(true)
    expect(patches).toEqual([
      { metadata: { annotations: { [CORDONED_BY]: 'cluster:apply' }, resourceVersion: '10' }, spec: { unschedulable: true } },
      { metadata: { annotations: { [CORDONED_BY]: 'cluster:apply' }, resourceVersion: '11' }, spec: { unschedulable: true } },
    ])
  })

  it("someone else's cordon is left alone (false), ours from an earlier run is ours (true), neither is patched", async () => {
    const theirs = setup([node('5', true)], [])
    expect(await theirs.kubectl.cordonOwned('wrkr-1', 'cluster:apply')).toBe(false)
    expect(await theirs.kubectl.uncordonOwned('wrkr-1')).toBe(false)
    const ours = setup([node('6', true, { [CORDONED_BY]: 'cluster:apply' })], [])
    expect(await ours.kubectl.cordonOwned('wrkr-1', 'cluster:apply')).toBe(true)
    expect([...theirs.patches, ...ours.patches]).toEqual([])
  })

  it('uncordons only a node with our mark, removing both; a Conflict that persists is thrown', async () => {
    const { kubectl, patches } = setup([node('7', true, { [CORDONED_BY]: 'cluster:apply' })], ['ok'])
    expect(await kubectl.uncordonOwned('wrkr-1')).toBe(true)
    expect(patches).toEqual([{ metadata: { annotations: { [CORDONED_BY]: null }, resourceVersion: '7' }, spec: { unschedulable: null } }])
    const stuck = setup([node('8', true, { [CORDONED_BY]: 'cluster:apply' })], Array<'conflict'>(9).fill('conflict'))
    await expect(stuck.kubectl.uncordonOwned('wrkr-1')).rejects.toThrow(/Conflict/)
    expect(stuck.patches).toHaveLength(5)
  })

  it('uncordons on a Node the caller read (no read of its own); one changed since (Conflict) is read again', async () => {
    const read = node('9', true, { [CORDONED_BY]: 'upgrade:talos' })
    const fresh = setup([node('99', true, { [CORDONED_BY]: 'upgrade:talos' })], ['ok'])
    expect(await fresh.kubectl.uncordonOwned('wrkr-1', read)).toBe(true)
    expect(fresh.patches).toEqual([
      { metadata: { annotations: { [CORDONED_BY]: null }, resourceVersion: '9' }, spec: { unschedulable: null } },
    ])
    const stale = setup([node('12', true, { [CORDONED_BY]: 'upgrade:talos' })], ['conflict', 'ok'])
    expect(await stale.kubectl.uncordonOwned('wrkr-1', read)).toBe(true)
    expect(stale.patches.map((p) => (p as { metadata: { resourceVersion: string } }).metadata.resourceVersion)).toEqual(['9', '12'])
    // the caller's read says it is not ours: nothing patched, whatever the Node says now
    const theirs = setup([node('13', true, { [CORDONED_BY]: 'upgrade:talos' })], [])
    expect(await theirs.kubectl.uncordonOwned('wrkr-1', node('10', true))).toBe(false)
    expect(theirs.patches).toEqual([])
  })

  it('cordons on a Node the caller read (the batched read of the rolling step): no read of its own; a Conflict is read again', async () => {
    const fresh = setup([node('30')], ['ok'])
    expect(await fresh.kubectl.cordonOwned('wrkr-1', 'upgrade:talos', node('21'))).toBe(true)
    expect(fresh.patches.map((p) => (p as { metadata: { resourceVersion: string } }).metadata.resourceVersion)).toEqual(['21'])
    // someone cordoned it after the read: the patch with the read's version is refused, the Node read again is theirs
    const raced = setup([node('31', true)], ['conflict'])
    expect(await raced.kubectl.cordonOwned('wrkr-1', 'upgrade:talos', node('22'))).toBe(false)
    expect(raced.patches).toHaveLength(1)
  })
})

// Kubectl.getMany (lib/tools/kubectl.ts): several objects of one kind in one kubectl process, as a
// control plane's three mirror pods are read (upgrade:k8s, the rolling steps). kubectl prints a List for
// several names, the object alone for one, nothing when --ignore-not-found found none. A fake kubectl answers.
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { ToolCall, ToolResult, ToolRunner } from '../../lib/tools/exec.js'
import { Kubectl } from '../../lib/tools/kubectl.js'

function setup(stdout: string) {
  const calls: string[][] = []
  const runner = {
    dryRun: false,
    run: (call: ToolCall): Promise<ToolResult> => {
      calls.push(call.args)
      return Promise.resolve({ call, ok: true, exitCode: 0, stdout, stderr: '', durationMs: 1, timedOut: false, aborted: false })
    },
  } as unknown as ToolRunner
  const dir = mkdtempSync(join(tmpdir(), 'tb-unit-'))
  const kubeconfig = join(dir, 'kubeconfig')
  writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n')
  return { kubectl: new Kubectl(runner, { kubeconfig, clusterName: 'c', cacheDir: dir }), calls }
}

const pod = (name: string) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'kube-system' } })
const NAMES = ['kube-apiserver-cp-1', 'kube-controller-manager-cp-1', 'kube-scheduler-cp-1']

describe('Kubectl.getMany', () => {
  it('one kubectl call naming every object; a List answered is read by name, a name not found is absent', async () => {
    const list = { apiVersion: 'v1', kind: 'List', items: [pod(NAMES[0]!), pod(NAMES[2]!)], metadata: { resourceVersion: '' } }
    const { kubectl, calls } = setup(JSON.stringify(list))
    const got = await kubectl.getMany('pod', NAMES, 'kube-system')
    expect(calls).toHaveLength(1)
    const args = calls[0]!
    const at = args.indexOf('get')
    expect(args.slice(at, at + 5)).toEqual(['get', 'pod', ...NAMES])
    expect(args).toContain('--ignore-not-found')
    expect(args.slice(args.indexOf('-n'), args.indexOf('-n') + 2)).toEqual(['-n', 'kube-system'])
    expect([...got.keys()]).toEqual([NAMES[0], NAMES[2]])
    expect(got.get(NAMES[0]!)?.metadata.namespace).toBe('kube-system')
    expect(got.has(NAMES[1]!)).toBe(false)
  })

  it('one name: the object alone; nothing found: an empty map', async () => {
    const one = setup(JSON.stringify(pod(NAMES[1]!)))
    expect([...(await one.kubectl.getMany('pod', [NAMES[1]!], 'kube-system')).keys()]).toEqual([NAMES[1]])
    const none = setup('')
    expect((await none.kubectl.getMany('pod', NAMES, 'kube-system')).size).toBe(0)
  })
})

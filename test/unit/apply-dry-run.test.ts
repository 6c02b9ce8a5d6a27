// cluster:apply's plan reads (lib/tools/talosctl.ts applyDryRun, lib/phases/cluster-apply.ts
// redactDiff): the answers below are the real talosctl v1.12.11's texts (test/sim/apply-day2.test.ts
// captures them against the simulator; the too-new Kubernetes text is RuntimeValidate's,
// pkg/machinery/config/types/v1alpha1/v1alpha1_validation.go). No network: a fake runner answers.
import { describe, expect, it } from 'vitest'
import { NodeError } from '../../lib/core/errors.js'
import { loadInventory } from '../../lib/input/inventory.js'
import { kubernetesDowngrades, redactDiff } from '../../lib/phases/cluster-apply.js'
import type { ToolCall, ToolResult, ToolRunner } from '../../lib/tools/exec.js'
import { classifyDryRun, Talosctl } from '../../lib/tools/talosctl.js'
import { clusterDir } from './fixtures.js'

const DIFF = '--- a\n+++ b\n@@ -10,6 +10,8 @@\n     kubelet:\n+    env:\n+        FOO: bar\n'

function setup(answer: Pick<ToolResult, 'exitCode' | 'stdout' | 'stderr'>) {
  const inventory = loadInventory(
    clusterDir([
      { hostname: 'cp-1', ip: '127.253.4.11', cp: true },
      { hostname: 'wrkr-1', ip: '127.253.4.21', cp: false },
    ]),
  )
  const calls: string[][] = []
  const runner = {
    dryRun: false,
    run: (call: ToolCall): Promise<ToolResult> => {
      calls.push(call.args)
      return Promise.resolve({ call, ok: answer.exitCode === 0, durationMs: 5, aborted: false, timedOut: false, ...answer })
    },
  } as unknown as ToolRunner
  const node = inventory.nodes.find((n) => n.name === 'wrkr-1') ?? expect.fail('no node')
  return { talosctl: new Talosctl(runner, inventory), calls, node }
}

describe('applyDryRun', () => {
  it('always asks in mode try, whatever mode the run applies in', async () => {
    const { talosctl, calls, node } = setup({
      exitCode: 0,
      stdout: '',
      stderr: 'Dry run summary:\nApplied configuration without a reboot (skipped in dry-run).\nConfig diff:\n\nNo changes.\n',
    })
    expect(await talosctl.applyDryRun(node, node.configFile)).toEqual({ class: 'none' })
    expect(calls[0]?.join(' ')).toContain('apply-config')
    expect(calls[0]?.join(' ')).toContain('--dry-run --mode try -f')
  })

  it('a diff the node could apply live', async () => {
    const { talosctl, node } = setup({
      exitCode: 0,
      stdout: '',
      stderr: `Dry run summary:\nApplied configuration without a reboot (skipped in dry-run).\nConfig diff:\n\n${DIFF}`,
    })
    expect(await talosctl.applyDryRun(node, node.configFile)).toEqual({ class: 'live', diff: DIFF.trimEnd() })
  })

  it("try's refusal of a change that needs a reboot: the class with the node's diff of what needs it", async () => {
    const { talosctl, node } = setup({
      exitCode: 1,
      stdout: '',
      stderr: `error applying new configuration: rpc error: code = InvalidArgument desc = this config change can't be applied in immediate mode\ndiff:\n${DIFF}`,
    })
    expect(await talosctl.applyDryRun(node, node.configFile)).toEqual({ class: 'reboot', diff: DIFF.trimEnd() })
  })

  it("any other InvalidArgument: invalid, with the node's own text", async () => {
    const { talosctl, node } = setup({
      exitCode: 1,
      stdout: '',
      stderr:
        'error applying new configuration: rpc error: code = InvalidArgument desc = runtime configuration validation failed: 1 error occurred:\n\t* kubelet image is not valid: version of Kubernetes 1.36.0 is too new to be used with Talos 1.12.11\n\n',
    })
    const got = await talosctl.applyDryRun(node, node.configFile)
    expect(got.class).toBe('invalid')
    expect(got).toMatchObject({
      text: expect.stringContaining('kubelet image is not valid: version of Kubernetes 1.36.0 is too new to be used with Talos 1.12.11'),
    })
  })

  it('a node busy with another apply is thrown as busy (transient: the retry policy tries again)', async () => {
    const { talosctl, node } = setup({
      exitCode: 1,
      stdout: '',
      stderr:
        'error applying new configuration: rpc error: code = FailedPrecondition desc = another apply configuration is already in progress\n',
    })
    const err = await talosctl.applyDryRun(node, node.configFile).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(NodeError)
    expect((err as NodeError).kind).toBe('busy')
    expect((err as NodeError).transient).toBe(true)
  })

  it('an answer that is no dry run summary is never taken for "no change"', () => {
    expect(classifyDryRun('Applied configuration without a reboot').class).toBe('invalid')
  })
})

describe('redactDiff', () => {
  it("masks key material on changed and context lines, keeps the rest, and applies the run's redactor", () => {
    const diff = [
      '--- a',
      '+++ b',
      '@@ -1,6 +1,6 @@',
      '     ca:',
      '-        crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t',
      '+        crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0u',
      '         key: LS0tLS1CRUdJTiBFRDI1NTE5IFBSSVZBVEUg',
      '-    token: abcdef.0123456789abcdef',
      '+    token: ghijkl.0123456789abcdef',
      '     aescbcEncryptionSecret: c2VjcmV0c2VjcmV0',
      '+        FOO: bar',
      '+        password: hunter2',
    ].join('\n')
    const out = redactDiff(diff, (t) => t.replaceAll('hunter2', '***'))
    expect(out).not.toMatch(/LS0t|abcdef|ghijkl|c2VjcmV0|hunter2/)
    expect(out).toContain('-        crt: ***')
    expect(out).toContain('+    token: ***')
    expect(out).toContain('     aescbcEncryptionSecret: ***')
    expect(out).toContain('+        FOO: bar')
    expect(out.split('\n').slice(0, 3)).toEqual(['--- a', '+++ b', '@@ -1,6 +1,6 @@'])
  })
})

describe('kubernetesDowngrades', () => {
  const config = (kubelet?: string, apiServer?: string) => ({
    machine: kubelet ? { kubelet: { image: `ghcr.io/siderolabs/kubelet:${kubelet}` } } : {},
    cluster: apiServer ? { apiServer: { image: `registry.k8s.io/kube-apiserver:${apiServer}@sha256:abc` } } : {},
  })

  it('names each image whose tag the desired config lowers, by patch or by minor', () => {
    expect(kubernetesDowngrades(config('v1.35.1', 'v1.35.1'), config('v1.35.0', 'v1.34.9'))).toEqual([
      { field: 'machine.kubelet.image', from: 'v1.35.1', to: 'v1.35.0' },
      { field: 'cluster.apiServer.image', from: 'v1.35.1', to: 'v1.34.9' },
    ])
  })

  it('an upgrade, the same tag, or an image only one side names is not a downgrade', () => {
    expect(kubernetesDowngrades(config('v1.35.0', 'v1.35.0'), config('v1.36.0', 'v1.35.0'))).toEqual([])
    expect(kubernetesDowngrades(config('v1.35.0'), config(undefined, 'v1.30.0'))).toEqual([])
    expect(kubernetesDowngrades(undefined, config('v1.30.0'))).toEqual([])
  })
})

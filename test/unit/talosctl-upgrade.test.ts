// upgrade:talos's call (lib/tools/talosctl.ts upgrade, docs/day2-design.md 1.1, 1.3, 2.4): the
// arguments (never --preserve or --force unless asked; --drain=false with a v1.13 client, whose own
// drain would uncordon any node), the stderr lines handed on, the node's refusals classified, and
// any other end returned for the product's own check. The texts are the real talosctl's against the
// simulator (test/sim/upgrade-api.test.ts). No network: a fake runner answers.
import { describe, expect, it } from 'vitest'
import { NodeError } from '../../lib/core/errors.js'
import { loadInventory } from '../../lib/input/inventory.js'
import type { ToolCall, ToolResult, ToolRunner } from '../../lib/tools/exec.js'
import { Talosctl } from '../../lib/tools/talosctl.js'
import { clusterDir } from './fixtures.js'

const IMAGE = 'ghcr.io/siderolabs/installer:v1.13.9'

function setup(answer: Pick<ToolResult, 'exitCode' | 'stderr'> & { timedOut?: boolean }, client = 'v1.12.11') {
  const inventory = loadInventory(clusterDir([{ hostname: 'cp-1', ip: '127.253.8.11', cp: true }]))
  const calls: ToolCall[] = []
  const runner = {
    dryRun: false,
    run: (call: ToolCall): Promise<ToolResult> => {
      if (call.args[0] === 'version')
        return Promise.resolve({
          call,
          ok: true,
          exitCode: 0,
          stdout: `Client:\n\tTag:         ${client}\n`,
          stderr: '',
          durationMs: 1,
          timedOut: false,
          aborted: false,
        })
      calls.push(call)
      for (const line of answer.stderr.split('\n')) if (line) call.onStderrLine?.(line)
      const timedOut = answer.timedOut ?? false
      return Promise.resolve({
        call,
        ok: answer.exitCode === 0 && !timedOut,
        stdout: '',
        durationMs: 5,
        aborted: false,
        timedOut,
        ...answer,
      })
    },
  } as unknown as ToolRunner
  const node = inventory.nodes[0] ?? expect.fail('no node')
  return { talosctl: new Talosctl(runner, inventory), calls, node }
}

const q = '"127.253.8.11": '

describe('Talosctl.upgrade', () => {
  it('talosctl v1.12: -n/-e the node, --image, --wait, --timeout in seconds; no --preserve, --force or --drain; a deadline past talosctl’s own', async () => {
    const { talosctl, calls, node } = setup({ exitCode: 0, stderr: `${q}post check passed\n` })
    const lines: string[] = []
    const out = await talosctl.upgrade(node, IMAGE, { timeoutMs: 1_800_000 }, (l) => lines.push(l))
    expect(out).toEqual({ exitCode: 0, timedOut: false })
    const args = calls[0]?.args ?? []
    expect(args.slice(0, 1)).toEqual(['upgrade'])
    expect(args.join(' ')).toContain('-e 127.253.8.11 -n 127.253.8.11')
    expect(args.join(' ')).toContain(`--image ${IMAGE} --wait --timeout 1800s`)
    for (const flag of ['--preserve', '--force', '--drain=false', '--stage']) expect(args).not.toContain(flag)
    expect(calls[0]?.mutates).toBe(true)
    expect(calls[0]?.timeoutMs).toBe(1_860_000)
    expect(lines).toEqual([`${q}post check passed`])
  })

  it('talosctl v1.13: --drain=false (its drain uncordons any node); --preserve and --force only when asked', async () => {
    const { talosctl, calls, node } = setup({ exitCode: 0, stderr: '' }, 'v1.13.9')
    await talosctl.upgrade(node, IMAGE, { timeoutMs: 60_000, preserve: true, force: true }, () => undefined)
    expect(calls[0]?.args).toContain('--drain=false')
    expect(calls[0]?.args).toContain('--preserve')
    expect(calls[0]?.args).toContain('--force')
  })

  it.each([
    [
      'image-missing',
      'error performing upgrade: 1 error occurred:\n\t* 127.253.8.11: rpc error: code = Unknown desc = error validating installer image "ghcr.io/siderolabs/installer:v1.13.8": failed to pull image "ghcr.io/siderolabs/installer:v1.13.8": failed to resolve reference "ghcr.io/siderolabs/installer:v1.13.8": ghcr.io/siderolabs/installer:v1.13.8: not found',
    ],
    ['image-missing', 'node 127.253.8.11: error pulling upgrade image: rpc error: code = NotFound desc = NotFound error pulling image'],
    [
      'upgrade-refused',
      'rpc error: code = Unknown desc = error validating etcd for upgrade: etcd member 8a2d3e6f1b4c5d7e is not started, all members must be running to perform an upgrade',
    ],
    ['upgrade-refused', 'node 127.253.8.11: upgrade failed with exit code 1'],
    [
      'busy',
      'rpc error: code = Unknown desc = failed to acquire upgrade mutex: error trying to lock etcd upgrade mutex: mutex: Locked by another session',
    ],
  ])('a refusal is thrown as %s', async (kind, stderr) => {
    const { talosctl, node } = setup({ exitCode: 1, stderr })
    const err = await talosctl.upgrade(node, IMAGE, { timeoutMs: 60_000 }, () => undefined).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(NodeError)
    expect((err as NodeError).kind).toBe(kind)
  })

  it('a sequence that failed is returned with its error (the product checks what the node runs: a rollback passes talosctl)', async () => {
    const fatal = 'sequence failed: error running phase 9 in upgrade sequence: task 1/1: failed, task "upgrade" failed: exit code 1'
    const { talosctl, node } = setup({ exitCode: 1, stderr: `${q}sequence: upgrade action: NOOP error: [code: ${fatal} message: FATAL]\n` })
    expect(await talosctl.upgrade(node, IMAGE, { timeoutMs: 60_000 }, () => undefined)).toEqual({
      exitCode: 1,
      timedOut: false,
      sequenceError: fatal,
    })
  })

  it('talosctl past its deadline is returned, not thrown: the node may be rebooting, the wait after it decides', async () => {
    const { talosctl, node } = setup({ exitCode: null, stderr: '', timedOut: true })
    expect(await talosctl.upgrade(node, IMAGE, { timeoutMs: 60_000 }, () => undefined)).toEqual({ exitCode: null, timedOut: true })
  })
})

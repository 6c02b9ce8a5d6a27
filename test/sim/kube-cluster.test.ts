// sim/kube wired into the whole simulator: the API behind each control plane's TLS listener
// and the VIP, spoken to by the real kubectl with the kubeconfig the node hands out; nodes
// register when their kubelet starts and turn Ready once the CNI's pod is ready, which the
// node's Talos MachineStatus sees. Addresses: 127.43.0.0/16.
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { applyInsecure, at, bootstrapWhenReady, CNI_DAEMONSET as CNI, machineStatus, startOn, talosctl, type Started } from './helpers.js'

describe('kube API inside the simulator', () => {
  let c: Started
  let dir: string
  let kubeconfig: string
  let n = 0
  const kubectl = (args: string[], input?: string) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(
        'kubectl',
        ['--cache-dir', join(dir, `cache-${n++}`), '--kubeconfig', kubeconfig, ...args],
        { timeout: 60_000 },
        (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
      )
      child.stdin?.end(input)
    })

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sim-kube-cluster-'))
    c = await startOn('127.43.1', { cps: 1, workers: 1, image: 'disk', speed: 1000, timings: { cni: 60 }, kube: 'model' })
    for (const node of ['cp-1', 'wrkr-1']) expect((await applyInsecure(c.sim, node)).code).toBe(0)
    expect((await bootstrapWhenReady(c.sim, 'cp-1')).code).toBe(0)
    await c.sim.until(() => ['cp-1', 'wrkr-1'].every((x) => c.sim.node(x)!.registered))
    kubeconfig = join(dir, 'kubeconfig')
    expect((await talosctl(c.sim, ['kubeconfig', kubeconfig, '--merge=false', '--force', ...at('127.43.1.11')])).code).toBe(0)
  })
  afterAll(async () => {
    await c?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('serves kubectl through the VIP with the cluster CA and client certificate', async () => {
    const ready = await kubectl(['get', '--raw', '/readyz'])
    expect(ready).toMatchObject({ code: 0, stdout: 'ok' })
    const nodes = await kubectl(['get', 'nodes', '-o', 'wide'])
    expect(nodes.code).toBe(0)
    expect(nodes.stdout).toMatch(/\ncp-1\s+NotReady\s+control-plane\s+\S+\s+v1\.\d+\.\d+\s+127\.43\.1\.11\s/)
    expect(nodes.stdout).toMatch(/\nwrkr-1\s+NotReady\s+<none>\s+\S+\s+v1\.\d+\.\d+\s+127\.43\.1\.21\s/)
    const direct = await kubectl(['--server', 'https://127.43.1.11:6443', 'get', 'nodes', '-o', 'name'])
    expect(direct.stdout).toBe('node/cp-1\nnode/wrkr-1\n')
  })

  it('turns nodes Ready through the CNI DaemonSet, and Talos sees nodeReady', async () => {
    expect((await kubectl(['apply', '-f', '-'], CNI)).stdout).toBe('daemonset.apps/cilium created\n')
    const w = await kubectl(['wait', '--for=condition=Ready', 'nodes', '--all', '--timeout=30s'])
    expect(w).toMatchObject({ code: 0, stdout: 'node/cp-1 condition met\nnode/wrkr-1 condition met\n' })
    const ms = await machineStatus(c.sim, '127.43.1.21')
    expect(ms.status).toEqual({ ready: true, unmetConditions: [] })
    const writes = c.sim.calls().filter((r: any) => r.tool === 'kubectl' && r.call === 'kube')
    expect(writes.map((r: any) => r.command)).toContain('POST /apis/apps/v1/namespaces/kube-system/daemonsets')
  })
})

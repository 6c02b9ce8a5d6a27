// A rerun after kill -9 or Ctrl-C in the middle of the applies finishes the job (issue 26 items 7, 8):
// each node's apply outcome is journaled as it happens, a tool started by a killed run dies with it
// (no orphaned apply lands after the kill), and a node that took its config and does not answer is
// waited for as installing, never failed as powered off. Each test on its own range 127.234.<n>.0/24.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { callsTo, E2eCluster, gatedTalosctl, processesMentioning, waitFor } from './harness.js'
import { fastWith } from '../faults/helpers.js'

let cluster: E2eCluster | undefined
afterEach(async () => {
  await cluster?.stop()
  cluster = undefined
})

// installs of 10 s at speed 600: the rerun starts while the nodes that took their configs still install
const SLOW_INSTALL = { install: 6000 }
// the rerun's verify must outlast the rest of the install
const RERUN = fastWith('--verify-timeout', '90s')

/** accepted applies per node over the whole test (the hidden budget: at most one each) */
function acceptedApplies(c: E2eCluster): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const call of c.calls())
    if (call.call === 'apply' && call.outcome.startsWith('ok')) counts[call.node ?? ''] = (counts[call.node ?? ''] ?? 0) + 1
  return counts
}

/** waits until these nodes took their configs */
function applied(c: E2eCluster, nodes: string[]): Promise<void> {
  return waitFor(
    () => nodes.every((n) => callsTo(c.calls(), n, 'apply').some((call) => call.outcome.startsWith('ok'))),
    60_000,
    `applies to ${nodes.join(', ')}`,
  )
}

/** the script's own process (node running scripts/<task>.ts for this cluster), not go-task */
function orchestrator(c: E2eCluster, script: string): number {
  const out = processesMentioning(`--cluster-dir=${c.clusterDir}`).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`scripts/${script}.ts`)
    } catch {
      return false
    }
  })
  if (out.length !== 1) throw new Error(`expected one ${script}.ts process, found ${out.join(', ') || 'none'}`)
  return out[0] as number
}

describe('a rerun after an interruption does only what is left', () => {
  it('kill -9 with an apply in flight: that apply never lands; the rerun applies it once and waits for the installing nodes', async () => {
    cluster = await E2eCluster.start('127.234.1', { workers: 2, timings: SLOW_INSTALL })
    const c = cluster
    // talosctl's apply to wrkr-1 has not left yet (a slow start, a slow dial) when the run is killed:
    // it leaves only once the gate opens, after the kill, unless it died with the run
    const gate = join(c.dir, 'gate')
    const slow = gatedTalosctl(c, '127.234.1.21', gate)
    const journalFile = join(c.clusterDir, '.bootstrap', 'journal.json')
    const journal = (): { nodes: Record<string, { apply?: { status: string; sent?: string } }> } =>
      existsSync(journalFile) ? JSON.parse(readFileSync(journalFile, 'utf8')) : { nodes: {} }
    const { child, done } = c.spawnTask('bootstrap:talos', { TALOSCTL: slow })
    try {
      await applied(c, ['cp-1', 'wrkr-2'])
      // what the nodes did is in the journal as it happens, while the apply phase is still under way
      await waitFor(() => ['cp-1', 'wrkr-2'].every((n) => journal().nodes[n]?.apply?.status === 'ok'), 30_000, 'the journal')
      await waitFor(() => processesMentioning('apply-config --insecure -n 127.234.1.21').length > 0, 30_000, "wrkr-1's apply")
      process.kill(orchestrator(c, 'talos'), 'SIGKILL')
      await done
    } finally {
      writeFileSync(gate, '')
      // a failed wait above leaves the run going: it stops with the test
      if (child.exitCode === null) process.kill(-(child.pid as number), 'SIGKILL')
    }
    // an orphaned apply would land now
    await new Promise((r) => setTimeout(r, 3000))
    expect(callsTo(c.calls(), 'wrkr-1', 'apply')).toEqual([])
    expect(processesMentioning(c.clusterDir)).toEqual([])
    expect(journal().nodes['wrkr-1']?.apply?.sent).toEqual(expect.any(String))

    const rerun = await c.task('bootstrap:talos', {}, RERUN)
    expect(rerun.code, rerun.stderr).toBe(0)
    expect(rerun.stderr).toMatch(/taking over a stale lock/)
    expect(acceptedApplies(c)).toEqual({ 'cp-1': 1, 'wrkr-1': 1, 'wrkr-2': 1 })
    expect(c.calls().filter((call) => call.call === 'bootstrap' && call.outcome === 'ok')).toHaveLength(1)
  }, 240_000)

  it('Ctrl-C while the nodes install, then the same command again: the installing nodes are waited for, not failed', async () => {
    cluster = await E2eCluster.start('127.234.2', { cps: 3, workers: 1, timings: SLOW_INSTALL })
    const c = cluster
    const { child, done } = c.spawnTask('bootstrap:talos', {}, RERUN)
    await applied(c, ['cp-1', 'cp-2', 'cp-3', 'wrkr-1'])
    process.kill(-(child.pid as number), 'SIGINT') // the whole foreground group, as a terminal does
    expect((await done).code).toBe(130)
    expect(c.sim.node('cp-1')?.stage).toMatch(/installing|booting/)

    const rerun = await c.task('bootstrap:talos', {}, RERUN)
    expect(rerun.code, rerun.stderr).toBe(0)
    const preflight = c.report().phases.find((p) => p.name === 'preflight')
    expect(preflight?.nodes.find((n) => n.name === 'cp-2')?.detail).toMatch(
      /took its config in an earlier run and does not answer yet \(installing or rebooting\): verify waits for it/,
    )
    expect(acceptedApplies(c)).toEqual({ 'cp-1': 1, 'cp-2': 1, 'cp-3': 1, 'wrkr-1': 1 })
    expect(c.calls().filter((call) => call.call === 'bootstrap' && call.outcome === 'ok')).toHaveLength(1)
  }, 240_000)

  it('kill -9 while helm installs the CNI: helm is left to finish (cut, it would leave the release pending-install), the rerun finds it deployed', async () => {
    // the CNI's DaemonSet is written 3 s after helm recorded its release as pending-install
    cluster = await E2eCluster.start('127.234.3', {
      workers: 1,
      faults: [{ on: 'kube', kind: 'latency', ms: 3000, path: '/apis/apps/v1/namespaces/kube-system/daemonsets' }],
    })
    const c = cluster
    const { done } = c.spawnTask('bootstrap:talos', {}, RERUN)
    const helmRelease = (call: { call: string; command: string; tool: string }): boolean =>
      call.call === 'kube' && call.tool === 'helm' && /^POST .*\/namespaces\/kube-system\/secrets/.test(call.command)
    await waitFor(() => c.calls().some(helmRelease), 120_000, "helm's pending-install release")
    process.kill(orchestrator(c, 'talos'), 'SIGKILL')
    await done
    c.sim.clearFault(null, 'latency')
    const rerun = await c.task('bootstrap:talos', {}, RERUN)
    expect(rerun.code, rerun.stderr).toBe(0)
    expect(
      c
        .report()
        .phases.find((p) => p.name === 'wait-ready')
        ?.steps.find((s) => s.name === 'cni')?.detail,
    ).toMatch(/already deployed|installed/)
    expect(acceptedApplies(c)).toEqual({ 'cp-1': 1, 'wrkr-1': 1 })
  }, 240_000)
})

// Issue 27, item 15: SIGTERM while a changing call is in flight (the etcd bootstrap, an apply). The
// node may take the call after the client is gone (the simulated node, like a real one, finishes a
// request whose client went away), so the report says "unknown outcome" for that step, never that
// it did not run, and the next run reads the node before deciding: no second bootstrap, no second
// apply. Range 127.237.10.x–127.237.11.x.
import { describe, expect, it } from 'vitest'
import { nodeIn, waitFor, type E2eCluster } from '../e2e/harness.js'
import { ROW_TIMEOUT, withCluster } from './helpers.js'

const LONG_CALLS = ['--call-timeout', '120s']

/** Starts `task`, sends SIGTERM to its process group once `inFlight` holds (and `settleMs` more), and waits for its end. */
async function interruptWhen(cluster: E2eCluster, name: string, inFlight: (stdout: string) => boolean, settleMs: number) {
  const { child, done } = cluster.spawnTask(name, {}, LONG_CALLS)
  let stdout = ''
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()))
  await waitFor(() => inFlight(stdout), 90_000, `the call in flight (${name})`)
  await new Promise((r) => setTimeout(r, settleMs))
  process.kill(-(child.pid as number), 'SIGTERM')
  return done
}

describe.concurrent('a changing call cut short by SIGTERM', () => {
  it(
    'talosctl bootstrap in flight: the step reads "unknown outcome"; the node took it, and the rerun does not bootstrap again',
    () =>
      withCluster(
        '127.237.10',
        { cps: 1, workers: 1, vip: false, faults: [{ node: 'cp-1', on: 'bootstrap', kind: 'latency', ms: 4000, times: 1 }] },
        async (cluster) => {
          const result = await interruptWhen(cluster, 'bootstrap:talos', (out) => /talosctl bootstrap on cp-1/.test(out), 1000)
          expect(result.code, result.stderr).toBe(130)
          const step = cluster
            .report()
            .phases.find((p) => p.name === 'bootstrap')
            ?.steps.find((s) => s.name === 'etcd-bootstrap')
          expect(step?.status).toBe('failed')
          expect(step?.error?.kind).toBe('interrupted')
          expect(step?.error?.message).toMatch(
            /^unknown outcome: interrupted by SIGTERM during: Bootstrap etcd \(once, on one control plane\), while `talosctl bootstrap --talosconfig \S+ -e 127\.237\.10\.11 -n 127\.237\.10\.11` was in flight: it may have taken effect or not/,
          )
          expect(result.stderr).toMatch(/^error: bootstrap\/etcd-bootstrap: interrupted: unknown outcome: /m)
          expect(result.stderr).not.toMatch(/etcd-bootstrap: not run/)

          // the node finished the request its client left: etcd is bootstrapped
          await waitFor(
            () => cluster.calls().some((c) => c.call === 'bootstrap' && c.outcome === 'ok'),
            30_000,
            'the bootstrap taken by cp-1',
          )
          const rerun = await cluster.task('bootstrap:talos')
          expect(rerun.code, `${rerun.stdout}\n${rerun.stderr}`).toBe(0)
          expect(cluster.calls().filter((c) => c.call === 'bootstrap')).toHaveLength(1)
          const again = cluster
            .report()
            .phases.find((p) => p.name === 'bootstrap')
            ?.steps.find((s) => s.name === 'etcd-bootstrap')
          expect(again?.detail).toBe('already bootstrapped (etcd running on cp-1)')
        },
      ),
    ROW_TIMEOUT,
  )

  it(
    "an apply in flight: the node's apply reads unknown outcome in the report and the summary; the rerun finds it configured",
    () =>
      withCluster(
        '127.237.11',
        { cps: 1, workers: 1, vip: false, faults: [{ node: 'wrkr-1', on: 'apply', kind: 'latency', ms: 4000, times: 1 }] },
        async (cluster) => {
          const result = await interruptWhen(
            cluster,
            'bootstrap:apply',
            () => cluster.calls().some((c) => c.node === 'cp-1' && c.call === 'apply' && c.outcome === 'ok'),
            500,
          )
          expect(result.code, result.stderr).toBe(130)
          const wrkr = nodeIn(cluster.report(), 'apply', 'wrkr-1')
          expect(wrkr.status).toBe('failed')
          expect(wrkr.error?.message).toMatch(
            /^unknown outcome: interrupted by SIGTERM during: Apply configs, while `talosctl apply-config --insecure -n 127\.237\.11\.21 -e 127\.237\.11\.21 -f \S+e2e-wrkr-1\.yaml` was in flight/,
          )
          expect(result.stdout).toMatch(/^wrkr-1\s+\S+\s+worker\s+unknown outcome\s+interrupted \(unknown outcome\)$/m)

          await waitFor(
            () => cluster.calls().some((c) => c.node === 'wrkr-1' && c.call === 'apply' && c.outcome === 'ok'),
            30_000,
            'the apply taken by wrkr-1',
          )
          const rerun = await cluster.task('bootstrap:apply')
          expect(rerun.code, `${rerun.stdout}\n${rerun.stderr}`).toBe(0)
          expect(nodeIn(cluster.report(), 'apply', 'wrkr-1').status).toBe('skipped')
          expect(cluster.calls().filter((c) => c.node === 'wrkr-1' && c.call === 'apply')).toHaveLength(1)
        },
      ),
    ROW_TIMEOUT,
  )
})

// Issue: stop cleanly (Ctrl-C, a killed go-task), resume, and refuse a concurrent run.
import { writeFileSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { callsTo, E2eCluster, processesMentioning, statuses, waitFor } from './harness.js'

let cluster: E2eCluster | undefined
afterEach(async () => {
  await cluster?.stop()
  cluster = undefined
})

/** wrkr-1's first apply never answers (a hung call), so a run can be caught in the middle of it */
const hangingApply = [{ node: 'wrkr-1', on: 'apply', kind: 'timeout', times: 1 }]
const LONG_CALLS = ['--call-timeout', '120s']

/** the simulator logs a hung call when it arrives: the run is now inside wrkr-1's apply */
function applying(c: E2eCluster): Promise<void> {
  return waitFor(() => c.calls().some((call) => call.node === 'wrkr-1' && call.call === 'apply'), 60_000, "wrkr-1's apply")
}

describe('interruptions', () => {
  it('Ctrl-C during apply: exit 130, report and journal written, no stray process; the rerun completes', async () => {
    cluster = await E2eCluster.start('127.62.1', { workers: 3, faults: hangingApply })
    const c = cluster
    const { child, done } = c.spawnTask('bootstrap:apply', { CONCURRENCY: '2' }, LONG_CALLS)
    await applying(c)
    process.kill(-(child.pid as number), 'SIGINT') // the whole foreground group, as a terminal does
    const result = await done
    expect(result.code).toBe(130)
    expect(c.report().interrupted).toBe(true)
    expect(processesMentioning(c.clusterDir)).toEqual([])

    const rerun = await c.task('bootstrap:apply', { CONCURRENCY: '2' })
    expect(rerun.code, rerun.stderr).toBe(0)
    const verify = await c.task('bootstrap:verify')
    expect(verify.code, verify.stderr).toBe(0)
    expect(Object.values(statuses(c.report(), 'verify'))).toEqual(Array(4).fill('ok'))
  })

  it('go-task killed (a CI runner signalling only its pid): the script notices it is orphaned and stops', async () => {
    cluster = await E2eCluster.start('127.62.2', { workers: 3, faults: hangingApply })
    const c = cluster
    const { child, done } = c.spawnTask('bootstrap:apply', {}, LONG_CALLS)
    await applying(c)
    child.kill('SIGKILL') // go-task only: it never forwards signals, so only orphan detection can stop the script
    await done
    await waitFor(() => processesMentioning(c.clusterDir).length === 0, 15_000, 'the orphaned script to stop')
    expect(c.report().interrupted).toBe(true)
  })

  it('a second run on the same cluster directory is refused, naming the holder; a stale lock is taken over', async () => {
    // wrkr-1 does not answer: the first run sits in its backoff while the second one starts
    cluster = await E2eCluster.start('127.62.3', { workers: 1, faults: [{ node: 'wrkr-1', on: 'any', kind: 'unreachable' }] })
    const c = cluster
    const first = c.spawnTask('bootstrap:preflight', {}, ['--retries', '2', '--retry-delay', '2s', '--retry-max-delay', '10s'])
    // the first run's probe of cp-1 is its disks, then its boot state (security state, system disk):
    // wait for all three answers, not for a quiet spell, which a loaded machine can make early
    const cp1Answered = (resource: string) =>
      c.calls().some((call) => call.node === 'cp-1' && call.args[0] === resource && call.outcome === 'ok')
    await waitFor(() => ['disks', 'securitystates', 'systemdisks'].every(cp1Answered), 30_000, "the first run's probe of cp-1")
    // and nothing more for cp-1 after that: from here the first run only retries wrkr-1
    const cp1Calls = () => c.calls().filter((call) => call.node === 'cp-1').length
    for (let seen = -1, now = cp1Calls(); now !== seen; now = cp1Calls()) {
      seen = now
      await new Promise((r) => setTimeout(r, 1000))
    }
    const before = c.calls().length
    const second = await c.task('bootstrap:preflight')
    expect(second.code, second.stderr + second.stdout).toBe(2)
    expect(second.stderr).toMatch(
      /\.bootstrap\/lock: another run holds the lock \(pid \d+, [^()]*scripts\/preflight\.ts[^()]*\) \(fix: wait for pid \d+ to finish, or stop it/,
    )
    // the refused run touched no node (the first one is only retrying unreachable wrkr-1 by now)
    expect(c.calls().slice(before)).toEqual([])
    expect((await first.done).code).toBe(1)

    c.sim.clearFault('wrkr-1', 'unreachable')
    mkdirSync(join(c.clusterDir, '.bootstrap'), { recursive: true })
    writeFileSync(join(c.clusterDir, '.bootstrap', 'lock'), '999999\n')
    const third = await c.task('bootstrap:preflight')
    expect(third.code, third.stderr).toBe(0)
    expect(third.stderr).toMatch(/taking over a stale lock .* left by pid 999999: pid 999999 is gone/)
  })

  it('DRY_RUN=true prints every command per node and touches nothing', async () => {
    cluster = await E2eCluster.start('127.62.4', { workers: 1 })
    const result = await cluster.task('bootstrap:all', { DRY_RUN: 'true' })
    expect(result.code, result.stderr).toBe(0)
    expect(cluster.calls()).toEqual([])
    expect(result.stdout).toMatch(/^PLAN \(dry run: nothing was run; these commands would run\)$/m)
    // the tree, the summary lines and the table say what would be done, never that it was
    expect(result.stdout).toMatch(/wrkr-1 \(127\.62\.4\.21\): would apply its machine config/)
    expect(result.stdout).toMatch(/Bootstrap etcd \(once, on one control plane\): would bootstrap etcd on cp-1/)
    expect(result.stdout).toMatch(/Install the CNI \(helm\): would install cilium with helm/)
    expect(result.stdout).toMatch(/apply \(dry run\): 2 would run, 0 skipped, 0 failed, 0 not run/)
    expect(result.stdout).toMatch(/^wrkr-1 +127\.62\.4\.21 +worker +would run +would run /m)
    expect(result.stdout).not.toMatch(/config accepted|bootstrapped on|cilium installed|\b\d+ ok\b/)
    expect(result.stdout).toMatch(
      /^wrkr-1:\n(  .*\n)*  talosctl apply-config --insecure -n 127\.62\.4\.21 -e 127\.62\.4\.21 -f \S+e2e-wrkr-1\.yaml$/m,
    )
    expect(result.stdout).toMatch(/^cp-1:\n(  .*\n)*  talosctl bootstrap --talosconfig \S+ -e 127\.62\.4\.11 -n 127\.62\.4\.11$/m)
    expect(result.stdout).toMatch(
      /^  helm upgrade --install --namespace=kube-system .* --repo=https:\/\/127\.0\.0\.1:\d+\/ --ca-file=\S+\/charts-ca\.crt .*-- cilium cilium$/m,
    )
    expect(result.stdout).toMatch(/^  flux bootstrap git --url /m)
    expect(callsTo(cluster.calls(), 'wrkr-1')).toEqual([])
  })
})

// A control plane whose etcd exits at each start (fault etcd-crash: corrupt data, a failing disk):
// Talos restarts it every 5 s and keeps the node booting. Verify names the crash, not "etcd waiting
// for bootstrap", and the hint's command runs as printed once the cause is gone. Range 127.248.7.
import { describe, expect, it } from 'vitest'
import { withCluster } from '../faults/helpers.js'
import { CLUSTER_CASE_TIMEOUT, hintOf, nodeIn, run, runInFreshShell } from './harness.js'

describe('a control plane whose etcd keeps crashing', { timeout: CLUSTER_CASE_TIMEOUT }, () => {
  it('verify names the crash and its log; the recovery runs as printed once etcd runs again', () =>
    withCluster('127.248.7', { cps: 3, workers: 1 }, async (c) => {
      expect((await c.task('bootstrap:talos')).code).toBe(0)
      const member = c.sim.node('cp-2')?.etcdMember
      c.sim.addFault({ node: 'cp-2', kind: 'etcd-crash', message: 'open /var/lib/etcd/member/wal: input/output error' })
      const reboot = await run('talosctl', ['reboot', '--wait=false', '-e', '127.248.7.12', '-n', '127.248.7.12'], c.env())
      expect(reboot.code, reboot.stderr).toBe(0)
      // back up, booting: its etcd started from its data and crashing
      await c.sim.until(() => c.sim.node('cp-2')?.stage === 'booting' && c.sim.node('cp-2')?.services.etcd === 'Waiting', 60_000)

      const failed = await c.task('bootstrap:node', { NODE: 'cp-2' }, ['--verify-timeout', '15s'])
      expect(failed.code, failed.stderr).toBe(1)
      const verify = nodeIn(c.report(), 'verify', 'cp-2')
      expect(verify.status).toBe('failed')
      expect(verify.error).toMatchObject({
        kind: 'etcd',
        message: expect.stringMatching(
          /booting, its etcd keeps crashing: Error running Containerd\(etcd\), going to restart forever: task "etcd" failed: exit code 1 .*input\/output error/,
        ),
      })
      expect(verify.error?.message).not.toContain('waiting for bootstrap')
      const { hint, command } = hintOf(failed.stderr, 'cp-2 (127.248.7.12)')
      expect(hint).toContain('-n 127.248.7.12 logs etcd')
      expect(command).toBe(`task -d ${process.cwd()} bootstrap:node CLUSTER_DIR=${c.clusterDir} NODE=cp-2`)

      // the disk replaced: Talos's next restart runs etcd from its data, the same member
      c.sim.clearFault('cp-2', 'etcd-crash')
      const again = await runInFreshShell(c, command)
      expect(again.code, again.stderr).toBe(0)
      expect(c.sim.node('cp-2')).toMatchObject({ stage: 'running', etcdHealthy: true, etcdMember: member })
    }))
})

// Fault matrix, a CNI release left pending (issue 28, item 10): helm refuses with "another operation
// (install/upgrade/rollback) is in progress". On a first install (pending-install, revision 1) there
// is nothing to roll back to: the hint says uninstall; a pending upgrade is rolled back. helm's answers
// for the pending release come from a wrapper (helm list and upgrade as helm v3 prints them), every
// other helm call is the real one against the simulator. 127.225.<row>.0/24.
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { E2eCluster } from '../e2e/harness.js'
import { fastWith, ROW_TIMEOUT, stepIn, withCluster } from './helpers.js'

/** a helm whose release cilium is left `status` at `revision` by an interrupted helm */
function pendingHelm(cluster: E2eCluster, status: string, revision: number): string {
  const bin = mkdtempSync(join(tmpdir(), 'tb-helm-'))
  const helm = join(bin, 'helm')
  writeFileSync(
    helm,
    `#!/usr/bin/env bash
if [ "$1" = list ]; then
  echo '[{"name":"cilium","namespace":"kube-system","revision":"${revision}","updated":"2026-11-26 10:00:00.000000000 +0000 UTC","status":"${status}","chart":"cilium-1.18.4","app_version":"1.18.4"}]'
  exit 0
fi
if [ "$1" = upgrade ]; then
  echo 'Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress' >&2
  exit 1
fi
exec '${cluster.sim.binDir}/helm' "$@"
`,
  )
  chmodSync(helm, 0o755)
  return helm
}

describe.concurrent('a pending CNI release', () => {
  it(
    'a first install left pending-install: the hint says uninstall, not rollback',
    () =>
      withCluster('127.225.1', { workers: 1, vip: false }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, fastWith('--ready-timeout', '6s'), {
          HELM: pendingHelm(cluster, 'pending-install', 1),
        })
        expect(result.code).toBe(1)
        const cni = stepIn(cluster.report(), 'wait-ready', 'cni')
        expect(cni.status).toBe('failed')
        expect(cni.error?.kind).toBe('cni')
        expect(cni.error?.message).toContain(
          'another operation (install/upgrade/rollback) is in progress (release cilium: pending-install, revision 1)',
        )
        expect(cni.error?.hint).toMatch(/helm uninstall cilium -n kube-system --kubeconfig \S+/)
        expect(cni.error?.hint).not.toMatch(/helm rollback/)
        expect(cni.error?.hint).toMatch(/task -d \S+ bootstrap:wait-ready CLUSTER_DIR=\S+/)
      }),
    ROW_TIMEOUT,
  )

  it(
    'an upgrade left pending-upgrade: the hint rolls it back',
    () =>
      withCluster('127.225.2', { workers: 1, vip: false }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, fastWith('--ready-timeout', '6s'), {
          HELM: pendingHelm(cluster, 'pending-upgrade', 2),
        })
        expect(result.code).toBe(1)
        const cni = stepIn(cluster.report(), 'wait-ready', 'cni')
        expect(cni.error?.hint).toMatch(/helm rollback cilium -n kube-system --kubeconfig \S+/)
        expect(cni.error?.hint).not.toMatch(/uninstall/)
      }),
    ROW_TIMEOUT,
  )
})

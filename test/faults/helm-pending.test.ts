// Fault matrix, a CNI release left pending (issue 28, item 10): helm refuses with "another operation
// (install/upgrade/rollback) is in progress". On a first install (pending-install, revision 1) there
// is nothing to roll back to: the hint says uninstall; a pending upgrade is rolled back. helm's answers
// for the pending release come from a wrapper (helm list and upgrade as helm v3 prints them), every
// other helm call is the real one against the simulator. 127.225.<row>.0/24.
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs'
import { gzipSync } from 'node:zlib'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { hintOf, runInFreshShell, type E2eCluster } from '../e2e/harness.js'
import { FAST, fastWith, ROW_TIMEOUT, stepIn, withCluster } from './helpers.js'

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
        expect(cni.error?.hint).toMatch(/helm uninstall cilium -n kube-system --kubeconfig \S+ --kube-context admin@e2e/)
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
        expect(cni.error?.hint).toMatch(/helm rollback cilium -n kube-system --kubeconfig \S+ --kube-context admin@e2e/)
        expect(cni.error?.hint).not.toMatch(/uninstall/)
      }),
    ROW_TIMEOUT,
  )

  it(
    "a real release left pending-install: the hint's helm uninstall and task, run verbatim, install the CNI again",
    () =>
      withCluster('127.225.3', { workers: 1, vip: false }, async (cluster) => {
        expect((await cluster.task('bootstrap:talos', {}, FAST)).code).toBe(0)
        await leavePendingInstall(cluster)
        const result = await cluster.task('bootstrap:wait-ready', {}, fastWith('--ready-timeout', '6s'))
        expect(result.code, result.stderr).toBe(1)
        expect(stepIn(cluster.report(), 'wait-ready', 'cni').error?.message).toContain('(release cilium: pending-install, revision 1)')
        const { hint, command } = hintOf(result.stderr, 'wait-ready/cni')
        const uninstall = /`(helm uninstall [^`]+)`/.exec(hint)?.[1] ?? ''
        expect(uninstall).toMatch(/--kube-context admin@e2e$/)
        const removed = await runInFreshShell(cluster, uninstall)
        expect(removed.code, `${uninstall}\n${removed.stderr}`).toBe(0)
        const recovered = await runInFreshShell(cluster, command)
        expect(recovered.code, `${command}\n${recovered.stderr}`).toBe(0)
        expect(stepIn(cluster.report(), 'wait-ready', 'cni').status).toBe('ok')
      }),
    ROW_TIMEOUT,
  )
})

/**
 * What a helm killed during its first install leaves: the release's only revision, status
 * pending-install (helm pkg/storage/driver/secrets.go: a Secret labelled owner=helm, its `release`
 * the gzipped JSON release, base64-encoded).
 */
async function leavePendingInstall(cluster: E2eCluster): Promise<void> {
  const deleted = await cluster.kubectl(['-n', 'kube-system', 'delete', 'secret', '-l', 'owner=helm,name=cilium'])
  expect(deleted.code, deleted.stderr).toBe(0)
  const at = '2026-11-26T10:00:00Z'
  const release = {
    name: 'cilium',
    namespace: 'kube-system',
    version: 1,
    info: { first_deployed: at, last_deployed: at, deleted: '', description: 'Initial install underway', status: 'pending-install' },
    chart: {
      metadata: { name: 'cilium', version: '1.18.4', appVersion: '1.18.4', apiVersion: 'v2' },
      templates: [],
      values: {},
      files: [],
    },
    config: {},
    manifest: '',
  }
  const secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'helm.sh/release.v1',
    metadata: {
      name: 'sh.helm.release.v1.cilium.v1',
      namespace: 'kube-system',
      labels: { name: 'cilium', owner: 'helm', status: 'pending-install', version: '1' },
    },
    stringData: { release: gzipSync(JSON.stringify(release)).toString('base64') },
  }
  const file = join(mkdtempSync(join(tmpdir(), 'tb-release-')), 'release.json')
  writeFileSync(file, JSON.stringify(secret))
  const created = await cluster.kubectl(['create', '-f', file])
  expect(created.code, created.stderr).toBe(0)
}

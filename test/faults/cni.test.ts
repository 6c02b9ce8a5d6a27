// The CNI step and the CNI pods, failures named on each node (issue 17 item 3, issue 12 item 4).
// Rows on 127.87.<row>.0/24.
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { nodeIn, runInFreshShell, type E2eCluster } from '../e2e/harness.js'
import { expectPhase, fastWith, stepIn, ROW_TIMEOUT, withCluster } from './helpers.js'

const READY_SHORT = fastWith('--ready-timeout', '6s')

/**
 * The machine configs were regenerated after they were applied: the nodes run the old ones while
 * the files (which preflight reads) say something else. Applies and verifies with `applied` edits
 * in place, then puts the files as `files` wants them.
 */
async function appliedThenRegenerated(
  cluster: E2eCluster,
  applied: (text: string) => string,
  files: (text: string) => string,
): Promise<void> {
  const config = join(cluster.clusterDir, 'clusterconfig', 'e2e-cp-1.yaml')
  const original = readFileSync(config, 'utf8')
  writeFileSync(config, applied(original))
  expect((await cluster.task('bootstrap:apply', {}, fastWith('--verify-timeout', '30s'))).code).toBe(0)
  expect((await cluster.task('bootstrap:verify', {}, fastWith('--verify-timeout', '30s'))).code).toBe(0)
  writeFileSync(config, files(original))
}

/** `bootstrap:talos` exits 1 with every node failed in wait-ready, kind cni, each with this message and hint. */
async function expectEveryNodeCni(cluster: E2eCluster, message: RegExp, hint: RegExp, flags = READY_SHORT): Promise<void> {
  const result = await cluster.task('bootstrap:talos', {}, flags)
  expect(result.code).toBe(1)
  const report = cluster.report()
  expectPhase(report, 'wait-ready', { 'cp-1': 'failed:cni', 'wrkr-1': 'failed:cni' })
  for (const name of ['cp-1', 'wrkr-1']) {
    const node = nodeIn(report, 'wait-ready', name)
    expect(node.error?.message).toMatch(message)
    expect(node.error?.hint).toMatch(hint)
  }
}

describe.concurrent('the CNI as Talos needs it', () => {
  it(
    'helm failing with timeout-like text from the chart download: the CNI step fails with the cause, not ok (issue 12 item 4)',
    () =>
      withCluster('127.87.2', { workers: 1 }, async (cluster) => {
        // a helm whose chart download times out; every other helm command is the simulator's
        const bin = mkdtempSync(join(tmpdir(), 'tb-helm-'))
        const helm = join(bin, 'helm')
        writeFileSync(
          helm,
          `#!/usr/bin/env bash
if [ "$1" = upgrade ]; then
  echo 'Error: looks like "https://helm.cilium.io/" is not a valid chart repository or cannot be reached: Get "https://helm.cilium.io/index.yaml": dial tcp: lookup helm.cilium.io: i/o timeout' >&2
  exit 1
fi
exec '${cluster.sim.binDir}/helm' "$@"
`,
        )
        chmodSync(helm, 0o755)
        const result = await cluster.task('bootstrap:talos', {}, READY_SHORT, { HELM: helm })
        expect(result.code).toBe(1)
        const report = cluster.report()
        const cni = stepIn(report, 'wait-ready', 'cni')
        expect(cni.status, JSON.stringify(cni)).toBe('failed')
        expect(cni.error?.message).toMatch(/i\/o timeout \(release cilium: not installed\)$/)
        expect(cni.error?.hint).toMatch(/check that the chart can be fetched .*task -d \S+ bootstrap:wait-ready CLUSTER_DIR=\S+/)
        // every node carries that cause, none waits out a timeout on a CNI that was never installed
        for (const node of ['cp-1', 'wrkr-1']) expect(nodeIn(report, 'wait-ready', node).error?.message).toMatch(/^cni: .*i\/o timeout/)
      }),
    ROW_TIMEOUT,
  )

  it(
    'the chart repository served with a CA helm is not given (no cni.caFile): the real helm refuses it, the CNI step names the repository and caFile',
    () =>
      withCluster('127.87.6', { workers: 1 }, async (cluster) => {
        const settings = join(cluster.clusterDir, 'bootstrap.yaml')
        writeFileSync(settings, readFileSync(settings, 'utf8').replace(/\n  caFile: charts-ca\.crt/, ''))
        // and the machine's trust store without the simulator's CA (the harness's SSL_CERT_FILE adds it, for the OCI registry)
        const result = await cluster.task('bootstrap:talos', {}, READY_SHORT, { SSL_CERT_FILE: '' })
        expect(result.code).toBe(1)
        const cni = stepIn(cluster.report(), 'wait-ready', 'cni')
        expect(cni.status).toBe('failed')
        expect(cni.error?.message).toMatch(
          /^Error: looks like "https:\/\/127\.0\.0\.1:\d+\/" is not a valid chart repository or cannot be reached: .*x509: certificate signed by unknown authority/,
        )
        expect(cni.error?.hint).toMatch(/cni\.caFile .*bootstrap\.yaml.*task .*bootstrap:wait-ready/)
        expect(cluster.sim.chartRepo.requests).toEqual([])
      }),
    ROW_TIMEOUT,
  )

  it(
    'the chart comes from the repository in the settings, with its CA: index.yaml, then the chart archive',
    () =>
      withCluster('127.87.7', { workers: 1 }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, [])
        expect(result.code, result.stderr).toBe(0)
        expect(stepIn(cluster.report(), 'wait-ready', 'cni').detail).toBe('cilium installed')
        expect(cluster.sim.chartRepo.requests).toEqual(['GET /index.yaml', 'GET /cilium-1.18.4.tgz'])
      }),
    ROW_TIMEOUT,
  )

  it(
    'helm printing a timeout although the release went in: read back, deployed, ok',
    () =>
      withCluster('127.87.3', { workers: 1 }, async (cluster) => {
        const bin = mkdtempSync(join(tmpdir(), 'tb-helm-'))
        const helm = join(bin, 'helm')
        writeFileSync(
          helm,
          `#!/usr/bin/env bash
'${cluster.sim.binDir}/helm' "$@" || exit $?
if [ "$1" = upgrade ]; then echo 'Error: context deadline exceeded' >&2; exit 1; fi
`,
        )
        chmodSync(helm, 0o755)
        const result = await cluster.task('bootstrap:talos', {}, [], { HELM: helm })
        expect(result.code, result.stderr).toBe(0)
        expect(stepIn(cluster.report(), 'wait-ready', 'cni').detail).toBe(
          'cilium installed (helm said "Error: context deadline exceeded", but the release is deployed)',
        )
      }),
    ROW_TIMEOUT,
  )

  it(
    'nodes running with kube-proxy disabled and cilium without k8sServiceHost: each node names the agent that cannot reach the API server',
    () =>
      // the real control plane: the hint's `kubectl logs` goes through the API server to the node's kubelet
      withCluster('127.87.4', { workers: 1, image: 'disk', kube: 'real' }, async (cluster) => {
        await appliedThenRegenerated(
          cluster,
          (t) => t,
          (t) => t.replace(/proxy:\n(\s+)disabled: true/, 'proxy:\n$1disabled: false'),
        )
        const settings = join(cluster.clusterDir, 'bootstrap.yaml')
        writeFileSync(settings, readFileSync(settings, 'utf8').replace(/\n {4}k8sServiceHost: localhost\n {4}k8sServicePort: 7445/, ''))
        await expectEveryNodeCni(
          cluster,
          /^not Ready within \S+: CNI pod cilium-\w+ Running not ready, restarting \(\d+ restarts\): .*Unable to initialize Kubernetes subsystem.*dial tcp 127\.96\.0\.1:443: i\/o timeout/,
          /k8sServiceHost: localhost, k8sServicePort: 7445 .*kubectl --kubeconfig \S+ --context admin@e2e -n kube-system logs -p cilium-\w+/,
          // a real API server's start: up to 25 s on a loaded 2-core machine (helpers.ts FAST)
          fastWith('--bootstrap-timeout', '60s', READY_SHORT),
        )
        // the log the hint points at, as printed: the agent's own last words
        const hint = nodeIn(cluster.report(), 'wait-ready', 'wrkr-1').error?.hint ?? ''
        const logs = hint.match(/its log: `([^`]+)`/)?.[1] ?? 'no log command in the hint'
        const printed = await runInFreshShell(cluster, logs)
        expect(printed.code, printed.stderr).toBe(0)
        expect(printed.stdout).toMatch(/Unable to initialize Kubernetes subsystem.*dial tcp 127\.96\.0\.1:443: i\/o timeout/)
      }),
    ROW_TIMEOUT,
  )

  it(
    "nodes running Talos's flannel next to cilium: two CNIs named on each node",
    () =>
      withCluster('127.87.5', { workers: 1, image: 'disk' }, async (cluster) => {
        await appliedThenRegenerated(
          cluster,
          (t) => t.replace('name: none', 'name: flannel'),
          (t) => t,
        )
        await expectEveryNodeCni(
          cluster,
          /^two CNIs on the node: Talos's own flannel \(pod kube-flannel-\w+\) runs next to cilium;/,
          /cluster\.network\.cni\.name: none .*kubectl --kubeconfig \S+ --context admin@e2e -n kube-system delete daemonset kube-flannel/,
        )
      }),
    ROW_TIMEOUT,
  )
})

// Fault matrix, the Kubernetes API rows (issue 12, items 2 and 8): a transient error of a shared
// reading (503 on `kubectl get nodes`, on the readiness gates' pods)
// is "not yet" for every node waiting on it; a certificate the kubeconfig does not trust is named at
// once, not waited out as "API not ready"; a kubeconfig step that wrote no file fails; bootstrap:etcd
// needs kubectl. Each row on its own range 127.182.<row>.0/24.
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { expectPhase, FAST, fastWith, stepIn, ROW_TIMEOUT, withCluster } from './helpers.js'

/** kube requests the simulator answered with a fault, by command ("GET /api/v1/nodes") */
const kubeFaults = (calls: Array<{ call: string; command?: string; outcome: string }>): string[] =>
  calls.filter((c) => c.call === 'kube' && c.outcome.startsWith('fault')).map((c) => `${c.command ?? ''} ${c.outcome}`)

describe.concurrent('Kubernetes API faults', () => {
  it(
    '503 on the shared `kubectl get nodes` for a few reads: every node waits on and becomes Ready',
    () =>
      withCluster(
        '127.182.1',
        { workers: 2, faults: [{ on: 'kube', kind: 'unavailable', times: 3, path: '/api/v1/nodes' }] },
        async (cluster) => {
          const result = await cluster.task('bootstrap:talos', {}, FAST)
          expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0)
          expectPhase(cluster.report(), 'wait-ready', { 'cp-1': 'ok', 'wrkr-1': 'ok', 'wrkr-2': 'ok' })
          // the fault did hit the reading the nodes share
          expect(kubeFaults(cluster.calls())).toEqual(Array(3).fill('GET /api/v1/nodes fault unavailable'))
        },
      ),
    ROW_TIMEOUT,
  )

  it(
    '503 on the readiness gate pods for a few reads: the gate waits on and is satisfied',
    () =>
      withCluster(
        '127.182.2',
        { workers: 1, faults: [{ on: 'kube', kind: 'unavailable', times: 2, path: '/api/v1/namespaces/kube-system/pods' }] },
        async (cluster) => {
          const settings = join(cluster.clusterDir, 'bootstrap.yaml')
          writeFileSync(
            settings,
            `${readFileSync(settings, 'utf8')}readinessGates:\n  - { name: dns, namespace: kube-system, selector: k8s-app=kube-dns }\n`,
          )
          const result = await cluster.task('bootstrap:talos', {}, FAST)
          expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0)
          expect(stepIn(cluster.report(), 'wait-ready', 'readiness-gates')).toMatchObject({ status: 'ok' })
          expect(kubeFaults(cluster.calls()).length).toBe(2)
        },
      ),
    ROW_TIMEOUT,
  )

  it(
    "a kubeconfig whose CA is not the cluster's, or that kubectl cannot load: the api step names it at once",
    () =>
      withCluster('127.182.3', { workers: 1 }, async (cluster) => {
        expect((await cluster.task('bootstrap:talos', {}, FAST)).code).toBe(0)
        const kubeconfig = join(cluster.clusterDir, 'kubeconfig')
        const talosCa =
          (
            parse(readFileSync(join(cluster.clusterDir, 'clusterconfig', 'talosconfig'), 'utf8')) as {
              contexts: Record<string, { ca: string }>
            }
          ).contexts.e2e?.ca ?? ''
        writeFileSync(
          kubeconfig,
          readFileSync(kubeconfig, 'utf8').replace(/certificate-authority-data: \S+/, `certificate-authority-data: ${talosCa}`),
        )
        const result = await cluster.task('bootstrap:wait-ready', {}, FAST)
        expect(result.code).toBe(1)
        const api = stepIn(cluster.report(), 'wait-ready', 'api')
        expect(api).toMatchObject({ status: 'failed', error: { kind: 'pki-mismatch' } })
        expect(api.error?.message).toMatch(/certificate the kubeconfig does not accept: .*x509: certificate signed by unknown authority/)
        expect(api.error?.hint).toMatch(/task -d \S+ bootstrap:etcd CLUSTER_DIR=\S+/)
        expectPhase(cluster.report(), 'wait-ready', { 'cp-1': 'failed:pki-mismatch', 'wrkr-1': 'failed:pki-mismatch' })
        // a kubeconfig kubectl cannot load is named the same way, not waited out
        writeFileSync(kubeconfig, 'apiVersion: v1\nclusters: [[[\n')
        const broken = await cluster.task('bootstrap:wait-ready', {}, FAST)
        expect(broken.code).toBe(1)
        expect(stepIn(cluster.report(), 'wait-ready', 'api')).toMatchObject({
          status: 'failed',
          error: { kind: 'config-invalid', message: expect.stringContaining('error loading config file') },
        })
      }),
    ROW_TIMEOUT,
  )

  it(
    'talosctl kubeconfig exits 0 but writes no file: the kubeconfig step fails, saying so',
    () =>
      withCluster('127.182.4', { workers: 1 }, async (cluster) => {
        const bin = mkdtempSync(join(tmpdir(), 'tb-wrap-'))
        try {
          // a talosctl that "succeeds" at kubeconfig without writing anything (a wrapper, a full disk, a broken build)
          const wrapper = join(bin, 'talosctl')
          writeFileSync(wrapper, '#!/bin/sh\n[ "$1" = kubeconfig ] && exit 0\nexec talosctl "$@"\n')
          chmodSync(wrapper, 0o755)
          const result = await cluster.task('bootstrap:talos', {}, fastWith('--ready-timeout', '6s'), { TALOSCTL: wrapper })
          expect(result.code, result.stderr).toBe(1)
          const step = stepIn(cluster.report(), 'bootstrap', 'kubeconfig')
          expect(step).toMatchObject({ status: 'failed' })
          expect(step.error?.message).toBe(
            `talosctl kubeconfig on cp-1 exited 0 but wrote no file at ${join(cluster.clusterDir, '.bootstrap', 'kubeconfig.fetched')}`,
          )
          expect(step.error?.hint).toMatch(/task -d \S+ bootstrap:etcd CLUSTER_DIR=\S+/)
        } finally {
          rmSync(bin, { recursive: true, force: true })
        }
      }),
    ROW_TIMEOUT,
  )

  it(
    'bootstrap:etcd without kubectl: exit 3 naming it, no node touched',
    () =>
      withCluster('127.182.5', { workers: 1 }, async (cluster) => {
        const result = await cluster.task('bootstrap:etcd', {}, FAST, { KUBECTL: join(cluster.dir, 'no-kubectl-here') })
        expect(result.code, result.stderr).toBe(3)
        expect(result.stderr).toMatch(/kubectl not found \(looked for ".*no-kubectl-here"\): install it or point KUBECTL at it/)
        expect(cluster.calls()).toEqual([])
      }),
    ROW_TIMEOUT,
  )
})

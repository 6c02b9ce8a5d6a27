// The Kubernetes API refusing or answering 503 for a while as helm installs the CNI or flux installs
// (issue 26 item 13): transient for helm, flux and kubectl, retried with the one retry policy; when it
// outlasts the retries the API is named as the cause, never the chart or the repository, and the hint
// runs as printed once the API is back. Each row on its own range 127.235.<row>.0/24.
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { E2eCluster } from '../e2e/harness.js'
import { run, runInFreshShell, waitFor } from '../e2e/harness.js'
import { fastWith, ROW_TIMEOUT, stepIn, withCluster } from './helpers.js'

// a backoff of 15 s at least (1 + 2 + 4 + 4 + 4, each x1-2): longer than the outages below
const PATIENT = [...fastWith('--retries', '5'), '--retry-delay', '1s', '--retry-max-delay', '4s']

const faulted = (c: E2eCluster, path: string): number =>
  c.calls().filter((call) => call.call === 'kube' && call.outcome.startsWith('fault') && (call.command ?? '').includes(path)).length

/** the API answers 503 on `path` from the first request there for `ms`, then recovers */
async function outage(c: E2eCluster, path: string, ms: number): Promise<void> {
  c.sim.addFault({ on: 'kube', kind: 'unavailable', path })
  await waitFor(() => faulted(c, path) > 0, 120_000, `a request to ${path}`)
  await new Promise((r) => setTimeout(r, ms))
  c.sim.clearFault(null, 'unavailable')
}

describe.concurrent('the Kubernetes API away while helm or flux install', () => {
  it(
    'helm installing the CNI: a 503 for 5 s is retried; one that lasts names the API, and its hint recovers once the API is back',
    () =>
      withCluster('127.235.1', { workers: 1 }, async (cluster) => {
        // helm keeps its releases as Secrets in the release's namespace: every helm call reads them
        const helmStorage = '/api/v1/namespaces/kube-system/secrets'
        const [result] = await Promise.all([cluster.task('bootstrap:talos', {}, PATIENT), outage(cluster, helmStorage, 5000)])
        expect(result.code, result.stderr).toBe(0)
        expect(stepIn(cluster.report(), 'wait-ready', 'cni')).toMatchObject({ status: 'ok' })
        expect(faulted(cluster, helmStorage)).toBeGreaterThan(0)

        // an outage that outlasts the retries: uninstall, then fail the API for good
        const kubeconfig = join(cluster.clusterDir, 'kubeconfig')
        expect((await run('helm', ['uninstall', 'cilium', '-n', 'kube-system', '--kubeconfig', kubeconfig], cluster.env())).code).toBe(0)
        cluster.sim.addFault({ on: 'kube', kind: 'unavailable', path: helmStorage })
        const failed = await cluster.task('bootstrap:wait-ready', {}, fastWith('--retries', '2'))
        expect(failed.code).toBe(1)
        const cni = stepIn(cluster.report(), 'wait-ready', 'cni')
        expect(cni.error?.message).toMatch(/^the Kubernetes API did not answer: .*the server is currently unable to handle the request/)
        expect(cni.error?.hint).not.toMatch(/chart|repository/)
        expect(cni.error?.hint).toMatch(/get --raw '\/readyz\?verbose'.*then run: task -d \S+ bootstrap:wait-ready CLUSTER_DIR=\S+$/)

        cluster.sim.clearFault(null, 'unavailable')
        const hint = /then run: (.*)$/.exec(cni.error?.hint ?? '')?.[1] ?? ''
        const recovered = await runInFreshShell(cluster, hint)
        expect(recovered.code, recovered.stderr).toBe(0)
        expect(stepIn(cluster.report(), 'wait-ready', 'cni')).toMatchObject({ status: 'ok' })
      }),
    ROW_TIMEOUT * 2,
  )

  it(
    'flux installing: the API answering 503 for 5 s is retried, not "fix the repository"',
    () =>
      withCluster('127.235.2', { workers: 0, allowSchedulingOnControlPlanes: true }, async (cluster) => {
        expect((await cluster.task('bootstrap:talos', {}, PATIENT)).code).toBe(0)
        // the CRDs flux installs, and the one the tool reads first
        const crds = '/apis/apiextensions.k8s.io'
        const [result] = await Promise.all([cluster.task('bootstrap:flux', {}, PATIENT), outage(cluster, crds, 5000)])
        expect(result.code, result.stderr).toBe(0)
        expect(stepIn(cluster.report(), 'flux', 'flux-install')).toMatchObject({ status: 'ok' })
        expect(faulted(cluster, crds)).toBeGreaterThan(0)
      }),
    ROW_TIMEOUT,
  )
})

// Issue: bootstrap etcd, wait until truly ready, hand over to Flux; bootstrap:all end to end, then again as a no-op.
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { E2eCluster, statuses } from './harness.js'

let cluster: E2eCluster

beforeAll(async () => {
  cluster = await E2eCluster.start('127.61.1', { cps: 3, workers: 2 })
})
afterAll(async () => {
  await cluster.stop()
})

describe('bootstrap:all', () => {
  it('reaches a Flux-reconciled cluster that the real kubectl sees Ready', async () => {
    const result = await cluster.task('bootstrap:all')
    expect(result.code, result.stderr).toBe(0)
    const report = cluster.report()
    expect(report.command).toBe('all')
    expect(report.ok).toBe(true)
    expect(report.phases.map((p) => p.name)).toEqual(['preflight', 'apply', 'verify', 'bootstrap', 'wait-ready', 'flux'])
    expect(Object.values(statuses(report, 'wait-ready'))).toEqual(Array(5).fill('ok'))
    const bootstrap = report.phases.find((p) => p.name === 'bootstrap')
    expect(bootstrap?.steps.find((s) => s.name === 'etcd-bootstrap')?.detail).toBe('bootstrapped on cp-1')
    expect(statuses(report, 'bootstrap')).toEqual({ 'cp-1': 'ok', 'cp-2': 'ok', 'cp-3': 'ok', 'wrkr-1': 'skipped', 'wrkr-2': 'skipped' })

    // exactly one bootstrap call, on the first control plane
    expect(
      cluster
        .calls()
        .filter((c) => c.call === 'bootstrap')
        .map((c) => c.node),
    ).toEqual(['cp-1'])

    // the kubelets are read in one batched call through cp-1 per poll round (naming the nodes not
    // yet registered), not one call per node
    const kubeletReads = readFileSync(join(cluster.clusterDir, '.bootstrap', 'commands.log'), 'utf8')
      .split('\n')
      .filter((l) => / talosctl service kubelet /.test(l))
    expect(kubeletReads[0]).toMatch(
      / -e 127\.61\.1\.11 -n 127\.61\.1\.11,127\.61\.1\.12,127\.61\.1\.13,127\.61\.1\.21,127\.61\.1\.22(\s|$)/,
    )
    for (const line of kubeletReads) expect(line).toMatch(/ -e 127\.61\.1\.11 -n /)

    const kubeconfig = join(cluster.clusterDir, 'kubeconfig')
    expect(statSync(kubeconfig).mode & 0o777).toBe(0o600)

    const nodes = await cluster.kubectl([
      'get',
      'nodes',
      '-o',
      'jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}',
    ])
    expect(nodes.code, nodes.stderr).toBe(0)
    expect(nodes.stdout.trim().split('\n').sort()).toEqual(['cp-1 True', 'cp-2 True', 'cp-3 True', 'wrkr-1 True', 'wrkr-2 True'])

    const flux = await cluster.kubectl(['-n', 'flux-system', 'wait', 'kustomization/flux-system', '--for=condition=Ready', '--timeout=10s'])
    expect(flux.code, flux.stderr).toBe(0)
    expect(flux.stdout).toMatch(/kustomization.kustomize.toolkit.fluxcd.io\/flux-system condition met/)

    const rollout = await cluster.kubectl(['-n', 'kube-system', 'rollout', 'status', 'daemonset/cilium', '--timeout=10s'])
    expect(rollout.stdout).toMatch(/daemon set "cilium" successfully rolled out/)
  })

  it('run again on the healthy cluster: succeeds and changes nothing', async () => {
    const before = cluster.calls().length
    const result = await cluster.task('bootstrap:all')
    expect(result.code, result.stderr).toBe(0)
    const calls = cluster.calls().slice(before)
    expect(calls.filter((c) => c.call === 'apply')).toEqual([])
    expect(calls.filter((c) => c.call === 'bootstrap')).toEqual([])
    // the real helm's writes reach the calls log as Kubernetes API writes by its user agent
    expect(calls.filter((c) => c.tool === 'helm')).toEqual([])
    expect(calls.filter((c) => c.tool === 'flux' && ['bootstrap', 'install'].includes(c.command))).toEqual([])
    expect(calls.filter((c) => c.tool === 'kubectl')).toEqual([]) // kubectl writes are recorded; there are none
    const report = cluster.report()
    expect(Object.values(statuses(report, 'apply'))).toEqual(Array(5).fill('skipped'))
    const steps = Object.fromEntries(report.phases.flatMap((p) => p.steps.map((s) => [s.name, s.detail])))
    expect(steps['etcd-bootstrap']).toMatch(/^already bootstrapped/)
    expect(steps.cni).toMatch(/already deployed/)
    expect(steps['flux-install']).toMatch(/already installed/)
  })
})

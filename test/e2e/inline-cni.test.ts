// Issue 29 item 4: a cluster whose machine configs install the CNI themselves (cni: none and the CNI's
// DaemonSet in a control plane's cluster.inlineManifests, which Talos applies) bootstraps with no cni:
// in bootstrap.yaml: preflight accepts it, the simulated control plane applies the manifest as
// Talos's manifest controllers do, the CNI's pods make every node Ready, and no helm release is made.
import { readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parse, parseAllDocuments, stringify } from 'yaml'
import { E2eCluster, statuses } from './harness.js'

const CNI = readFileSync(resolve(import.meta.dirname, '../fixtures/cni/cilium-daemonset.yaml'), 'utf8')

let cluster: E2eCluster
beforeAll(async () => {
  cluster = await E2eCluster.start('127.231.3', { cps: 1, workers: 1, speed: 3000 })
  const config = join(cluster.clusterDir, 'clusterconfig', 'e2e-cp-1.yaml')
  const docs = parseAllDocuments(readFileSync(config, 'utf8')).map((d) => d.toJS() as Record<string, Record<string, unknown>>)
  const v1alpha1 = docs[0] as { cluster: Record<string, unknown> }
  v1alpha1.cluster.inlineManifests = [{ name: 'cilium', contents: CNI }]
  writeFileSync(config, docs.map((d) => stringify(d)).join('---\n'))
  const settingsFile = join(cluster.clusterDir, 'bootstrap.yaml')
  const settings = parse(readFileSync(settingsFile, 'utf8')) as Record<string, unknown>
  delete settings.cni
  writeFileSync(settingsFile, stringify(settings))
})
afterAll(async () => {
  await cluster?.stop()
})

describe("the CNI in the configs' inlineManifests, no cni: in bootstrap.yaml", () => {
  it('bootstraps to every node Ready through the CNI Talos applied; nothing installed with helm', async () => {
    const result = await cluster.task('bootstrap:talos')
    expect(result.code, result.stderr + result.stdout).toBe(0)
    expect(statuses(cluster.report(), 'wait-ready')).toEqual({ 'cp-1': 'ok', 'wrkr-1': 'ok' })
    const pods = await cluster.kubectl(['-n', 'kube-system', 'get', 'pods', '-l', 'k8s-app=cilium', '-o', 'name'])
    expect(pods.stdout.trim().split('\n')).toHaveLength(2)
    expect(cluster.calls().filter((c) => c.tool === 'helm')).toEqual([])
  }, 180_000)
})

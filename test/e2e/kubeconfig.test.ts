// The kubeconfig the tool writes is this cluster's entries only: an operator's kubeconfig with other
// clusters keeps every one of them (entries, credentials, current context, servers), and a kubeconfig
// setting that names one of the run's inputs is bad input. Range 127.141.<case>.0/24.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { FAST, ROW_TIMEOUT, withCluster } from '../faults/helpers.js'

interface Kubeconfig {
  'current-context'?: string
  clusters: Array<{ name: string; cluster: { server: string } }>
  contexts: Array<{ name: string; context: { cluster: string; user: string } }>
  users: Array<{ name: string; user: Record<string, string> }>
}

const OTHER = `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: https://prod.example.invalid:6443
    certificate-authority-data: cHJvZC1jYQ==
contexts:
- name: prod-admin
  context:
    cluster: prod
    user: prod-admin
current-context: prod-admin
users:
- name: prod-admin
  user:
    token: prod-token-that-must-survive
`

describe.concurrent('the operator kubeconfig', () => {
  it(
    'with another cluster in it: that cluster, its context, user, server and the current context stay; this cluster is added',
    () =>
      withCluster('127.141.1', { cps: 1, workers: 1 }, async (cluster) => {
        const file = join(cluster.dir, 'operator-kubeconfig')
        writeFileSync(file, OTHER, { mode: 0o600 })
        const result = await cluster.task('bootstrap:talos', {}, FAST, { BOOTSTRAP_KUBECONFIG: file })
        expect(result.code, result.stderr + result.stdout).toBe(0)
        const after = parse(readFileSync(file, 'utf8')) as Kubeconfig
        expect(after['current-context']).toBe('prod-admin')
        expect(after.clusters.find((c) => c.name === 'prod')?.cluster).toEqual({
          server: 'https://prod.example.invalid:6443',
          'certificate-authority-data': 'cHJvZC1jYQ==',
        })
        expect(after.users.find((u) => u.name === 'prod-admin')?.user).toEqual({ token: 'prod-token-that-must-survive' })
        expect(after.contexts.find((c) => c.name === 'prod-admin')?.context).toEqual({ cluster: 'prod', user: 'prod-admin' })
        // this cluster's entries, pointing at its own API
        const mine = after.contexts.find((c) => c.name !== 'prod-admin')
        expect(mine).toBeDefined()
        expect(after.clusters.find((c) => c.name === mine?.context.cluster)?.cluster.server).toMatch(/^https:\/\/127\.141\.1\.\d+:6443$/)
        // a rerun (wait-ready points the kubeconfig again) still leaves the other cluster's server alone
        const again = await cluster.task('bootstrap:wait-ready', {}, FAST, { BOOTSTRAP_KUBECONFIG: file })
        expect(again.code, again.stderr + again.stdout).toBe(0)
        const rerun = parse(readFileSync(file, 'utf8')) as Kubeconfig
        expect(rerun.clusters.find((c) => c.name === 'prod')?.cluster.server).toBe('https://prod.example.invalid:6443')
        expect(rerun['current-context']).toBe('prod-admin')
      }),
    ROW_TIMEOUT,
  )

  it(
    'naming an input (the talosconfig): exit 2 naming both, the file untouched, no node called',
    () =>
      withCluster('127.141.2', { cps: 1, workers: 0 }, async (cluster) => {
        const talosconfig = cluster.env().TALOSCONFIG as string
        const before = readFileSync(talosconfig, 'utf8')
        const result = await cluster.task('bootstrap:talos', {}, FAST, { BOOTSTRAP_KUBECONFIG: talosconfig })
        expect(result.code, result.stderr + result.stdout).toBe(2)
        expect(result.stderr).toContain(`${talosconfig}: is an input of this cluster`)
        expect(result.stderr).toContain('(fix: point kubeconfig at a file of its own')
        expect(readFileSync(talosconfig, 'utf8')).toBe(before)
        expect(cluster.calls()).toEqual([])
      }),
    ROW_TIMEOUT,
  )
})

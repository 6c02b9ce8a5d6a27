// Issue 27, item 6: the manifests the tool builds for Flux (the namespaces of the operator's Secrets,
// the sops-age Secret, the deploy key Secret) are objects, never YAML put together as text: a
// namespace that would carry a second document into the Namespace manifest fails the step naming its
// file, and nothing of it reaches the cluster. Range 127.213.1.x.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parse, stringify } from 'yaml'
import { E2eCluster } from './harness.js'

const SLOW = 180_000

describe('Flux Secrets: a namespace cannot smuggle in another object', () => {
  let cluster: E2eCluster
  beforeAll(async () => {
    cluster = await E2eCluster.start('127.213.1', { cps: 1, workers: 0, allowSchedulingOnControlPlanes: true })
  }, SLOW)
  afterAll(async () => {
    await cluster?.stop()
  })

  it(
    'a multi-line metadata.namespace: flux-secrets fails naming the file, no ConfigMap created',
    async () => {
      writeFileSync(
        join(cluster.clusterDir, 'token.yaml'),
        [
          'apiVersion: v1',
          'kind: Secret',
          'metadata:',
          '  name: token',
          '  namespace: |-',
          '    apps',
          '    ---',
          '    apiVersion: v1',
          '    kind: ConfigMap',
          '    metadata:',
          '      name: injected',
          '      namespace: default',
          'stringData:',
          '  token: abc',
          '',
        ].join('\n'),
      )
      const file = join(cluster.clusterDir, 'bootstrap.yaml')
      const settings = parse(readFileSync(file, 'utf8')) as { flux: { secrets?: string[] } }
      settings.flux.secrets = ['token.yaml']
      writeFileSync(file, stringify(settings))
      const result = await cluster.task('bootstrap:all')
      expect(result.code, `${result.stdout}\n${result.stderr}`.slice(-3000)).toBe(1)
      const injected = await cluster.kubectl(['get', 'configmap', 'injected', '-n', 'default', '--ignore-not-found', '-o', 'name'])
      expect(injected.stdout.trim()).toBe('')
      const secrets = cluster
        .report()
        .phases.find((p) => p.name === 'flux')
        ?.steps.find((s) => s.name === 'flux-secrets')
      expect(secrets?.status).toBe('failed')
      expect(secrets?.error?.kind).toBe('config-invalid')
      expect(secrets?.error?.message).toMatch(/^token\.yaml: metadata\.namespace "apps\\n---\\n.*" is not a namespace name/)
      const namespaces = await cluster.kubectl(['get', 'namespaces', '-o', 'name'])
      expect(namespaces.stdout).not.toMatch(/namespace\/apps$/m)
    },
    SLOW,
  )
})

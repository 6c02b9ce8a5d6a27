// The secrets audit, one level down: every form of every input secret the audit searches for is masked by
// the product's Redactor (lib/input/redact.ts), fed as lib/commands/run-command.ts feeds it, so a tool that echoes one
// (an error quoting a config, a decoded PEM, a base64-encoded token) cannot carry it into an output.
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Redactor } from '../../lib/input/redact.js'
import { E2eCluster } from '../e2e/harness.js'
import { clusterSecrets, type Secret } from './secrets.js'

let cluster: E2eCluster
let secrets: Secret[]
let redactor: Redactor
beforeAll(async () => {
  cluster = await E2eCluster.start('127.71.4', { cps: 1, workers: 1 })
  secrets = clusterSecrets(cluster.clusterDir)
  redactor = new Redactor()
  const configs = join(cluster.clusterDir, 'clusterconfig')
  redactor.addFromYamlFile(join(configs, 'talosconfig'))
  for (const name of ['e2e-cp-1.yaml', 'e2e-wrkr-1.yaml']) redactor.addFromYamlFile(join(configs, name))
  redactor.addFile(join(cluster.clusterDir, 'flux-deploy-key'))
})
afterAll(async () => {
  await cluster?.stop()
})

describe('the Redactor masks every form of every input secret', () => {
  it('masks each value, its PEM body lines and its base64 form inside a line of tool output', () => {
    const missed: string[] = []
    for (const secret of secrets) {
      // the admin client certificate is not a secret the product masks: a certificate is public
      if (secret.origin.endsWith('.crt')) continue
      for (const needle of secret.needles) {
        const line = `error: rpc error: code = InvalidArgument desc = bad value "${needle}" in config`
        if (redactor.redact(line).includes(needle)) missed.push(`${secret.origin}: ${needle.slice(0, 12)}…`)
      }
    }
    expect(missed).toEqual([])
  })
})

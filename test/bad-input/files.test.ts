// Issue "Every failure seen in the field, rehearsed", item 2: bad files next to the inventory (the
// talosconfig, machine configs, Flux's secrets and deploy key) and bad node selections for recovery.
// Each case runs the real `task -x bootstrap:<phase>` against a simulated cluster on 127.70.3.x and must
// end with exit 2, `<path>:<line>: <what> (fix: <what to do>)`, and no call to any node.
import { mkdirSync, rmSync } from 'node:fs'
import { beforeEach, describe, expect, it } from 'vitest'
import { BadInputBed, expectBadInput, inputErrors, lineOf, useBed } from './helpers.js'

const bedOf = useBed('127.70.3')
let bed: BadInputBed
beforeEach(() => {
  bed = bedOf()
})

const TALOSCONFIG = 'clusterconfig/talosconfig'
const WORKER_CONFIG = 'clusterconfig/e2e-wrkr-1.yaml'
const SETTINGS = 'bootstrap.yaml'

describe('bad talosconfig: exit 2, file, line and fix, no node touched', () => {
  it('missing talosconfig (bootstrap:verify)', async () => {
    rmSync(bed.path(TALOSCONFIG))
    const result = await bed.cluster.task('bootstrap:verify')
    expectBadInput(result, bed, {
      file: bed.path(TALOSCONFIG),
      what: /^talosconfig not found$/,
      fix: /the talosconfig generated with the machine configs/,
    })
  })

  it('malformed talosconfig (bootstrap:etcd)', async () => {
    const file = bed.edit(TALOSCONFIG, /^context: e2e$/m, 'context: e2e: default')
    const result = await bed.cluster.task('bootstrap:etcd')
    expectBadInput(result, bed, {
      file,
      line: 1,
      what: /^talosconfig: YAML syntax error at column 10: Nested mappings are not allowed in compact mappings$/,
      fix: /correct the YAML syntax/,
    })
  })

  it('unreadable talosconfig: a directory in its place (bootstrap:apply)', async () => {
    rmSync(bed.path(TALOSCONFIG))
    mkdirSync(bed.path(TALOSCONFIG))
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, {
      file: bed.path(TALOSCONFIG),
      what: /^talosconfig: cannot read file \(EISDIR\)$/,
      fix: /make it a readable file/,
    })
  })

  it('talosconfig whose context is missing (bootstrap:talos)', async () => {
    const file = bed.edit(TALOSCONFIG, /^context: e2e$/m, 'context: prod')
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'context: prod'),
      what: /^talosconfig has no context "prod"$/,
      fix: /^set context: to one of e2e$/,
    })
  })

  it('talosconfig whose client key is not a base64 PEM (bootstrap:wait-ready)', async () => {
    const file = bed.edit(TALOSCONFIG, /key: \S+/, 'key: "not a key!"')
    const result = await bed.cluster.task('bootstrap:wait-ready')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'not a key'),
      what: /^talosconfig context "e2e" has no valid key \(base64 PEM expected\)$/,
      fix: /clusterconfig\/talosconfig/,
    })
  })
})

describe('bad machine configs: exit 2, file, line and fix, no node touched', () => {
  it('a machine config that fails `talosctl validate`: no install section (bootstrap:preflight)', async () => {
    const file = bed.edit(WORKER_CONFIG, /^ {4}install:\n(?: {8}.*\n)+/m, '')
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file,
      what: /^machine config of wrkr-1 is invalid: .*install instructions are required in "metal" mode$/,
      fix: /correct the config .*and regenerate it/,
    })
  })

  it('a machine config with an invalid install disk selector (bootstrap:talos)', async () => {
    const file = bed.edit(WORKER_CONFIG, /^( {8})disk: \/dev\/sda$/m, '$1diskSelector:\n$1    name: sda')
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file,
      what: /^machine config of wrkr-1 is invalid: .*install disk selector is invalid: selector on name is not supported(; |$)/,
      fix: /regenerate/,
    })
  })

  it('a Talos 1.13 config checked with talosctl 1.12: the client version is named as the cause (bootstrap:preflight)', async () => {
    bed.edit('talconfig.yaml', /^talosVersion: .*$/m, 'talosVersion: v1.13.7')
    const file = bed.edit(WORKER_CONFIG, /\n*$/, '\n---\napiVersion: v1alpha1\nkind: ImageVerificationConfig\nrules: []\n')
    bed.generated()
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file,
      what: /^machine config of wrkr-1 uses what talosctl v1\.12\.\d+ does not know \(.*"ImageVerificationConfig" "v1alpha1": not registered\); the configs are for Talos v1\.13\.7$/,
      fix: /^use talosctl v1\.13\.x, the cluster's Talos minor/,
    })
  })

  it('the same unknown document where the cluster is not newer than talosctl: an invalid config (bootstrap:preflight)', async () => {
    const file = bed.edit(WORKER_CONFIG, /\n*$/, '\n---\napiVersion: v1alpha1\nkind: ImageVerificationConfig\nrules: []\n')
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file,
      what: /^machine config of wrkr-1 is invalid: .*not registered$/,
      fix: /correct the config/,
    })
  })

  it('a machine config that is not YAML is refused before apply sends it (bootstrap:apply)', async () => {
    const file = bed.edit(WORKER_CONFIG, /^( {4})type: worker$/m, '$1type: [worker')
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'type: [worker') + 1,
      what: /^YAML syntax error at column \d+: /,
      fix: /correct the YAML syntax .*regenerate/,
    })
  })
})

describe('bad Flux inputs (bootstrap:flux): exit 2, file and fix, no node touched', () => {
  it('a flux secrets manifest that does not exist', async () => {
    const file = bed.edit(SETTINGS, /^flux:\n/m, 'flux:\n  secrets:\n    - secrets/sops-age.yaml\n')
    const result = await bed.cluster.task('bootstrap:flux')
    expectBadInput(result, bed, {
      file,
      what: /^secrets\/sops-age\.yaml named in flux settings not found$/,
      fix: /create .*secrets\/sops-age\.yaml or fix the path/,
    })
  })

  it('the flux deploy key file missing', async () => {
    rmSync(bed.path('flux-deploy-key'))
    const result = await bed.cluster.task('bootstrap:flux')
    expectBadInput(result, bed, {
      file: bed.path(SETTINGS),
      what: /^flux-deploy-key named in flux settings not found$/,
      fix: /create .*flux-deploy-key or fix the path/,
    })
  })

  it('no flux section in bootstrap.yaml', async () => {
    const file = bed.edit(SETTINGS, /^flux:\n(?: {2}.*\n)+/m, '')
    const result = await bed.cluster.task('bootstrap:flux')
    expectBadInput(result, bed, { file, what: /^no flux section in bootstrap\.yaml$/, fix: /add flux: \{mode, kustomization, git\}/ })
  })

  it('flux.mode bootstrap without flux.git, plus a machine config error: only the first input read is reported, nothing run', async () => {
    const file = bed.edit(SETTINGS, /^ {2}git:\n(?: {4}.*\n)+/m, '')
    const result = await bed.cluster.task('bootstrap:all')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'mode: bootstrap'),
      what: /^flux\.mode bootstrap needs flux\.git \(url, branch, path, privateKeyFile\)$/,
      fix: /add flux\.git, or set flux\.mode: existing/,
    })
    expect(inputErrors(result.stderr)).toHaveLength(1)
  })
})

describe('bad recovery target (bootstrap:node): exit 2, no node touched', () => {
  it('NODE that is not in the inventory', async () => {
    const result = await bed.cluster.task('bootstrap:node', { NODE: 'wrkr-9' })
    expectBadInput(result, bed, {
      file: bed.path('talconfig.yaml'),
      what: /^NODE names "wrkr-9", not in the inventory$/,
      fix: /^use one name or address from the inventory: cp-1, wrkr-1, wrkr-2$/,
    })
  })

  it('NODE naming two nodes', async () => {
    const result = await bed.cluster.task('bootstrap:node', { NODE: 'wrkr-1,wrkr-2' })
    expectBadInput(result, bed, {
      what: /^NODE takes one node, got "wrkr-1,wrkr-2"$/,
      fix: /name one node: task bootstrap:node NODE=<name or address>, one of: cp-1, wrkr-1, wrkr-2$/,
    })
  })
})

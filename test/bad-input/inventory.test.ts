// Issue "Every failure seen in the field, rehearsed", item 2: bad inventories (talconfig.yaml,
// machine config files, NODES). Each case runs the real `task -x bootstrap:<phase>` against a simulated
// cluster on 127.70.1.x and must end with exit 2, `<path>:<line>: <what> (fix: <what to do>)`, and no call
// to any node.
import { mkdirSync, rmSync } from 'node:fs'
import { beforeEach, describe, expect, it } from 'vitest'
import { BadInputBed, expectBadInput, inputErrors, lineOf, useBed } from './helpers.js'

const bedOf = useBed('127.70.1')
let bed: BadInputBed
beforeEach(() => {
  bed = bedOf()
})

const TALCONFIG = 'talconfig.yaml'

describe('bad inventory: exit 2, file, line and fix, no node touched', () => {
  it('YAML syntax error in talconfig.yaml (bootstrap:preflight)', async () => {
    const file = bed.edit(TALCONFIG, '    - hostname: wrkr-1', '    - hostname: [wrkr-1')
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, '[wrkr-1') + 1,
      what: /^YAML syntax error at column \d+: Flow sequence in block collection must be sufficiently indented/,
      fix: /correct the YAML syntax/,
    })
  })

  it('wrong type: nodes is a mapping, not a list (bootstrap:apply)', async () => {
    const file = bed.write(
      TALCONFIG,
      'clusterName: e2e\nendpoint: https://127.70.1.10:6443\nnodes:\n  hostname: cp-1\n  ipAddress: 127.70.1.11\n',
    )
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, { file, line: 4, what: /^nodes must be a list$/, fix: /one "- " item per node/ })
  })

  it('wrong type: controlPlane is a string (bootstrap:verify)', async () => {
    const file = bed.edit(TALCONFIG, /(hostname: wrkr-1\n\s+ipAddress: \S+\n\s+controlPlane:) false/, '$1 "no"')
    const result = await bed.cluster.task('bootstrap:verify')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'controlPlane: "no"'),
      what: /^wrkr-1: role missing or invalid \("no"\)$/,
      fix: /controlPlane: true or false/,
    })
  })

  it('duplicate hostname (bootstrap:etcd)', async () => {
    const file = bed.edit(TALCONFIG, 'hostname: wrkr-2', 'hostname: wrkr-1')
    const result = await bed.cluster.task('bootstrap:etcd')
    const second = lineOf(file, /hostname: wrkr-1$/) + 4 // the second wrkr-1, one node (4 lines) further down
    expectBadInput(result, bed, {
      file,
      line: second,
      what: /^duplicate node name "wrkr-1" \(also nodes\[1\]\)$/,
      fix: /give every node its own name/,
    })
  })

  it('duplicate address (bootstrap:talos)', async () => {
    const file = bed.edit(TALCONFIG, 'ipAddress: 127.70.1.22', 'ipAddress: 127.70.1.21')
    const result = await bed.cluster.task('bootstrap:talos')
    const second = lineOf(file, 'hostname: wrkr-2') + 1
    expectBadInput(result, bed, {
      file,
      line: second,
      what: /^duplicate address 127\.70\.1\.21 of wrkr-2 \(also nodes\[1\]\)$/,
      fix: /own address/,
    })
  })

  it('missing machine config file (bootstrap:all)', async () => {
    rmSync(bed.path('clusterconfig', 'e2e-wrkr-2.yaml'))
    const result = await bed.cluster.task('bootstrap:all')
    const file = bed.path(TALCONFIG)
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'hostname: wrkr-2'),
      what: new RegExp(`^wrkr-2: machine config ${bed.path('clusterconfig', 'e2e-wrkr-2.yaml').replace(/[.]/g, '\\.')} not found$`),
      fix: /talhelper genconfig/,
    })
  })

  it('invalid address (bootstrap:wait-ready)', async () => {
    const file = bed.edit(TALCONFIG, 'ipAddress: 127.70.1.21', 'ipAddress: 127.70.1.300')
    const result = await bed.cluster.task('bootstrap:wait-ready')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, '127.70.1.300'),
      what: /^nodes\[1\]\.ipAddress "127\.70\.1\.300" of wrkr-1 is not an IP address$/,
      fix: /the node's IP address/,
    })
  })

  it('unknown NODES entry (bootstrap:apply NODES=wrkr-9)', async () => {
    const result = await bed.cluster.task('bootstrap:apply', { NODES: 'cp-1,wrkr-9' })
    expectBadInput(result, bed, {
      file: bed.path(TALCONFIG),
      what: /^NODES names "wrkr-9", not in the inventory$/,
      fix: /cp-1, wrkr-1, wrkr-2/,
    })
  })

  it('NODES with an empty entry (bootstrap:verify NODES=cp-1,,wrkr-1)', async () => {
    const result = await bed.cluster.task('bootstrap:verify', { NODES: 'cp-1,,wrkr-1' })
    expectBadInput(result, bed, {
      file: bed.path(TALCONFIG),
      what: /^NODES "cp-1,,wrkr-1" has an empty entry$/,
      fix: /comma-separated names or addresses/,
    })
  })

  it('no control plane (bootstrap:flux)', async () => {
    const file = bed.edit(TALCONFIG, /(hostname: cp-1\n\s+ipAddress: \S+\n\s+controlPlane:) true/, '$1 false')
    // its config regenerated as a worker's too (else the contradiction is the error)
    bed.edit('clusterconfig/e2e-cp-1.yaml', 'type: controlplane', 'type: worker')
    const result = await bed.cluster.task('bootstrap:flux')
    // the line of the nodes list (its first item)
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, '- hostname: cp-1'),
      what: /^no control plane node in the inventory$/,
      fix: /at least one node as a control plane/,
    })
  })

  it('a node name with shell metacharacters (bootstrap:preflight)', async () => {
    const file = bed.edit(TALCONFIG, 'hostname: wrkr-2', 'hostname: "wrkr-2; touch /tmp/pwned-$(id -u)"')
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'pwned'),
      what: /^nodes\[2\]\.hostname "wrkr-2; touch \/tmp\/pwned-\$\(id -u\)" is not a valid node name$/,
      fix: /letters, digits and dashes, in dot-separated labels/,
    })
  })

  it('an empty inventory (bootstrap:apply)', async () => {
    const file = bed.write(TALCONFIG, 'clusterName: e2e\nendpoint: https://127.70.1.10:6443\nnodes: []\n')
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, { file, line: 3, what: /^the inventory lists no nodes$/, fix: /list your nodes under nodes:/ })
  })

  it('an endpoint that is not an https URL (bootstrap:talos)', async () => {
    const file = bed.edit(TALCONFIG, 'endpoint: https://127.70.1.10:6443', 'endpoint: 127.70.1.10:6443')
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'endpoint:'),
      what: /^endpoint "127\.70\.1\.10:6443" is not an https URL$/,
      fix: /https:\/\/<address>:6443/,
    })
  })

  it('missing CLUSTER_DIR (bootstrap:preflight CLUSTER_DIR=<no such dir>)', async () => {
    const missing = bed.path('no-such-cluster')
    const result = await bed.cluster.task('bootstrap:preflight', { CLUSTER_DIR: missing })
    expectBadInput(result, bed, { file: missing, what: /^cluster directory not found$/, fix: /point CLUSTER_DIR at your cluster/ })
  })

  it('a cluster directory with no inventory in it (bootstrap:apply)', async () => {
    const empty = bed.path('empty-cluster')
    mkdirSync(empty)
    const result = await bed.cluster.task('bootstrap:apply', { CLUSTER_DIR: empty })
    expectBadInput(result, bed, {
      file: empty,
      what: /^no talconfig\.yaml, topf\.yaml or nodes\.yaml in the cluster directory$/,
      fix: /add talconfig\.yaml/,
    })
  })

  it('two input errors at once are both reported (bootstrap:talos)', async () => {
    bed.edit(TALCONFIG, 'hostname: wrkr-2', 'hostname: wrkr-1')
    // a DNS name is an address to talhelper: this one has a space in it
    const file = bed.edit(TALCONFIG, 'ipAddress: 127.70.1.11', 'ipAddress: not an address')
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(
      result,
      bed,
      {
        file,
        line: lineOf(file, 'not an address'),
        what: /^nodes\[0\]\.ipAddress "not an address" of cp-1 is not an IP address$/,
        fix: /IP address/,
      },
      { file, line: lineOf(file, /hostname: wrkr-1$/) + 4, what: /^duplicate node name "wrkr-1"/, fix: /own name/ },
    )
    expect(inputErrors(result.stderr)).toHaveLength(2)
  })
})

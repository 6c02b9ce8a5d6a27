// Issue 28, items 3 and 5: machine configs that contradict the inventory, found before any node is
// touched: an installer image of another Talos version than talosVersion, an install disk other than
// talconfig's, and machine.kubelet.nodeIP.validSubnets that select none of the node's addresses: exit 2
// naming the config's line and the fix, no call to any node; subnets selecting a VIP the config does
// not hold: a warning. 127.239.1.x.
import { beforeEach, describe, expect, it } from 'vitest'
import { BadInputBed, expectBadInput, lineOf, useBed } from './helpers.js'

const bedOf = useBed('127.239.1')
let bed: BadInputBed
beforeEach(() => {
  bed = bedOf()
})

const WRKR1 = 'clusterconfig/e2e-wrkr-1.yaml'
const CP1 = 'clusterconfig/e2e-cp-1.yaml'

/** validSubnets under machine.kubelet (the generated configs indent by 4) */
function withValidSubnets(relative: string, subnets: string[]): string {
  return bed.edit(
    relative,
    /^( {4}kubelet:\n)/m,
    `$1        nodeIP:\n            validSubnets:\n${subnets.map((s) => `                - "${s}"`).join('\n')}\n`,
  )
}

describe('configs that contradict the inventory: exit 2, file, line and fix, no node touched', () => {
  it('an installer image of another Talos minor than talosVersion (bootstrap:talos)', async () => {
    const file = bed.edit(WRKR1, 'image: ghcr.io/siderolabs/installer:v1.12.11', 'image: ghcr.io/siderolabs/installer:v1.13.2')
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'installer:v1.13.2'),
      what: /^machine\.install\.image ghcr\.io\/siderolabs\/installer:v1\.13\.2 of wrkr-1 installs Talos v1\.13\.2, another version than talosVersion v1\.12\.11 in \S+talconfig\.yaml$/,
      fix: /give the installer image the tag v1\.12\.11/,
    })
  })

  it('an installer of another patch release is a warning only (bootstrap:preflight, dry run)', async () => {
    bed.edit(WRKR1, 'image: ghcr.io/siderolabs/installer:v1.12.11', 'image: ghcr.io/siderolabs/installer:v1.12.9')
    const result = await bed.cluster.task('bootstrap:preflight', { DRY_RUN: 'true' })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stderr).toMatch(
      /wrkr-1: machine\.install\.image ghcr\.io\/siderolabs\/installer:v1\.12\.9 in \S+ installs Talos v1\.12\.9, not v1\.12\.11 .*another patch release/,
    )
  })

  it("an install disk other than talconfig's installDisk (bootstrap:preflight)", async () => {
    const file = bed.edit(WRKR1, 'disk: /dev/sda', 'disk: /dev/sdb')
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'disk: /dev/sdb'),
      what: /^machine\.install\.disk \/dev\/sdb of wrkr-1 contradicts installDisk \/dev\/sda in \S+talconfig\.yaml: the node would install to another disk than the inventory says$/,
      fix: /regenerate the configs \(talhelper genconfig\)/,
    })
  })

  it("validSubnets that select none of the node's addresses (bootstrap:talos)", async () => {
    const file = withValidSubnets(WRKR1, ['127.239.9.0/24'])
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file,
      line: lineOf(file, 'validSubnets:'),
      what: /^machine\.kubelet\.nodeIP\.validSubnets 127\.239\.9\.0\/24 of wrkr-1 selects none of its addresses \(127\.239\.1\.21\): the kubelet would find no node IP$/,
      fix: /list a subnet that holds 127\.239\.1\.21 in validSubnets/,
    })
  })

  it("validSubnets that select the VIP: none of Talos's business when the config holds it (Talos excludes it), a warning when it does not (dry runs)", async () => {
    withValidSubnets(CP1, ['127.239.1.0/24'])
    const held = await bed.cluster.task('bootstrap:preflight', { DRY_RUN: 'true' })
    expect(held.code, held.stderr).toBe(0)
    expect(held.stderr).not.toContain('validSubnets')

    bed.edit(CP1, /\n\s+vip:\n\s+ip: 127\.239\.1\.10/, '')
    const other = await bed.cluster.task('bootstrap:preflight', { DRY_RUN: 'true' })
    expect(other.code, other.stderr).toBe(0)
    expect(other.stderr).toMatch(
      /cp-1: machine\.kubelet\.nodeIP\.validSubnets 127\.239\.1\.0\/24 in \S+ select the endpoint's address 127\.239\.1\.10, which its config does not hold as a VIP .*add "!127\.239\.1\.10\/32" to validSubnets/,
    )

    bed.restore()
    bed.edit(CP1, /\n\s+vip:\n\s+ip: 127\.239\.1\.10/, '')
    withValidSubnets(CP1, ['127.239.1.0/24', '!127.239.1.10/32'])
    const excluded = await bed.cluster.task('bootstrap:preflight', { DRY_RUN: 'true' })
    expect(excluded.code, excluded.stderr).toBe(0)
    expect(excluded.stderr).not.toContain('select the endpoint')
  })
})

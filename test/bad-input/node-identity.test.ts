// Issue 27, items 4 and 7: a machine config that would bring a node up as another one. The config's
// hostname and static addresses must agree with the inventory entry (as its machine.type must), and
// the hostname must be a DNS-1123 name; otherwise exit 2 naming the config and the inventory, before
// any node is touched. Range 127.211.1.x.
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs'
import { beforeEach, describe, it } from 'vitest'
import { BadInputBed, expectBadInput, lineOf, useBed } from './helpers.js'

const bedOf = useBed('127.211.1')
let bed: BadInputBed
beforeEach(() => {
  bed = bedOf()
})

const re = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

describe('the config names another node', () => {
  it("wrkr-1's config saved as wrkr-2's: its hostname names both files (bootstrap:talos)", async () => {
    const config = bed.path('clusterconfig', 'e2e-wrkr-2.yaml')
    copyFileSync(bed.path('clusterconfig', 'e2e-wrkr-1.yaml'), config)
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file: config,
      line: lineOf(config, 'hostname: wrkr-1'),
      what: new RegExp(
        `^machine\\.network\\.hostname "wrkr-1" contradicts ${re(bed.path('talconfig.yaml'))}, where this config is node wrkr-2`,
      ),
      fix: /its own machine config/,
    })
  })

  it('a HostnameConfig document naming another node (bootstrap:apply)', async () => {
    const config = bed.edit('clusterconfig/e2e-wrkr-2.yaml', /\n\s+hostname: wrkr-2\n/, '\n')
    writeFileSync(config, `${readFileSync(config, 'utf8')}---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: wrkr-1\n`)
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, {
      file: config,
      line: lineOf(config, 'hostname: wrkr-1'),
      what: /^HostnameConfig\.hostname "wrkr-1" contradicts .*talconfig\.yaml, where this config is node wrkr-2/,
      fix: /own machine config/,
    })
  })

  it("the static address of another node (wrkr-1's) in wrkr-2's config", async () => {
    const config = bed.edit('clusterconfig/e2e-wrkr-2.yaml', '127.211.1.22/8', '127.211.1.21/8')
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file: config,
      line: lineOf(config, '127.211.1.21/8'),
      what: new RegExp(
        `^machine\\.network\\.interfaces\\.0\\.addresses\\.0 127\\.211\\.1\\.21 in the config of wrkr-2 is the address of wrkr-1 in ${re(bed.path('talconfig.yaml'))}`,
      ),
      fix: /own machine config|ipAddress/,
    })
  })

  it('a LinkConfig document giving a node the address of a control plane', async () => {
    const config = bed.edit('clusterconfig/e2e-wrkr-1.yaml', /\n\s+interfaces:[\s\S]*?dhcp: false\n/, '\n')
    writeFileSync(
      config,
      `${readFileSync(config, 'utf8')}---\napiVersion: v1alpha1\nkind: LinkConfig\nname: eth0\naddresses:\n  - address: 127.211.1.11/8\n`,
    )
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file: config,
      line: lineOf(config, 'address: 127.211.1.11/8'),
      what: /^LinkConfig eth0\.addresses\.0\.address 127\.211\.1\.11 in the config of wrkr-1 is the address of cp-1/,
      fix: /own machine config/,
    })
  })

  it('static addresses none of which is the inventory address, no DHCP', async () => {
    const config = bed.edit('clusterconfig/e2e-wrkr-1.yaml', '127.211.1.21/8', '127.211.1.99/8')
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file: config,
      line: lineOf(config, '127.211.1.99/8'),
      what: /^the config of wrkr-1 gives it the static address 127\.211\.1\.99, none of them its address 127\.211\.1\.21 in .*talconfig\.yaml/,
      fix: /ipAddress/,
    })
  })
})

describe('item 7: a hostname that is not a DNS-1123 name', () => {
  for (const hostname of ['"--all-namespaces"', 'wrkr_2', '"wrkr-2 --help"']) {
    it(`machine.network.hostname: ${hostname}`, async () => {
      const config = bed.edit('clusterconfig/e2e-wrkr-2.yaml', 'hostname: wrkr-2', `hostname: ${hostname}`)
      const result = await bed.cluster.task('bootstrap:talos')
      expectBadInput(result, bed, {
        file: config,
        line: lineOf(config, `hostname: ${hostname}`),
        what: /^machine\.network\.hostname ".*" of wrkr-2 is not a DNS-1123 hostname$/,
        fix: /letters, digits and dashes/,
      })
    })
  }
})

// Issue 27, item 17: an unusable tool is exit 3 naming it, an unusable setting exit 2 naming it;
// never a stack trace. Range 127.217.1.x.
import { beforeEach, describe, expect, it } from 'vitest'
import { BadInputBed, expectBadInput, useBed } from './helpers.js'

const bedOf = useBed('127.217.1')
let bed: BadInputBed
beforeEach(() => {
  bed = bedOf()
})

describe('unusable tools and settings', () => {
  it('TALOSCTL=/bin/sh: exit 3 naming talosctl and the path', async () => {
    const result = await bed.cluster.task('bootstrap:talos', {}, [], { TALOSCTL: '/bin/sh' })
    const context = `exit ${String(result.code)}\n${result.stderr}\n${result.stdout}`
    expect(result.code, context).toBe(3)
    expect(result.stderr, context).toMatch(/talosctl.*\/bin\/sh/)
    expect(result.stderr, context).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m)
    expect(bed.cluster.calls()).toEqual([])
  })

  it('a machine config over 4 MiB: exit 2 before any apply', async () => {
    const config = bed.path('clusterconfig', 'e2e-wrkr-1.yaml')
    bed.write('clusterconfig/e2e-wrkr-1.yaml', `${bed.read('clusterconfig/e2e-wrkr-1.yaml')}${'# padding\n'.repeat(500_000)}`)
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file: config,
      what: /^the machine config of wrkr-1 is 4\.\d MiB: a node accepts at most 4 MiB$/,
      fix: /remove/,
    })
  })

  it('callTimeout: 1ms: exit 2 naming the setting', async () => {
    const result = await bed.cluster.task('bootstrap:talos', { BOOTSTRAP_CALL_TIMEOUT: '1ms' })
    expectBadInput(result, bed, { what: /callTimeout/, fix: /./ })
  })
})

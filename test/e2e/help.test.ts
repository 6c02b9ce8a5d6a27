// Issue 19 item 6: help and names. No simulator: help is answered before any cluster is read.
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { SCALAR_SETTINGS } from '../../lib/input/settings.js'
import { goBin } from '../support/go-bin.js'
import { ROOT, run } from './harness.js'

const env = { ...process.env, PATH: `${goBin()}:${process.env.PATH ?? ''}`, NO_COLOR: '1' }

describe('help and task names', () => {
  it('`task` alone lists the tasks (from any directory)', async () => {
    const result = await run('task', ['-d', ROOT], env, tmpdir())
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toMatch(/bootstrap:talos:/)
    expect(result.stdout).toMatch(/bootstrap:node:/)
  })

  for (const flag of ['--help', '-h']) {
    it(`\`-- ${flag}\` lists every flag with its default and names docs/settings.md`, async () => {
      const result = await run('task', ['-x', '-d', ROOT, 'bootstrap:talos', '--', flag], env, tmpdir())
      expect(result.code, result.stderr).toBe(0)
      for (const spec of SCALAR_SETTINGS)
        expect(result.stdout).toMatch(new RegExp(`^  --${spec.flag} \\S+ +.*\\(${spec.env}; default: [^)]+\\)$`, 'm'))
      for (const flag of ['cluster-dir', 'nodes', 'dry-run', 'fail-fast', 'reapply', 'node', 'reset', 'yes', 'watch'])
        expect(result.stdout).toMatch(new RegExp(`^  --${flag}\\b.*default: `, 'm'))
      expect(result.stdout).toMatch(/default: 5m\)$/m)
      expect(result.stdout).toContain(join(ROOT, 'docs', 'settings.md'))
    })
  }

  it('the phase shown as BOOTSTRAP runs as bootstrap:bootstrap too (bootstrap:etcd)', async () => {
    const result = await run('task', ['-x', '-d', ROOT, 'bootstrap:bootstrap', '--', '--help'], env, tmpdir())
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toMatch(/^usage: task bootstrap:etcd /m)
  })
})

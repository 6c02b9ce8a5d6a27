// `task tools` (scripts/tools.sh): the project's one way to get the real talosctl, helm (4), helmfile and helm3.
import { spawnSync } from 'node:child_process'
import { mkdirSync, symlinkSync, writeFileSync, chmodSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { bareCheckouts } from '../support/bare-checkout.js'
import { realTool } from '../support/real-tools.js'

const checkouts = bareCheckouts('tools.sh')
afterEach(() => checkouts.cleanup())
/** a checkout holding only the script, with nothing to build the tools from beside it */
const bareCheckout = () => checkouts.make()
const run = checkouts.run

describe('task tools', () => {
  it('without the tools on PATH and nothing to build them from: exit 3 with the install instructions', () => {
    const root = bareCheckout()
    const r = run(root, '/usr/bin:/bin')
    expect(r.status).toBe(3)
    // helmfile and helm3 serve the tests only: a warning, not a stop
    expect(r.stderr).toMatch(
      /^warning: helmfile helm3 not found and cannot be built here: the tests of the bootstrap helmfile \(helmfile v1\) and the end-to-end run on helm 3 are skipped\nerror: talosctl helm not found at a supported version \(talosctl v1\.12\.x, helm v3 or v4\) and cannot be built here\n/,
    )
    expect(r.stderr).toContain('(fix: install them and re-run `task tools`')
  })

  it('a script posing as talosctl on PATH (the simulated CLI) is not taken for the real one', () => {
    const root = bareCheckout()
    const fake = join(root, 'fake-bin')
    mkdirSync(fake)
    writeFileSync(join(fake, 'talosctl'), '#!/usr/bin/env bash\nprintf "Client:\\n\\tTag:         v1.12.11\\n"\n')
    chmodSync(join(fake, 'talosctl'), 0o755)
    const r = run(root, `${fake}:/usr/bin:/bin`)
    expect(r.status).toBe(3)
    expect(r.stderr).toMatch(/\nerror: talosctl helm not found/)
  })

  const talosctl = realTool('talosctl')
  const helm = realTool('helm')
  it.skipIf(!!talosctl.skip || !!helm.skip)('real binaries on PATH are linked into .tools/bin, and a second run does nothing', () => {
    const root = bareCheckout()
    const onPath = join(root, 'operator-bin')
    mkdirSync(onPath)
    symlinkSync(talosctl.path!, join(onPath, 'talosctl'))
    symlinkSync(helm.path!, join(onPath, 'helm'))
    const first = run(root, `${onPath}:/usr/bin:/bin`)
    const version = spawnSync(helm.path!, ['version', '--short'], { encoding: 'utf8' }).stdout.trim().split('+')[0]
    expect(first.stderr).toMatch(/^warning: helmfile helm3 not found and cannot be built here/)
    expect(first.stdout).toBe(
      `talosctl: using ${onPath}/talosctl\nhelm: using ${onPath}/helm\ntalosctl v1.12.11: .tools/bin/talosctl\nhelm ${version}: .tools/bin/helm\n`,
    )
    expect(first.status).toBe(0)
    const second = run(root, '/usr/bin:/bin') // nothing on PATH now: .tools/bin already holds them
    expect(second).toMatchObject({ status: 0, stdout: `talosctl v1.12.11: .tools/bin/talosctl\nhelm ${version}: .tools/bin/helm\n` })
  })
})

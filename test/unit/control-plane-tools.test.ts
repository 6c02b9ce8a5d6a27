// `task tools`' second step (scripts/control-plane-tools.sh): etcd and the Kubernetes control-plane
// programs the simulator runs, at pinned versions, from the per-machine cache or built once.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, symlinkSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { bareCheckouts } from '../support/bare-checkout.js'

const TOOLS = { etcd: 'v3.6.11', 'kube-apiserver': 'v1.35.0', 'kube-controller-manager': 'v1.35.0', 'kube-scheduler': 'v1.35.0' }
const checkouts = bareCheckouts('control-plane-tools.sh')
afterEach(() => checkouts.cleanup())
const bareCheckout = () => checkouts.make()
const run = checkouts.run
// this machine's builds, when `task tools` made them
const machineCache = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'talos-bootstrap', 'tools')
const built = Object.entries(TOOLS).every(([tool, v]) => existsSync(join(machineCache, `${tool}-${v}`, tool)))

describe('task tools: the control-plane programs', () => {
  it('nothing cached and no Go: exit 3 naming every program and the fix, nothing linked', () => {
    const root = bareCheckout()
    const r = run(root, '/usr/bin:/bin')
    expect(r.status).toBe(3)
    expect(r.stderr).toBe(
      'error: etcd kube-apiserver kube-controller-manager kube-scheduler not built yet and Go is missing ' +
        '(fix: install Go 1.25 or later from https://go.dev/dl/, put it on PATH and re-run `task tools`)\n',
    )
    expect(existsSync(join(root, '.tools', 'bin', 'etcd'))).toBe(false)
  })

  it.skipIf(!built)('builds in the per-machine cache are linked into .tools/bin at their versions, and a second run does nothing', () => {
    const root = bareCheckout()
    const cache = join(root, '.cache', 'talos-bootstrap', 'tools')
    for (const [tool, v] of Object.entries(TOOLS)) {
      mkdirSync(join(cache, `${tool}-${v}`), { recursive: true })
      symlinkSync(join(machineCache, `${tool}-${v}`, tool), join(cache, `${tool}-${v}`, tool))
    }
    const lines = Object.entries(TOOLS).map(([tool, v]) => `${tool} ${v}: .tools/bin/${tool}\n`)
    const first = run(root, '/usr/bin:/bin') // no Go on this PATH: nothing may need building
    expect(first.stderr).toBe('')
    expect(first.stdout).toBe(
      Object.entries(TOOLS)
        .map(([tool, v]) => `${tool}: using ${join(cache, `${tool}-${v}`, tool)} (built earlier on this machine)\n`)
        .join('') + lines.join(''),
    )
    expect(first.status).toBe(0)
    expect(spawnSync(join(root, '.tools', 'bin', 'etcd'), ['--version'], { encoding: 'utf8' }).stdout).toMatch(/^etcd Version: 3\.6\.11$/m)
    expect(spawnSync(join(root, '.tools', 'bin', 'kube-apiserver'), ['--version'], { encoding: 'utf8' }).stdout).toBe(
      'Kubernetes v1.35.0\n',
    )
    expect(run(root, '/usr/bin:/bin')).toMatchObject({ status: 0, stdout: lines.join(''), stderr: '' })
  })
})

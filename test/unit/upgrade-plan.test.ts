// upgrade:talos's refusals per node (lib/phases/upgrade-talos.ts refusalOf, docs/day2-design.md 2.6):
// the target installer's own text from the compatibility table, a downgrade only when allowed, and a
// Kubernetes outside the target's range naming the upgrade:k8s step when one fixes it.
import { describe, expect, it } from 'vitest'
import { parseVersion, type Version } from '../../lib/input/versions.js'
import { refusalOf } from '../../lib/phases/upgrade-talos.js'

const v = (text: string): Version => parseVersion(text) ?? expect.fail(`not a version: ${text}`)

describe('refusalOf', () => {
  it('accepts the upgrades the table allows: 1.12.11 -> 1.13.9 with Kubernetes 1.35, a patch upgrade, the same version', () => {
    expect(refusalOf('v1.12.11', v('v1.13.9'), 'v1.35.0', false)).toBeUndefined()
    expect(refusalOf('v1.12.0', v('v1.12.11'), 'v1.35.0', false)).toBeUndefined()
    expect(refusalOf('v1.13.9', v('v1.13.9'), 'v1.35.0', false)).toBeUndefined()
  })

  it("refuses a jump the target's installer refuses, with its text", () => {
    expect(refusalOf('v1.10.7', v('v1.13.9'), 'v1.33.0', false)).toBe('host version 1.10.7 is too old to upgrade to Talos 1.13.9')
  })

  it('a downgrade only with --allow-downgrade, and then the installer still judges it', () => {
    expect(refusalOf('v1.13.9', v('v1.13.8'), 'v1.35.0', false)).toMatch(/^1\.13\.8 is older than the v1\.13\.9 the node runs: a downgrade/)
    expect(refusalOf('v1.13.9', v('v1.13.8'), 'v1.35.0', true)).toBeUndefined()
    expect(refusalOf('v1.12.11', v('v1.10.9'), 'v1.33.0', true)).toBe('host version 1.12.11 is too new to downgrade to Talos 1.10.9')
  })

  it('Kubernetes too old for the target: the refusal names the upgrade:k8s step to run first (one minor up)', () => {
    const r = refusalOf('v1.12.11', v('v1.13.9'), 'v1.30.4', false)
    expect(r).toMatch(/^version of Kubernetes 1\.30\.4 is too old to be used with Talos 1\.13\.9: upgrade Kubernetes first/)
    expect(r).toContain('upgrade:k8s TO=v1.31.x')
  })

  it('Kubernetes too new for the target (a downgrade): no upgrade:k8s step can fix it', () => {
    const r = refusalOf('v1.13.9', v('v1.12.11'), 'v1.36.1', true)
    expect(r).toMatch(/^version of Kubernetes 1\.36\.1 is too new to be used with Talos 1\.12\.11: Kubernetes is never downgraded/)
    expect(r).not.toContain('upgrade:k8s')
  })

  it('a target the table does not know is the tool’s refusal; a host that is no version is refused', () => {
    expect(refusalOf('v1.13.9', v('v1.14.0'), 'v1.35.0', false)).toContain('this tool knows Talos up to 1.13')
    expect(refusalOf('unknown', v('v1.13.9'), 'v1.35.0', false)).toBe('the node runs unknown, which is no version this tool can compare')
  })
})

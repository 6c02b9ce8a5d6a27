// The simulator's installer check (sim/talos/compat.js) and the product's table (lib/input/versions.ts)
// are one table, pkg/machinery/compatibility/talos1{10..13}: the same rows, and the same text for
// every host and target the simulator emulates.
import { describe, expect, it } from 'vitest'
import { HOST_RANGES, upgradeRefusal } from '../../sim/talos/compat.js'
import { TALOS_COMPATIBILITY, parseVersion, upgradeableFrom } from '../../lib/input/versions.js'

describe('sim/talos/compat.js equals lib/input/versions.ts', () => {
  it('the host ranges of targets 1.10 to 1.13', () => {
    const product = Object.fromEntries(
      TALOS_COMPATIBILITY.filter((r) => Object.keys(HOST_RANGES).includes(r.minor)).map((r) => [r.minor, [r.minHost, r.maxHostExclusive]]),
    )
    expect(product).toEqual(HOST_RANGES)
  })
  it('the same refusal texts for hosts and targets 1.9 to 1.14', () => {
    const versions = ['v1.9.5', 'v1.10.0', 'v1.10.9', 'v1.11.0', 'v1.11.6', 'v1.12.11', 'v1.13.0', 'v1.13.9', 'v1.14.0', 'v1.14.2']
    let compared = 0
    for (const host of versions)
      for (const target of versions.filter((v) => HOST_RANGES[v.split('.').slice(0, 2).join('.').slice(1) as keyof typeof HOST_RANGES])) {
        const product = upgradeableFrom(parseVersion(host)!, parseVersion(target)!)
        expect(upgradeRefusal(host, target), `${host} -> ${target}`).toBe(product?.text ?? null)
        compared++
      }
    expect(compared).toBe(versions.length * 7)
    expect(upgradeRefusal('v1.12.11', 'v1.10.9')).toBe('host version 1.12.11 is too new to downgrade to Talos 1.10.9')
    expect(upgradeRefusal('v1.12.11', 'v1.15.0')).toBe('upgrades to version 1.15.0 are not supported')
  })
})

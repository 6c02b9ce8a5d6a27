// The installer's upgrade-path check (cmd/installer/pkg/install/preflight.go: the installer's own
// `UpgradeableFrom(host)`, pkg/machinery/compatibility/talos_version.go) with the rows of
// pkg/machinery/compatibility/talos1{10,11,12,13} (v1.13.9; DeniedHostUpgradeVersions is empty in
// each). Host versions are compared by major.minor.patch only; the texts print versions without `v`.
// test/unit/sim-compat.test.ts checks these rows equal lib/input/versions.ts's.

/** target minor -> [MinimumHostUpgradeVersion (inclusive), MaximumHostDowngradeVersion (exclusive)] */
export const HOST_RANGES = {
  '1.10': ['1.8.0', '1.12.0'],
  1.11: ['1.9.0', '1.13.0'],
  1.12: ['1.10.0', '1.14.0'],
  1.13: ['1.11.0', '1.15.0'],
}

/** `v1.12.11` -> [1, 12, 11, pre] or null */
export function parseTag(tag) {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?$/.exec(String(tag))
  return m ? { core: [Number(m[1]), Number(m[2]), Number(m[3])], text: `${m[1]}.${m[2]}.${m[3]}${m[4] ? `-${m[4]}` : ''}` } : null
}
const cmp = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]

/** null, or the installer's refusal of an upgrade from `hostTag` to `targetTag` (its exact text) */
export function upgradeRefusal(hostTag, targetTag) {
  const host = parseTag(hostTag)
  const target = parseTag(targetTag)
  if (!host || !target) return `error parsing host Talos version: Invalid Semantic Version`
  const range = HOST_RANGES[`${target.core[0]}.${target.core[1]}`]
  if (!range) return `upgrades to version ${target.text} are not supported`
  const [min, max] = range.map((v) => parseTag(v).core)
  if (cmp(host.core, min) < 0) return `host version ${host.text} is too old to upgrade to Talos ${target.text}`
  if (cmp(host.core, max) >= 0) return `host version ${host.text} is too new to downgrade to Talos ${target.text}`
  return null
}

// The versions a cluster's nodes run, grouped (docs/day2-design.md 2.8): the report's `versions`
// at the end of a day-2 command, and the line the summary and `task status` end with when the
// nodes run more than one Talos or Kubernetes version.
import type { ClusterVersions } from '../core/results.ts'
import { compareCore, parseVersion, type Version } from '../input/versions.ts'

/** The key of a node whose version could not be read. */
export const UNKNOWN = 'unknown'
/** The schematic key of a node running none (a plain installer). */
export const NO_SCHEMATIC = 'none'

/** What was read of one node: each undefined when it could not be read (a schematic: null when the node runs none). */
export interface NodeVersions {
  name: string
  talos?: string
  kubernetes?: string
  schematic?: string | null
}

/** Version -> nodes, in the order the nodes are given. */
function group(nodes: NodeVersions[], key: (n: NodeVersions) => string): Record<string, string[]> {
  const out: Record<string, string[]> = {}
  for (const node of nodes) (out[key(node)] ??= []).push(node.name)
  return out
}

/** The nodes' versions grouped; `mixed` when the nodes read run more than one Talos or Kubernetes version. */
export function groupVersions(nodes: NodeVersions[]): ClusterVersions {
  const talos = group(nodes, (n) => n.talos ?? UNKNOWN)
  const kubernetes = group(nodes, (n) => n.kubernetes ?? UNKNOWN)
  const schematics = group(nodes, (n) => (n.schematic === null ? NO_SCHEMATIC : (n.schematic ?? UNKNOWN)))
  const known = (m: Record<string, string[]>): number => Object.keys(m).filter((k) => k !== UNKNOWN).length
  return { talos, kubernetes, schematics, mixed: known(talos) > 1 || known(kubernetes) > 1 }
}

const rank = (v: string): Version => parseVersion(v) ?? { major: -1, minor: 0, patch: 0, pre: '' }

/** `v1.13.9 (cp-1, cp-2), v1.12.11 (wrkr-2)`: the newest first, the unread last. */
function listed(byVersion: Record<string, string[]>): string {
  return Object.entries(byVersion)
    .sort(([a], [b]) => (a === UNKNOWN ? 1 : b === UNKNOWN ? -1 : compareCore(rank(b), rank(a))))
    .map(([v, nodes]) => `${v} (${nodes.join(', ')})`)
    .join(', ')
}

/**
 * One line: `cluster left at mixed versions: Talos v1.13.9 (cp-1, …), v1.12.11 (wrkr-2)` (and
 * `; Kubernetes …` when that is mixed too) when mixed; otherwise `cluster at Talos v1.13.9 (cp-1, …),
 * Kubernetes v1.35.0 (cp-1, …)`. `left`: the wording after a run (`task status` says `cluster at
 * mixed versions`).
 */
export function versionsLine(versions: ClusterVersions, left = true): string {
  const sets: Array<[string, Record<string, string[]>]> = [
    ['Talos', versions.talos],
    ['Kubernetes', versions.kubernetes],
  ]
  const count = (m: Record<string, string[]>): number => Object.keys(m).filter((k) => k !== UNKNOWN).length
  if (versions.mixed) {
    const parts = sets.filter(([, m]) => count(m) > 1).map(([name, m]) => `${name} ${listed(m)}`)
    return `cluster ${left ? 'left ' : ''}at mixed versions: ${parts.join('; ')}`
  }
  return `cluster at ${sets.map(([name, m]) => `${name} ${listed(m)}`).join(', ')}`
}

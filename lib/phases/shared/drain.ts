import type { Kubectl, KubeObject } from '../../tools/kubectl.ts'

/** A pod Talos's drain cannot evict: a PodDisruptionBudget covering it allows no disruption. */
export interface BlockedEviction {
  /** namespace/name */
  pod: string
  /** namespace/name */
  pdb: string
}

/** Talos drains this long before it gives up and goes on (pkg/kubernetes/kubernetes.go DrainTimeout). */
export const TALOS_DRAIN_TIMEOUT = '5m'

interface Selector {
  matchLabels?: Record<string, string>
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>
}

/** A label selector as the API server reads it; an empty one selects every pod (policy/v1). */
function selects(selector: Selector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return false
  const byLabel = Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v)
  return (
    byLabel &&
    (selector.matchExpressions ?? []).every((e) => {
      const has = e.key in labels
      const value = labels[e.key] ?? ''
      switch (e.operator) {
        case 'In':
          return has && (e.values ?? []).includes(value)
        case 'NotIn':
          return !has || !(e.values ?? []).includes(value)
        case 'Exists':
          return has
        case 'DoesNotExist':
          return !has
        default:
          return false
      }
    })
  )
}

/**
 * The pods on `nodeName` that Talos's drain evicts (pkg/kubernetes Drain: not mirror pods, not pods
 * without a controller, not DaemonSet pods, not ones being deleted) and that a PodDisruptionBudget
 * allowing no disruption holds: the eviction API answers those 429 until the budget allows it.
 */
export async function blockedEvictions(kubectl: Kubectl, nodeName: string): Promise<BlockedEviction[]> {
  const [pods, pdbs] = await Promise.all([
    kubectl.list('pods', { allNamespaces: true, fieldSelector: `spec.nodeName=${nodeName}` }),
    kubectl.list('poddisruptionbudgets', { allNamespaces: true }),
  ])
  const stuck = pdbs.filter((b) => Number((b.status as { disruptionsAllowed?: number } | undefined)?.disruptionsAllowed ?? 1) < 1)
  const out: BlockedEviction[] = []
  for (const pod of pods.filter(evictable)) {
    const pdb = stuck.find(
      (b) =>
        b.metadata.namespace === pod.metadata.namespace && selects(b.spec?.selector as Selector | undefined, pod.metadata.labels ?? {}),
    )
    if (pdb) out.push({ pod: `${pod.metadata.namespace}/${pod.metadata.name}`, pdb: `${pdb.metadata.namespace}/${pdb.metadata.name}` })
  }
  return out
}

function evictable(pod: KubeObject): boolean {
  if (pod.metadata.annotations?.['kubernetes.io/config.mirror'] !== undefined || pod.metadata.deletionTimestamp) return false
  const owner = pod.metadata.ownerReferences?.find((r) => r.controller)
  return owner !== undefined && owner.kind !== 'DaemonSet'
}

/** One line naming the budgets and the pods they hold. */
export function describeBlocked(blocked: BlockedEviction[]): string {
  const byPdb = new Map<string, string[]>()
  for (const b of blocked) byPdb.set(b.pdb, [...(byPdb.get(b.pdb) ?? []), b.pod])
  return [...byPdb].map(([pdb, pods]) => `PodDisruptionBudget ${pdb} allows no disruption of ${pods.join(', ')}`).join('; ')
}

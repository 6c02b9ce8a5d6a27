import { NodeError } from '../../core/errors.ts'
import { bootstrapControlPlane, controlPlanes, type ClusterNode } from '../../core/model.ts'
import { hintFor } from '../../cli/hints.ts'
import type { Run } from '../../engine/run.ts'

/** The control plane that bootstraps etcd: bootstrapNode from settings, else the first in the inventory. */
export function bootstrapNode(run: Run): ClusterNode {
  const wanted = run.settings.bootstrapNode
  const node = bootstrapControlPlane(run.inventory, wanted)
  const cps = controlPlanes(run.inventory)
  if (!node)
    throw new NodeError(
      'wrong-node',
      `bootstrapNode "${wanted}" is not a control plane of the inventory`,
      hintFor('wrong-node', cps[0] as ClusterNode),
    )
  return node
}

/** The bootstrap node, or undefined when the bootstrapNode setting names no control plane (the etcd phase says so). */
export function bootstrapNodeIfAny(run: Run): ClusterNode | undefined {
  try {
    return bootstrapNode(run)
  } catch {
    return undefined
  }
}

/** Why the steps after the bootstrap cannot run: a cluster fact, so not-run (never skipped). */
export const NOT_BOOTSTRAPPED = 'cluster not bootstrapped yet: no control plane runs etcd (bootstrap it with task bootstrap:talos)'

// Which nodes a command was asked to act on (NODES, NODE), and the rule for the cluster-wide steps
// that change the cluster (the etcd bootstrap, the CNI, Flux): such a step runs only when the nodes it
// acts on are among the selected ones; otherwise it only reads, and is left, named, to a command that
// selects them (docs/design.md, "Node selection and cluster-wide steps").
import { taskCommand } from '../../cli/hints.ts'
import type { ClusterNode } from '../../core/model.ts'
import type { Run } from '../../engine/run.ts'

/** The node is among those this command acts on. */
export function isSelected(run: Run, node: ClusterNode): boolean {
  return run.nodes.some((n) => n.name === node.name)
}

/** Only part of the cluster is selected (NODES, or bootstrap:node's one node). */
export function partOfCluster(run: Run): boolean {
  return run.inventory.nodes.some((node) => !isSelected(run, node))
}

/** How the selection reads in a message: `NODES=wrkr-3` (or `NODE=…` for bootstrap:node). */
export function selectionText(run: Run): string {
  return `${run.options.recover ? 'NODE' : 'NODES'}=${run.nodes.map((n) => n.name).join(',')}`
}

/** This command run for every node (no NODES), as a hint runnable verbatim; `task` when the command itself cannot (bootstrap:node). */
export function wholeClusterCommand(run: Run, task?: string): string {
  const own = run.command === 'bootstrap' ? 'bootstrap:etcd' : `bootstrap:${run.command}`
  return taskCommand(task ?? (run.options.recover ? 'bootstrap:talos' : own))
}

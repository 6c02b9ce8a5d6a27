// The only control plane goes down (upgrade:talos or cluster:apply with --accept-downtime on a cluster
// of one): its etcd has no other member to recover from, so a snapshot is taken first.
import { join } from 'node:path'
import { NodeError } from '../../core/errors.ts'
import { hintFor } from '../../cli/hints.ts'
import { controlPlanes, type ClusterNode } from '../../core/model.ts'
import type { StepReporter } from '../../engine/phase.ts'
import type { Run } from '../../engine/run.ts'
import { snapshotDir } from '../../state/paths.ts'
import { handedStateDir } from '../../state/state-files.ts'

/** The node is the cluster's only control plane and the run accepts taking it down. */
export function takesOnlyControlPlaneDown(run: Run, node: ClusterNode): boolean {
  return node.role === 'controlplane' && run.options.acceptDowntime === true && controlPlanes(run.inventory).length === 1
}

/**
 * A snapshot of the node's etcd, saved in the state directory (`.bootstrap/snapshots/<time>-<node>.db`,
 * written through the directory this run opened, never outside it). Returns its path; a snapshot
 * that fails stops the node before anything changed.
 */
export async function snapshotBeforeDowntime(run: Run, node: ClusterNode, report: StepReporter, change: string): Promise<string> {
  const dir = snapshotDir(run.inventory.clusterDir)
  const name = `${new Date().toISOString().replace(/[:.]/g, '-')}-${node.name}.db`
  const through = run.options.dryRun ? dir : handedStateDir(run.inventory.clusterDir, dir)
  report.progress(`etcd snapshot before the only control plane goes down: ${join(dir, name)}`)
  try {
    await report.retry(() => run.talosctl.etcdSnapshot(node, join(through, name)))
  } catch (err) {
    if (!(err instanceof NodeError)) throw err
    throw new NodeError(
      err.kind,
      `the etcd snapshot before the ${change} of the only control plane failed, nothing was changed: ${err.message}`,
      hintFor(err.kind, node),
    )
  }
  return join(dir, name)
}

import { join } from 'node:path'

/** Where a run keeps its state: everything under CLUSTER_DIR/.bootstrap, nowhere else. */
export function stateDir(clusterDir: string): string {
  return join(clusterDir, '.bootstrap')
}

/** The files of the state directory, by what they hold. */
export function statePaths(clusterDir: string): {
  dir: string
  lock: string
  commandsLog: string
  journal: string
  lastRun: string
  runs: string
} {
  const dir = stateDir(clusterDir)
  return {
    dir,
    lock: join(dir, 'lock'),
    commandsLog: join(dir, 'commands.log'),
    journal: join(dir, 'journal.json'),
    lastRun: join(dir, 'last-run.json'),
    runs: join(dir, 'runs'),
  }
}

/** The tools' caches (kubectl's discovery, helm's repository index and homes): in the state directory, never $HOME. */
export function toolCacheDir(clusterDir: string): string {
  return join(stateDir(clusterDir), 'cache')
}

/** etcd snapshots taken before a day-2 change that takes the only etcd member down (upgrade:talos or cluster:apply --accept-downtime). */
export function snapshotDir(clusterDir: string): string {
  return join(stateDir(clusterDir), 'snapshots')
}

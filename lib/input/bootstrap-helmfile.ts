// The operator's bootstrap helmfile (onedr0p/cluster-template and its forks): in the cluster
// directory's repository, found upward from the cluster directory to the repository's root.
//   topf era (since 2026-07):   bootstrap/helmfile/apps.yaml, crds.yaml (and default.yaml, templates/)
//   talhelper era:              bootstrap/helmfile.d/01-apps.yaml, 00-crds.yaml (and templates/)
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'

export interface BootstrapHelmfile {
  /** the releases to install, in `needs` order */
  apps: string
  /** the releases whose CRDs are applied first (never installed) */
  crds?: string
}

const LAYOUTS = [
  { apps: 'bootstrap/helmfile/apps.yaml', crds: 'bootstrap/helmfile/crds.yaml' },
  { apps: 'bootstrap/helmfile.d/01-apps.yaml', crds: 'bootstrap/helmfile.d/00-crds.yaml' },
]

/** The first bootstrap helmfile from the cluster directory up to its repository's root (the directory holding .git). */
export function findBootstrapHelmfile(clusterDir: string): BootstrapHelmfile | undefined {
  for (let dir = clusterDir; ; dir = dirname(dir)) {
    for (const layout of LAYOUTS) {
      const apps = join(dir, layout.apps)
      if (!existsSync(apps)) continue
      const crds = join(dir, layout.crds)
      return { apps, ...(existsSync(crds) ? { crds } : {}) }
    }
    if (existsSync(join(dir, '.git')) || dirname(dir) === dir) return undefined
  }
}

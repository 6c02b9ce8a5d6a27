import { join } from 'node:path'
import { apiHint } from '../cli/hints.ts'
import { NodeError, type ErrorKind } from '../core/errors.ts'
import { contextOf } from '../state/kubeconfig.ts'

/** Which kubeconfig, and whose entries in it: a kubeconfig may hold other clusters (the operator's ~/.kube/config). */
export interface KubeAccess {
  kubeconfig: string
  clusterName: string
  /**
   * Where the tools keep their caches: a directory under .bootstrap/, never $HOME (kubectl's
   * ~/.kube/cache, helm's ~/.cache/helm; with HOME unset, kubectl's .kube/cache in the working directory)
   */
  cacheDir: string
  /**
   * The same directory as this process hands it to a tool it outlives (`/proc/<pid>/fd/<fd>`): never
   * through a link put in place of .bootstrap during the run. Not for a tool that may outlive the run
   * (helm's CNI install): that one gets `cacheDir`, once the directory is checked unchanged.
   */
  handedCacheDir?: string
}

/**
 * `--kubeconfig <path>` and, when the file holds this cluster's context, that context by name
 * (`contextFlag`: kubectl and flux say --context, helm --kube-context): the file's current context may
 * be another cluster's. Read at every call: the file is written during the run.
 */
export function kubeArgs(access: KubeAccess, contextFlag: '--context' | '--kube-context'): string[] {
  const names = contextOf(access.kubeconfig, access.clusterName)
  // kubectl and flux take the discovery and HTTP cache's place as a flag; helm takes its homes from the environment
  const cache = contextFlag === '--context' ? [kubeCacheFlag(access)] : []
  return ['--kubeconfig', access.kubeconfig, ...(names ? [contextFlag, names.context] : []), ...cache]
}

/** kubectl's (and flux's) --cache-dir: every call needs it, `version --client` too (it opens the HTTP cache). */
export function kubeCacheFlag(access: KubeAccess): string {
  return `--cache-dir=${join(access.handedCacheDir ?? access.cacheDir, 'kube')}`
}

/**
 * helm's cache, config and data homes (repository index, registry logins, plugins) and its
 * client-go discovery cache (KUBECACHEDIR: helm has no --cache-dir) under the cache directory; a helm
 * that may outlive the run gets its plain path (the handle goes with this process).
 */
export function helmEnv(access: KubeAccess, outlivesRun = false): Record<string, string> {
  const base = outlivesRun ? access.cacheDir : (access.handedCacheDir ?? access.cacheDir)
  const helm = join(base, 'helm')
  return {
    HELM_CACHE_HOME: join(helm, 'cache'),
    HELM_CONFIG_HOME: join(helm, 'config'),
    HELM_DATA_HOME: join(helm, 'data'),
    KUBECACHEDIR: join(base, 'kube'),
  }
}

/** A transient failure of a tool against the Kubernetes API (refused, reset, 503, timed out): named as the API's, its hint the API's. */
export function apiError(kind: ErrorKind, message: string, task: string): NodeError {
  return new NodeError(kind, `the Kubernetes API did not answer: ${message}`, apiHint(task))
}

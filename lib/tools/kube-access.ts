import { contextOf } from '../state/kubeconfig.js'

/** Which kubeconfig, and whose entries in it: a kubeconfig may hold other clusters (the operator's ~/.kube/config). */
export interface KubeAccess {
  kubeconfig: string
  clusterName: string
}

/**
 * `--kubeconfig <path>` and, when the file holds this cluster's context, that context by name
 * (`contextFlag`: kubectl and flux say --context, helm --kube-context): the file's current context may
 * be another cluster's. Read at every call: the file is written during the run.
 */
export function kubeArgs(access: KubeAccess, contextFlag: '--context' | '--kube-context'): string[] {
  const names = contextOf(access.kubeconfig, access.clusterName)
  return ['--kubeconfig', access.kubeconfig, ...(names ? [contextFlag, names.context] : [])]
}

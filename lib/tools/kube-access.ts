import { apiHint } from '../cli/hints.js'
import { NodeError, type ErrorKind } from '../core/errors.js'
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

/** A transient failure of a tool against the Kubernetes API (refused, reset, 503, timed out): named as the API's, its hint the API's. */
export function apiError(kind: ErrorKind, message: string, task: string): NodeError {
  return new NodeError(kind, `the Kubernetes API did not answer: ${message}`, apiHint(task))
}

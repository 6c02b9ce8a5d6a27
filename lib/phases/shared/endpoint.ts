import { existsSync } from 'node:fs'
import type { ClusterNode } from '../../core/model.js'
import type { Run } from '../../engine/run.js'
import { apiUrl, kubeconfigServer, setKubeconfigServer } from '../../state/kubeconfig.js'
import { SharedReading } from '../../wait/shared-reading.js'
import { bootstrapNode } from './bootstrap-node.js'

/**
 * Why a worker's authenticated API cannot answer yet by Talos's design, or undefined. Its apid starts
 * once trustd on a control plane signs its certificate (secrets/api.go), dialled at the endpoint's
 * host or, with discovery, at any control plane: behind a VIP with discovery off, that is only once
 * the VIP is up, after the etcd bootstrap.
 */
export function waitsForControlPlane(node: ClusterNode, run: Run): string | undefined {
  const vip = run.inventory.vip
  if (node.role !== 'worker' || !vip || node.discovery === true) return undefined
  return `authenticated API starts once a control plane's trustd is reachable through ${vip} (the endpoint's VIP, up after the etcd bootstrap; cluster discovery is disabled)`
}

/** The endpoint's API answers (a kubeconfig exists and /readyz is ok there): the VIP is up. */
export function endpointReading(run: Run): SharedReading<boolean> {
  return new SharedReading(async () => {
    if (!existsSync(run.kubeconfig)) return false
    return run.kubectl.readyz(run.inventory.endpoint).catch(() => false)
  }, run.settings.pollIntervalMs / 2)
}

/**
 * A node that does not answer but took its config in an earlier run, and whose API waits for the
 * control plane (the endpoint does not answer yet): why, else undefined. Not down, just not up yet.
 */
export async function appliedAndWaiting(
  node: ClusterNode,
  run: Run,
  endpoint: SharedReading<boolean> = endpointReading(run),
): Promise<string | undefined> {
  const waits = waitsForControlPlane(node, run)
  if (!waits || !run.journal.tookConfig(node.name) || run.options.reset) return undefined
  return (await endpoint.get()) ? undefined : waits
}

/** Endpoint if it answers, else a control plane's own address. Returns where it points. */
export async function pointKubeconfig(run: Run): Promise<string> {
  return (await aimKubeconfig(run)).where
}

/** As pointKubeconfig; `ready` when choosing the VIP already found the API answering /readyz there. */
export async function aimKubeconfig(run: Run): Promise<{ where: string; ready: boolean }> {
  const endpoint = run.inventory.endpoint
  const cluster = run.inventory.clusterName
  const current = kubeconfigServer(run.kubeconfig, cluster)
  if (!run.inventory.vip) {
    if (current !== endpoint) setKubeconfigServer(run.kubeconfig, cluster, endpoint)
    return { where: `kubeconfig -> ${endpoint}`, ready: false }
  }
  if (await run.kubectl.readyz(endpoint)) {
    if (current !== endpoint) setKubeconfigServer(run.kubeconfig, cluster, endpoint)
    return { where: `kubeconfig -> ${endpoint}`, ready: true }
  }
  const node = bootstrapNode(run)
  const direct = apiUrl(node.address)
  if (current !== direct) setKubeconfigServer(run.kubeconfig, cluster, direct)
  return { where: `kubeconfig -> ${direct} (the endpoint ${run.inventory.vip} does not answer yet)`, ready: false }
}

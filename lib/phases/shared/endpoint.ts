import { existsSync } from 'node:fs'
import { NodeError } from '../../core/errors.ts'
import { formatDuration } from '../../core/duration.ts'
import { controlPlanes, type ClusterNode } from '../../core/model.ts'
import { talosctlCommand, taskCommand } from '../../cli/hints.ts'
import type { StepReporter } from '../../engine/phase.ts'
import { lastErrorNote, PollTimeout } from '../../wait/poll.ts'
import type { Run } from '../../engine/run.ts'
import { apiUrl, kubeconfigServer, setKubeconfigServer } from '../../state/kubeconfig.ts'
import { SharedReading } from '../../wait/shared-reading.ts'
import { bootstrapNode } from './bootstrap-node.ts'

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

/**
 * Took its config in an earlier run (or had one sent when that run stopped) and never answered
 * verify since (Journal.verified): its silence is the install or the reboot that follows, which verify waits for with its own
 * timeout. A node verified before that falls silent is down or rebooting, and is retried as ever.
 */
export function installingSinceEarlierRun(node: ClusterNode, run: Run): boolean {
  return run.journal.tookConfig(node.name) && !run.journal.verified(node.name) && !run.options.reset
}

export const INSTALLING_SINCE_EARLIER_RUN =
  'took its config in an earlier run and does not answer yet (installing or rebooting): verify waits for it'

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

/**
 * After the bootstrap, the endpoint's VIP gets a bounded wait (bootstrapTimeout): Talos brings it up on
 * a control plane once etcd runs (the VIP follows an etcd election), and a control plane joining etcd
 * learns its peers through it when discovery is off (controllers/k8s/endpoint.go reads the Kubernetes
 * endpoints with the admin kubeconfig's endpoint). A VIP that never answers is named with what to check.
 */
export async function waitForEndpoint(run: Run, report: StepReporter): Promise<string> {
  const vip = run.inventory.vip ?? ''
  if (run.options.dryRun) return `would wait for ${run.inventory.endpoint} to answer`
  try {
    await report.poll(async () => {
      if (await run.kubectl.readyz(run.inventory.endpoint).catch(() => false)) return { done: true, value: true }
      return { done: false, state: `the endpoint ${run.inventory.endpoint} does not answer yet` }
    }, run.settings.bootstrapTimeoutMs)
  } catch (err) {
    if (!(err instanceof PollTimeout)) throw err
    const cps = controlPlanes(run.inventory)
    const even =
      cps.length % 2 === 0
        ? `; ${cps.length} control planes: an even number, etcd keeps no quorum with half of them down (use 1, 3 or 5)`
        : ''
    throw new NodeError(
      'unreachable',
      `the endpoint's VIP ${vip} never answered within ${formatDuration(run.settings.bootstrapTimeoutMs)} after the etcd bootstrap (${run.inventory.endpoint}/readyz): no control plane holds it, so ${cps.every((cp) => cp.discovery === true) ? 'nothing reaches the Kubernetes API through the endpoint (the kubeconfig, kubelets and clients that use it)' : 'control planes cannot join etcd through it (cluster discovery off) and workers behind it get no certificate'}${even}${lastErrorNote(err.lastError)}`,
      `check the VIP in the control planes' configs (machine.network.interfaces[].vip.ip ${vip}, or a Layer2VIPConfig: on the interface that holds their address, ${vip} inside that address's subnet and free on the network), whether a control plane holds it (${cps.map((cp) => `\`${talosctlCommand(cp, 'get addresses')}\``).join(', ')}) and etcd's health (\`${talosctlCommand(cps[0] ?? { address: vip }, 'etcd status')}\`: the VIP goes to the etcd election's winner); apply fixed configs (${taskCommand('bootstrap:apply', {}, ['--reapply'])}), then run: ${taskCommand('bootstrap:talos')}`,
    )
  }
  return `the endpoint ${run.inventory.endpoint} answers (${await pointKubeconfig(run)})`
}

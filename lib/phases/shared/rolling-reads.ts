// The reads of the rolling steps (shared/rolling.ts), batched across the nodes a step has in flight
// at once (a batch of CONCURRENCY workers: docs/benchmark.md "Rolling upgrade"). The nodes asking
// within a few ms of each other go out as one call: `kubectl get nodes a b …`, and through a control
// plane (apid proxies to each node) `talosctl get machinestatus`, `service kubelet`, `version` and
// `get extensions -n …`. Each node's answer is its own node's; a node the batch could not tell, or
// told an error (it may be the endpoint's proxying, not the node), is read alone, as without the
// batch. Reads that are not batched (one node at a time: a batch would only wait) are each alone.
import { controlPlanes, type ClusterNode } from '../../core/model.ts'
import type { Run } from '../../engine/run.ts'
import type { KubeObject, Kubectl } from '../../tools/kubectl.ts'
import { extensionOf, type MachineStatus, type NodeAnswer, type ServiceStatus } from '../../tools/talosctl.ts'
import { BatchedReading } from '../../wait/shared-reading.ts'

export type Extension = ReturnType<typeof extensionOf>

type ThroughReading<T> = BatchedReading<ClusterNode, NodeAnswer<T>>

interface Batches {
  /** by Node name: the Node, or none (`node` absent) when the read found none */
  nodes: BatchedReading<string, { node?: KubeObject }>
  statuses: ThroughReading<MachineStatus>
  kubelets: ThroughReading<ServiceStatus>
  versions: ThroughReading<string>
  extensions: ThroughReading<Extension[]>
}

export class RollingReads {
  private readonly batches: Batches | undefined
  /** control planes a batch failed whole through (down, or not answering): not its endpoint again */
  private readonly down = new Set<string>()

  private readonly run: Run
  readonly kubectl: Kubectl
  constructor(run: Run, kubectl: Kubectl, batched = false) {
    this.run = run
    this.kubectl = kubectl
    if (!batched) return
    // the nodes of a batch come back from their action up to seconds apart under load (talosctl's own
    // wait): a longer window than StatusReads', each batch's nodes then go on to the next read together
    const windowMs = Math.min(250, run.settings.pollIntervalMs / 4)
    const through = <T>(read: (order: ClusterNode[], via: ClusterNode) => Promise<Map<string, NodeAnswer<T>>>): ThroughReading<T> =>
      new BatchedReading((nodes) => this.readThrough(nodes, read), windowMs)
    this.batches = {
      nodes: new BatchedReading(async (names) => {
        const found = await kubectl.getMany('node', names)
        return new Map(names.map((name) => [name, found.has(name) ? { node: found.get(name) } : {}]))
      }, windowMs),
      statuses: through((order, via) => run.talosctl.machineStatuses(order, via)),
      kubelets: through((order, via) => run.talosctl.serviceStatuses(order, via, 'kubelet')),
      versions: through((order, via) => run.talosctl.versions(order, via)),
      extensions: through(async (order, via) => {
        const docs = await run.talosctl.resources(order, via, 'extensions')
        return new Map([...docs].map(([ip, answer]) => [ip, answer.error ? answer : { value: answer.value.map(extensionOf) }]))
      }),
    }
  }

  /** The Node named, undefined when there is none. */
  async node(name: string): Promise<KubeObject | undefined> {
    const told = await this.batches?.nodes.get(name)
    return told ? told.node : this.kubectl.get('node', name)
  }

  machineStatus(node: ClusterNode): Promise<MachineStatus> {
    return this.told(this.batches?.statuses, node, () => this.run.talosctl.machineStatus(node))
  }

  kubelet(node: ClusterNode): Promise<ServiceStatus> {
    return this.told(this.batches?.kubelets, node, () => this.run.talosctl.serviceStatus(node, 'kubelet'))
  }

  /** The Talos version (Tag) the node runs; `alone` reads it when the batch did not tell it. */
  version(node: ClusterNode, alone: () => Promise<string>): Promise<string> {
    return this.told(this.batches?.versions, node, alone)
  }

  /** The node's extensions (Image Factory's `schematic` among them); `alone` as for version. */
  extensions(node: ClusterNode, alone: () => Promise<Extension[]>): Promise<Extension[]> {
    return this.told(this.batches?.extensions, node, alone)
  }

  private async told<T>(batch: ThroughReading<T> | undefined, node: ClusterNode, alone: () => Promise<T>): Promise<T> {
    const answer = await batch?.get(node)
    return answer && !answer.error ? answer.value : alone()
  }

  /** A control plane to read through: the first not down (none: each node alone). */
  private endpoint(): ClusterNode | undefined {
    return controlPlanes(this.run.inventory).find((cp) => !this.down.has(cp.name) && !this.run.failed.has(cp.name))
  }

  private async readThrough<T>(
    nodes: ClusterNode[],
    read: (order: ClusterNode[], via: ClusterNode) => Promise<Map<string, NodeAnswer<T>>>,
  ): Promise<Map<ClusterNode, NodeAnswer<T>>> {
    const via = this.endpoint()
    if (!via) return new Map()
    // the endpoint first: a `get` resolves its type through the first node, which must answer
    const answers = await read([via, ...nodes.filter((n) => n !== via)], via)
    if (answers.size === 0) this.down.add(via.name)
    return new Map(
      nodes.flatMap((n) => {
        const answer = answers.get(n.address)
        return answer ? [[n, answer] as const] : []
      }),
    )
  }
}

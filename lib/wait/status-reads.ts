import { NodeError } from '../core/errors.ts'
import type { ClusterNode } from '../core/model.ts'
import type { Run } from '../engine/run.ts'
import { BatchedReading } from './shared-reading.ts'
import type { MachineStatus, NodeAnswer } from '../tools/talosctl.ts'

/**
 * The authenticated MachineStatus reads of a wait: the nodes that ask together go out as one
 * batched `talosctl get machinestatus -n …` through a control plane that answered (apid proxies to
 * the others; a worker cannot forward). Each node's own error in the batch is that node's (a
 * rebooting node refuses, the others carry on). Until a control plane has answered, and when a
 * batch fails whole (its endpoint went down), each node is read alone, as before.
 *
 * talosctl resolves the type through the batch's first node, so a batch starts with a node that
 * answers; when none of the nodes asking does, one is borrowed, and read with them. A node is
 * borrowed only when that costs no read beyond one an interval: not read for an interval, or still
 * polling (the borrowed answer then serves its own next poll).
 */
export class StatusReads {
  /** the endpoint of the batches: the control plane that answered last */
  private via: ClusterNode | undefined
  /** per node: when it was last read and last asked, and whether it answered */
  private readonly seen = new Map<string, { node: ClusterNode; readAt: number; askedAt: number; up: boolean }>()
  /** a borrowed node's answer, kept for its own next poll */
  private readonly spare = new Map<string, { status: MachineStatus; at: number }>()
  /** the seed failed a batch: only a control plane that answers again becomes the endpoint */
  private seedDown = false
  private readonly batch: BatchedReading<ClusterNode, NodeAnswer<MachineStatus>>

  /**
   * `seed`: a control plane known to answer before any read here (after the bootstrap: the bootstrap
   * node); `spared`: a node never borrowed (during verify the bootstrap node: etcd's checks and
   * member lists go through it next, as many reads as its own polls leave room for).
   */
  private readonly run: Run
  private readonly seed: () => ClusterNode | undefined
  private readonly spared: () => ClusterNode | undefined
  constructor(run: Run, seed: () => ClusterNode | undefined = () => undefined, spared: () => ClusterNode | undefined = () => undefined) {
    this.run = run
    this.seed = seed
    this.spared = spared
    // a round's nodes ask within a few ms of each other (the same poll tick), more under load
    this.batch = new BatchedReading((nodes) => this.readBatch(nodes), Math.min(100, run.settings.pollIntervalMs / 8))
  }

  async read(node: ClusterNode): Promise<MachineStatus> {
    const now = performance.now()
    const entry = this.seen.get(node.name)
    if (entry) entry.askedAt = now
    else this.seen.set(node.name, { node, readAt: 0, askedAt: now, up: false })
    const spare = this.spare.get(node.name)
    this.spare.delete(node.name)
    if (spare && now - spare.at < this.run.settings.pollIntervalMs) return spare.status
    if (this.endpoint()) {
      const answer = await this.batch.get(node)
      if (answer) return this.saw(node, answer)
    }
    try {
      return this.saw(node, { value: await this.run.talosctl.machineStatus(node) })
    } catch (err) {
      if (err instanceof NodeError) this.saw(node, { error: err })
      throw err
    }
  }

  private endpoint(): ClusterNode | undefined {
    if (this.via && this.run.failed.has(this.via.name)) this.via = undefined
    const seed = this.seed()
    if (!this.via && seed && !this.seedDown) this.via = seed
    return this.via
  }

  /** The node's status, or its error thrown; either way, whether it answers is noted. */
  private saw(node: ClusterNode, answer: NodeAnswer<MachineStatus>): MachineStatus {
    this.note(node, answer)
    if (answer.error) throw answer.error
    return answer.value
  }

  private note(node: ClusterNode, answer: NodeAnswer<MachineStatus>): void {
    const entry = this.seen.get(node.name) ?? { node, readAt: 0, askedAt: 0, up: false }
    entry.readAt = performance.now()
    entry.up = !answer.error
    this.seen.set(node.name, entry)
    if (!answer.error && node.role === 'controlplane') this.via = node
  }

  /** A node that answers to resolve the type for `nodes`: one of them, else one to borrow (see above). */
  private resolver(nodes: ClusterNode[], via: ClusterNode): ClusterNode | undefined {
    const asking = nodes.find((n) => this.seen.get(n.name)?.up)
    if (asking) return asking
    const now = performance.now()
    const interval = this.run.settings.pollIntervalMs
    const free = (name: string): boolean => {
      const entry = this.seen.get(name)
      if (!entry) return true
      return now - entry.readAt >= interval || (now - entry.askedAt < interval && !this.spare.has(name))
    }
    // the endpoint last: the batches' other calls go through it
    const spared = this.spared()
    const borrowable = [...this.seen.values()]
      .filter((e) => e.up && e.node !== spared && !this.run.failed.has(e.node.name) && !nodes.includes(e.node) && free(e.node.name))
      .sort((a, b) => Number(a.node === via) - Number(b.node === via) || a.readAt - b.readAt)
    return borrowable[0]?.node ?? (via !== spared && free(via.name) && !nodes.includes(via) ? via : undefined)
  }

  private async readBatch(nodes: ClusterNode[]): Promise<Map<ClusterNode, NodeAnswer<MachineStatus>>> {
    const via = this.endpoint()
    const first = via && this.resolver(nodes, via)
    // nobody to resolve the type through without reading a node twice an interval: each alone
    if (!via || !first) return new Map()
    const order = [first, ...nodes.filter((n) => n !== first)]
    const answers = await this.run.talosctl.machineStatuses(order, via)
    if (answers.size === 0) {
      // failed whole (the endpoint, or the node that resolves the type, is down): read alone this time
      const entry = this.seen.get(first.name)
      if (entry) entry.up = false
      if (via === this.seed()) this.seedDown = true
      if (this.via === via) this.via = undefined
      return new Map()
    }
    const borrowed = answers.get(first.address)
    if (borrowed && !nodes.includes(first)) {
      this.note(first, borrowed)
      if (borrowed.value) this.spare.set(first.name, { status: borrowed.value, at: performance.now() })
    }
    return new Map(
      nodes.flatMap((n) => {
        const answer = answers.get(n.address)
        return answer ? [[n, answer] as const] : []
      }),
    )
  }
}

import { parse as parseYaml, parseAllDocuments } from 'yaml'
import { classify, essence } from './classify.ts'
import { NodeError, ToolUnusableError } from '../core/errors.ts'
import { hintFor } from '../cli/hints.ts'
import { controlPlanes, type ClusterNode, type Inventory } from '../core/model.ts'
import type { ToolResult, ToolRunner } from './exec.ts'
import { parseJsonStream } from './json-stream.ts'
import { mapLimit } from '../wait/map-limit.ts'

/** MachineStatus as `talosctl get machinestatus -o json` prints it (the MachineStatus resource: siderolabs/talos pkg/machinery/resources/runtime/machine_status.go). */
export interface MachineStatus {
  node: string
  stage: string
  ready: boolean
  unmetConditions: Array<{ name: string; reason: string }>
}

export interface Disk {
  id: string
  devPath: string
  sizeBytes: number
  model: string
  serial: string
  wwid: string
  uuid: string
  modalias: string
  busPath: string
  transport: string
  rotational: boolean
  readonly: boolean
  cdrom: boolean
}

export interface EtcdMember {
  id: string
  hostname: string
  peerUrls: string[]
  isLearner: boolean
}

export interface ServiceStatus {
  id: string
  state: string
  health: string
  lastEvent: string
  /** every event talosctl printed, newest first (`Bootstrap requested`, `Running pre state`, …) */
  events: string[]
}

/** One node's part of a batched read: its answer, or its own error (classified as a read of that node alone). */
export type NodeAnswer<T> = { value: T; error?: undefined } | { error: NodeError; value?: undefined }

/** Result of the insecure maintenance probe (works on v1.12 and v1.13: the maintenance API serves MachineStatus to an insecure client, internal/app/resources/access.go). */
export type ProbeResult = { state: 'maintenance' } | { state: 'configured' }

const DRY_MACHINESTATUS = (node: string, stage: string): string =>
  JSON.stringify({ node, metadata: { id: 'machine' }, spec: { stage, status: { ready: true, unmetConditions: [] } } })

/** `talosctl service <id>` block of a running service, for dry runs. */
const DRY_SERVICE = (node: string, service: string): string =>
  `NODE     ${node}\nID       ${service}\nSTATE    Running\nHEALTH   OK\nEVENTS   [Running]: Health check successful (1s ago)\n`

/** The talosctl wrapper: every call names -e, -n and --talosconfig (secure) or --insecure, and is bounded. */
export class Talosctl {
  private readonly runner: ToolRunner
  private readonly inventory: Inventory
  constructor(runner: ToolRunner, inventory: Inventory) {
    this.runner = runner
    this.inventory = inventory
  }

  private secureArgs(node: ClusterNode, endpoint: string = node.address): string[] {
    return ['--talosconfig', this.inventory.talosconfig, '-e', endpoint, '-n', node.address]
  }

  /** Runs a call; a failure becomes a NodeError with the kind and hint for this node. */
  private async call(node: ClusterNode, args: string[], dryRunStdout?: string, mutates = false): Promise<ToolResult> {
    const result = await this.runner.run({
      tool: 'talosctl',
      args,
      node: node.name,
      ...(dryRunStdout !== undefined ? { dryRunStdout } : {}),
      ...(mutates ? { mutates } : {}),
    })
    if (result.ok) return result
    throw this.failure(node, result)
  }

  failure(node: ClusterNode, result: ToolResult): NodeError {
    const { kind, message } = classify(result)
    return new NodeError(kind, message, hintFor(kind, node))
  }

  async clientVersion(): Promise<string> {
    const result = await this.runner.run({
      tool: 'talosctl',
      args: ['version', '--client'],
      local: true,
      reusable: { key: ['version', '--client'] },
      dryRunStdout: 'Client:\n\tTag:         v0.0.0-dry-run\n',
    })
    const tag = /Tag:\s+(\S+)/.exec(result.stdout)?.[1]
    // a binary that is no talosctl (TALOSCTL=/bin/sh) fails here or answers without a Tag
    if (!result.ok || !tag) {
      const why = result.timedOut
        ? `\`talosctl version --client\` did not answer within ${Math.round(result.durationMs)}ms`
        : `\`talosctl version --client\` ${result.ok ? 'printed no version' : `failed: ${essence(result.stderr || result.stdout) || `exit ${String(result.exitCode)}`}`}`
      throw new ToolUnusableError('talosctl', this.runner.binary('talosctl'), 'TALOSCTL', why)
    }
    return tag
  }

  /**
   * `talosctl validate --mode metal -c <file>`: undefined when valid, else its problems on one line
   * (the multierror's `* …` items joined by `; `).
   */
  async validate(configFile: string): Promise<string | undefined> {
    const args = ['validate', '--mode', 'metal', '-c', configFile]
    const result = await this.runner.run({ tool: 'talosctl', args, local: true, reusable: { key: args, files: [configFile] } })
    if (result.ok) return undefined
    const text = withoutUnknownValues(result.stderr.trim() || result.stdout.trim() || `talosctl validate exited with ${result.exitCode}`)
    return text
      .split('\n')
      .map((l) => l.replace(/^\s*\*\s*/, '').trim())
      .filter((l) => l && !/errors? occurred:$/.test(l))
      .join('; ')
  }

  /** Insecure MachineStatus read: maintenance, or refused with "certificate required" = configured. */
  async probe(node: ClusterNode): Promise<ProbeResult> {
    try {
      const result = await this.call(
        node,
        ['get', 'machinestatus', '--insecure', '-n', node.address, '-e', node.address, '-o', 'json'],
        DRY_MACHINESTATUS('', 'maintenance'),
      )
      const status = parseMachineStatuses(result.stdout)[0]
      // an insecure answer only comes from the maintenance API
      if (status && status.stage !== 'maintenance') return { state: 'configured' }
      return { state: 'maintenance' }
    } catch (err) {
      if (err instanceof NodeError && err.kind === 'configured') return { state: 'configured' }
      throw err
    }
  }

  async machineStatus(node: ClusterNode): Promise<MachineStatus> {
    const result = await this.call(
      node,
      ['get', 'machinestatus', ...this.secureArgs(node), '-o', 'json'],
      DRY_MACHINESTATUS(node.address, 'running'),
    )
    const status = parseMachineStatuses(result.stdout)[0]
    if (!status) throw new NodeError('unknown', 'talosctl get machinestatus returned no resource', hintFor('unknown', node))
    return status
  }

  /**
   * One batched MachineStatus read through the endpoint `via` (apid proxies one List per node, in
   * order). talosctl resolves the type through the first node: put one that answers first (`via`
   * itself will do); a batch whose first node is down fails whole. Each node answers with its
   * status or its own error; a node absent from the map could not be told (the batch failed whole).
   */
  async machineStatuses(order: ClusterNode[], via: ClusterNode): Promise<Map<string, NodeAnswer<MachineStatus>>> {
    const [first, ...rest] = order
    if (!first) return new Map()
    // each chunk resolves the type through the same first node
    return merged(chunks(rest).map((chunk) => this.machineStatusChunk([first, ...chunk], via)))
  }

  private async machineStatusChunk(order: ClusterNode[], via: ClusterNode): Promise<Map<string, NodeAnswer<MachineStatus>>> {
    const dry = order.map((n) => DRY_MACHINESTATUS(n.address, 'running')).join('\n')
    const docs = await this.resourceChunk(order, via, 'machinestatus', dry)
    const answers = new Map<string, NodeAnswer<MachineStatus>>()
    for (const [ip, answer] of docs) {
      if (answer.error) answers.set(ip, answer)
      else if (answer.value[0] !== undefined) answers.set(ip, { value: toMachineStatus(answer.value[0]) })
    }
    return answers
  }

  /**
   * One batched `talosctl get <type> -n … -e <via> -o json` (the first node resolves the type: put
   * one that answers first): each node's resources (a node with none: []). A batch that exits 0
   * answered for every node; otherwise the nodes without a row are told only when their errors can
   * be matched to them (as machineStatuses), the rest are absent (ask again).
   */
  async resources(order: ClusterNode[], via: ClusterNode, type: string): Promise<Map<string, NodeAnswer<unknown[]>>> {
    if (order.length === 0) return new Map()
    const [first, ...rest] = order
    return merged(chunks(rest).map((chunk) => this.resourceChunk([first as ClusterNode, ...chunk], via, type)))
  }

  private async resourceChunk(
    order: ClusterNode[],
    via: ClusterNode,
    type: string,
    dryRunStdout = '',
  ): Promise<Map<string, NodeAnswer<unknown[]>>> {
    const args = ['get', type, ...this.batchArgs(via, order), '-o', 'json']
    const result = await this.runner.run({ tool: 'talosctl', args, dryRunStdout })
    const answers = new Map<string, NodeAnswer<unknown[]>>()
    if (result.timedOut || result.aborted) return answers
    const rows = new Map<string, unknown[]>()
    for (const doc of parseJsonStream(result.stdout)) {
      const node = (doc as { node?: string }).node ?? ''
      rows.set(node, [...(rows.get(node) ?? []), doc])
    }
    if (result.ok) {
      for (const n of order) answers.set(n.address, { value: rows.get(n.address) ?? [] })
      return answers
    }
    for (const [node, docs] of rows) answers.set(node, { value: docs })
    // `get` collects each node's List error in node order and names no node (get.go, helpers/resources.go
    // ForEachResource): the nodes without a row, in order, are those errors when the counts agree
    const missing = order.filter((n) => !rows.has(n.address))
    const errors = missing.length > 0 ? multiErrors(result.stderr) : []
    if (errors.length === missing.length)
      missing.forEach((n, i) => answers.set(n.address, { error: this.failure(n, { ...result, stdout: '', stderr: errors[i] ?? '' }) }))
    return answers
  }

  /**
   * Each control plane's own member list, one call per node at once: not one batched call, since a
   * node whose etcd does not run holds its answer until the call's deadline (its local client waits
   * for etcd) and a batch would lose every other node's answer with it.
   */
  async etcdMemberLists(nodes: ClusterNode[]): Promise<Map<string, NodeAnswer<EtcdMember[]>>> {
    const answers = await Promise.all(
      nodes.map(async (node): Promise<[string, NodeAnswer<EtcdMember[]>]> => {
        try {
          return [node.address, { value: await this.etcdMembers(node) }]
        } catch (err) {
          if (err instanceof NodeError) return [node.address, { error: err }]
          throw err
        }
      }),
    )
    return new Map(answers)
  }

  /** A resource read from a node in maintenance (the maintenance API serves non-sensitive resources to an insecure client). */
  private insecureGet(node: ClusterNode, type: string): Promise<ToolResult> {
    return this.call(node, ['get', type, '--insecure', '-n', node.address, '-e', node.address, '-o', 'json'], '')
  }

  async disks(node: ClusterNode): Promise<Disk[]> {
    return parseDisks((await this.insecureGet(node, 'disks')).stdout)
  }

  /**
   * The probe and the disks in one process: only the maintenance API answers an insecure read (a
   * configured node's apid wants a client certificate: "certificate required"), so the disks
   * answering is maintenance (internal/app/maintenance/server.go serves only the insecure API).
   */
  async probeDisks(node: ClusterNode): Promise<{ state: 'maintenance'; disks: Disk[] } | { state: 'configured' }> {
    try {
      return { state: 'maintenance', disks: await this.disks(node) }
    } catch (err) {
      if (err instanceof NodeError && err.kind === 'configured') return { state: 'configured' }
      throw err
    }
  }

  /**
   * What a node in maintenance says of its boot (insecure reads of non-sensitive resources, which the
   * maintenance API serves: internal/app/resources/access.go): secure boot on (SecurityState, pkg/machinery/
   * resources/runtime/security_status.go), and the disk it booted Talos from when one has a META partition
   * (SystemDisk: a disk image or an earlier install, controllers/block/system_disk.go).
   */
  async maintenanceBoot(node: ClusterNode): Promise<{ secureBoot: boolean; systemDisk: string | undefined }> {
    const [security, systemDisk] = await Promise.all([this.insecureGet(node, 'securitystate'), this.insecureGet(node, 'systemdisk')])
    const disk = parseJsonStream(systemDisk.stdout)[0] as { spec?: { devPath?: string; diskID?: string } } | undefined
    return {
      secureBoot: secureBootOf(parseJsonStream(security.stdout)[0]),
      systemDisk: disk?.spec?.devPath || (disk?.spec?.diskID ? `/dev/${disk.spec.diskID}` : undefined),
    }
  }

  /**
   * A node in maintenance's links (names, with their aliases and alternative names) and the addresses
   * on them, as the maintenance API shows them (LinkStatuses, AddressStatuses: pkg/machinery/resources/
   * network/link_status.go, address_status.go); host-scoped addresses (loopback) are left out.
   */
  async maintenanceNetwork(node: ClusterNode): Promise<{ links: string[]; addresses: string[] }> {
    const [links, addresses] = await Promise.all([this.insecureGet(node, 'links'), this.insecureGet(node, 'addresses')])
    const names = parseJsonStream(links.stdout).flatMap((doc) => {
      const d = doc as { metadata?: { id?: unknown }; spec?: { alias?: unknown; altNames?: unknown } }
      const alt = Array.isArray(d.spec?.altNames) ? d.spec.altNames : []
      return [d.metadata?.id, d.spec?.alias, ...alt].filter((x): x is string => typeof x === 'string' && x !== '')
    })
    const addrs = parseJsonStream(addresses.stdout).flatMap((doc) => {
      const spec = (doc as { spec?: { address?: unknown; scope?: unknown } }).spec
      return typeof spec?.address === 'string' && spec.scope !== 'host' ? [spec.address.replace(/\/\d+$/, '')] : []
    })
    return { links: names, addresses: addrs }
  }

  /**
   * The insecure apply: `accepted`, or `{ answerLost }` when the call failed in a way that may have
   * come after the node took the config (a timeout, EOF, a reset connection: its answer lost on the
   * way back), which only a look at the node settles. Any other failure, a refused dial included
   * (the request never left), is thrown.
   */
  async applyInsecure(node: ClusterNode): Promise<'accepted' | { answerLost: NodeError }> {
    const result = await this.runner.run({
      tool: 'talosctl',
      args: ['apply-config', '--insecure', '-n', node.address, '-e', node.address, '-f', node.configFile],
      node: node.name,
      mutates: true,
    })
    if (result.ok) return 'accepted'
    const error = this.failure(node, result)
    if (result.aborted || !error.transient || neverSent(result)) throw error
    return { answerLost: error }
  }

  /** Over the authenticated API (mode auto): true when the node reboots to apply it (talosctl prints the mode's details). */
  async applySecure(node: ClusterNode): Promise<{ reboots: boolean }> {
    const result = await this.call(node, ['apply-config', ...this.secureArgs(node), '-f', node.configFile], undefined, true)
    return { reboots: /Applied configuration with a reboot/.test(`${result.stderr}\n${result.stdout}`) }
  }

  /** The last lines of a service's own log (`talosctl logs <service> --tail <n>`). */
  async logs(node: ClusterNode, service: string, tail = 50): Promise<string[]> {
    const result = await this.call(node, ['logs', service, ...this.secureArgs(node), '--tail', String(tail)], '')
    return result.stdout.split('\n').filter((l) => l.trim() !== '')
  }

  /** The node's TimeStatus (pkg/machinery/resources/time/status.go): whether its clock is in sync. */
  async timeSynced(node: ClusterNode): Promise<boolean | undefined> {
    const result = await this.call(node, ['get', 'timestatus', ...this.secureArgs(node), '-o', 'json'], '')
    const doc = parseJsonStream(result.stdout)[0] as { spec?: { synced?: boolean } } | undefined
    return doc?.spec?.synced
  }

  /**
   * The system extensions the node runs (`talosctl get extensions`: one ExtensionStatus per layer,
   * pkg/machinery/resources/runtime/extension_status.go), each with its metadata; Image Factory's
   * virtual `schematic` extension among them carries the schematic ID as its version and the
   * schematic itself as extraInfo (siderolabs/image-factory internal/artifacts/schematic.go).
   */
  async extensions(node: ClusterNode): Promise<Array<{ name: string; version: string; extraInfo: string }>> {
    const result = await this.call(node, ['get', 'extensions', ...this.secureArgs(node), '-o', 'json'], '')
    return parseJsonStream(result.stdout).map(extensionOf)
  }

  /** secure boot on (SecurityState) on a configured node */
  async secureBoot(node: ClusterNode): Promise<boolean> {
    const result = await this.call(node, ['get', 'securitystate', ...this.secureArgs(node), '-o', 'json'], '')
    return secureBootOf(parseJsonStream(result.stdout)[0])
  }

  async serviceStatus(node: ClusterNode, service: string): Promise<ServiceStatus> {
    const result = await this.call(node, ['service', service, ...this.secureArgs(node)], DRY_SERVICE(node.address, service))
    return parseServiceBlock(result.stdout, service)
  }

  /** a batched call's target: the talosconfig, the endpoint `via` (apid proxies) and the nodes */
  private batchArgs(via: ClusterNode, nodes: ClusterNode[]): string[] {
    return ['--talosconfig', this.inventory.talosconfig, '-e', via.address, '-n', nodes.map((n) => n.address).join(',')]
  }

  /** apid's per-node errors of a batched call (`* <node>: rpc error …`), each the answer of the node it names that has none */
  private namedErrors<T>(answers: Map<string, NodeAnswer<T>>, nodes: ClusterNode[], result: ToolResult): void {
    for (const line of multiErrors(result.stderr)) {
      const ip = /^(\S+?): /.exec(line)?.[1]
      const node = nodes.find((n) => n.address === ip)
      if (node && !answers.has(node.address))
        answers.set(node.address, {
          error: this.failure(node, { ...result, exitCode: 1, stdout: '', stderr: line.slice(node.address.length + 2) }),
        })
    }
  }

  /**
   * One batched `talosctl service <id>` through `via` for many nodes (one block per node). A node
   * the endpoint could not reach is named in apid's per-node error (`* <node>: rpc error …`,
   * exit 0); a node absent from the map could not be told (the endpoint failed whole): ask it alone.
   */
  async serviceStatuses(nodes: ClusterNode[], via: ClusterNode, service: string): Promise<Map<string, NodeAnswer<ServiceStatus>>> {
    if (nodes.length === 0) return new Map()
    return merged(chunks(nodes).map((chunk) => this.serviceChunk(chunk, via, service)))
  }

  private async serviceChunk(nodes: ClusterNode[], via: ClusterNode, service: string): Promise<Map<string, NodeAnswer<ServiceStatus>>> {
    const args = ['service', service, ...this.batchArgs(via, nodes)]
    const result = await this.runner.run({
      tool: 'talosctl',
      args,
      dryRunStdout: nodes.map((n) => DRY_SERVICE(n.address, service)).join(''),
    })
    const answers = new Map<string, NodeAnswer<ServiceStatus>>()
    if (result.timedOut || result.aborted) return answers
    for (const block of result.stdout.split(/^(?=NODE\s)/m).filter((b) => b.trim())) {
      const ip = /^NODE\s+(\S+)/.exec(block)?.[1]
      if (ip) answers.set(ip, { value: parseServiceBlock(block, service) })
    }
    this.namedErrors(answers, nodes, result)
    return answers
  }

  /**
   * One batched `talosctl memory --verbose` through `via`: each node's MemTotal in kB (the Memory
   * API's /proc/meminfo, what `talosctl health`'s "all nodes memory sizes" reads). A node the
   * endpoint could not reach is named in apid's per-node error; a node absent from the map could not
   * be told.
   */
  async memoryTotals(nodes: ClusterNode[], via: ClusterNode): Promise<Map<string, NodeAnswer<number>>> {
    if (nodes.length === 0) return new Map()
    return merged(chunks(nodes).map((chunk) => this.memoryChunk(chunk, via)))
  }

  private async memoryChunk(nodes: ClusterNode[], via: ClusterNode): Promise<Map<string, NodeAnswer<number>>> {
    const result = await this.runner.run({
      tool: 'talosctl',
      args: ['memory', '--verbose', ...this.batchArgs(via, nodes)],
      dryRunStdout: nodes.map((n) => `NODE: ${n.address}\nMemTotal: 4091904 kB\n`).join(''),
    })
    const answers = new Map<string, NodeAnswer<number>>()
    if (result.timedOut || result.aborted) return answers
    for (const [ip, kB] of parseMemTotals(result.stdout)) answers.set(ip, { value: kB })
    this.namedErrors(answers, nodes, result)
    return answers
  }

  /**
   * `talosctl get services <id> -n a,b,… -e <via> -o json`: the service's COSI resource on many nodes
   * in one read (machined's ServiceStatus controller), by node address. A node that did not answer
   * is absent.
   */
  async serviceResources(
    nodes: ClusterNode[],
    via: ClusterNode,
    service: string,
  ): Promise<Map<string, { running: boolean; healthy: boolean; unknown: boolean }>> {
    const ordered = [via, ...nodes.filter((n) => n.address !== via.address)].filter((n) => nodes.includes(n))
    if (ordered.length === 0) return new Map()
    const args = [
      'get',
      'services',
      service,
      '--talosconfig',
      this.inventory.talosconfig,
      '-e',
      via.address,
      '-n',
      ordered.map((n) => n.address).join(','),
      '-o',
      'json',
    ]
    const result = await this.runner.run({ tool: 'talosctl', args })
    const byIp = new Map<string, { running: boolean; healthy: boolean; unknown: boolean }>()
    for (const doc of parseJsonStream(result.stdout)) {
      const d = doc as { node?: string; spec?: { running?: boolean; healthy?: boolean; unknown?: boolean } }
      if (d.node)
        byIp.set(d.node, { running: d.spec?.running === true, healthy: d.spec?.healthy === true, unknown: d.spec?.unknown === true })
    }
    return byIp
  }

  async bootstrap(node: ClusterNode): Promise<void> {
    await this.call(node, ['bootstrap', ...this.secureArgs(node)], undefined, true)
  }

  async etcdMembers(node: ClusterNode): Promise<EtcdMember[]> {
    // dry run: the happy answer, every control plane a member
    const rows = [['ID', 'HOSTNAME', 'PEER URLS', 'CLIENT URLS', 'LEARNER']].concat(
      controlPlanes(this.inventory).map((n, i) => [
        String(i + 1).padStart(16, '0'),
        n.name,
        `https://${n.address}:2380`,
        `https://${n.address}:2379`,
        'false',
      ]),
    )
    // aligned as talosctl's tabwriter does (the parser reads columns at the header's offsets)
    const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)))
    const dry = rows.map((r) => r.map((cell, c) => (c < r.length - 1 ? cell.padEnd(widths[c]! + 3) : cell)).join('')).join('\n')
    const result = await this.call(node, ['etcd', 'members', ...this.secureArgs(node)], dry)
    return parseEtcdMembers(result.stdout)
  }

  /**
   * The cluster's etcd alarms through one control plane's local etcd (`talosctl etcd alarm list`:
   * etcd's AlarmList is cluster-wide): member ID (hex) and alarm (NOSPACE, CORRUPT); none prints nothing.
   */
  async etcdAlarms(node: ClusterNode): Promise<Array<{ memberId: string; alarm: string }>> {
    const result = await this.call(node, ['etcd', 'alarm', 'list', ...this.secureArgs(node)], '')
    const lines = result.stdout.split('\n').filter((l) => l.trim())
    const header = lines.shift()?.trim().split(/\s+/) ?? []
    const [member, alarm] = [header.indexOf('MEMBER'), header.indexOf('ALARM')]
    return lines
      .map((l) => l.trim().split(/\s+/))
      .map((cells) => ({ memberId: cells[member] ?? '', alarm: cells[alarm] ?? '' }))
      .filter((a) => a.memberId && a.alarm)
  }

  /** Wipes STATE and EPHEMERAL and reboots into maintenance; graceful also leaves etcd (cmd/talosctl/cmd/talos/reset.go). */
  async reset(node: ClusterNode, graceful: boolean): Promise<void> {
    const args = [
      'reset',
      ...this.secureArgs(node),
      `--graceful=${graceful}`,
      '--reboot',
      '--system-labels-to-wipe',
      'STATE',
      '--system-labels-to-wipe',
      'EPHEMERAL',
      '--wait=false',
    ]
    await this.call(node, args, undefined, true)
  }

  /**
   * Removes a member that cannot leave by itself, through a healthy control plane; the ID is hex
   * (the v1.12 CLI has no hostname form). NotFound (a retry whose first reply was lost, or a member
   * already gone) is done: 'gone' (machined v1alpha1_server.go EtcdRemoveMemberByID answers
   * `NotFound desc = failed to remove member <decimal ID>: etcdserver: member not found`). etcd's
   * `unhealthy cluster` (a peer down or connected less than 5 s) is not-ready-yet: the caller retries it.
   */
  async etcdRemoveMember(via: ClusterNode, memberId: string): Promise<'removed' | 'gone'> {
    const result = await this.runner.run({
      tool: 'talosctl',
      args: ['etcd', 'remove-member', memberId, ...this.secureArgs(via)],
      node: via.name,
      mutates: true,
    })
    if (result.ok) return 'removed'
    if (
      !result.timedOut &&
      !result.aborted &&
      /code = NotFound desc = (?:failed to remove member \d+: )?etcdserver: member not found/.test(result.stderr)
    )
      return 'gone'
    throw this.failure(via, result)
  }

  async kubeconfig(node: ClusterNode, path: string): Promise<void> {
    await this.call(node, ['kubeconfig', path, ...this.secureArgs(node), '--merge=false', '--force'])
  }

  // ---- day 2 (issue 31, docs/day2-design.md 1.4, 2.3): the quorum gate's and the upgrade plan's reads

  /**
   * Each control plane's own etcd status (`talosctl etcd status`, cmd/talosctl/cmd/talos/etcd.go): one
   * batched call through `via`, rows matched by NODE. The call exits 0 when any node answered, and
   * names the others only in its `WARNING: N errors occurred:` lines: such a node gets its own error,
   * never a pass. A node with neither (the batch failed whole: `via` down, or a member whose etcd
   * does not run holds the whole call until its deadline, as the local client waits for etcd) is
   * asked alone, through its own endpoint.
   */
  async etcdStatus(controlPlanes: ClusterNode[], via: ClusterNode): Promise<Map<string, NodeAnswer<EtcdStatus>>> {
    const dry = dryEtcdStatus(this.inventory)
    return this.eachNode(controlPlanes, via, ['etcd', 'status'], parseEtcdStatus, (nodes) =>
      formatEtcdStatusDry(dry.filter((r) => nodes.some((n) => n.address === r.node))),
    )
  }

  /** The Talos version (`Tag`) each node runs (`talosctl version`'s Server blocks), batched through `via` as etcdStatus. */
  async versions(nodes: ClusterNode[], via: ClusterNode | undefined = nodes[0]): Promise<Map<string, NodeAnswer<string>>> {
    if (!via) return new Map()
    const tag = this.inventory.talosVersion ?? 'v0.0.0-dry-run'
    return this.eachNode(
      nodes,
      via,
      ['version'],
      parseServerVersions,
      (asked) =>
        `Client:\n\tTag:         v0.0.0-dry-run\nServer:\n${asked.map((n) => `\tNODE:        ${n.address}\n\tTag:         ${tag}\n`).join('')}`,
    )
  }

  /**
   * What `apply-config --dry-run --mode try -f <file>` says the node would do (docs/day2-design.md
   * 2.5): always try, whatever mode is wanted, since any other mode cancels a pending try revert on
   * the node (v1alpha1_server.go ApplyConfiguration: before the dry-run check). Try refuses a change
   * that needs a reboot with that change's diff, so the answer tells auto's choice without acting on
   * it. A busy node (the apply mutex is held for the whole call) is thrown as `busy`: retried.
   */
  async applyDryRun(node: ClusterNode, file: string): Promise<DryRunClass> {
    const result = await this.runner.run({
      tool: 'talosctl',
      args: ['apply-config', ...this.secureArgs(node), '--dry-run', '--mode', 'try', '-f', file],
      node: node.name,
      dryRunStdout: '',
    })
    if (result.ok) return classifyDryRun(`${result.stderr}\n${result.stdout}`)
    const refused = immediateRefusal(result.stderr)
    if (refused !== undefined) return { class: 'reboot', diff: refused }
    const error = this.failure(node, result)
    // InvalidArgument (Validate, RuntimeValidate) and a config talosctl cannot read: the node's own text
    if (error.kind === 'config-invalid') return { class: 'invalid', text: nodeText(result.stderr) || error.message }
    throw error
  }

  /** `apply-config --mode <mode> -f <file>`: the node's answer (talosctl prints only mode_details). */
  async apply(node: ClusterNode, file: string, mode: ApplyMode): Promise<string> {
    const result = await this.call(
      node,
      ['apply-config', ...this.secureArgs(node), '--mode', mode, '-f', file],
      mode === 'reboot' ? 'Applied configuration with a reboot\n' : '',
      true,
    )
    return `${result.stderr}\n${result.stdout}`.trim()
  }

  /**
   * The node's MachineConfigs (`get mc -o json`): `v1alpha1`, the active config, and `persistent`,
   * what the next boot loads, when this boot set one (pkg/machinery/resources/config/machine_config.go;
   * absent after a boot from STATE alone). Each as its v1alpha1 document.
   */
  async machineConfigs(node: ClusterNode): Promise<{ active: unknown; persistent?: unknown }> {
    const result = await this.call(node, ['get', 'machineconfigs', ...this.secureArgs(node), '-o', 'json'], '')
    const byId = new Map<string, unknown>()
    for (const doc of parseJsonStream(result.stdout)) {
      const d = doc as { metadata?: { id?: unknown }; spec?: unknown }
      if (typeof d.metadata?.id === 'string') byId.set(d.metadata.id, v1alpha1Document(d.spec))
    }
    const active = byId.get('v1alpha1')
    if (active === undefined && !this.runner.dryRun) {
      throw new NodeError('unknown', 'the node lists no active MachineConfig (v1alpha1)', hintFor('unknown', node))
    }
    return { active, ...(byId.has('persistent') ? { persistent: byId.get('persistent') } : {}) }
  }

  /**
   * `talosctl upgrade -n X -e X --image <image> --wait --timeout <timeout>` (docs/day2-design.md 1.3,
   * 2.4): never `--preserve` or `--force` unless asked (either skips Talos's own etcd check); with a
   * v1.13 client `--drain=false` (its own drain runs after the install and uncordons any node, ours
   * included). Each stderr line (the tracker's `"<ip>": …`) goes to `onLine`. The node's refusals are
   * thrown classified: `image-missing`, `upgrade-refused`, `busy` (the etcd upgrade mutex, the
   * lifecycle lock). Any other end, exit 0 included, is returned: talosctl's tracker passes a node
   * that rolled back (it checks only that the boot ID changed), so the caller checks what runs.
   */
  async upgrade(
    node: ClusterNode,
    image: string,
    opts: { timeoutMs: number; preserve?: boolean; force?: boolean; stage?: boolean; rebootMode?: 'default' | 'powercycle' },
    onLine: (line: string) => void,
  ): Promise<{ exitCode: number | null; timedOut: boolean; sequenceError?: string }> {
    const client = parseClientMinor(await this.cachedClientVersion())
    const args = [
      'upgrade',
      ...this.secureArgs(node),
      '--image',
      image,
      '--wait',
      '--timeout',
      `${Math.max(1, Math.round(opts.timeoutMs / 1000))}s`,
      ...(client !== undefined && client >= 13 ? ['--drain=false'] : []),
      ...(opts.preserve ? ['--preserve'] : []),
      ...(opts.force ? ['--force'] : []),
      ...(opts.stage ? ['--stage'] : []),
      ...(opts.rebootMode === 'powercycle' ? ['--reboot-mode', 'powercycle'] : []),
    ]
    let sequenceError: string | undefined
    const result = await this.runner.run({
      tool: 'talosctl',
      args,
      node: node.name,
      mutates: true,
      timeoutMs: opts.timeoutMs + 60_000,
      dryRunStdout: '',
      onStderrLine: (line) => {
        // the tracker's `sequence error: …`, or the NOOP event's `[code: <text> message: FATAL]`
        const seq = /sequence error: (.*)$/.exec(line)?.[1] ?? /NOOP error: \[code: (.*) message: FATAL\]/.exec(line)?.[1]
        if (seq) sequenceError = seq
        onLine(line)
      },
    })
    if (result.aborted) throw this.failure(node, result)
    if (!result.ok && !result.timedOut) {
      const error = this.failure(node, result)
      if (error.kind === 'image-missing' || error.kind === 'upgrade-refused' || error.kind === 'busy') throw error
    }
    return { exitCode: result.exitCode, timedOut: result.timedOut, ...(sequenceError ? { sequenceError } : {}) }
  }

  private clientTag: Promise<string> | undefined

  private cachedClientVersion(): Promise<string> {
    return (this.clientTag ??= this.clientVersion())
  }

  /**
   * `talosctl etcd snapshot <file>` from the node's own etcd member (EtcdSnapshot streams the
   * database; talosctl writes `<file>.part`, checks the trailing sha256 and renames it into place).
   * Returns talosctl's line (`etcd snapshot saved to "<file>" (<n> bytes)`).
   */
  async etcdSnapshot(node: ClusterNode, file: string): Promise<string> {
    const result = await this.call(
      node,
      ['etcd', 'snapshot', file, ...this.secureArgs(node)],
      `etcd snapshot saved to "${file}" (0 bytes)\n`,
    )
    return `${result.stdout}\n${result.stderr}`
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .join('; ')
  }

  /** `talosctl reboot --wait=false`: the reboot is watched through the boot ID, never talosctl's tracker. */
  async reboot(node: ClusterNode): Promise<void> {
    await this.call(node, ['reboot', ...this.secureArgs(node), '--wait=false'], '', true)
  }

  /** The node's boot ID (`read /proc/sys/kernel/random/boot_id`, os:admin): it changes with every boot. */
  async bootId(node: ClusterNode): Promise<string> {
    const result = await this.call(node, ['read', ...this.secureArgs(node), '/proc/sys/kernel/random/boot_id'], 'dry-run-boot-id\n')
    const id = result.stdout.trim()
    if (!id) throw new NodeError('unknown', 'the node answered an empty boot ID', hintFor('unknown', node))
    return id
  }

  /**
   * The versions of the control plane's component configs (APIServerConfigs, ControllerManagerConfigs,
   * SchedulerConfigs, namespace controlplane): each mirror pod carries the version it runs as its
   * `talos.dev/config-version` annotation (what `talosctl upgrade-k8s` waits for, checkPodStatus).
   * Undefined when the node's API does not serve these types.
   */
  async controlPlaneConfigVersions(node: ClusterNode): Promise<Map<string, string> | undefined> {
    const configs = await this.componentConfigs(node, CONTROL_PLANE_CONFIGS)
    return configs && new Map([...configs].map(([component, c]) => [component, c.version]))
  }

  /**
   * The Kubernetes images Talos runs on the node, from its typed specs (what `talosctl upgrade-k8s`
   * patches): the KubeletSpec's (namespace k8s), and on a control plane each component's config
   * (`image` and the resource version its mirror pod is annotated with). Undefined when the node's API
   * does not serve these types.
   */
  async kubernetesImages(node: ClusterNode): Promise<Map<string, { image: string; version: string }> | undefined> {
    const types: ReadonlyArray<[string, string]> = [
      ['kubelet', 'kubeletspecs'],
      ...(node.role === 'controlplane' ? CONTROL_PLANE_CONFIGS : []),
    ]
    return this.componentConfigs(node, types)
  }

  /** `get <type> -o json` for each [component, type]: its spec's image and its resource version. */
  private async componentConfigs(
    node: ClusterNode,
    types: ReadonlyArray<[string, string]>,
  ): Promise<Map<string, { image: string; version: string }> | undefined> {
    const out = new Map<string, { image: string; version: string }>()
    // the types read at once (one process each: `get` takes one type)
    const results = await Promise.all(
      types.map(([, type]) =>
        this.runner.run({
          tool: 'talosctl',
          args: ['get', type, ...this.secureArgs(node), '-o', 'json'],
          node: node.name,
          dryRunStdout: '',
        }),
      ),
    )
    for (const [i, [component]] of types.entries()) {
      const result = results[i]!
      // a node whose API does not serve the type (`resource "…" is not registered`): undefined, said by the caller
      if (!result.ok && /code = NotFound desc = resource "[^"]+" is not registered/.test(result.stderr)) return undefined
      if (!result.ok) throw this.failure(node, result)
      for (const doc of parseJsonStream(result.stdout)) {
        const d = doc as { metadata?: { version?: unknown }; spec?: { image?: unknown } }
        if (d.metadata?.version !== undefined)
          out.set(component, { image: typeof d.spec?.image === 'string' ? d.spec.image : '', version: String(d.metadata.version) })
      }
    }
    return out
  }

  /**
   * `talosctl upgrade-k8s --to <to> -n <via> -e <via>` (docs/day2-design.md 1.6, 2.7), with
   * `--endpoint <url>` when given (the cluster endpoint does not answer). Never `--dry-run`: it is no
   * read-only probe (it applies a config to every control plane). Each line it prints, on either
   * stream, goes to `onLine` (its manifest diffs among them: secrets, never to be shown as they are). Its own waits have no deadline: the call's is `timeoutMs`, and the
   * watchdog cuts it once it is silent for `stallTimeoutMs`. A failure is thrown with upgrade-k8s's
   * own text: `version-skew` for its path and compatibility refusals (nothing changed), `stuck` when
   * cut silent, `timeout` past the deadline, else `k8s-upgrade`.
   */
  async upgradeK8s(
    via: ClusterNode,
    to: string,
    endpoint: string | undefined,
    onLine: (line: string) => void,
    opts: { timeoutMs: number; stallTimeoutMs: number },
  ): Promise<void> {
    const result = await this.runner.run({
      tool: 'talosctl',
      args: ['upgrade-k8s', ...this.secureArgs(via), '--to', to, ...(endpoint ? ['--endpoint', endpoint] : [])],
      node: via.name,
      mutates: true,
      timeoutMs: opts.timeoutMs,
      stallTimeoutMs: opts.stallTimeoutMs,
      dryRunStdout: '',
      onStdoutLine: onLine,
      onStderrLine: onLine,
    })
    if (result.ok) return
    if (result.aborted) throw this.failure(via, result)
    if (result.stalled)
      throw new NodeError(
        'stuck',
        `talosctl upgrade-k8s printed nothing for ${Math.round(opts.stallTimeoutMs / 1000)}s and was cut`,
        hintFor('k8s-upgrade', via),
      )
    if (result.timedOut)
      throw new NodeError(
        'timeout',
        `talosctl upgrade-k8s did not finish within ${Math.round(opts.timeoutMs / 1000)}s and was cut`,
        hintFor('k8s-upgrade', via),
      )
    // its log goes to stdout (manifest diffs with secrets among it), its error is the last line of stderr
    const text =
      result.stderr
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean)
        .pop() ?? `exit ${String(result.exitCode)}`
    if (/unsupported upgrade path|version of Kubernetes \S+ is too (?:new|old) to be used with Talos/.test(text))
      throw new NodeError('version-skew', `talosctl upgrade-k8s refused: ${text}`, hintFor('version-skew', via))
    const classified = this.failure(via, result)
    // the node unreachable or its certificate refused keep their own kind (and hint); anything else is upgrade-k8s's own failure
    if (REACHING.has(classified.kind)) throw classified
    throw new NodeError('k8s-upgrade', `talosctl upgrade-k8s failed: ${text}`, hintFor('k8s-upgrade', via))
  }

  /**
   * A batched read of `nodes` through `via` (BATCH_NODES a call), each node's answer or its own
   * error; the nodes the batch could not tell are asked alone (each through itself, READ_ALONE at a time).
   */
  private async eachNode<T>(
    nodes: ClusterNode[],
    via: ClusterNode,
    command: string[],
    parse: (stdout: string) => Array<{ node: string; value: T }>,
    dry: (nodes: ClusterNode[]) => string,
  ): Promise<Map<string, NodeAnswer<T>>> {
    if (nodes.length === 0) return new Map()
    const batch = async (chunk: ClusterNode[]): Promise<Map<string, NodeAnswer<T>>> => {
      const answers = new Map<string, NodeAnswer<T>>()
      const result = await this.runner.run({
        tool: 'talosctl',
        args: [...command, ...this.batchArgs(via, chunk)],
        dryRunStdout: dry(chunk),
      })
      if (result.timedOut || result.aborted) return answers
      for (const row of parse(result.stdout))
        if (chunk.some((n) => n.address === row.node) && !answers.has(row.node)) answers.set(row.node, { value: row.value })
      this.namedErrors(answers, chunk, result)
      return answers
    }
    const answers = await merged(chunks(nodes).map(batch))
    const alone = nodes.filter((n) => !answers.has(n.address))
    const told = await mapLimit(alone, READ_ALONE, async (node): Promise<[string, NodeAnswer<T>]> => {
      const result = await this.runner.run({
        tool: 'talosctl',
        args: [...command, ...this.secureArgs(node)],
        node: node.name,
        dryRunStdout: dry([node]),
      })
      const rows = parse(result.stdout)
      // asked alone, the one row is this node's (apid names it; a node that does not is still the one asked)
      const row = rows.find((r) => r.node === node.address) ?? (rows.length === 1 ? rows[0] : undefined)
      if (result.ok && row) return [node.address, { value: row.value }]
      return [
        node.address,
        {
          error: this.failure(
            node,
            result.ok ? { ...result, ok: false, stderr: `talosctl ${command.join(' ')} printed no row for ${node.address}` } : result,
          ),
        },
      ]
    })
    for (const [ip, answer] of told) answers.set(ip, answer)
    return answers
  }
}

/** Failures of reaching a node at all (the dial, its certificate, the role), as opposed to what a call itself answered. */
const REACHING: ReadonlySet<string> = new Set([
  'unreachable',
  'pki-mismatch',
  'clock',
  'cert-sans',
  'unauthorized',
  'maintenance',
  'configured',
])

/** The minor of a talosctl client tag (`v1.13.9` -> 13), undefined for one that is no v1 release. */
function parseClientMinor(tag: string): number | undefined {
  const m = /^v1\.(\d+)\./.exec(tag)
  return m ? Number(m[1]) : undefined
}

/**
 * The call failed before its request could reach the node: the dial itself failed (grpc-go's
 * `Error while dialing`: refused, no route, a dial timeout). Anything else may have been received.
 */
function neverSent(result: ToolResult): boolean {
  return !result.timedOut && /Error while dialing|connect: connection refused|no route to host|network is unreachable/.test(result.stderr)
}

/**
 * Nodes per batched call: every node travels in the call's metadata (a header entry each), and a
 * `get` asks them one after the other; larger batches go out as several calls at once.
 */
const BATCH_NODES = 50

/** One ExtensionStatus document (`talosctl get extensions -o json`): the extension's name, version and extraInfo. */
export function extensionOf(doc: unknown): { name: string; version: string; extraInfo: string } {
  const meta = (doc as { spec?: { metadata?: { name?: unknown; version?: unknown; extraInfo?: unknown } } }).spec?.metadata
  const text = (v: unknown): string => (typeof v === 'string' ? v : '')
  return { name: text(meta?.name), version: text(meta?.version), extraInfo: text(meta?.extraInfo) }
}

/** One SecurityState document (`talosctl get securitystate -o json`): secure boot on (pkg/machinery/resources/runtime/security_status.go). */
export function secureBootOf(doc: unknown): boolean {
  return (doc as { spec?: { secureBoot?: unknown } } | undefined)?.spec?.secureBoot === true
}

function chunks(nodes: ClusterNode[]): ClusterNode[][] {
  const out: ClusterNode[][] = []
  for (let i = 0; i < nodes.length; i += BATCH_NODES) out.push(nodes.slice(i, i + BATCH_NODES))
  return out.length > 0 ? out : [[]]
}

async function merged<T>(parts: Array<Promise<Map<string, T>>>): Promise<Map<string, T>> {
  return new Map((await Promise.all(parts)).flatMap((part) => [...part]))
}

/** The items of a go-multierror (`N errors occurred:` then `\t* <error>` lines), [] when stderr holds none. */
export function multiErrors(stderr: string): string[] {
  if (!/\d+ errors? occurred:/.test(stderr)) return []
  return [...stderr.matchAll(/^\t\* (.*)$/gm)].map((m) => m[1] ?? '')
}

export function parseMachineStatuses(stdout: string): MachineStatus[] {
  return parseJsonStream(stdout).map(toMachineStatus)
}

/** One MachineStatus resource as `get -o json` prints it. */
function toMachineStatus(doc: unknown): MachineStatus {
  const d = doc as {
    node?: string
    spec?: { stage?: string; status?: { ready?: boolean; unmetConditions?: Array<{ name: string; reason: string }> } }
  }
  return {
    node: d.node ?? '',
    stage: d.spec?.stage ?? 'unknown',
    ready: d.spec?.status?.ready ?? false,
    // Talos lists a required service that is not running twice (machine_status.go: once among all
    // services, once among the required ones): `etcd not running, etcd not running` says it once here
    unmetConditions: (d.spec?.status?.unmetConditions ?? []).map((c) => ({
      name: c.name,
      reason: [...new Set(c.reason.split(', '))].join(', '),
    })),
  }
}

/** `talosctl memory --verbose`: each `NODE: <node>` block's `MemTotal: <n> kB` (cmd/talosctl/cmd/talos/memory.go verboseRender) */
export function parseMemTotals(stdout: string): Map<string, number> {
  const totals = new Map<string, number>()
  for (const block of stdout.split(/^(?=NODE: )/m)) {
    const node = /^NODE: (\S+)/.exec(block)?.[1]
    const kB = /^MemTotal:\s+(\d+) kB$/m.exec(block)?.[1]
    if (node && kB !== undefined) totals.set(node, Number(kB))
  }
  return totals
}

/** `talosctl get disks -o json`: one resource per disk (empty fields are omitted by the node). */
export function parseDisks(stdout: string): Disk[] {
  return parseJsonStream(stdout).map(toDisk)
}

function toDisk(doc: unknown): Disk {
  const d = doc as { metadata?: { id?: string }; spec?: Record<string, unknown> }
  const spec = d.spec ?? {}
  const id = d.metadata?.id ?? ''
  const str = (k: string): string => (typeof spec[k] === 'string' ? (spec[k] as string) : '')
  return {
    id,
    devPath: str('dev_path') || `/dev/${id}`,
    sizeBytes: typeof spec.size === 'number' ? spec.size : Number(spec.size ?? 0),
    model: str('model'),
    serial: str('serial'),
    wwid: str('wwid'),
    uuid: str('uuid'),
    modalias: str('modalias'),
    busPath: str('bus_path'),
    transport: str('transport'),
    rotational: spec.rotational === true,
    readonly: spec.readonly === true,
    cdrom: spec.cdrom === true,
  }
}

/** `talosctl service <id>` key/value block (cmd/talosctl/cmd/talos/service.go). */
export function parseServiceBlock(stdout: string, id: string): ServiceStatus {
  const field = (name: string): string => new RegExp(`^${name}\\s+(.*)$`, 'm').exec(stdout)?.[1]?.trim() ?? ''
  const event = /^EVENTS\s+\[\w+\]: (.*?)(?: \(\S+ ago\))?$/m.exec(stdout)?.[1] ?? ''
  // the EVENTS line, then one indented line per older event
  const events: string[] = []
  let inEvents = false
  for (const line of stdout.split('\n')) {
    if (/^EVENTS\s/.test(line)) inEvents = true
    else if (!/^\s/.test(line)) inEvents = false
    const m = inEvents ? /^(?:EVENTS)?\s+\[\w+\]: (.*?)(?: \(\S+ ago\))?$/.exec(line) : null
    if (m?.[1] !== undefined) events.push(m[1])
  }
  return { id, state: field('STATE') || 'unknown', health: field('HEALTH') || '?', lastEvent: event, events }
}

/**
 * `talosctl etcd members` table (cmd/talosctl/cmd/talos/etcd.go); NODE column optional. Cells are cut at the header's
 * column offsets (tabwriter aligns them): a learner that has not started has an empty HOSTNAME and
 * CLIENT URLS, which splitting on whitespace would shift.
 */
export function parseEtcdMembers(stdout: string): EtcdMember[] {
  return parseEtcdRows(stdout).map((r) => r.member)
}

/** The rows of the `etcd members` table, each with its NODE cell ('' without that column). */
function parseEtcdRows(stdout: string): Array<{ node: string; member: EtcdMember }> {
  const lines = stdout.split('\n').filter((l) => l.trim())
  const header = lines.shift()
  if (!header) return []
  const names = ['NODE', 'ID', 'HOSTNAME', 'PEER URLS', 'CLIENT URLS', 'LEARNER']
  const starts = names.map((name) => new RegExp(`(^|\\s)${name}(\\s|$)`).exec(header)).map((m) => (m ? m.index + m[1]!.length : -1))
  const column = (line: string, i: number): string => {
    const from = starts[i] ?? -1
    if (from < 0) return ''
    const to = starts.slice(i + 1).find((x) => x > from) ?? line.length
    return line.slice(from, to).trim()
  }
  return lines.map((line) => ({
    node: column(line, 0),
    member: {
      id: column(line, 1),
      hostname: column(line, 2),
      peerUrls: column(line, 3).split(',').filter(Boolean),
      isLearner: column(line, 5) === 'true',
    },
  }))
}

const UNKNOWN_KEYS = 'unknown keys found during decoding:'

/**
 * talosctl's decoder echoes the unknown keys of a document with their values as YAML
 * (pkg/machinery/config/configloader/internal/decoder: a misspelt `pasword: hunter2` is printed
 * as it is): only the keys' paths are kept, never the values.
 */
export function withoutUnknownValues(text: string): string {
  const at = text.indexOf(UNKNOWN_KEYS)
  if (at < 0) return text
  const head = text.slice(0, at + UNKNOWN_KEYS.length)
  const rest = text.slice(at + UNKNOWN_KEYS.length).replace(/^\n/, '')
  // the YAML block runs until the next line that starts another error
  const lines = rest.split('\n')
  let end = lines.findIndex((l) => /^(error|\* )/.test(l) || l.includes(UNKNOWN_KEYS))
  if (end < 0) end = lines.length
  const block = lines.slice(0, end).join('\n')
  const tail = lines.slice(end).join('\n')
  const paths: string[] = []
  const walk = (value: unknown, path: string[]): void => {
    if (Array.isArray(value)) value.forEach((v, i) => walk(v, [...path, String(i)]))
    else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) walk(v, [...path, k])
    else paths.push(path.join('.'))
  }
  try {
    walk(parseYaml(block) as unknown, [])
  } catch {
    // not YAML after all: keep each line's key, never its value
    for (const line of lines.slice(0, end)) {
      const key = /^\s*(?:- )?([^:]+):/.exec(line)?.[1]
      if (key) paths.push(key.trim())
    }
  }
  return `${head} ${paths.join(', ')} (values not shown)${tail ? `\n${withoutUnknownValues(tail)}` : ''}`
}

// ---- day 2: the parsers of etcdStatus and versions (fixtures of the real talosctl v1.12.11 in test/unit/etcd-status.test.ts)

/** Nodes a batched read could not tell, asked alone at once. */
const READ_ALONE = 16

/** One row of `talosctl etcd status`: a member's own view (etcd's StatusResponse, through Talos's EtcdStatus). */
export interface EtcdStatus {
  /** the NODE cell: the address the answer came from */
  node: string
  /** %016x, as etcd.FormatMemberID prints it */
  memberId: string
  /** the member it follows; `0000000000000000` when it knows none */
  leader: string
  raftIndex: number
  raftTerm: number
  raftAppliedIndex: number
  learner: boolean
  /** etcd's version (PROTOCOL) */
  protocol: string
  /** etcd's errors for this member (`ERRORS`: joined with ", " by talosctl), '' when none */
  errors: string
  /** DB SIZE and IN USE as printed (`20 kB`, `16 kB (80.00%)`) */
  dbSize: string
  inUse: string
}

const ETCD_STATUS_COLUMNS = [
  'NODE',
  'MEMBER',
  'DB SIZE',
  'IN USE',
  'LEADER',
  'RAFT INDEX',
  'RAFT TERM',
  'RAFT APPLIED INDEX',
  'LEARNER',
  'PROTOCOL',
  'STORAGE',
  'ERRORS',
] as const

/**
 * A tabwriter table cut at its header's offsets (padding 3: a cell can hold single spaces, `4.1 MB`,
 * and may be empty); each row as column name -> cell.
 */
function tableRows(stdout: string, names: readonly string[]): Array<Record<string, string>> {
  const lines = stdout.split('\n').filter((l) => l.trim())
  const headerAt = lines.findIndex((l) => names.filter((n) => new RegExp(`(^|\\s)${n}(\\s|$)`).test(l)).length >= 2)
  if (headerAt < 0) return []
  const header = lines[headerAt]!
  const starts = names
    .map((name) => ({ name, m: new RegExp(`(^|\\s{2,})${name}(\\s|$)`).exec(header) }))
    .filter((x) => x.m !== null)
    .map((x) => ({ name: x.name, at: x.m!.index + x.m![1]!.length }))
    .sort((a, b) => a.at - b.at)
  return lines
    .slice(headerAt + 1)
    .map((line) => Object.fromEntries(starts.map((c, i) => [c.name, line.slice(c.at, starts[i + 1]?.at ?? line.length).trim()])))
}

/** `talosctl etcd status` stdout: one row per member that answered (a node that failed is only in stderr's WARNING). */
export function parseEtcdStatus(stdout: string): Array<{ node: string; value: EtcdStatus }> {
  return tableRows(stdout, ETCD_STATUS_COLUMNS)
    .filter((r) => /^[0-9a-f]{16}$/.test(r.MEMBER ?? ''))
    .map((r) => {
      const number = (cell: string | undefined): number => (/^\d+$/.test(cell ?? '') ? Number(cell) : Number.NaN)
      const value: EtcdStatus = {
        node: r.NODE ?? '',
        memberId: r.MEMBER ?? '',
        leader: r.LEADER ?? '',
        raftIndex: number(r['RAFT INDEX']),
        raftTerm: number(r['RAFT TERM']),
        raftAppliedIndex: number(r['RAFT APPLIED INDEX']),
        learner: r.LEARNER === 'true',
        protocol: r.PROTOCOL ?? '',
        errors: r.ERRORS ?? '',
        dbSize: r['DB SIZE'] ?? '',
        inUse: r['IN USE'] ?? '',
      }
      return { node: value.node, value }
    })
}

/** The Server blocks of `talosctl version` (cmd/talosctl/cmd/talos/version.go): each `NODE:` and its `Tag:`, the Client block skipped. */
export function parseServerVersions(stdout: string): Array<{ node: string; value: string }> {
  const server = stdout.split(/^Server:\s*$/m)[1] ?? ''
  const out: Array<{ node: string; value: string }> = []
  let node = ''
  for (const line of server.split('\n')) {
    const field = /^\s*(NODE|Tag):\s+(\S+)/.exec(line)
    if (field?.[1] === 'NODE') node = field[2] ?? ''
    else if (field?.[1] === 'Tag') out.push({ node, value: field[2] ?? '' })
  }
  return out
}

/** Dry runs: every control plane a started voter, the first the leader, all caught up (IDs as etcdMembers' dry answer). */
function dryEtcdStatus(inventory: Inventory): EtcdStatus[] {
  const id = (i: number): string => String(i + 1).padStart(16, '0')
  return controlPlanes(inventory).map((n, i) => ({
    node: n.address,
    memberId: id(i),
    leader: id(0),
    raftIndex: 1,
    raftTerm: 1,
    raftAppliedIndex: 1,
    learner: false,
    protocol: '3.6.11',
    errors: '',
    dbSize: '20 kB',
    inUse: '16 kB (80.00%)',
  }))
}

function formatEtcdStatusDry(rows: EtcdStatus[]): string {
  const line = (cells: string[]): string => `${cells.map((c) => c.padEnd(24)).join('')}\n`
  const cells = (s: EtcdStatus): string[] => [
    s.node,
    s.memberId,
    s.dbSize,
    s.inUse,
    s.leader,
    String(s.raftIndex),
    String(s.raftTerm),
    String(s.raftAppliedIndex),
    String(s.learner),
    s.protocol,
    '3.6.0',
    s.errors,
  ]
  return line([...ETCD_STATUS_COLUMNS]) + rows.map((r) => line(cells(r))).join('')
}

/** The modes `apply-config --mode` takes (interactive aside). */
export const APPLY_MODES = ['auto', 'no-reboot', 'reboot', 'staged', 'try'] as const
export type ApplyMode = (typeof APPLY_MODES)[number]

/** A dry run's verdict: nothing changes, a live change, one that needs a reboot, or a config the node refuses. */
export type DryRunClass =
  { class: 'none' } | { class: 'live'; diff: string } | { class: 'reboot'; diff: string } | { class: 'invalid'; text: string }

/** The typed configs behind the control plane's static pods (controlplane namespace), by component. */
const CONTROL_PLANE_CONFIGS: ReadonlyArray<[string, string]> = [
  ['kube-apiserver', 'apiserverconfigs'],
  ['kube-controller-manager', 'controllermanagerconfigs'],
  ['kube-scheduler', 'schedulerconfigs'],
]

const IMMEDIATE_REFUSAL = "this config change can't be applied in immediate mode\ndiff:\n"

/**
 * A dry run's answer (`Dry run summary:\n<details> (skipped in dry-run).\nConfig diff:\n\n<diff>`):
 * `No changes.` only when both configs encode the same (pkg/machinery/configdiff).
 */
export function classifyDryRun(text: string): DryRunClass {
  const at = text.indexOf('Config diff:\n')
  if (!/Dry run summary:/.test(text) || at < 0) return { class: 'invalid', text: `unexpected dry-run answer: ${text.trim().slice(0, 300)}` }
  const diff = text.slice(at + 'Config diff:\n'.length).trim()
  if (diff === 'No changes.') return { class: 'none' }
  return { class: 'live', diff }
}

/** The diff of a try the node refused because the change needs a reboot, else undefined. */
export function immediateRefusal(stderr: string): string | undefined {
  const at = stderr.indexOf(IMMEDIATE_REFUSAL)
  if (at < 0) return undefined
  return stderr.slice(at + IMMEDIATE_REFUSAL.length).trimEnd()
}

/** The node's own text of a refusal: after gRPC's `desc = `, or talosctl's line. */
function nodeText(stderr: string): string {
  const desc = stderr.split('desc = ')
  return (desc.length > 1 ? desc.slice(1).join('desc = ') : stderr).trim()
}

/** A MachineConfig's spec: the v1alpha1 document (a spec may come as the YAML of every document). */
function v1alpha1Document(spec: unknown): unknown {
  if (typeof spec !== 'string') return spec
  for (const doc of parseAllYaml(spec)) {
    const d = doc as { version?: unknown; kind?: unknown } | null
    if (d && typeof d === 'object' && d.kind === undefined) return d
  }
  return undefined
}

function parseAllYaml(text: string): unknown[] {
  return parseAllDocuments(text).map((d) => d.toJS() as unknown)
}

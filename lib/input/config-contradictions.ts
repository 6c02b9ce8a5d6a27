// What the machine configs say about a node against what the inventory says, checked offline before
// any node is touched: the installer's Talos version, the install disk, and the kubelet's node IP
// subnets. A contradiction is bad input (exit 2) naming the config's line and the fix.
import { BlockList, isIP } from 'node:net'
import { InputError } from '../core/errors.ts'
import type { ClusterNode, Inventory } from '../core/model.ts'
import { MachineConfig, networkIdentity } from './machine-config.ts'

export interface ConfigFindings {
  errors: InputError[]
  /** worth a word, not a stop (an installer of another patch release) */
  warnings: string[]
}

const versionParts = (version: string): number[] | undefined => {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version)
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined
}

/** Every contradiction between the nodes' configs and the inventory. */
export function configContradictions(inventory: Inventory): ConfigFindings {
  const findings: ConfigFindings = { errors: [], warnings: [] }
  for (const node of inventory.nodes) {
    installerVersion(node, inventory, findings)
    installDisk(node, inventory, findings)
    nodeIpSubnets(node, inventory, findings)
  }
  return findings
}

/**
 * A cluster of control planes only whose configs leave them tainted (Talos taints a control plane
 * node-role.kubernetes.io/control-plane:NoSchedule unless cluster.allowSchedulingOnControlPlanes is
 * true: machined controllers/k8s/node_status.go, v1alpha1_clusterconfig.go ScheduleOnControlPlanes):
 * every workload without that toleration, Flux's included, stays Pending. A warning per config.
 */
export function controlPlaneOnlyScheduling(inventory: Inventory): string | undefined {
  if (inventory.nodes.length === 0 || inventory.nodes.some((n) => n.role !== 'controlplane')) return undefined
  const tainted = inventory.nodes.filter((n) => {
    const doc = MachineConfig.of(n.configFile).v1alpha1
    return doc?.getIn(['cluster', 'allowSchedulingOnControlPlanes']) !== true
  })
  if (tainted.length === 0) return undefined
  return `every node is a control plane and ${tainted.map((n) => `${n.name} (${n.configFile})`).join(', ')} ${tainted.length === 1 ? 'does' : 'do'} not set cluster.allowSchedulingOnControlPlanes: true: Talos taints them node-role.kubernetes.io/control-plane:NoSchedule, so every workload without that toleration (Flux's controllers included) stays Pending; set it in the configs (talhelper: allowSchedulingOnControlPlanes: true) and regenerate them, or add workers`
}

/** The installer image installs the Talos of its tag: another minor than the configs were generated for is another Talos. */
function installerVersion(node: ClusterNode, inventory: Inventory, findings: ConfigFindings): void {
  const config = MachineConfig.of(node.configFile)
  const tag = config.installerVersion()
  const wanted = inventory.talosVersion
  if (!tag || !wanted) return
  const [have, want] = [versionParts(tag), versionParts(wanted)]
  if (!have || !want || have.join('.') === want.join('.')) return
  const image = config.installImage() ?? tag
  const doc = config.v1alpha1
  const line = doc ? config.lineOf(doc, ['machine', 'install', 'image']) : undefined
  const source = inventory.source.endsWith('nodes.yaml')
    ? `the other nodes' installer images (${wanted})`
    : `talosVersion ${wanted} in ${inventory.source}`
  if (have[0] === want[0] && have[1] === want[1]) {
    findings.warnings.push(
      `${node.name}: machine.install.image ${image} in ${node.configFile} installs Talos ${tag}, not ${wanted} (${source}): another patch release`,
    )
    return
  }
  findings.errors.push(
    new InputError(`machine.install.image ${image} of ${node.name} installs Talos ${tag}, another version than ${source}`, {
      file: node.configFile,
      ...(line ? { line } : {}),
      fix: `give the installer image the tag ${wanted} (talhelper: talosVersion, or talosImageURL without a tag) and regenerate the configs, or set talosVersion to the Talos you mean to install`,
    }),
  )
}

/** talhelper writes installDisk / installDiskSelector into the config: a config that says otherwise was not regenerated. */
function installDisk(node: ClusterNode, inventory: Inventory, findings: ConfigFindings): void {
  const config = MachineConfig.of(node.configFile)
  const target = config.installTarget()
  if (!target) return
  const doc = config.v1alpha1
  const fix = `regenerate the configs (talhelper genconfig) from ${inventory.source}, or correct installDisk/installDiskSelector of ${node.name} there to the disk you mean`
  const contradiction = (key: string, said: string, inventorySays: string): void => {
    const line = doc ? config.lineOf(doc, ['machine', 'install', key]) : undefined
    findings.errors.push(
      new InputError(
        `machine.install.${key} ${said} of ${node.name} contradicts ${inventorySays} in ${inventory.source}: the node would install to another disk than the inventory says`,
        { file: node.configFile, ...(line ? { line } : {}), fix },
      ),
    )
  }
  // the selector wins over the disk in Talos's install: compare what decides
  if (node.installDiskSelector) {
    const want = JSON.stringify(sorted(node.installDiskSelector))
    if (!target.selector) contradiction('disk', target.disk ?? '', `installDiskSelector ${want}`)
    else if (JSON.stringify(sorted(target.selector)) !== want)
      contradiction('diskSelector', JSON.stringify(sorted(target.selector)), `installDiskSelector ${want}`)
    return
  }
  if (node.installDisk && !target.selector && target.disk && target.disk !== node.installDisk)
    contradiction('disk', target.disk, `installDisk ${node.installDisk}`)
  else if (node.installDisk && target.selector)
    contradiction('diskSelector', JSON.stringify(sorted(target.selector)), `installDisk ${node.installDisk}`)
}

function sorted(value: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(value)
      .map(([k, v]) => [k, String(v)] as const)
      .sort(([a], [b]) => a.localeCompare(b)),
  )
}

/**
 * machine.kubelet.nodeIP.validSubnets: the kubelet takes the first of the node's addresses the subnets
 * select (`!` excludes), one per family (machined controllers/k8s/nodeip.go). None selected: the kubelet
 * gets no node IP. The endpoint's VIP selected on a control plane whose config does not hold it as its
 * VIP: the kubelet may take it, and it moves (a warning: it may be a load balancer's, never on the node).
 */
function nodeIpSubnets(node: ClusterNode, inventory: Inventory, findings: ConfigFindings): void {
  const config = MachineConfig.of(node.configFile)
  const doc = config.v1alpha1
  const list = validSubnetsOf(config)
  if (!doc || !list) return
  const line = config.lineOf(doc, ['machine', 'kubelet', 'nodeIP', 'validSubnets'])
  const filter = subnetFilter(list)
  if (!filter) return // a subnet that does not parse (talosctl validate names it), or exclusions only
  const identity = networkIdentity(config)
  const addresses = addressesOf(node, config)
  const where = { file: node.configFile, ...(line ? { line } : {}) }
  // with DHCP the node may hold an address neither the config nor the inventory names
  if (addresses.length > 0 && !identity.dhcp && !addresses.some(filter)) {
    findings.errors.push(
      new InputError(
        `machine.kubelet.nodeIP.validSubnets ${list.join(', ')} of ${node.name} selects none of its addresses (${addresses.join(', ')}): the kubelet would find no node IP`,
        { ...where, fix: `list a subnet that holds ${node.address} in validSubnets and regenerate the config` },
      ),
    )
  }
  // Talos excludes the VIPs its config holds (controllers/k8s/nodeip_config.go); one held by something
  // else (kube-vip, keepalived) stays a candidate, the kubelet may take it and fail once it moves
  const vip = inventory.vip
  if (vip && isIP(vip) && node.role === 'controlplane' && filter(vip) && !configVips(config).includes(vip))
    findings.warnings.push(
      `${node.name}: machine.kubelet.nodeIP.validSubnets ${list.join(', ')} in ${node.configFile} select the endpoint's address ${vip}, which its config does not hold as a VIP (so Talos does not exclude it): if something else puts ${vip} on the node (kube-vip, keepalived), the kubelet may take it as its node IP and fail once it moves (bad --node-ip); add "!${vip}/${isIP(vip) === 6 ? 128 : 32}" to validSubnets`,
    )
}

/** The VIPs a config holds: interfaces[].vip.ip, their VLANs', and the VIP documents (Layer2VIPConfig, …: named by the address). */
function configVips(config: MachineConfig): string[] {
  const vips: string[] = []
  for (const value of config.values()) {
    const doc = value as { kind?: unknown; name?: unknown; machine?: { network?: { interfaces?: unknown } } } | null
    if (typeof doc?.kind === 'string' && doc.kind.endsWith('VIPConfig') && typeof doc.name === 'string') vips.push(doc.name)
    const interfaces = doc?.machine?.network?.interfaces
    if (!Array.isArray(interfaces)) continue
    for (const iface of interfaces as Array<{ vip?: { ip?: unknown }; vlans?: Array<{ vip?: { ip?: unknown } }> } | null>) {
      for (const holder of [iface, ...(Array.isArray(iface?.vlans) ? iface.vlans : [])])
        if (typeof holder?.vip?.ip === 'string') vips.push(holder.vip.ip)
    }
  }
  return vips
}

/** The node's addresses: its inventory addresses, the config's static ones and any the node reports. */
function addressesOf(node: ClusterNode, config: MachineConfig, reported: string[] = []): string[] {
  const all = [...reported, ...(node.addresses ?? [node.address]), ...networkIdentity(config).addresses.map((a) => a.value)]
  return [...new Set(all)].filter((a) => isIP(a))
}

/** machine.kubelet.nodeIP.validSubnets as written, when the config has some. */
function validSubnetsOf(config: MachineConfig): string[] | undefined {
  const doc = config.v1alpha1?.toJS() as { machine?: { kubelet?: { nodeIP?: { validSubnets?: unknown } } } } | undefined
  const list = doc?.machine?.kubelet?.nodeIP?.validSubnets
  return Array.isArray(list) && list.length > 0 ? list.map(String) : undefined
}

/** The subnets as the kubelet's node IP filter reads them: an address passes when some subnet holds it and no `!` subnet does. */
function subnetFilter(subnets: string[]): ((address: string) => boolean) | undefined {
  const include = new BlockList()
  const exclude = new BlockList()
  let includes = 0
  for (const raw of subnets) {
    const negated = raw.startsWith('!')
    const [address, prefix] = raw.replace(/^!/, '').split('/')
    const family = isIP(address ?? '')
    if (!address || !family) return undefined
    const bits = prefix === undefined ? (family === 6 ? 128 : 32) : Number(prefix)
    if (!Number.isInteger(bits)) return undefined
    ;(negated ? exclude : include).addSubnet(address, bits, family === 6 ? 'ipv6' : 'ipv4')
    if (!negated) includes++
  }
  // only exclusions: what Talos adds to them is not known here, so nothing is claimed
  if (includes === 0) return undefined
  return (address) => {
    const type = isIP(address) === 6 ? 'ipv6' : 'ipv4'
    return include.check(address, type) && !exclude.check(address, type)
  }
}

/** The node's network as it reports it in maintenance (its links' names, its addresses). */
export interface ReportedNetwork {
  links: string[]
  addresses: string[]
}

/** Links a config configures by name (virtual ones it creates itself are left out: bonds, bridges, dummies, wireguard). */
function namedLinks(config: MachineConfig): Array<{ name: string; key: string }> {
  const named: Array<{ name: string; key: string }> = []
  for (const [i, value] of config.values().entries()) {
    const doc = value as {
      version?: unknown
      kind?: unknown
      name?: unknown
      machine?: { network?: { interfaces?: unknown } }
    } | null
    if (doc?.kind === 'LinkConfig' && typeof doc.name === 'string')
      named.push({ name: doc.name, key: `LinkConfig ${doc.name} (document ${i + 1})` })
    const interfaces = doc?.machine?.network?.interfaces
    if (!Array.isArray(interfaces)) continue
    interfaces.forEach((iface: unknown, j) => {
      const entry = iface as {
        interface?: unknown
        bond?: unknown
        bridge?: unknown
        dummy?: unknown
        wireguard?: unknown
        ignore?: unknown
      }
      if (typeof entry?.interface !== 'string' || entry.ignore === true) return
      if (entry.bond || entry.bridge || entry.dummy || entry.wireguard) return
      named.push({ name: entry.interface, key: `machine.network.interfaces.${j}.interface` })
    })
  }
  return named
}

/** Whether the node's own network report is needed: the config names links, or selects node IPs among addresses DHCP may add. */
export function needsReportedNetwork(node: ClusterNode): boolean {
  const config = MachineConfig.of(node.configFile)
  if (namedLinks(config).length > 0) return true
  return validSubnetsOf(config) !== undefined && networkIdentity(config).dhcp
}

/**
 * What the config asks of the node's network that the node in maintenance contradicts: a link it
 * does not have (its settings, static addresses included, never apply: the machine leaves the address
 * it is reached at), or node IP subnets that select none of its addresses. Undefined when none.
 */
export function networkContradiction(node: ClusterNode, reported: ReportedNetwork): string | undefined {
  const config = MachineConfig.of(node.configFile)
  const have = new Set(reported.links)
  const missing = namedLinks(config).filter((l) => !have.has(l.name))
  const shown = reported.links.filter((l) => l !== 'lo').join(', ') || 'none'
  if (missing.length > 0)
    return `${missing.map((l) => `${l.key} ${l.name}`).join(', ')} in ${node.configFile} ${missing.length === 1 ? 'is not a link' : 'are not links'} of the node (its links: ${shown}): what the config sets there (static addresses, routes, VIP) would never apply and the node would not be reached at ${node.address} after the apply`
  const list = validSubnetsOf(config)
  const filter = list ? subnetFilter(list) : undefined
  if (!filter || !list) return undefined
  const addresses = addressesOf(node, config, reported.addresses)
  if (addresses.length > 0 && !addresses.some(filter))
    return `machine.kubelet.nodeIP.validSubnets ${list.join(', ')} in ${node.configFile} selects none of the node's addresses (${addresses.join(', ')}): the kubelet would find no node IP`
  return undefined
}

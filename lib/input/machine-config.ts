// A node's machine config, read and parsed once per process: every check (the inventory's, the CNI's,
// the install target, discovery, the redactor) asks this object instead of parsing the file again.
import { statSync } from 'node:fs'
import { type Document, isMap, isScalar, isSeq, LineCounter, parseAllDocuments } from 'yaml'
import { readRegularFile } from '../core/files.ts'

export interface InstallTarget {
  disk?: string
  selector?: Record<string, unknown>
}

export class MachineConfig {
  private static readonly cache = new Map<string, MachineConfig>()

  /** The file as text; undefined when it cannot be read (`readError` says why). */
  readonly source: string | undefined
  readonly readError: NodeJS.ErrnoException | undefined
  /** Every YAML document of the file, with line positions. */
  readonly documents: Document[]
  readonly lines = new LineCounter()

  readonly path: string
  private constructor(path: string) {
    this.path = path
    let source: string | undefined
    let readError: NodeJS.ErrnoException | undefined
    try {
      source = readRegularFile(path)
    } catch (err) {
      readError = err as NodeJS.ErrnoException
    }
    this.source = source
    this.readError = readError
    const docs = source === undefined ? [] : parseAllDocuments(source, { lineCounter: this.lines })
    this.documents = Array.isArray(docs) ? docs : []
  }

  /** The config at `path`, parsed once (again only when the file changed). */
  static of(path: string): MachineConfig {
    let stamp = 'missing'
    try {
      const stat = statSync(path)
      stamp = `${stat.mtimeMs}:${stat.size}`
    } catch {
      // unreadable: the constructor records why
    }
    const key = `${path}\0${stamp}`
    let config = MachineConfig.cache.get(key)
    if (!config) {
      config = new MachineConfig(path)
      MachineConfig.cache.set(key, config)
    }
    return config
  }

  get syntaxOk(): boolean {
    return this.documents.every((d) => d.errors.length === 0)
  }

  /** The v1alpha1 document (`version: v1alpha1` without a kind), the first when there are several. */
  get v1alpha1(): Document | undefined {
    return this.documents.find((d) => isMap(d.contents) && d.get('version') === 'v1alpha1' && d.get('kind') === undefined)
  }

  /** The 1-based line of the key of the deepest part of `keys` the document has (`network:` when it has no `cni`). */
  lineOf(doc: Document, keys: ReadonlyArray<string | number>): number | undefined {
    for (let depth = keys.length; depth > 0; depth--) {
      const parent = depth === 1 ? doc.contents : doc.getIn(keys.slice(0, depth - 1), true)
      if (!isMap(parent)) continue
      const pair = parent.items.find((p) => isScalar(p.key) && p.key.value === keys[depth - 1])
      const range = (pair?.key as { range?: [number, number, number] } | undefined)?.range
      if (range) return this.lines.linePos(range[0]).line
    }
    return undefined
  }

  /** Each document as plain values (a document that cannot be converted is left out). */
  values(): unknown[] {
    return this.documents.flatMap((d) => {
      try {
        return [d.toJS() as unknown]
      } catch {
        return []
      }
    })
  }

  /** machine.install.image: the installer an ISO node pulls to install itself, when the config names one. */
  installImage(): string | undefined {
    for (const value of this.values()) {
      const image = (value as { machine?: { install?: { image?: unknown } } } | null)?.machine?.install?.image
      if (typeof image === 'string' && image) return image
    }
    return undefined
  }

  /** The install disk or selector the config asks for, when it asks for one. */
  installTarget(): InstallTarget | undefined {
    for (const value of this.values()) {
      const install = (value as { machine?: { install?: { disk?: unknown; diskSelector?: unknown } } } | null)?.machine?.install
      if (!install) continue
      const target: InstallTarget = {}
      if (typeof install.disk === 'string' && install.disk) target.disk = install.disk
      if (install.diskSelector && typeof install.diskSelector === 'object')
        target.selector = install.diskSelector as Record<string, unknown>
      if (target.disk || target.selector) return target
    }
    return undefined
  }

  /** The Talos version of the installer image the config asks for (`machine.install.image`'s tag, `v1.13.7`), when it has one. */
  installerVersion(): string | undefined {
    for (const value of this.values()) {
      const image = (value as { machine?: { install?: { image?: unknown } } } | null)?.machine?.install?.image
      if (typeof image !== 'string') continue
      const tag = /:(v\d+\.\d+\.\d+[^@]*)(?:@|$)/.exec(image)?.[1]
      if (tag) return tag
    }
    return undefined
  }

  /**
   * cluster.discovery.enabled with the service registry on (Talos's default when absent: off,
   * pkg/machinery/config/types/v1alpha1/v1alpha1_discoveryconfig.go). The kubernetes registry
   * needs the API, so it finds nobody before the bootstrap.
   */
  get discovery(): boolean {
    for (const value of this.values()) {
      const discovery = (
        value as { cluster?: { discovery?: { enabled?: unknown; registries?: { service?: { disabled?: unknown } } } } } | null
      )?.cluster?.discovery
      if (discovery) return discovery.enabled === true && discovery.registries?.service?.disabled !== true
    }
    return false
  }
}

/** A value the config sets, with where: the dotted key (as the operator reads it) and its line. */
export interface ConfigSetting<T> {
  value: T
  key: string
  line: number | undefined
}

/** `192.0.2.5/24` -> `192.0.2.5`; a value that is not a string is left out. */
function addressPart(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.trim() === '') return undefined
  return value.trim().replace(/\/\d+$/, '')
}

type Path = Array<string | number>

export interface NetworkIdentity {
  /** the hostname Talos takes: machine.network.hostname, else a HostnameConfig document's */
  hostname: ConfigSetting<unknown> | undefined
  /** every static address (interfaces, VLANs, cidr, and the network documents of Talos 1.12+) */
  addresses: Array<ConfigSetting<string>>
  /** some link asks for DHCP (the node may also be reached at an address the config does not name) */
  dhcp: boolean
}

/**
 * What a node takes from its config as its identity on the network: the hostname (the Kubernetes
 * Node name comes from it) and the static addresses. Talos: v1alpha1_network.go (interfaces,
 * vlans, cidr), network/hostname.go (HostnameConfig), network/link*.go (LinkConfig and friends:
 * `addresses: [{address: …}]`), network/dhcp*.go (DHCPv4Config, DHCPv6Config).
 */
export function networkIdentity(config: MachineConfig): NetworkIdentity {
  const identity: NetworkIdentity = { hostname: undefined, addresses: [], dhcp: false }
  // a list item's own line (lineOf finds keys of mappings only)
  const lineAt = (doc: Document, keys: Path): number | undefined => {
    const range = (doc.getIn(keys, true) as { range?: [number, number, number] } | undefined)?.range
    return range ? config.lines.linePos(range[0]).line : config.lineOf(doc, keys)
  }
  const at = (doc: Document, keys: Path, value: string, label: Path): ConfigSetting<string> => ({
    value,
    key: label.join('.'),
    line: typeof keys[keys.length - 1] === 'number' ? lineAt(doc, keys) : config.lineOf(doc, keys),
  })
  let docHostname: ConfigSetting<unknown> | undefined
  for (const doc of config.documents) {
    if (!isMap(doc.contents)) continue
    const kind = doc.get('kind')
    if (doc.get('version') === 'v1alpha1' && kind === undefined) {
      const hostname = doc.getIn(['machine', 'network', 'hostname'])
      if (hostname !== undefined && hostname !== null && hostname !== '' && !identity.hostname)
        identity.hostname = {
          value: hostname,
          key: 'machine.network.hostname',
          line: config.lineOf(doc, ['machine', 'network', 'hostname']),
        }
      const interfaces = doc.getIn(['machine', 'network', 'interfaces'])
      const links: Array<{ base: Path; label: Path }> = []
      if (isSeq(interfaces))
        interfaces.items.forEach((iface, i) => {
          const base: Path = ['machine', 'network', 'interfaces', i]
          links.push({ base, label: base })
          const vlans = isMap(iface) ? iface.get('vlans') : undefined
          if (isSeq(vlans)) vlans.items.forEach((_, v) => links.push({ base: [...base, 'vlans', v], label: [...base, 'vlans', v] }))
        })
      for (const { base, label } of links) {
        if (doc.getIn([...base, 'dhcp']) === true) identity.dhcp = true
        const cidr = addressPart(doc.getIn([...base, 'cidr']))
        if (cidr) identity.addresses.push(at(doc, [...base, 'cidr'], cidr, [...label, 'cidr']))
        const addresses = doc.getIn([...base, 'addresses'])
        if (isSeq(addresses))
          addresses.items.forEach((item, j) => {
            const address = addressPart(isScalar(item) ? item.value : undefined)
            if (address) identity.addresses.push(at(doc, [...base, 'addresses', j], address, [...label, 'addresses', j]))
          })
      }
      continue
    }
    if (typeof kind !== 'string') continue
    if (kind === 'HostnameConfig') {
      const hostname = doc.get('hostname')
      if (hostname !== undefined && hostname !== null && hostname !== '' && !docHostname)
        docHostname = { value: hostname, key: `${kind}.hostname`, line: config.lineOf(doc, ['hostname']) }
    }
    if (/^DHCPv[46]Config$/.test(kind)) identity.dhcp = true
    const addresses = doc.get('addresses')
    if (isSeq(addresses))
      addresses.items.forEach((item, j) => {
        const address = addressPart(isMap(item) ? item.get('address') : undefined)
        const name = doc.get('name')
        const label = [`${kind}${typeof name === 'string' ? ` ${name}` : ''}`, 'addresses', j, 'address']
        if (address) identity.addresses.push(at(doc, ['addresses', j, 'address'], address, label))
      })
  }
  identity.hostname ??= docHostname
  return identity
}

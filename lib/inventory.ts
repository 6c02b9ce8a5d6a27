import { existsSync, readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { join, resolve } from 'node:path'
import { parseAllDocuments } from 'yaml'
import { InputError, InputErrors } from './errors.js'
import { YamlFile } from './yaml-file.js'

export type Role = 'controlplane' | 'worker'

export interface ClusterNode {
  name: string
  ip: string
  role: Role
  /** absolute path of the node's machine config */
  configFile: string
  installDisk?: string
  installDiskSelector?: Record<string, unknown>
  /**
   * the config enables cluster discovery with the service registry: the node finds the control
   * planes without the endpoint (a worker's apid then gets its certificate before the bootstrap)
   */
  discovery?: boolean
}

export interface Inventory {
  clusterDir: string
  /** the file the nodes came from (talconfig.yaml or nodes.yaml) */
  source: string
  clusterName: string
  endpoint: string
  /** the Talos version the configs were generated for (talconfig talosVersion), when known */
  talosVersion?: string
  /** host of the endpoint when it is not a node address (a VIP or a DNS name) */
  vip?: string
  talosconfig: string
  nodes: ClusterNode[]
}

const DEMO_FIX = 'point CLUSTER_DIR at your cluster, or try `task demo`'
const NAME_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/

/** Reads CLUSTER_DIR: talhelper's talconfig.yaml + clusterconfig/, or nodes.yaml for `talosctl gen config` clusters. */
export function loadInventory(clusterDir: string): Inventory {
  const dir = resolve(clusterDir)
  if (!existsSync(dir)) {
    throw new InputError('cluster directory not found', { file: dir, fix: DEMO_FIX })
  }
  const talconfig = join(dir, 'talconfig.yaml')
  const nodesFile = join(dir, 'nodes.yaml')
  if (existsSync(talconfig)) return fromTalconfig(dir, YamlFile.read(talconfig, DEMO_FIX))
  if (existsSync(nodesFile)) return fromNodesFile(dir, YamlFile.read(nodesFile, DEMO_FIX))
  throw new InputError('no talconfig.yaml or nodes.yaml in the cluster directory', {
    file: dir,
    fix: `add talconfig.yaml (talhelper) or nodes.yaml (docs/inventory.md); ${DEMO_FIX}`,
  })
}

interface RawNode {
  name: unknown
  ip: unknown
  controlPlane: boolean | undefined
  role: unknown
  configFile: string | undefined
  installDisk: unknown
  installDiskSelector: unknown
  path: Array<string | number>
}

function fromTalconfig(dir: string, file: YamlFile): Inventory {
  const doc = record(file.toJS(), file, [])
  const clusterName = text(doc.clusterName, file, ['clusterName'], 'set clusterName: <name> as talhelper does')
  const endpoint = text(doc.endpoint, file, ['endpoint'], 'set endpoint: https://<vip or control plane address>:6443')
  const nodes = list(doc.nodes, file, ['nodes'])
  const raw: RawNode[] = nodes.map((item, i) => {
    const n = record(item, file, ['nodes', i])
    const hostname = n.hostname
    return {
      name: hostname,
      ip: n.ipAddress,
      controlPlane: typeof n.controlPlane === 'boolean' ? n.controlPlane : undefined,
      role: n.controlPlane,
      configFile: typeof hostname === 'string' ? join(dir, 'clusterconfig', `${clusterName}-${hostname}.yaml`) : undefined,
      installDisk: n.installDisk,
      installDiskSelector: n.installDiskSelector,
      path: ['nodes', i],
    }
  })
  const inventory = build(dir, file, clusterName, endpoint, raw, join(dir, 'clusterconfig', 'talosconfig'), 'talhelper')
  if (typeof doc.talosVersion === 'string') inventory.talosVersion = doc.talosVersion
  return inventory
}

function fromNodesFile(dir: string, file: YamlFile): Inventory {
  const doc = record(file.toJS(), file, [])
  const endpoint = text(doc.endpoint, file, ['endpoint'], 'set endpoint: https://<vip or control plane address>:6443')
  const clusterName = doc.clusterName === undefined ? 'talos' : text(doc.clusterName, file, ['clusterName'], 'set clusterName: <name>')
  const talosconfig = doc.talosconfig === undefined ? 'talosconfig' : text(doc.talosconfig, file, ['talosconfig'], 'name the talosconfig file')
  const raw: RawNode[] = list(doc.nodes, file, ['nodes']).map((item, i) => {
    const n = record(item, file, ['nodes', i])
    return {
      name: n.name,
      ip: n.ip,
      controlPlane: n.role === 'controlplane' ? true : n.role === 'worker' ? false : undefined,
      role: n.role,
      configFile: typeof n.config === 'string' ? resolve(dir, n.config) : undefined,
      installDisk: n.installDisk,
      installDiskSelector: n.installDiskSelector,
      path: ['nodes', i],
    }
  })
  return build(dir, file, clusterName, endpoint, raw, resolve(dir, talosconfig), 'nodes')
}

function build(
  dir: string,
  file: YamlFile,
  clusterName: string,
  endpoint: string,
  raw: RawNode[],
  talosconfig: string,
  schema: 'talhelper' | 'nodes',
): Inventory {
  const errors: InputError[] = []
  const nodes: ClusterNode[] = []
  const seenNames = new Map<string, number>()
  const seenIps = new Map<string, number>()
  if (raw.length === 0) {
    errors.push(file.error(['nodes'], 'the inventory lists no nodes', 'list your nodes under nodes:'))
  }
  raw.forEach((n, i) => {
    const nameKey = schema === 'talhelper' ? 'hostname' : 'name'
    const ipKey = schema === 'talhelper' ? 'ipAddress' : 'ip'
    if (typeof n.name !== 'string' || !NAME_PATTERN.test(n.name)) {
      errors.push(file.error([...n.path, nameKey], `nodes[${i}].${nameKey} ${JSON.stringify(n.name ?? null)} is not a valid node name`, 'use lower-case letters, digits and dashes (an RFC 1123 label)'))
      return
    }
    if (typeof n.ip !== 'string' || isIP(n.ip) === 0) {
      errors.push(file.error([...n.path, ipKey], `nodes[${i}].${ipKey} ${JSON.stringify(n.ip ?? null)} of ${n.name} is not an IP address`, `write the node's IP address; ${DEMO_FIX}`))
      return
    }
    if (n.controlPlane === undefined) {
      const fix = schema === 'talhelper' ? 'set controlPlane: true or false' : 'set role: controlplane or worker'
      errors.push(file.error([...n.path, schema === 'talhelper' ? 'controlPlane' : 'role'], `${n.name}: role missing or invalid (${JSON.stringify(n.role ?? null)})`, fix))
      return
    }
    const dupName = seenNames.get(n.name)
    if (dupName !== undefined) {
      errors.push(file.error([...n.path, nameKey], `duplicate node name "${n.name}" (also nodes[${dupName}])`, 'give every node its own name'))
      return
    }
    const dupIp = seenIps.get(n.ip)
    if (dupIp !== undefined) {
      errors.push(file.error([...n.path, ipKey], `duplicate address ${n.ip} of ${n.name} (also nodes[${dupIp}])`, 'give every node its own address'))
      return
    }
    seenNames.set(n.name, i)
    seenIps.set(n.ip, i)
    if (!n.configFile) {
      errors.push(file.error(n.path, `${n.name}: no machine config file named`, 'set config: <file> for the node'))
      return
    }
    if (!existsSync(n.configFile)) {
      const fix = schema === 'talhelper' ? 'run `talhelper genconfig` to generate clusterconfig/' : 'generate it with `talosctl gen config` or fix the path'
      errors.push(file.error(n.path, `${n.name}: machine config ${n.configFile} not found`, fix))
      return
    }
    // a config that is not YAML would otherwise reach the node (apply does not run `talosctl validate`)
    const syntax = machineConfigSyntax(n.configFile)
    if (syntax) {
      errors.push(syntax)
      return
    }
    const node: ClusterNode = { name: n.name, ip: n.ip, role: n.controlPlane ? 'controlplane' : 'worker', configFile: n.configFile }
    if (discoveryEnabled(n.configFile)) node.discovery = true
    if (typeof n.installDisk === 'string') node.installDisk = n.installDisk
    if (n.installDiskSelector && typeof n.installDiskSelector === 'object') node.installDiskSelector = n.installDiskSelector as Record<string, unknown>
    nodes.push(node)
  })
  if (raw.length > 0 && errors.length === 0 && !nodes.some((n) => n.role === 'controlplane')) {
    errors.push(file.error(['nodes'], 'no control plane node in the inventory', 'mark at least one node as a control plane'))
  }

  let host: string | undefined
  try {
    const url = new URL(endpoint)
    if (url.protocol !== 'https:' || !url.hostname) throw new Error('not https')
    host = url.hostname.replace(/^\[|\]$/g, '')
  } catch {
    errors.push(file.error(['endpoint'], `endpoint ${JSON.stringify(endpoint)} is not an https URL`, `write it as https://<address>:6443; ${DEMO_FIX}`))
  }
  if (errors.length === 0) checkTalosconfig(talosconfig, errors)
  if (errors.length === 1) throw errors[0]
  if (errors.length > 1) throw new InputErrors(errors)

  const inventory: Inventory = { clusterDir: dir, source: file.path, clusterName, endpoint, talosconfig, nodes }
  if (host && !nodes.some((n) => n.ip === host)) inventory.vip = host
  return inventory
}

function machineConfigSyntax(path: string): InputError | undefined {
  const fix = 'correct the YAML syntax at that line (or in its talhelper patch) and regenerate the config'
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    return new InputError(`cannot read the machine config (${(err as NodeJS.ErrnoException).code ?? 'error'})`, { file: path, fix: 'make it a readable file (talhelper genconfig writes it)' })
  }
  const error = YamlFile.checkSyntax(path, text)
  return error && new InputError(error.message, { file: path, ...(error.line ? { line: error.line } : {}), fix })
}

/**
 * cluster.discovery.enabled with the service registry on (Talos's default when absent: off,
 * v1alpha1_discoveryconfig.go). The kubernetes registry needs the API, so it finds nobody before the bootstrap.
 */
function discoveryEnabled(path: string): boolean {
  let docs: unknown[]
  try {
    docs = parseAllDocuments(readFileSync(path, 'utf8')).map((d) => d.toJS() as unknown)
  } catch {
    return false // unreadable: the syntax check reports it
  }
  for (const doc of docs) {
    const config = doc as { cluster?: { discovery?: { enabled?: unknown; registries?: { service?: { disabled?: unknown } } } } } | null
    const discovery = config?.cluster?.discovery
    if (discovery) return discovery.enabled === true && discovery.registries?.service?.disabled !== true
  }
  return false
}

/** A talosconfig must parse and hold a context with credentials, or every authenticated call fails later. */
function checkTalosconfig(path: string, errors: InputError[]): void {
  const fix = 'point at the talosconfig generated with the machine configs (clusterconfig/talosconfig)'
  if (!existsSync(path)) {
    errors.push(new InputError('talosconfig not found', { file: path, fix }))
    return
  }
  let file: YamlFile
  try {
    file = YamlFile.read(path, `make it a readable file: ${fix}`)
  } catch (err) {
    if (!(err instanceof InputError)) throw err
    errors.push(new InputError(`talosconfig: ${err.message}`, { ...(err.file ? { file: err.file } : {}), ...(err.line ? { line: err.line } : {}), fix: err.fix }))
    return
  }
  const config = file.toJS() as { context?: unknown; contexts?: Record<string, { ca?: unknown; crt?: unknown; key?: unknown }> } | null
  const name = typeof config?.context === 'string' ? config.context : undefined
  const contexts = config?.contexts && typeof config.contexts === 'object' ? config.contexts : {}
  const context = name ? contexts[name] : undefined
  if (!context) {
    const known = Object.keys(contexts)
    errors.push(file.error(['context'], `talosconfig has no context ${name ? `"${name}"` : '(context: is empty)'}`, known.length ? `set context: to one of ${known.join(', ')}` : fix))
    return
  }
  for (const key of ['ca', 'crt', 'key'] as const) {
    const value = context[key]
    if (typeof value !== 'string' || !/^[A-Za-z0-9+/=\s]+$/.test(value) || !Buffer.from(value, 'base64').toString('utf8').includes('-----BEGIN')) {
      errors.push(file.error(['contexts', name ?? '', key], `talosconfig context "${name}" has no valid ${key} (base64 PEM expected)`, fix))
      return
    }
  }
}

function record(value: unknown, file: YamlFile, path: Array<string | number>): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    const where = path.length ? path.join('.') : 'the file'
    throw file.error(path, `${where} must be a mapping`, 'write key: value pairs')
  }
  return value as Record<string, unknown>
}

function list(value: unknown, file: YamlFile, path: Array<string | number>): unknown[] {
  if (value === undefined || value === null) return []
  if (!Array.isArray(value)) throw file.error(path, `${path.join('.')} must be a list`, 'write one "- " item per node')
  return value
}

function text(value: unknown, file: YamlFile, path: Array<string | number>, fix: string): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw file.error(path, `${path.join('.')} is missing or not a string`, fix)
  }
  return value
}

/** NODES=cp-1,127.0.0.5 -> the nodes, in inventory order. Unknown entries are bad input. */
export function selectNodes(inventory: Inventory, selection: string | undefined): ClusterNode[] {
  if (!selection || selection.trim() === '') return inventory.nodes
  const wanted = selection.split(',').map((s) => s.trim())
  // `cp-1,,wrkr-1` is a typo, not "every node" nor "skip it": say so before touching anything
  if (wanted.includes('')) {
    throw new InputError(`NODES ${JSON.stringify(selection)} has an empty entry`, {
      file: inventory.source,
      fix: `write comma-separated names or addresses with nothing empty between the commas, e.g. NODES=${inventory.nodes.slice(0, 2).map((n) => n.name).join(',')}`,
    })
  }
  const unknown = wanted.filter((w) => !inventory.nodes.some((n) => n.name === w || n.ip === w))
  if (unknown.length > 0) {
    throw new InputError(`NODES names ${unknown.map((u) => JSON.stringify(u)).join(', ')}, not in the inventory`, {
      file: inventory.source,
      fix: `use names or addresses from the inventory: ${inventory.nodes.map((n) => n.name).join(', ')}`,
    })
  }
  return inventory.nodes.filter((n) => wanted.includes(n.name) || wanted.includes(n.ip))
}

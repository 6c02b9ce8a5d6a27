import { existsSync } from 'node:fs'
import { isIP } from 'node:net'
import { basename, join, resolve } from 'node:path'
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Document } from 'yaml'
import { InputError, InputErrors } from '../core/errors.ts'
import type { ClusterNode, Inventory, Role } from '../core/model.ts'
import {
  DEFAULT_FILENAME_TMPL,
  isDomain,
  isHostname,
  renderFilename,
  splitAddresses,
  substituteEnv,
  talhelperEnv,
  talosVersionOf,
} from './talhelper.ts'
import { outsideClusterDir } from './inside.ts'
import { type ConfigSetting, MachineConfig, networkIdentity } from './machine-config.ts'
import { documentToJS, YamlFile } from './yaml-file.ts'
import { talosconfigCaProblem } from './talosconfig-ca.ts'
import { readTopfLayout, topfConfigFile, TOPF_FILE, TOPF_RENDER, type TopfLayout } from './topf.ts'
import { readErrorCode, readRegularFile } from '../core/files.ts'

export interface InventoryOptions {
  /** talhelper's config file (genconfig -c), relative to the cluster directory; default talconfig.yaml */
  talconfig?: string
  /** talhelper's output folder (genconfig -o), relative to the cluster directory; default clusterconfig */
  talhelperOutDir?: string
  /** the environment `${VAR}` placeholders are taken from (with talenv.yaml over it) */
  env?: NodeJS.ProcessEnv
  /** the inventory's own checks only, before the configs are generated: no config or talosconfig is read */
  withoutConfigs?: boolean
}

/** The inventory's format: its key names and the generator that writes its configs differ. */
type Schema = 'talhelper' | 'topf' | 'nodes'

const DEMO_FIX = 'point CLUSTER_DIR at your cluster, or try `task demo`'

/** Reads CLUSTER_DIR: talhelper's talconfig.yaml + clusterconfig/, or nodes.yaml for `talosctl gen config` clusters (docs/inventory.md). */
export function loadInventory(clusterDir: string, options: InventoryOptions = {}): Inventory {
  const dir = resolve(clusterDir)
  if (!existsSync(dir)) {
    throw new InputError('cluster directory not found', { file: dir, fix: DEMO_FIX })
  }
  const talconfig = resolve(dir, options.talconfig ?? 'talconfig.yaml')
  const nodesFile = join(dir, 'nodes.yaml')
  if (existsSync(talconfig)) {
    const outside = outsideClusterDir(dir, talconfig, 'the talconfig file', 'keep talconfig.yaml in the cluster directory')
    if (outside) throw outside
    return fromTalconfig(dir, talconfig, options)
  }
  if (options.talconfig !== undefined) {
    throw new InputError('the talconfig file set in the settings does not exist', {
      file: talconfig,
      fix: 'correct talconfig (bootstrap.yaml, BOOTSTRAP_TALCONFIG or --talconfig): the file talhelper genconfig -c reads',
    })
  }
  const topfFile = join(dir, TOPF_FILE)
  if (existsSync(topfFile)) return fromTopf(dir, readTopfLayout(dir, topfFile, options.env ?? process.env), options.withoutConfigs)
  if (existsSync(nodesFile)) return fromNodesFile(dir, YamlFile.read(nodesFile, DEMO_FIX))
  throw new InputError('no talconfig.yaml, topf.yaml or nodes.yaml in the cluster directory', {
    file: dir,
    fix: `add talconfig.yaml (talhelper), topf.yaml (topf) or nodes.yaml (docs/inventory.md); ${DEMO_FIX}`,
  })
}

/** Which generator's layout CLUSTER_DIR holds, in the order loadInventory tries them. */
export function inventoryLayout(clusterDir: string, options: Pick<InventoryOptions, 'talconfig'> = {}): 'talhelper' | 'topf' | 'nodes' {
  const dir = resolve(clusterDir)
  if (existsSync(resolve(dir, options.talconfig ?? 'talconfig.yaml')) || options.talconfig !== undefined) return 'talhelper'
  return existsSync(join(dir, TOPF_FILE)) ? 'topf' : 'nodes'
}

export interface RawNode {
  name: unknown
  address: unknown
  controlPlane: boolean | undefined
  role: unknown
  /** the config file name, or why there is none */
  configFile: string | { error: string } | undefined
  installDisk: unknown
  installDiskSelector: unknown
  path: Array<string | number>
}

/** talconfig.yaml after talhelper's `${VAR}` substitution, parsed; errors name the variable and its line. */
function readTalconfig(dir: string, path: string, env: NodeJS.ProcessEnv): { file: YamlFile; strings: unknown } {
  let source: string
  try {
    source = readRegularFile(path)
  } catch (err) {
    throw new InputError(`cannot read file (${readErrorCode(err)})`, { file: path, fix: DEMO_FIX })
  }
  const talenv = talhelperEnv(dir, env)
  const { text, errors } = substituteEnv(source, talenv.vars)
  if (errors.length > 0) {
    const ignored = talenv.ignored.length ? `; talhelper ignores ${talenv.ignored.join(', ')}` : ''
    const fix = `export it or set it in talenv.yaml beside talconfig.yaml (KEY: value), as for talhelper genconfig; write $$ for a literal $${ignored}`
    const list = errors.map((e) => new InputError(e.message, { file: path, line: e.line, fix }))
    throw list.length === 1 ? list[0] : new InputErrors(list)
  }
  const file = YamlFile.parse(path, text)
  // the same text with every scalar a string: talhelper's string fields keep `1.10` as written
  const lines = new LineCounter()
  return { file, strings: documentToJS(parseDocument(text, { schema: 'failsafe', lineCounter: lines }), path, lines) }
}

/** talconfig.yaml read as talhelper reads it: the nodes and the files genconfig writes for them. */
export interface TalhelperLayout {
  file: YamlFile
  clusterName: string
  endpoint: string
  talosVersion?: string
  raw: RawNode[]
  outDir: string
  /** every string of the file after substitution: `@<file>` references (patches) among them */
  strings: unknown
}

function fromTalconfig(dir: string, path: string, options: InventoryOptions): Inventory {
  const layout = readTalhelperLayout(dir, path, options)
  const inventory = build(
    dir,
    layout.file,
    layout.clusterName,
    layout.endpoint,
    layout.raw,
    join(layout.outDir, 'talosconfig'),
    'talhelper',
    options.withoutConfigs,
  )
  if (layout.talosVersion) inventory.talosVersion = layout.talosVersion
  return inventory
}

export function readTalhelperLayout(dir: string, path: string, options: InventoryOptions): TalhelperLayout {
  const { file, strings } = readTalconfig(dir, path, options.env ?? process.env)
  const doc = record(file.toJS(), file, [])
  const asText = record(strings, file, [])
  const stringAt = (value: unknown, raw: unknown): unknown => (typeof value === 'number' && typeof raw === 'string' ? raw : value)
  const clusterName = text(
    stringAt(doc.clusterName, asText.clusterName),
    file,
    ['clusterName'],
    'set clusterName: <name> as talhelper does',
  )
  const endpoint = text(doc.endpoint, file, ['endpoint'], 'set endpoint: https://<vip or control plane address>:6443')
  const outDir = resolve(dir, options.talhelperOutDir ?? 'clusterconfig')
  const groups = { controlplane: groupTemplate(doc.controlPlane, file, 'controlPlane'), worker: groupTemplate(doc.worker, file, 'worker') }
  const rawNodes = list(asText.nodes, file, ['nodes'])
  const raw: RawNode[] = list(doc.nodes, file, ['nodes']).map((item, i) => {
    const n = record(item, file, ['nodes', i])
    const t = (rawNodes[i] ?? {}) as Record<string, unknown>
    const hostname = stringAt(n.hostname, t.hostname)
    const address = stringAt(n.ipAddress, t.ipAddress)
    // talhelper: controlPlane is a plain bool, false when left out (a worker)
    const controlPlane =
      n.controlPlane === undefined || n.controlPlane === null ? false : typeof n.controlPlane === 'boolean' ? n.controlPlane : undefined
    let configFile: RawNode['configFile']
    if (typeof hostname === 'string' && controlPlane !== undefined) {
      const role = controlPlane ? 'controlplane' : 'worker'
      const tmpl = typeof n.filenameTmpl === 'string' && n.filenameTmpl !== '' ? n.filenameTmpl : (groups[role] ?? DEFAULT_FILENAME_TMPL)
      const rendered = renderFilename(tmpl, {
        ClusterName: clusterName,
        Hostname: hostname,
        IPAddress: typeof address === 'string' ? address : '',
        Role: role,
      })
      configFile = 'name' in rendered ? resolve(outDir, rendered.name) : { error: rendered.error }
    }
    return {
      name: hostname,
      address,
      controlPlane,
      role: n.controlPlane,
      configFile,
      installDisk: stringAt(n.installDisk, t.installDisk),
      installDiskSelector: n.installDiskSelector,
      path: ['nodes', i],
    }
  })
  const version = stringAt(doc.talosVersion, asText.talosVersion)
  return {
    file,
    clusterName,
    endpoint,
    ...(typeof version === 'string' && version !== '' ? { talosVersion: talosVersionOf(version) } : {}),
    raw,
    outDir,
    strings,
  }
}

function fromTopf(dir: string, layout: TopfLayout, withoutConfigs?: boolean): Inventory {
  const raw: RawNode[] = layout.nodes.map((n) => ({
    name: n.host,
    // without ip, topf connects to host (Node.Endpoint)
    address: n.ip ?? n.host,
    controlPlane: n.role === undefined ? undefined : n.role === 'controlplane',
    role: n.written,
    configFile: typeof n.host === 'string' ? topfConfigFile(layout, n.host) : undefined,
    installDisk: undefined,
    installDiskSelector: undefined,
    path: n.path,
  }))
  const inventory = build(
    dir,
    layout.file,
    layout.clusterName,
    layout.endpoint,
    raw,
    join(layout.outDir, 'talosconfig'),
    'topf',
    withoutConfigs,
  )
  if (layout.talosVersion) inventory.talosVersion = layout.talosVersion
  return inventory
}

/** A node group's (`controlPlane:` / `worker:` at the top) filenameTmpl, which nodes inherit. */
function groupTemplate(group: unknown, file: YamlFile, key: string): string | undefined {
  if (group === undefined || group === null) return undefined
  const g = record(group, file, [key])
  if (g.filenameTmpl === undefined || g.filenameTmpl === null || g.filenameTmpl === '') return undefined
  return text(g.filenameTmpl, file, [key, 'filenameTmpl'], 'write a Go template such as "{{ .ClusterName }}-{{ .Hostname }}.yaml"')
}

function fromNodesFile(dir: string, file: YamlFile): Inventory {
  const doc = record(file.toJS(), file, [])
  const endpoint = text(doc.endpoint, file, ['endpoint'], 'set endpoint: https://<vip or control plane address>:6443')
  const clusterName = doc.clusterName === undefined ? 'talos' : text(doc.clusterName, file, ['clusterName'], 'set clusterName: <name>')
  const talosconfig =
    doc.talosconfig === undefined ? 'talosconfig' : text(doc.talosconfig, file, ['talosconfig'], 'name the talosconfig file')
  const raw: RawNode[] = list(doc.nodes, file, ['nodes']).map((item, i) => {
    const n = record(item, file, ['nodes', i])
    return {
      name: n.name,
      address: n.ip,
      controlPlane: n.role === 'controlplane' ? true : n.role === 'worker' ? false : undefined,
      role: n.role,
      configFile: typeof n.config === 'string' ? resolve(dir, n.config) : undefined,
      installDisk: n.installDisk,
      installDiskSelector: n.installDiskSelector,
      path: ['nodes', i],
    }
  })
  const inventory = build(dir, file, clusterName, endpoint, raw, resolve(dir, talosconfig), 'nodes')
  // nodes.yaml names no Talos version: the installer image the configs ask for does
  const version = inventory.nodes.map((n) => MachineConfig.of(n.configFile).installerVersion()).find((v) => v !== undefined)
  if (version) inventory.talosVersion = version
  return inventory
}

/**
 * One spelling per address, so that one machine cannot hide under two: IPv6 compressed and lower
 * case, an IPv4-mapped IPv6 address as its IPv4 address, a DNS name lower case without a final dot.
 */
export function canonicalAddress(address: string): string {
  const bare = address.trim().replace(/^\[|\]$/g, '')
  if (isIP(bare) === 6) {
    const host = new URL(`http://[${bare}]/`).hostname.slice(1, -1)
    const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host)
    if (mapped) {
      const hi = parseInt(mapped[1] as string, 16)
      const lo = parseInt(mapped[2] as string, 16)
      return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
    }
    return host
  }
  return bare.toLowerCase().replace(/\.$/, '')
}

function addressesOfNode(node: ClusterNode): string[] {
  return node.addresses ?? [node.address]
}

function addressesOf(value: unknown): { addresses: string[] } | { bad: string } {
  if (typeof value !== 'string' || value.trim() === '') return { bad: JSON.stringify(value ?? null) }
  const addresses = splitAddresses(value)
  const bad = addresses.find((a) => isIP(a) === 0 && (!isDomain(a) || /^[\d.]+$/.test(a)))
  return bad === undefined ? { addresses } : { bad: JSON.stringify(bad) }
}

function build(
  dir: string,
  file: YamlFile,
  clusterName: string,
  endpoint: string,
  raw: RawNode[],
  talosconfig: string,
  schema: Schema,
  withoutConfigs = false,
): Inventory {
  const errors: InputError[] = []
  const nodes: ClusterNode[] = []
  const identities: Array<{ node: ClusterNode; addresses: Array<ConfigSetting<string>>; dhcp: boolean }> = []
  const seenNames = new Map<string, number>()
  const seenAddresses = new Map<string, { index: number; written: string }>()
  if (raw.length === 0) {
    errors.push(file.error(['nodes'], 'the inventory lists no nodes', 'list your nodes under nodes:'))
  }
  const nameKey = schema === 'talhelper' ? 'hostname' : schema === 'topf' ? 'host' : 'name'
  const ipKey = schema === 'talhelper' ? 'ipAddress' : 'ip'
  raw.forEach((n, i) => {
    if (typeof n.name !== 'string' || !isHostname(n.name)) {
      errors.push(
        file.error(
          [...n.path, nameKey],
          `nodes[${i}].${nameKey} ${JSON.stringify(n.name ?? null)} is not a valid node name`,
          'use a hostname: letters, digits and dashes, in dot-separated labels (an FQDN is fine)',
        ),
      )
      return
    }
    const parsed = addressesOf(n.address)
    if ('bad' in parsed) {
      errors.push(
        file.error(
          [...n.path, ipKey],
          `nodes[${i}].${ipKey} ${parsed.bad} of ${n.name} is not an IP address`,
          `write the node's IP address (or DNS name; several separated by commas); ${DEMO_FIX}`,
        ),
      )
      return
    }
    if (n.controlPlane === undefined) {
      const fix =
        schema === 'talhelper'
          ? 'set controlPlane: true or false (left out, it is false)'
          : schema === 'topf'
            ? 'set role: control-plane or worker'
            : 'set role: controlplane or worker'
      errors.push(
        file.error(
          [...n.path, schema === 'talhelper' ? 'controlPlane' : 'role'],
          `${n.name}: role missing or invalid (${JSON.stringify(n.role ?? null)})`,
          fix,
        ),
      )
      return
    }
    const nameId = n.name.toLowerCase()
    const dupName = seenNames.get(nameId)
    if (dupName !== undefined) {
      errors.push(
        file.error([...n.path, nameKey], `duplicate node name "${n.name}" (also nodes[${dupName}])`, 'give every node its own name'),
      )
      return
    }
    const dup = parsed.addresses.map((a) => ({ a, seen: seenAddresses.get(canonicalAddress(a)) })).find((d) => d.seen !== undefined)
    if (dup?.seen) {
      const same = dup.seen.written === dup.a ? '' : ` (written ${dup.seen.written} there: the same address)`
      errors.push(
        file.error(
          [...n.path, ipKey],
          `duplicate address ${dup.a} of ${n.name} (also nodes[${dup.seen.index}])${same}`,
          'give every node its own address',
        ),
      )
      return
    }
    seenNames.set(nameId, i)
    for (const a of parsed.addresses) seenAddresses.set(canonicalAddress(a), { index: i, written: a })
    const role: Role = n.controlPlane ? 'controlplane' : 'worker'
    const install = installFields(n, file, schema)
    if ('error' in install) {
      errors.push(install.error)
      return
    }
    if (!n.configFile) {
      errors.push(file.error(n.path, `${n.name}: no machine config file named`, 'set config: <file> for the node'))
      return
    }
    if (typeof n.configFile === 'object') {
      errors.push(
        file.error(
          [...n.path, 'filenameTmpl'],
          `${n.name}: ${n.configFile.error}`,
          'use {{ .ClusterName }}, {{ .Hostname }}, {{ .IPAddress }} and {{ .Role }} in filenameTmpl',
        ),
      )
      return
    }
    const node: ClusterNode = {
      name: n.name,
      address: parsed.addresses[0] as string,
      addresses: parsed.addresses,
      role,
      configFile: n.configFile,
      ...install.fields,
    }
    if (withoutConfigs) {
      nodes.push(node)
      return
    }
    if (!existsSync(n.configFile)) {
      const fix =
        schema === 'talhelper'
          ? 'run `talhelper genconfig` to generate the configs (or set talhelperOutDir to the folder genconfig -o wrote)'
          : schema === 'topf'
            ? `run \`${TOPF_RENDER}\` in ${dir} (each run regenerates what is missing when topf is on PATH)`
            : 'generate it with `talosctl gen config` or fix the path'
      errors.push(file.error(n.path, `${n.name}: machine config ${n.configFile} not found`, fix))
      return
    }
    const outside = outsideClusterDir(
      dir,
      n.configFile,
      `the machine config of ${n.name}`,
      'keep the machine configs in the cluster directory',
    )
    if (outside) {
      errors.push(outside)
      return
    }
    // a config that is not a v1alpha1 machine config of this role would otherwise reach the node
    const config = checkMachineConfig(n.configFile, n.name, role, schema, file.path)
    if ('problems' in config) {
      errors.push(...config.problems)
      return
    }
    const kubeName = kubernetesNodeName(config.hostname ?? n.name, config.registerWithFQDN)
    if (kubeName !== n.name) node.kubeName = kubeName
    if (MachineConfig.of(n.configFile).discovery) node.discovery = true
    nodes.push(node)
    identities.push({ node, addresses: config.addresses, dhcp: config.dhcp })
  })
  errors.push(...addressProblems(file.path, identities, schema))
  if (raw.length > 0 && errors.length === 0 && !nodes.some((n) => n.role === 'controlplane')) {
    errors.push(file.error(['nodes'], 'no control plane node in the inventory', 'mark at least one node as a control plane'))
  }

  let host: string | undefined
  try {
    const url = new URL(endpoint)
    if (url.protocol !== 'https:' || !url.hostname) throw new Error('not https')
    host = url.hostname.replace(/^\[|\]$/g, '')
  } catch {
    errors.push(
      file.error(
        ['endpoint'],
        `endpoint ${JSON.stringify(endpoint)} is not an https URL`,
        `write it as https://<address>:6443; ${DEMO_FIX}`,
      ),
    )
  }
  const talosconfigOutside = outsideClusterDir(dir, talosconfig, 'the talosconfig', 'keep the talosconfig in the cluster directory')
  if (talosconfigOutside) errors.push(talosconfigOutside)
  if (errors.length === 0 && !withoutConfigs) checkTalosconfig(talosconfig, nodes, errors)
  if (errors.length === 1) throw errors[0]
  if (errors.length > 1) throw new InputErrors(errors)

  const inventory: Inventory = { clusterDir: dir, source: file.path, clusterName, endpoint, talosconfig, nodes }
  if (host && !nodes.some((n) => addressesOfNode(n).some((a) => canonicalAddress(a) === canonicalAddress(host as string))))
    inventory.vip = host
  return inventory
}

/** installDisk is a device path, installDiskSelector a mapping (talhelper's v1alpha1.InstallDiskSelector). */
function installFields(
  n: RawNode,
  file: YamlFile,
  schema: Schema,
): { fields: Pick<ClusterNode, 'installDisk' | 'installDiskSelector'> } | { error: InputError } {
  const fields: Pick<ClusterNode, 'installDisk' | 'installDiskSelector'> = {}
  const where = schema === 'talhelper' ? 'in talconfig.yaml and regenerate the configs' : `in ${basename(file.path)}`
  if (n.installDisk !== undefined && n.installDisk !== null) {
    if (typeof n.installDisk !== 'string' || n.installDisk.trim() === '') {
      return {
        error: file.error(
          [...n.path, 'installDisk'],
          `${n.name}: installDisk must be a device path, got ${JSON.stringify(n.installDisk)}`,
          `write installDisk: /dev/sda (or an installDiskSelector mapping) ${where}`,
        ),
      }
    }
    fields.installDisk = n.installDisk
  }
  if (n.installDiskSelector !== undefined && n.installDiskSelector !== null) {
    if (typeof n.installDiskSelector !== 'object' || Array.isArray(n.installDiskSelector)) {
      return {
        error: file.error(
          [...n.path, 'installDiskSelector'],
          `${n.name}: installDiskSelector must be a mapping, got ${JSON.stringify(n.installDiskSelector)}`,
          `write installDiskSelector: { model: "Samsung*" } (keys size, name, model, serial, modalias, uuid, wwid, type, busPath) ${where}`,
        ),
      }
    }
    fields.installDiskSelector = n.installDiskSelector as Record<string, unknown>
  }
  return { fields }
}

/** Talos's apply limit: the maintenance API's gRPC message size (4 MiB). */
const MAX_CONFIG_BYTES = 4 * 1024 * 1024

const TALOS_DOC_FIX =
  'regenerate the machine config (talhelper genconfig or talosctl gen config); it holds one v1alpha1 document (version: v1alpha1) and optional Talos documents with apiVersion and kind'

/**
 * The machine config is YAML, holds exactly one v1alpha1 document, its machine.type is the
 * inventory's role, and its install disk fields have their types. Errors name the config's line.
 */
function checkMachineConfig(
  path: string,
  name: string,
  role: Role,
  schema: Schema,
  inventoryFile: string,
): { problems: InputError[] } | ConfigIdentity {
  const problems = machineConfigProblems(path, name, role, schema, inventoryFile)
  return Array.isArray(problems) ? { problems } : problems
}

/**
 * Talos's node name: the hostname's first label, or all of it with machine.kubelet.registerWithFQDN,
 * lower case, `_` as `-`, other characters dropped (machined controllers/k8s/nodename.go and
 * internal/nodename/nodename.go; the FQDN split in resources/network/hostname_spec.go ParseFQDN).
 */
export function kubernetesNodeName(hostname: string, registerWithFQDN: boolean): string {
  const chosen = registerWithFQDN ? hostname : (hostname.split('.')[0] ?? hostname)
  return chosen
    .toLowerCase()
    .replace(/_/g, '-')
    .replace(/[^a-z0-9.-]/g, '')
}

interface ConfigIdentity {
  hostname?: string
  registerWithFQDN: boolean
  addresses: Array<ConfigSetting<string>>
  dhcp: boolean
}

function machineConfigProblems(
  path: string,
  name: string,
  role: Role,
  schema: Schema,
  inventoryFile: string,
): InputError[] | ConfigIdentity {
  const machineConfig = MachineConfig.of(path)
  const source = machineConfig.source
  if (source === undefined) {
    return [
      new InputError(`cannot read the machine config (${machineConfig.readError ? readErrorCode(machineConfig.readError) : 'error'})`, {
        file: path,
        fix: 'make it a readable file (talhelper genconfig writes it)',
      }),
    ]
  }
  // the maintenance API takes a config of at most 4 MiB (Talos's gRPC message limit): a larger one
  // passes every offline check and fails only at the apply, as an unknown error
  const bytes = Buffer.byteLength(source)
  if (bytes > MAX_CONFIG_BYTES)
    return [
      new InputError(`the machine config of ${name} is ${(bytes / 1048576).toFixed(1)} MiB: a node accepts at most 4 MiB`, {
        file: path,
        fix: 'remove what makes it large (embedded files, inline manifests: serve them by URL) and regenerate it',
      }),
    ]
  const docs = machineConfig.documents
  // the syntax error message is built only when there is one
  const syntax = machineConfig.syntaxOk ? undefined : YamlFile.checkSyntax(path, source)
  if (syntax)
    return [
      new InputError(syntax.message, {
        file: path,
        ...(syntax.line ? { line: syntax.line } : {}),
        fix: 'correct the YAML syntax at that line (or in its talhelper patch) and regenerate the config',
      }),
    ]
  const at = (doc: Document, keys: Array<string | number>): { line?: number } => {
    for (let depth = keys.length; depth >= 0; depth--) {
      const node = doc.getIn(keys.slice(0, depth), true) as { range?: [number, number, number] } | undefined
      // offsets are into the whole file; lines are counted only for an error
      if (node?.range) return { line: source.slice(0, node.range[0]).split('\n').length }
    }
    return {}
  }
  const err = (doc: Document, keys: Array<string | number>, message: string, fix: string): InputError =>
    new InputError(message, { file: path, ...at(doc, keys), fix })
  const v1alpha1: Document[] = []
  for (const doc of docs) {
    // an empty document (a stray `---`) holds nothing
    if (doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null)) continue
    if (isSeq(doc.contents))
      return [err(doc, [], `the machine config of ${name} is a YAML list, not a Talos machine config`, TALOS_DOC_FIX)]
    if (!isMap(doc.contents))
      return [
        err(
          doc,
          [],
          `the machine config of ${name} holds the scalar ${JSON.stringify(documentToJS(doc, path))} where a Talos config document belongs`,
          TALOS_DOC_FIX,
        ),
      ]
    const version = doc.get('version')
    const kind = doc.get('kind')
    if (version === 'v1alpha1' && kind === undefined) {
      v1alpha1.push(doc)
      continue
    }
    if (typeof kind !== 'string' || typeof doc.get('apiVersion') !== 'string') {
      return [
        err(
          doc,
          version !== undefined ? ['version'] : [],
          `the machine config of ${name} has a document that is neither a v1alpha1 machine config (version: ${JSON.stringify(version ?? null)}) nor a Talos config document (apiVersion and kind)`,
          TALOS_DOC_FIX,
        ),
      ]
    }
  }
  const config = v1alpha1[0]
  if (!config) {
    const kinds = docs.map((d) => (isMap(d.contents) ? d.get('kind') : undefined)).filter((k): k is string => typeof k === 'string')
    return [
      new InputError(
        `the machine config of ${name} has no v1alpha1 machine config document${kinds.length ? ` (only ${kinds.join(', ')})` : ''}`,
        { file: path, line: 1, fix: TALOS_DOC_FIX },
      ),
    ]
  }
  if (v1alpha1.length > 1)
    return [err(v1alpha1[1] as Document, [], `the machine config of ${name} has ${v1alpha1.length} v1alpha1 documents`, TALOS_DOC_FIX)]
  const problems: InputError[] = []
  const roleFix =
    schema === 'talhelper'
      ? 'set controlPlane: in talconfig.yaml to what the node is and regenerate the configs'
      : schema === 'topf'
        ? 'set role: in topf.yaml to what the node is (control-plane or worker) and render the configs again'
        : 'set the role in nodes.yaml to what the node is, or point config: at its own machine config'
  const type = config.getIn(['machine', 'type'])
  if (type !== undefined && type !== null) {
    const configRole = type === 'controlplane' || type === 'init' ? 'controlplane' : type === 'worker' ? 'worker' : undefined
    if (!configRole)
      problems.push(
        err(config, ['machine', 'type'], `machine.type ${JSON.stringify(type)} of ${name} is not controlplane or worker`, TALOS_DOC_FIX),
      )
    else if (configRole !== role)
      problems.push(
        err(
          config,
          ['machine', 'type'],
          `machine.type ${JSON.stringify(type)} of ${name} contradicts the inventory, where it is a ${role === 'controlplane' ? 'control plane' : 'worker'}`,
          roleFix,
        ),
      )
  }
  const disk = config.getIn(['machine', 'install', 'disk'])
  if (disk !== undefined && disk !== null && (typeof disk !== 'string' || disk === '')) {
    problems.push(
      err(
        config,
        ['machine', 'install', 'disk'],
        `machine.install.disk of ${name} must be a device path, got ${JSON.stringify(disk)}`,
        'set installDisk: /dev/<disk> (a string) and regenerate the config',
      ),
    )
  }
  const selector = config.getIn(['machine', 'install', 'diskSelector'])
  if (selector !== undefined && selector !== null && !isMap(selector)) {
    problems.push(
      err(
        config,
        ['machine', 'install', 'diskSelector'],
        `machine.install.diskSelector of ${name} must be a mapping, got ${JSON.stringify((documentToJS(config, path) as { machine: { install: { diskSelector: unknown } } }).machine.install.diskSelector)}`,
        'write installDiskSelector as a mapping (model, wwid, size, ...) and regenerate the config',
      ),
    )
  }
  if (problems.length > 0) return problems
  // the hostname Talos takes (the Kubernetes Node's name) and the addresses it gives itself: another
  // node's config saved under this node's name would bring this machine up as that node
  const identity = networkIdentity(machineConfig)
  const hostname = identity.hostname
  const regenerate =
    schema === 'talhelper'
      ? `point the node at its own machine config: regenerate them with talhelper genconfig from ${inventoryFile}`
      : schema === 'topf'
        ? `render the configs again (${TOPF_RENDER}): topf names each config after its node's host in ${inventoryFile}`
        : `point config: in ${inventoryFile} at the node's own machine config`
  if (hostname) {
    const where = { file: path, ...(hostname.line ? { line: hostname.line } : {}) }
    if (typeof hostname.value !== 'string' || !isDns1123Hostname(hostname.value)) {
      return [
        new InputError(`${hostname.key} ${JSON.stringify(hostname.value)} of ${name} is not a DNS-1123 hostname`, {
          ...where,
          fix: 'use letters, digits and dashes in dot-separated labels of at most 63 characters, each starting and ending with a letter or digit, and regenerate the config',
        }),
      ]
    }
    if (!sameHost(hostname.value, name)) {
      return [
        new InputError(
          `${hostname.key} "${hostname.value}" contradicts ${inventoryFile}, where this config is node ${name}: the machine would come up as ${hostname.value}`,
          { ...where, fix: regenerate },
        ),
      ]
    }
  }
  return {
    ...(hostname && typeof hostname.value === 'string' ? { hostname: hostname.value } : {}),
    registerWithFQDN: config.getIn(['machine', 'kubelet', 'registerWithFQDN']) === true,
    addresses: identity.addresses,
    dhcp: identity.dhcp,
  }
}

/** DNS-1123 (RFC 1123) labels, any case (Talos lower-cases the Node name), at most 253 characters. */
function isDns1123Hostname(name: string): boolean {
  return name.length <= 253 && /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i.test(name)
}

/** The same host: equal in any case, or one the short name of the other (knode01 / knode01.home.example). */
function sameHost(a: string, b: string): boolean {
  const x = a.toLowerCase().replace(/\.$/, '')
  const y = b.toLowerCase().replace(/\.$/, '')
  return x === y || x === y.split('.')[0] || y === x.split('.')[0]
}

/**
 * Every static address a config gives its node must be that node's: one of another inventory node's
 * addresses means another node's config; static addresses none of which is the inventory's address
 * (with no DHCP to reach it otherwise) mean the node would leave the address the tool reaches it at.
 */
function addressProblems(
  inventoryFile: string,
  nodes: ReadonlyArray<{ node: ClusterNode; addresses: Array<ConfigSetting<string>>; dhcp: boolean }>,
  schema: Schema,
): InputError[] {
  const owner = new Map<string, ClusterNode>()
  for (const { node } of nodes) for (const a of addressesOfNode(node)) owner.set(canonicalAddress(a), node)
  const problems: InputError[] = []
  const fix = (name: string): string =>
    schema === 'talhelper'
      ? `point ${name} at its own machine config (regenerate them with talhelper genconfig), or correct its ipAddress in ${inventoryFile}`
      : schema === 'topf'
        ? `correct the address in ${name}'s patches or its ip in ${inventoryFile}, and render the configs again (${TOPF_RENDER})`
        : `point config: of ${name} at its own machine config, or correct its ip in ${inventoryFile}`
  for (const { node, addresses, dhcp } of nodes) {
    if (!node.configFile || addresses.length === 0) continue
    const where = (a: ConfigSetting<string>): { file: string; line?: number; fix: string } => ({
      file: node.configFile as string,
      ...(a.line ? { line: a.line } : {}),
      fix: fix(node.name),
    })
    const foreign = addresses.find((a) => {
      const other = owner.get(canonicalAddress(a.value))
      return other !== undefined && other !== node
    })
    if (foreign) {
      const other = owner.get(canonicalAddress(foreign.value)) as ClusterNode
      problems.push(
        new InputError(
          `${foreign.key} ${foreign.value} in the config of ${node.name} is the address of ${other.name} in ${inventoryFile}: the machine would come up with ${other.name}'s address`,
          where(foreign),
        ),
      )
      continue
    }
    const own = addressesOfNode(node).map(canonicalAddress)
    const ips = addressesOfNode(node).filter((a) => isIP(a.replace(/^\[|\]$/g, '')) !== 0)
    if (dhcp || ips.length === 0 || addresses.some((a) => own.includes(canonicalAddress(a.value)))) continue
    const first = addresses[0] as ConfigSetting<string>
    problems.push(
      new InputError(
        `the config of ${node.name} gives it the static address${addresses.length > 1 ? 'es' : ''} ${addresses.map((a) => a.value).join(', ')}, none of them its address ${ips.join(', ')} in ${inventoryFile}: the machine would leave the address it is reached at`,
        where(first),
      ),
    )
  }
  return problems
}

/** A talosconfig must parse and hold a context with credentials, or every authenticated call fails later. */
function checkTalosconfig(path: string, nodes: readonly ClusterNode[], errors: InputError[]): void {
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
    errors.push(
      new InputError(`talosconfig: ${err.message}`, {
        ...(err.file ? { file: err.file } : {}),
        ...(err.line ? { line: err.line } : {}),
        fix: err.fix,
      }),
    )
    return
  }
  const config = file.toJS() as { context?: unknown; contexts?: Record<string, { ca?: unknown; crt?: unknown; key?: unknown }> } | null
  const name = typeof config?.context === 'string' ? config.context : undefined
  const contexts = config?.contexts && typeof config.contexts === 'object' ? config.contexts : {}
  const context = name ? contexts[name] : undefined
  if (!context) {
    const known = Object.keys(contexts)
    errors.push(
      file.error(
        ['context'],
        `talosconfig has no context ${name ? `"${name}"` : '(context: is empty)'}`,
        known.length ? `set context: to one of ${known.join(', ')}` : fix,
      ),
    )
    return
  }
  for (const key of ['ca', 'crt', 'key'] as const) {
    const value = context[key]
    if (
      typeof value !== 'string' ||
      !/^[A-Za-z0-9+/=\s]+$/.test(value) ||
      !Buffer.from(value, 'base64').toString('utf8').includes('-----BEGIN')
    ) {
      errors.push(file.error(['contexts', name ?? '', key], `talosconfig context "${name}" has no valid ${key} (base64 PEM expected)`, fix))
      return
    }
  }
  const caProblem = talosconfigCaProblem(file, name ?? '', { ca: String(context.ca), crt: String(context.crt) }, nodes)
  if (caProblem) errors.push(caProblem)
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

/**
 * The nodes one NODE/NODES entry names: the full name (any case), an address in any spelling of
 * it, or the short name of an FQDN (`knode01` for knode01.home.example) when only one node has it.
 */
export function nodesMatching(nodes: readonly ClusterNode[], wanted: string): ClusterNode[] {
  const name = wanted.toLowerCase().replace(/\.$/, '')
  const exact = nodes.filter(
    (n) => n.name.toLowerCase() === name || addressesOfNode(n).some((a) => canonicalAddress(a) === canonicalAddress(wanted)),
  )
  if (exact.length > 0) return exact
  return nodes.filter((n) => n.name.toLowerCase().split('.')[0] === name)
}

/**
 * NODES=cp-1,127.0.0.5 -> the nodes, in inventory order. Unknown or ambiguous entries are bad input;
 * `variable` names where the selection came from (NODES, or bootstrap:node's NODE) in the messages.
 */
export function selectNodes(inventory: Inventory, selection: string | undefined, variable = 'NODES'): ClusterNode[] {
  if (!selection || selection.trim() === '') return inventory.nodes
  const wanted = selection.split(',').map((s) => s.trim())
  // `cp-1,,wrkr-1` is a typo, not "every node" nor "skip it": say so before touching anything
  if (wanted.includes('')) {
    throw new InputError(`${variable} ${JSON.stringify(selection)} has an empty entry`, {
      file: inventory.source,
      fix: `write comma-separated names or addresses with nothing empty between the commas, e.g. NODES=${inventory.nodes
        .slice(0, 2)
        .map((n) => n.name)
        .join(',')}`,
    })
  }
  const matches = wanted.map((w) => ({ w, nodes: nodesMatching(inventory.nodes, w) }))
  const unknown = matches.filter((m) => m.nodes.length === 0).map((m) => m.w)
  if (unknown.length > 0) {
    throw new InputError(`${variable} names ${unknown.map((u) => JSON.stringify(u)).join(', ')}, not in the inventory`, {
      file: inventory.source,
      fix: `use ${variable === 'NODE' ? 'one name or address' : 'names or addresses'} from the inventory: ${inventory.nodes.map((n) => n.name).join(', ')}`,
    })
  }
  const ambiguous = matches.find((m) => m.nodes.length > 1)
  if (ambiguous) {
    throw new InputError(
      `${variable} entry ${JSON.stringify(ambiguous.w)} matches several nodes: ${ambiguous.nodes.map((n) => n.name).join(', ')}`,
      {
        file: inventory.source,
        fix: 'write the full name of the node you mean',
      },
    )
  }
  const chosen = new Set(matches.flatMap((m) => m.nodes))
  return inventory.nodes.filter((n) => chosen.has(n))
}

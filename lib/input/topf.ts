// topf.yaml, as postfinance/topf reads it (pkg/config/topf_config.go LoadFromFile, node.go, node_role.go,
// patches.go; cmd/topf/render.go writeMachineConfigs): the cluster's name, endpoint and versions, its
// nodes (host, ip, role control-plane|worker), and where the patches and the secrets bundle are. topf
// keeps no configs on disk: `topf render -o <dir>` writes `<dir>/<host>.yaml`, and `topf talosconfig`
// prints the talosconfig, which the tool keeps as `<dir>/talosconfig`.
import { existsSync, readdirSync, statSync } from 'node:fs'
import { isIP } from 'node:net'
import { isAbsolute, join, resolve } from 'node:path'
import { InputError } from '../core/errors.ts'
import { readErrorCode, readRegularFile } from '../core/files.ts'
import type { Role } from '../core/model.ts'
import { SOPS_ENV, sopsDecrypt } from '../tools/sops.ts'
import { YamlFile } from './yaml-file.ts'
import { talosVersionOf } from './talhelper.ts'

export const TOPF_FILE = 'topf.yaml'
/** `topf render`'s own default output folder (`--output ./output`), relative to where it runs: the cluster directory */
export const TOPF_OUT_DIR = 'output'
/** The commands that write what the tool reads, run in the cluster directory */
export const TOPF_RENDER = `topf render -o ${TOPF_OUT_DIR} && topf talosconfig > ${TOPF_OUT_DIR}/talosconfig`

export interface TopfNode {
  host: unknown
  /** topf's `ip` (a netip.Addr); without it topf connects to `host` */
  ip: unknown
  role: Role | undefined
  /** the role as written, for the error */
  written: unknown
  path: Array<string | number>
}

export interface TopfLayout {
  file: YamlFile
  clusterName: string
  endpoint: string
  talosVersion?: string
  /** patchesDir: the folders all/, control-plane/, worker/, node/<host>/ */
  patchesDir: string
  secretsPath: string
  nodes: TopfNode[]
  outDir: string
}

const FIX_ROLE = 'write role: control-plane or role: worker (topf knows no other role)'

/** Reads topf.yaml (decrypted with sops when it carries sops metadata, as topf's decryption cache does). */
export function readTopfLayout(dir: string, path: string, env: NodeJS.ProcessEnv): TopfLayout {
  let text: string
  try {
    text = readRegularFile(path)
  } catch (err) {
    throw new InputError(`cannot read file (${readErrorCode(err)})`, { file: path, fix: 'make topf.yaml a readable file' })
  }
  if (/^sops:\s*$/m.test(text) && /^\s+mac:\s/m.test(text)) {
    const result = sopsDecrypt(path, env)
    if (!result.ok)
      throw new InputError(
        result.missing
          ? `topf.yaml is encrypted with SOPS and sops is needed to read it ("${result.binary}" not found)`
          : `sops could not decrypt topf.yaml: ${result.message}`,
        { file: path, fix: `install sops (or point ${SOPS_ENV} at it) with the key that decrypts it, as topf needs` },
      )
    text = result.text
  }
  const file = YamlFile.parse(path, text)
  const doc = file.toJS()
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc))
    throw file.error([], 'topf.yaml must be a mapping', 'write clusterName:, clusterEndpoint: and nodes: as in topf.yaml')
  const top = doc as Record<string, unknown>
  const string = (key: string, fix: string): string => {
    const value = top[key]
    if (typeof value === 'string' && value.trim() !== '') return value
    throw file.error([key], `${key} is missing or not a string`, fix)
  }
  // topf refuses it too (LoadFromFile): the folder moved to patchesDir
  if (top.configDir !== undefined) throw file.error(['configDir'], "deprecated field 'configDir'", 'rename it to patchesDir, as topf asks')
  if (top.nodesProvider !== undefined)
    throw file.error(
      ['nodesProvider'],
      'nodesProvider: nodes a program provides cannot be known before anything runs',
      'list the nodes under nodes: in topf.yaml (host, ip, role)',
    )
  const clusterName = string('clusterName', 'set clusterName: <name>, as topf needs')
  const endpoint = string('clusterEndpoint', 'set clusterEndpoint: https://<vip or control plane address>:6443')
  const relativeTo = (value: unknown, key: string, fallback: string): string => {
    if (value === undefined || value === null || value === '') return fallback
    if (typeof value !== 'string') throw file.error([key], `${key} must be a path`, `write ${key}: <path relative to topf.yaml>`)
    return isAbsolute(value) ? value : resolve(dir, value)
  }
  const nodesValue = top.nodes ?? []
  if (!Array.isArray(nodesValue)) throw file.error(['nodes'], 'nodes must be a list', 'write one "- host: …" item per node')
  const nodes: TopfNode[] = nodesValue.map((item: unknown, i) => {
    const n = item !== null && typeof item === 'object' && !Array.isArray(item) ? (item as Record<string, unknown>) : undefined
    if (!n) throw file.error(['nodes', i], `nodes[${i}] must be a mapping`, 'write host:, ip: and role: for the node')
    const role = n.role === 'control-plane' ? 'controlplane' : n.role === 'worker' ? 'worker' : undefined
    return { host: n.host, ip: n.ip, role, written: n.role, path: ['nodes', i] }
  })
  for (const n of nodes) {
    // topf's Node.UnmarshalYAML and NodeRole.UnmarshalText: the same refusals, said before any node is touched
    if (typeof n.host !== 'string' || n.host === '')
      throw file.error([...n.path, 'host'], "node 'host' can't be empty", 'write host: <the node name> (a short name or an FQDN)')
    if (n.written === undefined || n.written === null || n.written === '')
      throw file.error([...n.path], `${n.host}: node 'role' can't be empty`, FIX_ROLE)
    if (!n.role)
      throw file.error(
        [...n.path, 'role'],
        `${n.host}: invalid node role ${JSON.stringify(n.written)}: must be either "worker" or "control-plane"`,
        FIX_ROLE,
      )
    // topf parses ip as netip.Addr: a name there is refused by topf itself
    if (n.ip !== undefined && n.ip !== null && (typeof n.ip !== 'string' || isIP(n.ip) === 0))
      throw file.error(
        [...n.path, 'ip'],
        `${n.host}: ip ${JSON.stringify(n.ip)} is not an IP address`,
        'write the IP address topf connects to (or leave ip out to connect to host)',
      )
  }
  const version = top.talosVersion
  return {
    file,
    clusterName,
    endpoint,
    ...(typeof version === 'string' && version !== '' ? { talosVersion: talosVersionOf(version) } : {}),
    patchesDir: relativeTo(top.patchesDir, 'patchesDir', dir),
    secretsPath: relativeTo(top.secretsPath, 'secretsPath', join(dir, 'secrets.yaml')),
    nodes,
    outDir: join(dir, TOPF_OUT_DIR),
  }
}

/** `<out>/<host>.yaml`, as `topf render -o <out>` names each node's config. */
export function topfConfigFile(layout: Pick<TopfLayout, 'outDir'>, host: string): string {
  return join(layout.outDir, `${host}.yaml`)
}

const PATCH = /\.ya?ml(\.tpl)?$/

/** Patch files of one folder, as topf's loadFolder walks it (recursively, links followed). */
function patchFiles(folder: string, seen = new Set<string>()): string[] {
  if (!existsSync(folder) || seen.has(folder)) return []
  seen.add(folder)
  const files: string[] = []
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const path = join(folder, entry.name)
    const isDir = entry.isDirectory() || (entry.isSymbolicLink() && statSync(path, { throwIfNoEntry: false })?.isDirectory() === true)
    if (isDir) files.push(...patchFiles(path, seen))
    else if (PATCH.test(entry.name)) files.push(path)
  }
  return files
}

/** Every file a node's rendered config comes from: topf.yaml, the secrets bundle, and its all/, role and node/<host>/ patches. */
export function topfInputs(layout: TopfLayout, host: string, role: Role): string[] {
  const folders = ['all', role === 'controlplane' ? 'control-plane' : 'worker', join('node', host)]
  return [
    layout.file.path,
    ...(existsSync(layout.secretsPath) ? [layout.secretsPath] : []),
    ...folders.flatMap((f) => patchFiles(join(layout.patchesDir, f))),
  ]
}

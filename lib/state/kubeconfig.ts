// The kubeconfig the tool writes is this cluster's entries only: merged into an existing file (the
// operator's ~/.kube/config, say) beside every other cluster, context and user, and only this
// cluster's server is ever changed. Writes are atomic and private (0600), through a link to its target.
import { closeSync, constants, existsSync, fsyncSync, openSync, realpathSync, renameSync, rmSync, writeSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { isMap, isSeq, parseDocument, type Document, YAMLSeq } from 'yaml'
import { readRegularFile } from '../core/files.ts'

/** The names `talosctl kubeconfig` gives a cluster's entries (cluster, context `admin@<cluster>`, user `admin@<cluster>`). */
export interface KubeconfigNames {
  cluster: string
  context: string
  user: string
}

const SECTIONS = { clusters: 'cluster', contexts: 'context', users: 'user' } as const

/** The context, cluster and user of the kubeconfig's current context (what talosctl kubeconfig writes: one of each). */
export function namesIn(text: string): KubeconfigNames | undefined {
  const doc = parseDocument(text)
  const current = doc.get('current-context')
  const contexts = doc.get('contexts')
  if (!isSeq(contexts)) return undefined
  for (const item of contexts.items) {
    if (!isMap(item)) continue
    const name = item.get('name')
    if (typeof name !== 'string' || (typeof current === 'string' && current !== '' && current !== name)) continue
    const cluster = item.getIn(['context', 'cluster'])
    const user = item.getIn(['context', 'user'])
    if (typeof cluster === 'string' && typeof user === 'string') return { cluster, context: name, user }
  }
  return undefined
}

/** The context this cluster's entries have in a kubeconfig: `admin@<cluster>` when present, else the only context. */
export function contextOf(path: string, clusterName: string): KubeconfigNames | undefined {
  if (!existsSync(path)) return undefined
  const doc = parseDocument(readRegularFile(path))
  const contexts = doc.get('contexts')
  if (!isSeq(contexts)) return undefined
  const entries = contexts.items.filter(isMap).map((item) => ({
    context: item.get('name'),
    cluster: item.getIn(['context', 'cluster']),
    user: item.getIn(['context', 'user']),
  }))
  const valid = entries.filter(
    (e): e is KubeconfigNames => typeof e.context === 'string' && typeof e.cluster === 'string' && typeof e.user === 'string',
  )
  return (
    valid.find((e) => e.context === `admin@${clusterName}`) ??
    valid.find((e) => e.cluster === clusterName) ??
    (valid.length === 1 ? valid[0] : undefined)
  )
}

/**
 * Merges `incoming` (one cluster's kubeconfig, as talosctl writes it) into `target`: that cluster's
 * cluster, context and user entries are replaced or added by name; every other entry is kept; the
 * current context is set only when the file had none. A missing target is written as it comes.
 */
export function mergeKubeconfig(target: string, incoming: string): KubeconfigNames {
  const names = namesIn(incoming)
  if (!names) throw new Error('the kubeconfig talosctl wrote names no context')
  if (!existsSync(target)) {
    replaceFile(target, incoming)
    return names
  }
  const existing = readRegularFile(target)
  // an empty file is an empty kubeconfig
  const into = parseDocument(existing.trim() ? existing : '{}')
  if (into.errors.length > 0 || !isMap(into.contents)) {
    throw new Error(`${target} is not a kubeconfig (YAML mapping) that can be merged into; move it away or point kubeconfig elsewhere`)
  }
  const from = parseDocument(incoming)
  if (!into.has('apiVersion')) into.set('apiVersion', 'v1')
  if (!into.has('kind')) into.set('kind', 'Config')
  const wanted: Record<keyof typeof SECTIONS, string> = { clusters: names.cluster, contexts: names.context, users: names.user }
  for (const section of Object.keys(SECTIONS) as Array<keyof typeof SECTIONS>) {
    const entry = entryNamed(from, section, wanted[section])
    if (!entry) continue
    let list = into.get(section)
    if (!isSeq(list)) {
      list = new YAMLSeq()
      into.set(section, list)
    }
    const seq = list as YAMLSeq
    const at = seq.items.findIndex((item) => isMap(item) && item.get('name') === wanted[section])
    if (at >= 0) seq.items[at] = entry
    else seq.items.push(entry)
  }
  const current = into.get('current-context')
  if (typeof current !== 'string' || current === '') into.set('current-context', names.context)
  replaceFile(target, String(into))
  return names
}

function entryNamed(doc: Document, section: string, name: string): unknown {
  const list = doc.get(section, true)
  if (!isSeq(list)) return undefined
  return list.items.find((item) => isMap(item) && item.get('name') === name)
}

/** The API server URL of this cluster's entry (the cluster its context names). */
export function kubeconfigServer(path: string, clusterName: string): string | undefined {
  const names = contextOf(path, clusterName)
  if (!names) return undefined
  const doc = parseDocument(readRegularFile(path))
  const entry = entryNamed(doc, 'clusters', names.cluster)
  const server = isMap(entry) ? entry.getIn(['cluster', 'server']) : undefined
  return typeof server === 'string' ? server : undefined
}

/** Points this cluster's entry, and only it, at `server`; the file stays private (0600). */
export function setKubeconfigServer(path: string, clusterName: string, server: string): void {
  const names = contextOf(path, clusterName)
  if (!names) throw new Error(`${path} has no context for the cluster ${clusterName}`)
  const doc = parseDocument(readRegularFile(path))
  const entry = entryNamed(doc, 'clusters', names.cluster)
  if (!isMap(entry)) throw new Error(`${path} has no cluster entry ${names.cluster}`)
  entry.setIn(['cluster', 'server'], server)
  replaceFile(path, String(doc))
}

export function apiUrl(host: string): string {
  return `https://${host.includes(':') ? `[${host}]` : host}:6443`
}

/**
 * Replaces a file atomically (a temporary file beside it, renamed over it), mode 0600. A link is
 * followed to its target, which is replaced: the link (a dotfiles repository's, say) stays.
 */
function replaceFile(path: string, text: string): void {
  const real = existsSync(path) ? realpathSync(path) : path
  const tmp = join(dirname(real), `.${basename(real)}.${process.pid}.tmp`)
  rmSync(tmp, { force: true })
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600)
  try {
    writeSync(fd, text)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  renameSync(tmp, real)
}

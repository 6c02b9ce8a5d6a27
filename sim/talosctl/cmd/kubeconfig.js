// talosctl kubeconfig [local-path]: path logic, merge with renames, file mode 0600
import { io, local } from '../../cli-io.js'
import fs from 'node:fs'
import path from 'node:path'
import os from 'node:os'
import { withClient } from '../session.js'
import { filterMessages } from '../errors.js'

function singlePath() {
  const env = io().env.KUBECONFIG
  if (env) {
    const list = env.split(path.delimiter).filter(Boolean)
    if (list.length > 1) throw new Error('multiple kubeconfig files defined')
    if (list.length === 1) return list[0]
  }
  return path.join(io().env.HOME || os.homedir(), '.kube', 'config')
}

async function merge(data, localPath, force, forceContextName) {
  const YAML = await import('yaml')
  const incoming = YAML.parse(data) ?? {}
  const cur = YAML.parse(fs.readFileSync(local(localPath), 'utf8')) ?? {}
  for (const k of ['clusters', 'users', 'contexts']) cur[k] = cur[k] ?? []
  const kinds = [['clusters', 'cluster'], ['users', 'auth info'], ['contexts', 'context']]
  const renames = { clusters: {}, users: {} }
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b)
  for (const [key, label] of kinds) {
    for (const item of incoming[key] ?? []) {
      const entry = JSON.parse(JSON.stringify(item))
      if (key === 'contexts') {
        if (forceContextName) entry.name = forceContextName
        if (renames.clusters[entry.context.cluster]) entry.context.cluster = renames.clusters[entry.context.cluster]
        if (renames.users[entry.context.user]) entry.context.user = renames.users[entry.context.user]
      }
      const idx = cur[key].findIndex((x) => x.name === entry.name)
      if (idx >= 0 && !same(cur[key][idx], entry)) {
        if (force) { cur[key][idx] = entry } else {
          let n = 1
          while (cur[key].some((x) => x.name === `${entry.name}-${n}`)) n++
          const newName = `${entry.name}-${n}`
          io().stdout.write(`renamed ${label} ${JSON.stringify(entry.name)} -> ${JSON.stringify(newName)}\n`)
          if (renames[key]) renames[key][entry.name] = newName
          entry.name = newName
          cur[key].push(entry)
        }
      } else if (idx < 0) cur[key].push(entry)
      if (key === 'contexts') cur['current-context'] = entry.name
    }
  }
  const out = { apiVersion: cur.apiVersion ?? 'v1', clusters: cur.clusters, contexts: cur.contexts, 'current-context': cur['current-context'], kind: cur.kind ?? 'Config', preferences: cur.preferences ?? {}, users: cur.users }
  fs.writeFileSync(local(localPath), YAML.stringify(out), { mode: 0o600 })
}

export async function kubeconfig({ positional, flag, g }) {
  const s = await withClient(g)
  if (s.nodes.length > 1) throw new Error('command "kubeconfig" is not supported with multiple nodes')
  let doMerge = flag('merge')
  const force = flag('force')
  let localPath = positional.length ? positional[0] : doMerge ? singlePath() : io().cwd
  localPath = path.normalize(localPath).replace(/(.)\/$/, '$1')
  let st = null
  try { st = fs.statSync(local(localPath)) } catch (e) {
    if (e.code !== 'ENOENT') throw new Error(`error checking path ${JSON.stringify(localPath)}: stat ${localPath}: ${e.message}`)
    if (localPath !== '-') fs.mkdirSync(path.dirname(local(localPath)), { recursive: true, mode: 0o755 })
  }
  if (st && st.isDirectory()) localPath = path.join(localPath, 'kubeconfig')
  if (fs.existsSync(local(localPath))) {
    if (!(force || doMerge)) throw new Error(`kubeconfig file already exists, use --force to overwrite: ${JSON.stringify(localPath)}`)
  } else doMerge = false
  let reply
  try { reply = await s.rpc('machine.Kubeconfig', {}) } catch (e) { throw new Error(`error copying: ${e.message}`) }
  const { good, err } = filterMessages(reply.messages ?? [])
  if (err) throw new Error(`error copying: ${err.message}`)
  const data = good[0]?.data?.kubeconfig ?? ''
  if (doMerge) return merge(data, localPath, force, flag('force-context-name'))
  if (localPath === '-') { io().stdout.write(data); return }
  fs.writeFileSync(local(localPath), data, { mode: 0o600 })
}

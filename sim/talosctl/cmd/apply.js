// talosctl apply-config
import { io, local } from '../../cli-io.js'
import fs from 'node:fs'
import { withClient, withMaintenance } from '../session.js'
import { filterMessages, warn } from '../errors.js'

// strategic-merge-like patch: maps merge, lists append, `$patch: delete` removes a key
function merge(dst, src) {
  if (src && typeof src === 'object' && !Array.isArray(src) && dst && typeof dst === 'object' && !Array.isArray(dst)) {
    for (const [k, v] of Object.entries(src)) {
      if (v && typeof v === 'object' && v.$patch === 'delete') { delete dst[k]; continue }
      dst[k] = k in dst ? merge(dst[k], v) : v
    }
    return dst
  }
  if (Array.isArray(dst) && Array.isArray(src)) return dst.concat(src)
  return src
}

async function applyPatches(bytes, patches) {
  const YAML = await import('yaml')
  const docs = YAML.parseAllDocuments(bytes.toString('utf8')).map((d) => d.toJS())
  for (const p of patches) {
    let text = p
    if (p.startsWith('@')) {
      try { text = fs.readFileSync(local(p.slice(1)), 'utf8') } catch (e) { throw new Error(`open ${p.slice(1)}: no such file or directory`) }
    }
    let patch
    try { patch = YAML.parseAllDocuments(text).map((d) => d.toJS()) } catch (e) { throw new Error(`failed to load patch: ${e.message}`) }
    for (const pd of patch) {
      if (Array.isArray(pd)) throw new Error('JSON6902 patches are not supported by the simulator')
      const target = pd && pd.kind ? docs.find((d) => d && d.kind === pd.kind && d.name === pd.name) : docs.find((d) => d && d.version === 'v1alpha1')
      if (target) merge(target, pd)
      else docs.push(pd)
    }
  }
  return Buffer.from(docs.map((d) => YAML.stringify(d)).join('---\n'))
}

export async function applyConfig({ cmd, positional, flag }) {
  if (positional.length > 0) {
    if (positional[0] !== 'config' && positional[0].toLowerCase() !== 'machineconfig') {
      io().stdout.write(cmd.helpString())
      throw new Error(`unknown positional argument ${positional[0]}`)
    } else if (io().argv.includes('apply-config')) {
      io().stdout.write(cmd.helpString())
      throw new Error('expected no positional arguments')
    }
  }
  const file = flag('file')
  if (!file) throw new Error('no filename supplied for configuration')
  let bytes
  try { bytes = fs.readFileSync(local(file)) } catch (e) {
    const why = e.code === 'ENOENT' ? 'no such file or directory' : e.code === 'EISDIR' ? 'is a directory' : e.code === 'EACCES' ? 'permission denied' : e.message
    throw new Error(`failed to read configuration from ${JSON.stringify(file)}: ${e.code === 'EISDIR' ? 'read' : 'open'} ${file}: ${why}`)
  }
  if (bytes.length < 1) throw new Error('no configuration data read')
  const patches = flag('config-patch') ?? []
  if (patches.length) bytes = await applyPatches(bytes, patches)

  const g = arguments[0].g
  const insecure = flag('insecure')
  const s = insecure ? withMaintenance(g) : await withClient(g)
  let reply
  try {
    reply = await s.rpc('machine.ApplyConfiguration', { data: bytes.toString('utf8'), mode: flag('mode'), dryRun: !!flag('dry-run'), tryModeTimeoutMs: flag('timeout') })
  } catch (e) {
    throw new Error(`error applying new configuration: ${e.message}`)
  }
  const { good, err } = filterMessages(reply.messages ?? [])
  if (err) throw new Error(`error applying new configuration: ${err.message}`)
  for (const m of good) {
    for (const w of m.data?.warnings ?? []) warn(w)
    if (m.data?.modeDetails) io().stderr.write(m.data.modeDetails + '\n')
  }
}

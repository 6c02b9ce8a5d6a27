// Apply-time machine config validation (v1alpha1 subset) and install disk matching.
import { parseAllDocuments } from 'yaml'
import { rpc, multierror } from './errors.js'
import { parseSize } from '../scenario.js'

/** parse the config text; throws RpcError the way each version reports parse failures. A config is
 *  one or more `---` documents: the v1alpha1 one (version, no kind) is returned, the others (HostnameConfig,
 *  VolumeConfig, …: apiVersion and kind) ride along as `documents`, as Talos's config decoder splits them
 *  (pkg/machinery/config/configloader/internal/decoder/decoder.go) */
export function parseConfig(text, { maintenance, minor }) {
  const fail = (msg) => {
    if (maintenance && minor <= 12) throw rpc('Unknown', `failed to parse config: ${msg}`)
    throw rpc('InvalidArgument', msg)
  }
  const docs = parseAllDocuments(text)
  const broken = docs.find((d) => d.errors.length > 0)
  if (broken) fail(broken.errors[0].message.split('\n')[0])
  const values = docs.map((d) => d.toJS()).filter((v) => v !== null && v !== undefined)
  for (const v of values) {
    if (typeof v !== 'object' || Array.isArray(v)) fail('error decoding document: not a mapping')
    if (v.kind === undefined && v.version === undefined) fail('error decoding document /: missing kind')
  }
  const doc = values.find((v) => v.version === 'v1alpha1' && v.kind === undefined)
  if (doc) Object.defineProperty(doc, 'documents', { value: values.filter((v) => v !== doc), enumerable: false })
  if (!doc || typeof doc !== 'object' || doc.version !== 'v1alpha1' || !doc.machine) {
    if (maintenance && minor <= 12) throw rpc('Unknown', 'failed to parse config: config is missing v1alpha1 document')
    throw rpc(
      'InvalidArgument',
      "the applied machine configuration doesn't contain v1alpha1 config, did you mean to patch the machine config instead?",
    )
  }
  return doc
}

/** static validation (metal mode); returns a list of member texts */
export function validateConfig(cfg, { requireInstall }) {
  const errs = []
  const m = cfg.machine ?? {}
  if (!['controlplane', 'worker', 'init'].includes(m.type)) errs.push(`unknown machine type "${m.type ?? ''}"`)
  if (!m.ca?.crt) errs.push('issuing CA is required (.machine.ca)')
  if (m.type === 'controlplane' && !m.ca?.key) errs.push('issuing CA key is required for controlplane nodes (.machine.ca.key)')
  if (m.type === 'worker' && m.ca?.key) errs.push('issuing Talos API CA key is not allowed on non-controlplane nodes (.machine.ca)')
  const inst = m.install
  if (requireInstall && !inst) errs.push('install instructions are required in "metal" mode')
  else if (inst) {
    if (!inst.disk && !inst.diskSelector && requireInstall) errs.push('either install disk or diskSelector should be defined')
    if (inst.diskSelector?.name) errs.push('install disk selector is invalid: selector on name is not supported')
    if (inst.diskSelector?.type && !['ssd', 'hdd', 'nvme', 'sd'].includes(inst.diskSelector.type)) {
      errs.push(`install disk selector is invalid: unsupported disk type "${inst.diskSelector.type}"`)
    }
    if (inst.extraKernelArgs?.length && inst.grubUseUKICmdline)
      errs.push("install.extraKernelArgs and install.grubUseUKICmdline can't be used together")
  }
  if (m.type === 'worker' && m.network?.interfaces?.some((i) => i.vip))
    errs.push('virtual (shared) IP is not allowed on non-controlplane nodes')
  return errs
}

/** the nested go-multierror of a failed validation */
export const validationText = (errs) => multierror([`v1alpha1.Config: ${multierror(errs)}`])

const parseCmp = (v) => {
  const m = /^\s*(<=|>=|<|>|==)?\s*(.+)$/.exec(String(v))
  return { op: m[1] ?? '==', size: parseSize(m[2].replace(/\s+/g, '')) }
}

/** CEL-like rendering of a Talos diskSelector, as `no disks matched the expression:` prints it */
export function selectorExpression(sel) {
  const parts = []
  if (sel.size != null) {
    const { op, size } = parseCmp(sel.size)
    parts.push(`disk.size ${op} ${size}u`)
  }
  if (sel.model) parts.push(`glob("${sel.model}", disk.model)`)
  if (sel.serial) parts.push(`glob("${sel.serial}", disk.serial)`)
  if (sel.wwid) parts.push(`glob("${sel.wwid}", disk.wwid)`)
  if (sel.type) parts.push(sel.type === 'nvme' ? 'disk.transport == "nvme"' : sel.type === 'hdd' ? 'disk.rotational' : '!disk.rotational')
  parts.push('disk.transport != ""', '!disk.readonly', '!disk.cdrom')
  return parts.join(' && ')
}

// ryanuber/go-glob (Talos's CEL glob): only `*` is special
const glob = (pattern, s) =>
  new RegExp(
    `^${pattern
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
    's',
  ).test(s ?? '')

export function diskMatches(sel, d) {
  if (d.cdrom || d.readonly || !d.transport) return false
  if (sel.size != null) {
    const { op, size } = parseCmp(sel.size)
    const ok = { '<=': d.size <= size, '>=': d.size >= size, '<': d.size < size, '>': d.size > size, '==': d.size === size }[op]
    if (!ok) return false
  }
  if (sel.model && !glob(sel.model, d.model)) return false
  if (sel.serial && !glob(sel.serial, d.serial)) return false
  if (sel.wwid && !glob(sel.wwid, d.wwid)) return false
  if (sel.busPath && !glob(sel.busPath, d.busPath)) return false
  if (sel.name) return false // "selector on name is not supported" (v1alpha1_provider.go DiskMatchExpression)
  // type as DiskMatchExpression: nvme/sd are transports (sd = mmc), hdd/ssd rotational or not
  if (sel.type === 'nvme' && d.transport !== 'nvme') return false
  if (sel.type === 'sd' && d.transport !== 'mmc') return false
  if (sel.type === 'hdd' && !d.rotational) return false
  if (sel.type === 'ssd' && d.rotational) return false
  return true
}

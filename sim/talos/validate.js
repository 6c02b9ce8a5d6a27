// Apply-time machine config validation (v1alpha1 subset) and install disk matching.
import { parseAllDocuments, stringify } from 'yaml'
import { rpc, multierror } from './errors.js'
import { parseSize } from '../scenario.js'
import { diff } from './textdiff.js'

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

// ---- config diffs (pkg/machinery/config/configdiff DiffConfigs: both configs re-encoded without
// comments, then pkg/machinery/textdiff) ----

/**
 * `value` with its mapping keys in `ref`'s order (keys `ref` lacks after them, as they came), deeply:
 * Talos encodes every config in its structs' field order, so a file that only orders its keys
 * differently encodes the same; the active config stands for that order here.
 */
function alignKeys(value, ref) {
  if (Array.isArray(value)) return value.map((v, i) => alignKeys(v, Array.isArray(ref) ? ref[i] : undefined))
  if (!value || typeof value !== 'object') return value
  const refKeys = ref && typeof ref === 'object' && !Array.isArray(ref) ? Object.keys(ref) : []
  const keys = [...refKeys.filter((k) => k in value), ...Object.keys(value).filter((k) => !refKeys.includes(k))]
  return Object.fromEntries(keys.map((k) => [k, alignKeys(value[k], ref?.[k])]))
}

const yamlOf = (doc) => stringify(doc, { lineWidth: 0, indent: 4 })

/** a parsed config's encoding for a diff: the v1alpha1 document, then the others (each after `---`), keys in `ref`'s order */
export function encodeConfig(cfg, ref = cfg) {
  const others = cfg.documents ?? []
  const refOthers = ref?.documents ?? []
  return [
    yamlOf(alignKeys({ ...cfg }, ref)),
    ...others.map((d) =>
      yamlOf(
        alignKeys(
          d,
          refOthers.find((r) => r.kind === d.kind && r.name === d.name),
        ),
      ),
    ),
  ].join('---\n')
}

/** the dry run's `Config diff:` body: the active config against the new one; `No changes.` only when both encode the same */
export function configDiff(active, next) {
  return diff(active ? encodeConfig(active) : '', encodeConfig(next, active ?? next)) || 'No changes.'
}

// the fields Runtime.CanApplyImmediate takes from the new config as they are (applied live); any
// other difference needs a reboot (internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_runtime.go)
const LIVE_MACHINE = [
  'ca',
  'acceptedCAs',
  'time',
  'certSANs',
  'install',
  'network',
  'sysfs',
  'sysctls',
  'logging',
  'controlPlane',
  'kubelet',
  'kernel',
  'registries',
  'pods',
  'seccompProfiles',
  'nodeAnnotations',
  'nodeLabels',
  'nodeTaints',
]
const LIVE_FEATURES = ['kubernetesTalosAPIAccess', 'kubePrism', 'hostDNS', 'imageCache', 'nodeAddressSortAlgorithm']

/**
 * Runtime.CanApplyImmediate: null when the change applies live, else its error: the new v1alpha1
 * document with every live field (debug, cluster, the machine fields above) taken from the current
 * one, diffed against the current one (`this config change can't be applied in immediate mode\ndiff:\n<diff>`).
 * Only the v1alpha1 documents are compared.
 */
export function immediateRefusal(current, next) {
  if (!current) return 'no current config'
  const patched = structuredClone({ ...next })
  const copy = (to, from, key) => {
    if (from[key] === undefined) delete to[key]
    else to[key] = structuredClone(from[key])
  }
  for (const k of ['debug', 'cluster']) copy(patched, current, k)
  if (patched.machine && current.machine) {
    for (const k of LIVE_MACHINE) copy(patched.machine, current.machine, k)
    if (patched.machine.features && current.machine.features)
      for (const k of LIVE_FEATURES) copy(patched.machine.features, current.machine.features, k)
  }
  const before = yamlOf(alignKeys({ ...current }, current))
  const after = yamlOf(alignKeys(patched, current))
  if (before === after) return null
  return `this config change can't be applied in immediate mode\ndiff:\n${diff(before, after)}`
}

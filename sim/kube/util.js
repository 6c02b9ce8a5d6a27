// Small helpers shared by the store, handler and controllers.
import { randomBytes } from 'node:crypto'

// The alphabet the real name generator uses for generateName / pod suffixes (no vowels).
const ALNUM = 'bcdfghjklmnpqrstvwxz2456789'
export function randomSuffix(n = 5) {
  const bytes = randomBytes(n)
  let s = ''
  for (const b of bytes) s += ALNUM[b % ALNUM.length]
  return s
}

export function randomHex(n) {
  return randomBytes(Math.ceil(n / 2))
    .toString('hex')
    .slice(0, n)
}

// RFC 3339 with second precision, as metav1.Time marshals.
export function rfc3339(date) {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z')
}

export const clone = (o) => (o === undefined ? undefined : structuredClone(o))

export function deepEqual(a, b) {
  return JSON.stringify(a) === JSON.stringify(b)
}

// kubectl's duration.HumanDuration (the AGE column).
export function humanDuration(ms) {
  const seconds = Math.floor(ms / 1000)
  if (seconds < -1) return '<invalid>'
  if (seconds < 0) return '0s'
  if (seconds < 120) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 10) {
    const s = seconds % 60
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`
  }
  if (minutes < 180) return `${minutes}m`
  const hours = Math.floor(minutes / 60)
  if (hours < 8) {
    const m = minutes % 60
    return m === 0 ? `${hours}h` : `${hours}h${m}m`
  }
  if (hours < 48) return `${hours}h`
  if (hours < 24 * 8) {
    const h = hours % 24
    return h === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${h}h`
  }
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`
  if (hours < 24 * 365 * 8) {
    const y = Math.floor(hours / 24 / 365)
    const d = Math.floor(hours / 24) % 365
    return d === 0 ? `${y}y` : `${y}y${d}d`
  }
  return `${Math.floor(hours / 24 / 365)}y`
}

// RFC 7386 merge patch (also used for strategic merge and server-side apply bodies).
export function mergePatch(target, patch) {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return clone(patch)
  const out = target && typeof target === 'object' && !Array.isArray(target) ? { ...target } : {}
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k]
    else out[k] = mergePatch(out[k], v)
  }
  return out
}

// Strategic merge patch, as far as kubectl apply/patch need it: maps merge like a merge
// patch; lists of objects that all carry `name` (containers, env, volumes, ports...) merge
// by name ($patch: delete removes one, $setElementOrder orders them); other lists are
// replaced; $retainKeys / $deleteFromPrimitiveList directives are dropped.
export function strategicMergePatch(target, patch) {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return clone(patch)
  if (patch.$patch === 'replace') {
    const { $patch, ...rest } = patch
    return strategicMergePatch({}, rest)
  }
  if (patch.$patch === 'delete') return undefined
  const out = target && typeof target === 'object' && !Array.isArray(target) ? { ...target } : {}
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith('$')) continue
    if (k.startsWith('$setElementOrder/')) continue
    if (v === null) {
      delete out[k]
      continue
    }
    const order = patch[`$setElementOrder/${k}`]
    if (Array.isArray(v) && Array.isArray(out[k]) && isNamedList(v) && isNamedList(out[k])) out[k] = mergeNamed(out[k], v, order)
    else {
      const merged = Array.isArray(v)
        ? v.filter((x) => !(x && x.$patch === 'delete')).map((x) => strategicMergePatch(undefined, x))
        : strategicMergePatch(out[k], v)
      if (merged === undefined) delete out[k]
      else out[k] = merged
    }
  }
  return out
}

const isNamedList = (list) => list.every((x) => x && typeof x === 'object' && !Array.isArray(x) && typeof x.name === 'string')

function mergeNamed(current, patch, order) {
  const byName = new Map(current.map((x) => [x.name, x]))
  const names = current.map((x) => x.name)
  for (const item of patch) {
    if (item.$patch === 'delete') {
      byName.delete(item.name)
      continue
    }
    if (!byName.has(item.name)) names.push(item.name)
    byName.set(item.name, strategicMergePatch(byName.get(item.name), item))
  }
  const seq = Array.isArray(order) ? [...order.map((o) => o.name), ...names.filter((n) => !order.some((o) => o.name === n))] : names
  return [...new Set(seq)].filter((n) => byName.has(n)).map((n) => byName.get(n))
}

// RFC 6902 JSON patch: add, remove, replace, test, copy, move.
export function jsonPatch(doc, ops) {
  let root = clone(doc)
  const parse = (p) =>
    p
      .split('/')
      .slice(1)
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
  const get = (path) => parse(path).reduce((o, k) => (o == null ? undefined : o[k]), root)
  function put(path, value, mode) {
    const parts = parse(path)
    if (parts.length === 0) {
      root = value
      return
    }
    const last = parts.pop()
    const parent = parts.reduce((o, k) => (o == null ? undefined : o[k]), root)
    if (parent == null) throw new Error(`doc is missing path: "${path}"`)
    if (Array.isArray(parent)) {
      const i = last === '-' ? parent.length : Number(last)
      if (mode === 'remove') parent.splice(i, 1)
      else if (mode === 'add') parent.splice(i, 0, value)
      else parent[i] = value
    } else if (mode === 'remove') {
      if (!(last in parent)) throw new Error(`doc is missing key: "${path}"`)
      delete parent[last]
    } else parent[last] = value
  }
  for (const op of ops) {
    if (op.op === 'add') put(op.path, clone(op.value), 'add')
    else if (op.op === 'remove') put(op.path, undefined, 'remove')
    else if (op.op === 'replace') put(op.path, clone(op.value), 'replace')
    else if (op.op === 'test') {
      if (!deepEqual(get(op.path), op.value)) throw new Error(`testing value ${op.path} failed`)
    } else if (op.op === 'copy') put(op.path, clone(get(op.from)), 'add')
    else if (op.op === 'move') {
      const v = clone(get(op.from))
      put(op.from, undefined, 'remove')
      put(op.path, v, 'add')
    } else throw new Error(`Unexpected kind: ${op.op}`)
  }
  return root
}

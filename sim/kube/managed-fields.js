// metadata.managedFields and server-side apply (k8s.io/apimachinery/pkg/util/managedfields and
// sigs.k8s.io/structured-merge-diff): every write records which fields its manager set; an apply
// that changes a field another manager owns is a 409 Conflict unless forced, and a field the
// applier stops sending is removed when nobody else owns it. Simplification: lists are atomic
// (one leaf), as structured-merge-diff treats lists without merge keys.
import { ApiError } from './status.js'
import { clone, deepEqual, rfc3339 } from './util.js'

const TRACKED_META = ['labels', 'annotations', 'ownerReferences', 'finalizers']

/** Leaf paths (arrays of keys) of the fields an object sets, as managedFields tracks them. */
export function leafPaths(obj) {
  const out = []
  const walk = (v, path) => {
    if (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length) {
      for (const [k, x] of Object.entries(v)) walk(x, [...path, k])
    } else out.push(path)
  }
  for (const [k, v] of Object.entries(obj || {})) {
    if (k === 'apiVersion' || k === 'kind' || k === 'status') continue
    if (k === 'metadata') {
      for (const m of TRACKED_META) if (v?.[m] !== undefined) walk(v[m], ['metadata', m])
      continue
    }
    walk(v, [k])
  }
  return out
}

const key = (p) => JSON.stringify(p)

/** FieldsV1 ({"f:spec":{"f:replicas":{}}}) of a set of leaf paths. */
function toFieldsV1(paths) {
  const root = {}
  for (const p of paths) {
    let node = root
    for (const k of p) {
      node[`f:${k}`] ||= {}
      node = node[`f:${k}`]
    }
  }
  const mark = (n) => {
    for (const c of Object.values(n))
      if (Object.keys(c).length) {
        c['.'] = {}
        mark(c)
      }
  }
  mark(root)
  return root
}

function fromFieldsV1(fields) {
  const out = []
  const walk = (n, path) => {
    const kids = Object.keys(n).filter((k) => k.startsWith('f:'))
    if (!kids.length) return out.push(path)
    for (const k of kids) walk(n[k], [...path, k.slice(2)])
  }
  walk(fields || {}, [])
  return out.filter((p) => p.length)
}

const valueAt = (obj, path) => path.reduce((o, k) => (o && typeof o === 'object' ? o[k] : undefined), obj)

function removeAt(obj, path) {
  const parents = [obj]
  for (const k of path.slice(0, -1)) {
    const next = parents[parents.length - 1]?.[k]
    if (!next || typeof next !== 'object') return
    parents.push(next)
  }
  delete parents[parents.length - 1][path[path.length - 1]]
  // drop maps the removal emptied, as the merge does
  for (let i = parents.length - 1; i > 0; i--) if (!Object.keys(parents[i]).length) delete parents[i - 1][path[i - 1]]
}

/** The default manager of a non-apply write: the User-Agent up to its first '/' (fieldmanager.go). */
export function managerOf(query, userAgent) {
  return query.get('fieldManager') || String(userAgent || 'unknown').split('/')[0]
}

function entries(obj) {
  return (obj?.metadata?.managedFields || []).map((e) => ({ ...e, paths: fromFieldsV1(e.fieldsV1) }))
}

function finish(list, def, now) {
  return list
    .filter((e) => e.paths.length)
    .map((e) => ({
      manager: e.manager,
      operation: e.operation,
      apiVersion: def.apiVersion,
      time: e.time ?? now,
      fieldsType: 'FieldsV1',
      fieldsV1: toFieldsV1(e.paths),
    }))
}

/** managedFields after an ordinary write (create, update, patch) by `manager`: it owns what it changed. */
export function afterUpdate(def, old, next, manager, now) {
  const list = entries(old)
  const changed = leafPaths(next).filter((p) => !old || !deepEqual(valueAt(old, p), valueAt(next, p)))
  const gone = old
    ? leafPaths(old)
        .filter((p) => valueAt(next, p) === undefined)
        .map(key)
    : []
  if (old && !changed.length && !gone.length) return old.metadata?.managedFields
  const taken = new Set([...changed.map(key), ...gone])
  for (const e of list) e.paths = e.paths.filter((p) => !taken.has(key(p)))
  let mine = list.find((e) => e.manager === manager && e.operation === 'Update')
  if (!mine) {
    mine = { manager, operation: 'Update', paths: [] }
    list.push(mine)
  }
  const have = new Set(mine.paths.map(key))
  for (const p of changed) if (!have.has(key(p))) mine.paths.push(p)
  mine.time = rfc3339(now)
  return finish(list, def, rfc3339(now))
}

/**
 * Server-side apply of `applied` by `manager` over `live` (null: create). Returns the object to
 * store, its managedFields set; throws 409 Conflict naming each field another manager owns.
 */
export function apply(def, live, applied, manager, force, now) {
  const mine = leafPaths(applied)
  const list = entries(live)
  const conflicts = new Map() // manager -> paths
  for (const p of mine) {
    if (live && deepEqual(valueAt(live, p), valueAt(applied, p))) continue
    for (const e of list) {
      if (e.manager === manager && e.operation === 'Apply') continue
      if (e.paths.some((q) => key(q) === key(p) || key(q.slice(0, p.length)) === key(p) || key(p.slice(0, q.length)) === key(q))) {
        if (!conflicts.has(e.manager)) conflicts.set(e.manager, [])
        conflicts.get(e.manager).push(p)
      }
    }
  }
  if (conflicts.size && !force) throw conflictError(def, live.metadata.name, conflicts)
  const next = clone(live || {})
  // fields this manager applied before and no longer sends, owned by nobody else, go
  const previous = list.find((e) => e.manager === manager && e.operation === 'Apply')
  const sent = new Set(mine.map(key))
  if (previous) {
    const others = new Set(list.filter((e) => e !== previous).flatMap((e) => e.paths.map(key)))
    for (const p of previous.paths) if (!sent.has(key(p)) && !others.has(key(p))) removeAt(next, p)
  }
  const merge = (target, src) => {
    for (const [k, v] of Object.entries(src)) {
      if (v && typeof v === 'object' && !Array.isArray(v) && target[k] && typeof target[k] === 'object' && !Array.isArray(target[k]))
        merge(target[k], v)
      else target[k] = clone(v)
    }
  }
  merge(next, applied)
  // forced or shared: other managers keep only what this apply did not set to a new value
  for (const e of list) {
    if (e.manager === manager && e.operation === 'Apply') continue
    e.paths = e.paths.filter(
      (q) =>
        !mine.some(
          (p) => (key(q) === key(p) || key(q.slice(0, p.length)) === key(p)) && !(live && deepEqual(valueAt(live, p), valueAt(applied, p))),
        ),
    )
  }
  const rest = list.filter((e) => !(e.manager === manager && e.operation === 'Apply'))
  next.metadata ||= {}
  const same = previous && deepEqual(previous.paths.map(key).sort(), mine.map(key).sort())
  if (
    live &&
    same &&
    deepEqual(
      { ...next, metadata: { ...next.metadata, managedFields: undefined } },
      { ...live, metadata: { ...live.metadata, managedFields: undefined } },
    )
  ) {
    next.metadata.managedFields = live.metadata.managedFields // a no-op apply changes nothing
    return next
  }
  rest.push({ manager, operation: 'Apply', paths: mine, time: rfc3339(now) })
  next.metadata.managedFields = finish(rest, def, rfc3339(now))
  return next
}

// The text of staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/conflict.go.
function conflictError(def, name, conflicts) {
  const total = [...conflicts.values()].reduce((n, ps) => n + ps.length, 0)
  const field = (p) => `.${p.join('.')}`
  let message
  if (total === 1) {
    const [[m, [p]]] = [...conflicts]
    message = `Apply failed with 1 conflict: conflict with "${m}" using ${def.apiVersion}: ${field(p)}`
  } else {
    const parts = [...conflicts].map(
      ([m, ps]) => `conflicts with "${m}" using ${def.apiVersion}:\n${ps.map((p) => `- ${field(p)}`).join('\n')}`,
    )
    message = `Apply failed with ${total} conflicts: ${parts.join('\n')}`
  }
  const causes = [...conflicts].flatMap(([m, ps]) =>
    ps.map((p) => ({ reason: 'FieldManagerConflict', message: `conflict with "${m}" using ${def.apiVersion}`, field: field(p) })),
  )
  return new ApiError(409, 'Conflict', message, { name, ...(def.group ? { group: def.group } : {}), kind: def.plural, causes })
}

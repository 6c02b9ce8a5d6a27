// The object store ("etcd"): one global resourceVersion counter, a bounded event history
// per write (for watches that resume from a resourceVersion), and live watchers.
// Callers always get copies; writes go through create/update/remove.
import { randomUUID } from 'node:crypto'
import { clone, deepEqual, rfc3339 } from './util.js'
import { alreadyExists, conflict, expired, notFound } from './status.js'

export function createStore({ clock, historyLimit = 20000 }) {
  let rv = 1000
  const objects = new Map() // def.key -> Map(`${ns}/${name}` -> obj)
  const history = [] // { rv, key, type, obj, old }
  const watchers = new Set()
  const listeners = new Set()

  const bucket = (def) => {
    if (!objects.has(def.key)) objects.set(def.key, new Map())
    return objects.get(def.key)
  }
  const id = (ns, name) => `${ns || ''}/${name}`

  function emit(def, type, obj, old) {
    const event = { rv: Number(obj.metadata.resourceVersion), key: def.key, type, obj, old }
    history.push(event)
    if (history.length > historyLimit) history.splice(0, history.length - historyLimit)
    for (const w of watchers) if (w.def.key === def.key) w.deliver(event)
    for (const fn of listeners) fn(def, type, clone(obj), clone(old))
  }

  function stamp(obj) {
    obj.metadata.resourceVersion = String(++rv)
    return obj
  }

  const api = {
    get rv() {
      return String(rv)
    },

    get(def, ns, name) {
      return clone(bucket(def).get(id(ns, name)))
    },

    // raw: the stored objects themselves, for controllers that only read (never mutate them).
    list(def, ns, { raw = false } = {}) {
      const out = []
      for (const o of bucket(def).values()) if (!ns || !def.namespaced || o.metadata.namespace === ns) out.push(raw ? o : clone(o))
      return out.sort(
        (a, b) => (a.metadata.namespace || '').localeCompare(b.metadata.namespace || '') || a.metadata.name.localeCompare(b.metadata.name),
      )
    },

    create(def, input) {
      const obj = clone(input)
      const { name, namespace } = obj.metadata
      const b = bucket(def)
      if (b.has(id(namespace, name))) throw alreadyExists(def, name)
      obj.apiVersion = def.apiVersion
      obj.kind = def.kind
      obj.metadata.uid = randomUUID()
      obj.metadata.creationTimestamp = rfc3339(clock.now())
      if (def.hasGeneration) obj.metadata.generation = 1
      else delete obj.metadata.generation
      stamp(obj)
      b.set(id(namespace, name), obj)
      emit(def, 'ADDED', obj)
      return clone(obj)
    },

    // Full replacement of an existing object. System metadata is kept; the generation
    // bumps when spec changes; a stale resourceVersion in `input` is a 409.
    update(def, input, { checkVersion = true } = {}) {
      const { name, namespace } = input.metadata
      const b = bucket(def)
      const old = b.get(id(namespace, name))
      if (!old) throw notFound(def, name)
      const want = input.metadata.resourceVersion
      if (checkVersion && want && want !== old.metadata.resourceVersion) throw conflict(def, name)
      const obj = clone(input)
      obj.apiVersion = def.apiVersion
      obj.kind = def.kind
      for (const k of ['uid', 'creationTimestamp', 'name', 'namespace', 'generation', 'deletionTimestamp']) {
        if (old.metadata[k] === undefined) delete obj.metadata[k]
        else obj.metadata[k] = old.metadata[k]
      }
      if (def.hasGeneration && !deepEqual(old.spec, obj.spec)) obj.metadata.generation = (old.metadata.generation || 0) + 1
      obj.metadata.resourceVersion = old.metadata.resourceVersion
      if (deepEqual(old, obj)) return clone(old) // a no-op write does not bump the resourceVersion
      stamp(obj)
      b.set(id(namespace, name), obj)
      emit(def, 'MODIFIED', obj, old)
      return clone(obj)
    },

    remove(def, ns, name) {
      const b = bucket(def)
      const old = b.get(id(ns, name))
      if (!old) throw notFound(def, name)
      b.delete(id(ns, name))
      const obj = stamp(clone(old))
      emit(def, 'DELETED', obj, old)
      return clone(obj)
    },

    // Watch one resource. `match(obj)` applies namespace and selectors. From a
    // resourceVersion: replay history after it; without one (or "0"): synthetic ADDEDs.
    // Returns a cancel function; throws 410 when the history no longer reaches back.
    watch(def, { ns, match, resourceVersion, send }) {
      const inScope = (o) => o && (!ns || !def.namespaced || o.metadata.namespace === ns) && match(o)
      const w = {
        def,
        deliver(ev) {
          const now = inScope(ev.obj)
          const before = ev.type === 'MODIFIED' ? inScope(ev.old) : ev.type === 'DELETED' ? inScope(ev.old) : false
          if (ev.type === 'ADDED' && now) send('ADDED', ev.obj)
          else if (ev.type === 'DELETED' && before) send('DELETED', ev.obj)
          else if (ev.type === 'MODIFIED') {
            // A selector that stops/starts matching turns the change into DELETED/ADDED.
            if (now && before) send('MODIFIED', ev.obj)
            else if (now) send('ADDED', ev.obj)
            else if (before) send('DELETED', ev.obj)
          }
        },
      }
      const from = Number(resourceVersion || 0)
      if (!from) {
        for (const o of api.list(def, ns)) if (match(o)) send('ADDED', o)
      } else {
        const oldest = history.length ? history[0].rv : rv + 1
        if (from < oldest - 1 && from < rv) throw expired(from, oldest - 1)
        for (const ev of history) if (ev.rv > from && ev.key === def.key) w.deliver(ev)
      }
      watchers.add(w)
      return () => watchers.delete(w)
    },

    // Controllers subscribe to every write: fn(def, type, obj, old).
    onChange(fn) {
      listeners.add(fn)
      return () => listeners.delete(fn)
    },

    namespaceObjects(ns) {
      const out = []
      for (const [key, b] of objects) for (const o of b.values()) if (o.metadata.namespace === ns) out.push({ key, obj: o })
      return out
    },

    allObjects({ raw = false } = {}) {
      const out = []
      for (const [key, b] of objects) for (const o of b.values()) out.push({ key, obj: raw ? o : clone(o) })
      return out
    },
  }
  return api
}

// talosctl get: COSI resources, one-to-one per node; raw errors (no node prefix).
import { io } from '../../cli-io.js'
import { withClient, withMaintenance, versionCheck } from '../session.js'
import { fromWire, multiError } from '../errors.js'
import { table, goJSON, goYAML } from '../format.js'
import { parseJSONPath, evalJSONPath } from '../jsonpath.js'

const META_ORDER = ['namespace', 'type', 'id', 'version', 'owner', 'phase', 'created', 'updated', 'labels', 'annotations', 'finalizers']

function cell(v) {
  if (v === undefined || v === null) return ''
  if (typeof v === 'object') return JSON.stringify(v)
  return String(v)
}

function metaOrdered(md) {
  const out = {}
  for (const k of META_ORDER) {
    if (md[k] === undefined) continue
    if (['labels', 'annotations'].includes(k) && !Object.keys(md[k]).length) continue
    if (k === 'finalizers' && !md[k].length) continue
    out[k] = (k === 'created' || k === 'updated') ? { __rawYaml: md[k] } : md[k]
  }
  return out
}

function writer(format) {
  const out = (s) => io().stdout.write(s)
  if (format === 'table') {
    let rows = []
    let def
    return {
      header(d) { def = d; rows.push(['NODE', 'NAMESPACE', 'TYPE', 'ID', 'VERSION', ...d.columns.map((c) => c.name.toUpperCase())]) },
      resource(node, r) {
        rows.push([node, r.metadata.namespace, def.displayType, r.metadata.id, String(r.metadata.version),
          ...def.columns.map((c) => { const res = evalJSONPath(parseJSONPath(c.jsonPath), r.spec, true); return res.map(cell).join(' ') })])
      },
      flush() { if (rows.length) out(table(rows)); rows = [] },
    }
  }
  const doc = (node, r) => ({ metadata: r.metadata, node, spec: r.spec })
  if (format === 'json') return { header() {}, resource: (node, r) => out(goJSON(doc(node, r)) + '\n'), flush() {} }
  if (format === 'yaml') {
    let dashes = false
    return {
      header() {},
      resource(node, r) {
        if (dashes) out('---\n')
        dashes = true
        out(`node: ${node}\n`)
        out(goYAML({ metadata: metaOrdered(r.metadata), spec: r.spec }))
      },
      flush() {},
    }
  }
  if (format.startsWith('jsonpath=')) {
    let jp
    try { jp = parseJSONPath(format.slice('jsonpath='.length)) } catch (e) { throw new Error(`error parsing jsonpath: ${e.message}`) }
    return {
      header() {},
      resource(node, r) {
        let results
        try { results = evalJSONPath(jp, doc(node, r), false) } catch (e) { throw new Error(`error finding result for jsonpath: ${e.message}`) }
        for (const v of results) out((v !== null && typeof v === 'object' ? goJSON(v) : String(v)) + '\n')
      },
      flush() {},
    }
  }
  throw new Error(`output format ${JSON.stringify(format)} is not supported`)
}

export async function get({ positional, flag, g }) {
  if (flag('watch')) throw new Error('get --watch is not supported by the simulator')
  const s = flag('insecure') ? withMaintenance(g) : await withClient(g)
  await versionCheck(s)
  const w = writer(flag('output'))
  const [type, id] = positional
  const nodes = s.nodes.length ? s.nodes : ['']
  const body = { type, namespace: flag('namespace') || undefined, id }
  const errs = []
  try {
    for (let i = 0; i < nodes.length; i++) {
      const node = nodes[i]
      let msg
      try {
        const reply = await s.rpc('resources.Get', body, { nodes: node ? [node] : [] })
        msg = (reply.messages ?? [])[0] ?? { node, data: { resources: [] } }
      } catch (e) {
        if (i === 0) throw e
        errs.push(e)
        continue
      }
      if (msg.error) {
        if (i === 0) throw fromWire(msg.error)
        errs.push(fromWire(msg.error))
        continue
      }
      if (i === 0) w.header(msg.data.definition)
      for (const r of msg.data.resources ?? []) w.resource(node, r)
    }
  } finally {
    w.flush()
  }
  if (errs.length) throw multiError(errs)
}

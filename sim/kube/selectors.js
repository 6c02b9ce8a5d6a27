// Label and field selectors as the API server parses them from list/watch queries.
// Both compile to a predicate over an object; an invalid selector throws (-> 400).

// Split on commas that are not inside parentheses ("tier in (a,b),app=x").
function splitTerms(text) {
  const terms = []
  let depth = 0
  let cur = ''
  for (const ch of text) {
    if (ch === '(') depth++
    if (ch === ')') depth--
    if (ch === ',' && depth === 0) {
      terms.push(cur)
      cur = ''
    } else cur += ch
  }
  terms.push(cur)
  return terms.map((t) => t.trim()).filter(Boolean)
}

export function parseLabelSelector(text) {
  if (!text) return () => true
  const tests = splitTerms(text).map((term) => {
    let m
    if ((m = /^!\s*([\w./-]+)$/.exec(term))) {
      const k = m[1]
      return (l) => !(k in l)
    }
    if ((m = /^([\w./-]+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term))) {
      const [, k, op, list] = m
      const vals = list.split(',').map((v) => v.trim())
      return op === 'in' ? (l) => k in l && vals.includes(l[k]) : (l) => !(k in l) || !vals.includes(l[k])
    }
    if ((m = /^([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)$/.exec(term))) {
      const [, k, op, v] = m
      return op === '!=' ? (l) => l[k] !== v : (l) => k in l && l[k] === v
    }
    if ((m = /^([\w./-]+)$/.exec(term))) {
      const k = m[1]
      return (l) => k in l
    }
    throw new Error(`unable to parse requirement: found '${term}', expected: identifier`)
  })
  return (obj) => {
    const l = obj?.metadata?.labels || {}
    return tests.every((t) => t(l))
  }
}

function fieldValue(obj, path) {
  let v = obj
  for (const part of path.split('.')) v = v == null ? undefined : v[part]
  if (v == null) return ''
  return typeof v === 'object' ? JSON.stringify(v) : String(v)
}

// Generic: a dotted path into the object with =, ==, != (commas AND).
export function parseFieldSelector(text) {
  if (!text) return () => true
  const tests = splitTerms(text).map((term) => {
    const m = /^([\w.]+)\s*(==|=|!=)\s*(.*)$/.exec(term)
    if (!m) throw new Error(`invalid selector: '${text}'; can't understand '${term}'`)
    const [, path, op, val] = m
    return op === '!=' ? (o) => fieldValue(o, path) !== val : (o) => fieldValue(o, path) === val
  })
  return (obj) => tests.every((t) => t(obj))
}

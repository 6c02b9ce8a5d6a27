// A small subset of k8s.io/client-go/util/jsonpath: {.a.b}, {.a[0]}, {.a[*].b}, {.a['x.y']}, literal text.

export function parseJSONPath(tpl) {
  const parts = []
  let i = 0
  if (!tpl.includes('{')) tpl = `{${tpl}}`
  while (i < tpl.length) {
    const open = tpl.indexOf('{', i)
    if (open < 0) { parts.push({ text: tpl.slice(i) }); break }
    if (open > i) parts.push({ text: tpl.slice(i, open) })
    const close = tpl.indexOf('}', open)
    if (close < 0) throw new Error('unclosed action')
    parts.push({ path: parsePath(tpl.slice(open + 1, close).trim()) })
    i = close + 1
  }
  return parts
}

function parsePath(expr) {
  const steps = []
  let i = 0
  if (expr === '' || expr === '.' || expr === '@') return steps
  while (i < expr.length) {
    const c = expr[i]
    if (c === '.') {
      const m = expr.slice(i + 1).match(/^[A-Za-z0-9_\-/]*/)
      if (m[0]) steps.push({ key: m[0] })
      i += 1 + m[0].length
    } else if (c === '[') {
      const close = expr.indexOf(']', i)
      if (close < 0) throw new Error('unterminated array')
      const inner = expr.slice(i + 1, close).trim()
      if (inner === '*') steps.push({ all: true })
      else if (/^-?\d+$/.test(inner)) steps.push({ index: parseInt(inner, 10) })
      else if (/^'.*'$|^".*"$/.test(inner)) steps.push({ key: inner.slice(1, -1) })
      else throw new Error(`invalid array index ${inner}`)
      i = close + 1
    } else if (c === '@' || c === '$') i++
    else throw new Error(`unrecognized character in action: U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')} '${c}'`)
  }
  return steps
}

/** Evaluate against data; allowMissing as AllowMissingKeys(true) (table columns). Returns values. */
export function evalJSONPath(parts, data, allowMissing) {
  const out = []
  for (const p of parts) {
    if (p.text !== undefined) { out.push(p.text); continue }
    let cur = [data]
    for (const st of p.path) {
      const next = []
      for (const v of cur) {
        if (st.key !== undefined) {
          if (v && typeof v === 'object' && !Array.isArray(v) && st.key in v) next.push(v[st.key])
          else if (!allowMissing) throw new Error(`${st.key} is not found`)
        } else if (st.all) {
          if (Array.isArray(v)) next.push(...v)
          else if (v && typeof v === 'object') next.push(...Object.keys(v).sort().map((k) => v[k]))
        } else if (Array.isArray(v)) {
          const idx = st.index < 0 ? v.length + st.index : st.index
          if (idx >= 0 && idx < v.length) next.push(v[idx])
          else if (!allowMissing) throw new Error(`array index out of bounds: index ${st.index}, length ${v.length}`)
        }
      }
      cur = next
    }
    out.push(...cur)
  }
  return out
}

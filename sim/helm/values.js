// Chart values as helm v3 merges them: -f files (in order, deep merge), then --set (strvals).
import { local } from '../cli-io.js'
import fs from 'node:fs'

export const isMap = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)

/** Deep merge b into a copy of a (b wins; maps merge, everything else replaces). */
export function mergeMaps(a, b) {
  const out = { ...(a || {}) }
  for (const [k, v] of Object.entries(b || {})) {
    out[k] = isMap(v) && isMap(out[k]) ? mergeMaps(out[k], v) : v
  }
  return out
}

/** Chart defaults coalesced with user values; a user `null` deletes the default key (as helm does). */
export function coalesce(defaults, user) {
  const out = { ...(defaults || {}) }
  for (const [k, v] of Object.entries(user || {})) {
    if (v === null) delete out[k]
    else out[k] = isMap(v) && isMap(out[k]) ? coalesce(out[k], v) : v
  }
  return out
}

// helm's strvals typedVal: true/false/null/ints are typed, everything else a string.
function typedVal(val) {
  if (val.toLowerCase() === 'true') return true
  if (val.toLowerCase() === 'false') return false
  if (val.toLowerCase() === 'null') return null
  if (val === '0') return 0
  if (val.length && val[0] !== '0' && /^[+-]?\d+$/.test(val)) {
    const n = Number(val)
    if (Number.isSafeInteger(n)) return n
  }
  return val
}

/** Split on unescaped commas (helm's `\,` escapes a comma). */
function splitUnescaped(s, sep) {
  const parts = []
  let cur = ''
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '\\' && i + 1 < s.length) {
      cur += s[i + 1]
      i++
    } else if (s[i] === sep) {
      parts.push(cur)
      cur = ''
    } else cur += s[i]
  }
  parts.push(cur)
  return parts
}

/** Apply one --set string ("a.b=c,d[0]=e") onto values, as helm's strvals.ParseInto does. */
export function applySet(values, expr, { asString = false } = {}) {
  for (const pair of splitUnescaped(expr, ',')) {
    if (pair === '') continue
    const eq = pair.indexOf('=')
    if (eq < 0) throw new Error(`failed parsing --set data: key "${pair}" has no value`)
    const key = pair.slice(0, eq)
    const raw = pair.slice(eq + 1)
    const val = asString ? raw : typedVal(raw)
    const segs = key.split('.')
    let cur = values
    segs.forEach((seg, i) => {
      const m = /^(.*)\[(\d+)\]$/.exec(seg)
      const last = i === segs.length - 1
      if (m) {
        if (!Array.isArray(cur[m[1]])) cur[m[1]] = []
        const arr = cur[m[1]]
        const idx = Number(m[2])
        while (arr.length <= idx) arr.push(null)
        if (last) arr[idx] = val
        else {
          if (!isMap(arr[idx])) arr[idx] = {}
          cur = arr[idx]
        }
      } else if (last) {
        cur[seg] = val
      } else {
        if (!isMap(cur[seg])) cur[seg] = {}
        cur = cur[seg]
      }
    })
  }
  return values
}

/** helm's MergeValues: value files, then --set, then --set-string. */
export async function mergeValues({ files = [], sets = [], setStrings = [] }) {
  let base = {}
  for (const f of files) {
    let text
    try {
      text = f === '-' ? fs.readFileSync(0, 'utf8') : fs.readFileSync(local(f), 'utf8')
    } catch {
      throw new Error(`open ${f}: no such file or directory`)
    }
    const { parse } = await import('yaml')
    let parsed
    try {
      parsed = parse(text)
    } catch (e) {
      throw new Error(`failed to parse ${f}: error converting YAML to JSON: yaml: ${e.message.split('\n')[0]}`)
    }
    base = mergeMaps(base, isMap(parsed) ? parsed : {})
  }
  for (const s of sets) applySet(base, s)
  for (const s of setStrings) applySet(base, s, { asString: true })
  return base
}

/** Stable JSON for comparing values/manifests (key order independent). */
export function stableStringify(v) {
  if (Array.isArray(v)) return `[${v.map(stableStringify).join(',')}]`
  if (isMap(v)) return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${stableStringify(v[k])}`).join(',')}}`
  return JSON.stringify(v)
}

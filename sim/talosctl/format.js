// Output helpers: Go text/tabwriter, encoding/json with 4-space indent, a yaml.v3-like emitter.

/** tabwriter with minwidth 0, tabwidth 0, padding 3, space padding; last cell not padded. */
export function table(rows) {
  const widths = []
  for (const r of rows) r.slice(0, -1).forEach((c, i) => { widths[i] = Math.max(widths[i] ?? 0, [...String(c)].length) })
  return rows.map((r) => r.map((c, i) => (i < r.length - 1 ? String(c).padEnd(widths[i] + 3 + (String(c).length - [...String(c)].length)) : String(c))).join('') + '\n').join('')
}

/** Go encoding/json string escaping (with HTML escaping, as json.Encoder does by default). */
function jsonString(s) {
  return JSON.stringify(s).replace(/[<>&\u2028\u2029]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'))
}

/** json.MarshalIndent(v, "", "    ") with map keys sorted (Go maps marshal sorted). */
export function goJSON(v, indent = '') {
  if (v === null || v === undefined) return 'null'
  if (typeof v === 'string') return jsonString(v)
  if (typeof v === 'number' || typeof v === 'boolean') return String(v)
  if (v instanceof Date) return jsonString(v.toISOString().replace('.000Z', 'Z'))
  const inner = indent + '    '
  if (Array.isArray(v)) {
    if (v.length === 0) return '[]'
    return '[\n' + v.map((x) => inner + goJSON(x, inner)).join(',\n') + '\n' + indent + ']'
  }
  const keys = Object.keys(v).filter((k) => v[k] !== undefined).sort()
  if (keys.length === 0) return '{}'
  return '{\n' + keys.map((k) => inner + jsonString(k) + ': ' + goJSON(v[k], inner)).join(',\n') + '\n' + indent + '}'
}

const plainUnsafe = /^(?:|~|null|Null|NULL|true|True|TRUE|false|False|FALSE|y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF|[-+]?(?:\d[\d_]*)?\.?\d[\d_]*(?:[eE][-+]?\d+)?|0x[0-9a-fA-F_]+|0o?[0-7_]+|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|\d{4}-\d\d?-\d\d?(?:[Tt ].*)?)$/

function yamlScalar(v, indent) {
  if (v === null || v === undefined) return 'null'
  if (typeof v === 'boolean' || typeof v === 'number') return String(v)
  if (v && v.__rawYaml !== undefined) return v.__rawYaml
  const s = String(v)
  if (s.includes('\n')) {
    const chomp = s.endsWith('\n') ? (s.endsWith('\n\n') ? '+' : '') : '-'
    const body = s.replace(/\n$/, '')
    return '|' + chomp + '\n' + body.split('\n').map((l) => (l ? indent + l : '')).join('\n')
  }
  if (plainUnsafe.test(s) || /^[\s\-?:,[\]{}#&*!|>'"%@`]/.test(s) || /\s$/.test(s) || s.includes(': ') || s.includes(' #') || s.endsWith(':')) {
    return JSON.stringify(s)
  }
  return s
}

/** A yaml.v3 encoder with SetIndent(4) for plain data; keys keep their insertion order. */
export function goYAML(v, indent = '') {
  const isObj = (x) => x && typeof x === 'object' && !Array.isArray(x) && x.__rawYaml === undefined
  const lines = []
  const emit = (val, ind) => {
    if (Array.isArray(val)) {
      for (const item of val) {
        if (isObj(item) && Object.keys(item).length) {
          const sub = goYAML(item, ind + '  ').split('\n').filter(Boolean)
          lines.push(ind + '- ' + sub[0].slice(ind.length + 2), ...sub.slice(1))
        } else if (Array.isArray(item) && item.length) {
          lines.push(ind + '-')
          emit(item, ind + '    ')
        } else lines.push(ind + '- ' + inline(item, ind + '    '))
      }
      return
    }
    for (const [k, x] of Object.entries(val)) {
      if (x === undefined) continue
      if (isObj(x) && Object.keys(x).length) { lines.push(`${ind}${k}:`); emit(x, ind + '    ') }
      else if (Array.isArray(x) && x.length) { lines.push(`${ind}${k}:`); emit(x, ind + '    ') }
      else lines.push(`${ind}${k}: ${inline(x, ind + '    ')}`)
    }
  }
  const inline = (x, ind) => (Array.isArray(x) ? '[]' : isObj(x) ? '{}' : yamlScalar(x, ind))
  emit(v, indent)
  return lines.join('\n') + '\n'
}

/** A Go duration rounded to seconds, as services' LAST CHANGE prints it. */
export function goDurationSeconds(ms) {
  let s = Math.round(ms / 1000)
  if (s === 0) return '0s'
  const h = Math.floor(s / 3600); s -= h * 3600
  const m = Math.floor(s / 60); s -= m * 60
  return (h ? `${h}h` : '') + (h || m ? `${m}m` : '') + `${s}s`
}

/** go-humanize Bytes (SI units). */
export function humanBytes(n) {
  if (n < 10) return `${n} B`
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB', 'EB']
  const e = Math.floor(Math.log(n) / Math.log(1000))
  const val = Math.floor((n / 1000 ** e) * 10 + 0.5) / 10
  return (val < 10 ? val.toFixed(1) : val.toFixed(0)) + ' ' + units[e]
}

// pflag-like flag set: the parsing rules and error texts of spf13/pflag, which talosctl uses via cobra.

const zeroDefaults = new Set(['false', '<nil>', '', '0', '[]', '0s'])

/** Go time.ParseDuration subset: "1m0s", "500ms", "20m", "1h2m3.5s". Returns milliseconds. */
export function parseDuration(s) {
  if (s === '0') return 0
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/y
  const unit = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1000, m: 60000, h: 3600000 }
  let i = 0
  let sign = 1
  if (s[0] === '-' || s[0] === '+') { sign = s[0] === '-' ? -1 : 1; i = 1 }
  if (i >= s.length) throw new Error(`time: invalid duration "${s}"`)
  let total = 0
  while (i < s.length) {
    re.lastIndex = i
    const m = re.exec(s)
    if (!m) {
      if (/^[\d.]+$/.test(s.slice(i))) throw new Error(`time: missing unit in duration "${s}"`)
      throw new Error(`time: invalid duration "${s}"`)
    }
    total += parseFloat(m[1]) * unit[m[2]]
    i = re.lastIndex
  }
  return sign * total
}

/** Go's time.Duration.String() for whole milliseconds. */
export function formatDuration(ms) {
  if (ms === 0) return '0s'
  const neg = ms < 0
  ms = Math.abs(ms)
  let out
  if (ms < 1000) out = `${ms}ms`
  else {
    const h = Math.floor(ms / 3600000)
    const m = Math.floor((ms % 3600000) / 60000)
    const s = (ms % 60000) / 1000
    out = (h ? `${h}h` : '') + (h || m ? `${m}m` : '') + `${+s.toFixed(3)}s`
  }
  return (neg ? '-' : '') + out
}

function parseBool(v) {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(v)) return true
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(v)) return false
  throw new Error(`strconv.ParseBool: parsing ${JSON.stringify(v)}: invalid syntax`)
}

// Minimal Go encoding/csv reader for one line, as pflag's string slices use it.
function readCSV(v) {
  if (v === '') return []
  const out = []
  let i = 0
  while (i <= v.length) {
    if (v[i] === '"') {
      let cell = ''
      i++
      for (;;) {
        if (i >= v.length) throw new Error('parse error on line 1, column ' + (i + 1) + ': extraneous or missing " in quoted-field')
        if (v[i] === '"') {
          if (v[i + 1] === '"') { cell += '"'; i += 2; continue }
          i++
          break
        }
        cell += v[i++]
      }
      if (i < v.length && v[i] !== ',') throw new Error(`parse error on line 1, column ${i + 1}: extraneous or missing " in quoted-field`)
      out.push(cell)
      i++
    } else {
      const j = v.indexOf(',', i)
      if (j < 0) { out.push(v.slice(i)); break }
      out.push(v.slice(i, j))
      i = j + 1
      if (i === v.length) { out.push(''); break }
    }
  }
  return out
}

/**
 * A flag: {name, short, type, usage, def, hidden, noOpt, typeName, set(value)}.
 * type: bool | string | stringSlice | stringArray | duration | int | enum (custom pflag.Value).
 */
export class Flag {
  constructor(spec) {
    Object.assign(this, { short: '', hidden: false, persistent: false }, spec)
    if (this.type === 'bool') this.noOpt = 'true'
    this.reset()
  }

  reset() {
    this.changed = false
    this.value = this.type === 'stringSlice' || this.type === 'stringArray' ? [...(this.def ?? [])] : this.def
  }

  /** The default as pflag prints it (DefValue). */
  defValue() {
    switch (this.type) {
      case 'bool': return String(!!this.def)
      case 'stringSlice': case 'stringArray': return '[' + (this.def ?? []).join(',') + ']'
      case 'duration': return formatDuration(this.def ?? 0)
      case 'int': return String(this.def ?? 0)
      default: return this.def ?? ''
    }
  }

  typeLabel() {
    return { bool: 'bool', string: 'string', stringSlice: 'strings', stringArray: 'stringArray', duration: 'duration', int: 'int' }[this.type] ?? this.typeName
  }

  set(v) {
    switch (this.type) {
      case 'bool': this.value = parseBool(v); break
      case 'string': this.value = v; break
      case 'int': {
        if (!/^[+-]?\d+$/.test(v)) throw new Error(`strconv.ParseInt: parsing ${JSON.stringify(v)}: invalid syntax`)
        this.value = parseInt(v, 10)
        break
      }
      case 'duration': this.value = parseDuration(v); break
      case 'stringSlice': {
        const items = readCSV(v)
        this.value = this.changed ? this.value.concat(items) : items
        break
      }
      case 'stringArray': this.value = this.changed ? this.value.concat([v]) : [v]; break
      case 'enum': {
        if (!this.options.includes(v)) throw new Error(this.invalid(v))
        this.value = v
        break
      }
      default: throw new Error('unknown flag type ' + this.type)
    }
    this.changed = true
  }
}

export class FlagSet {
  constructor(flags = []) {
    this.flags = []
    for (const f of flags) this.add(f)
  }

  add(f) {
    if (!(f instanceof Flag)) f = new Flag(f)
    if (this.lookup(f.name)) return this.lookup(f.name)
    this.flags.push(f)
    return f
  }

  lookup(name) { return this.flags.find((f) => f.name === name) }
  lookupShort(s) { return this.flags.find((f) => f.short === s) }

  /** Parse args (interspersed), returning positional args; throws Error with pflag's texts. */
  parse(args) {
    const positional = []
    const setFlag = (flag, value, display) => {
      try {
        flag.set(value)
      } catch (e) {
        throw new Error(`invalid argument ${JSON.stringify(value)} for "${display}" flag: ${e.message}`)
      }
    }
    for (let i = 0; i < args.length; i++) {
      const s = args[i]
      if (s.length === 0 || s[0] !== '-' || s.length === 1) { positional.push(s); continue }
      if (s[1] === '-') {
        if (s.length === 2) { positional.push(...args.slice(i + 1)); break }
        const body = s.slice(2)
        if (body.length === 0 || body[0] === '-' || body[0] === '=') throw new Error(`bad flag syntax: ${s}`)
        const eq = body.indexOf('=')
        const name = eq >= 0 ? body.slice(0, eq) : body
        const flag = this.lookup(name)
        if (!flag) {
          if (name === 'help') { const e = new Error('pflag: help requested'); e.help = true; throw e }
          throw new Error(`unknown flag: --${name}`)
        }
        const display = flag.short ? `-${flag.short}, --${flag.name}` : `--${flag.name}`
        if (eq >= 0) setFlag(flag, body.slice(eq + 1), display)
        else if (flag.noOpt !== undefined) setFlag(flag, flag.noOpt, display)
        else if (i + 1 < args.length) setFlag(flag, args[++i], display)
        else throw new Error(`flag needs an argument: ${s}`)
      } else {
        let shorts = s.slice(1)
        while (shorts.length > 0) {
          const c = shorts[0]
          const flag = this.lookupShort(c)
          if (!flag) {
            if (c === 'h') { const e = new Error('pflag: help requested'); e.help = true; throw e }
            throw new Error(`unknown shorthand flag: '${c}' in -${shorts}`)
          }
          const display = `-${flag.short}, --${flag.name}`
          if (shorts.length > 2 && shorts[1] === '=') { setFlag(flag, shorts.slice(2), display); shorts = ''; break }
          if (flag.noOpt !== undefined) { setFlag(flag, flag.noOpt, display); shorts = shorts.slice(1); continue }
          if (shorts.length > 1) { setFlag(flag, shorts.slice(1), display); shorts = ''; break }
          if (i + 1 < args.length) { setFlag(flag, args[++i], display); shorts = ''; break }
          throw new Error(`flag needs an argument: '${c}' in -${shorts}`)
        }
      }
    }
    return positional
  }

  /** pflag FlagUsages: sorted, aligned, hidden flags skipped. */
  usages() {
    const visible = this.flags.filter((f) => !f.hidden).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    const lines = []
    let maxlen = 0
    for (const f of visible) {
      let line = f.short ? `  -${f.short}, --${f.name}` : `      --${f.name}`
      let usage = f.usage
      let varname = f.typeLabel()
      const bq = usage.match(/`([^`]*)`/)
      if (bq) { varname = bq[1]; usage = usage.replace(/`([^`]*)`/, '$1') } else if (f.type === 'bool') varname = ''
      if (varname) line += ' ' + varname
      if (f.noOpt !== undefined && f.type === 'bool' && f.noOpt !== 'true') line += `[=${f.noOpt}]`
      line += '\0'
      if (line.length > maxlen) maxlen = line.length
      line += usage
      const dv = f.defValue()
      if (!zeroDefaults.has(dv)) line += f.type === 'string' ? ` (default ${JSON.stringify(dv)})` : ` (default ${dv})`
      lines.push(line)
    }
    return lines.map((line) => {
      const sidx = line.indexOf('\0')
      return line.slice(0, sidx) + ' ' + ' '.repeat(maxlen - sidx) + ' ' + line.slice(sidx + 1)
    }).join('\n') + (lines.length ? '\n' : '')
  }
}

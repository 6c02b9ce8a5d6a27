// Flag parsing as spf13/pflag + cobra do it, with their error texts, shared by the simulated helm
// and flux. A flag spec: { name: { type, short?, def? } } with type one of
// bool | string | int | duration | stringArray | stringSlice | stringToString.
// Errors thrown are plain Error objects whose message is exactly what cobra returns.

/** Go's time.ParseDuration, in milliseconds. Throws with Go's message. */
export function parseDuration(s) {
  const orig = s
  if (s === '0') return 0
  if (s === '') throw new Error(`time: invalid duration ${JSON.stringify(orig)}`)
  let neg = false
  if (s[0] === '-' || s[0] === '+') {
    neg = s[0] === '-'
    s = s.slice(1)
  }
  if (s === '0') return 0
  const units = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1000, m: 60000, h: 3600000 }
  let total = 0
  while (s.length) {
    const num = /^(\d*)(\.(\d*))?/.exec(s)
    if (!num || (num[1] === '' && (num[3] === undefined || num[3] === '')))
      throw new Error(`time: invalid duration ${JSON.stringify(orig)}`)
    s = s.slice(num[0].length)
    const u = /^[^\d.]*/.exec(s)[0]
    if (!u) throw new Error(`time: missing unit in duration ${JSON.stringify(orig)}`)
    if (!(u in units)) throw new Error(`time: unknown unit ${JSON.stringify(u)} in duration ${JSON.stringify(orig)}`)
    s = s.slice(u.length)
    total += parseFloat(num[0] || '0') * units[u]
  }
  return neg ? -total : total
}

/** Go's Duration.String() for a number of milliseconds (e.g. 300000 -> "5m0s"). */
export function formatDuration(ms) {
  if (ms === 0) return '0s'
  const neg = ms < 0
  let rest = Math.abs(ms)
  let out = ''
  if (rest < 1000) {
    out = `${+rest.toFixed(6)}ms`
  } else {
    const h = Math.floor(rest / 3600000)
    rest -= h * 3600000
    const m = Math.floor(rest / 60000)
    rest -= m * 60000
    const sec = +(rest / 1000).toFixed(9)
    out = (h ? `${h}h` : '') + (h || m ? `${m}m` : '') + `${sec}s`
  }
  return (neg ? '-' : '') + out
}

function parseBool(v) {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(v)) return true
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(v)) return false
  throw new Error(`strconv.ParseBool: parsing ${JSON.stringify(v)}: invalid syntax`)
}

function convert(spec, value) {
  switch (spec.type) {
    case 'bool':
      return parseBool(value)
    case 'int': {
      if (!/^[+-]?\d+$/.test(value)) throw new Error(`strconv.ParseInt: parsing ${JSON.stringify(value)}: invalid syntax`)
      return parseInt(value, 10)
    }
    case 'duration':
      return parseDuration(value)
    default:
      return value
  }
}

function flagDisplay(name, spec) {
  return spec.short ? `-${spec.short}, --${name}` : `--${name}`
}

function defaultOf(spec) {
  if (spec.def !== undefined) return Array.isArray(spec.def) ? [...spec.def] : spec.def
  switch (spec.type) {
    case 'bool':
      return false
    case 'int':
      return 0
    case 'duration':
      return 0
    case 'stringArray':
    case 'stringSlice':
      return []
    case 'stringToString':
      return {}
    default:
      return ''
  }
}

/**
 * Parse argv against a flag spec. Returns { flags, args, changed:Set }.
 * Positional args and flags may interleave (cobra's default); `--` ends flag parsing.
 */
export function parseFlags(argv, specs) {
  const flags = {}
  const changed = new Set()
  for (const [name, spec] of Object.entries(specs)) flags[name] = defaultOf(spec)
  const byShort = {}
  for (const [name, spec] of Object.entries(specs)) if (spec.short) byShort[spec.short] = name
  const args = []

  const set = (name, raw) => {
    const spec = specs[name]
    let v
    try {
      v = convert(spec, raw)
    } catch (e) {
      throw new Error(`invalid argument ${JSON.stringify(raw)} for ${JSON.stringify(flagDisplay(name, spec))} flag: ${e.message}`)
    }
    if (spec.type === 'stringArray') {
      if (!changed.has(name)) flags[name] = []
      flags[name].push(v)
    } else if (spec.type === 'stringSlice') {
      if (!changed.has(name)) flags[name] = []
      flags[name].push(...(v === '' ? [] : v.split(',')))
    } else if (spec.type === 'stringToString') {
      if (!changed.has(name)) flags[name] = {}
      for (const kv of v.split(',')) {
        const i = kv.indexOf('=')
        if (i < 0)
          throw new Error(
            `invalid argument ${JSON.stringify(raw)} for ${JSON.stringify(flagDisplay(name, spec))} flag: ${kv} must be formatted as key=value`,
          )
        flags[name][kv.slice(0, i)] = kv.slice(i + 1)
      }
    } else {
      flags[name] = v
    }
    changed.add(name)
  }

  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--') {
      args.push(...argv.slice(i + 1))
      break
    }
    if (a.startsWith('--') && a.length > 2) {
      const eq = a.indexOf('=')
      const name = eq >= 0 ? a.slice(2, eq) : a.slice(2)
      const spec = specs[name]
      if (!spec) throw new Error(`unknown flag: --${name}`)
      if (eq >= 0) set(name, a.slice(eq + 1))
      else if (spec.type === 'bool' || spec.noOptDefVal !== undefined) set(name, spec.type === 'bool' ? 'true' : spec.noOptDefVal)
      else if (i + 1 < argv.length) set(name, argv[++i])
      else throw new Error(`flag needs an argument: --${name}`)
    } else if (a.startsWith('-') && a.length > 1) {
      // shorthand cluster: -ab, -nvalue, -n value, -n=value
      let j = 1
      while (j < a.length) {
        const c = a[j]
        const name = byShort[c]
        if (!name) throw new Error(`unknown shorthand flag: '${c}' in ${a}`)
        const spec = specs[name]
        if (spec.type === 'bool') {
          if (a[j + 1] === '=') {
            set(name, a.slice(j + 2))
            break
          }
          set(name, 'true')
          j++
          continue
        }
        if (a[j + 1] === '=') set(name, a.slice(j + 2))
        else if (j + 1 < a.length) set(name, a.slice(j + 1))
        else if (i + 1 < argv.length) set(name, argv[++i])
        else throw new Error(`flag needs an argument: '${c}' in -${c}`)
        break
      }
    } else {
      args.push(a)
    }
  }
  return { flags, args, changed }
}

/**
 * Find the subcommand path the way cobra does: walk the words, skipping flags and the values of
 * known non-bool flags; words descend into subcommands until the first positional argument.
 * `tree` is { sub: { word: { name?, aliases?, sub? } } }.
 * Returns { path: [command names], node, rest: argv without the command words }.
 */
export function findCommand(argv, tree, allSpecs) {
  const pathWords = []
  const rest = []
  let node = tree
  let positional = false
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--') {
      rest.push(...argv.slice(i))
      break
    }
    if (a.startsWith('-') && a.length > 1) {
      rest.push(a)
      if (!a.includes('=')) {
        const spec = a.startsWith('--')
          ? allSpecs[a.slice(2)]
          : a.length === 2
            ? Object.values(allSpecs).find((s) => s.short === a[1])
            : null
        if (spec && spec.type !== 'bool' && spec.noOptDefVal === undefined && i + 1 < argv.length) rest.push(argv[++i])
      }
      continue
    }
    const subs = node?.sub || {}
    const key = subs[a] ? a : Object.keys(subs).find((k) => subs[k].aliases?.includes(a))
    if (!positional && key) {
      pathWords.push(key)
      node = subs[key]
    } else {
      positional = true
      rest.push(a)
    }
  }
  return { path: pathWords, node, rest }
}

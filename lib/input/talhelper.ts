// talhelper's input rules, as budimanjojo/talhelper v3 applies them before it generates configs:
// env files (cmd/genconfig.go, pkg/substitute/envsubst.go, pkg/decrypt/decrypt.go, joho/godotenv's
// parser), `${VAR}` substitution (a8m/envsubst with noUnset and noEmpty), hostnames and addresses
// (pkg/config/validator.go), output file names (pkg/config/outputfilename.go, defaults.go).
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { LineCounter, Parser, parseDocument } from 'yaml'
import { InputError } from '../core/errors.ts'
import { documentToJS } from './yaml-file.ts'
import { SOPS_ENV, sopsDecrypt } from '../tools/sops.ts'
import { readErrorCode, readRegularFile } from '../core/files.ts'

/** genconfig's default --env-file list: loaded in this order, each setting the environment, so later files win over earlier ones and over the shell. */
export const TALENV_FILES = ['talenv.yaml', 'talenv.sops.yaml', 'talenv.yml', 'talenv.sops.yml'] as const

export interface TalhelperEnv {
  vars: Map<string, string>
  /** env files talhelper would silently ignore (godotenv could not parse them): named when a variable is then missing */
  ignored: string[]
}

/** The environment talhelper substitutes from: the process environment, then each talenv file found in `dir`. */
export function talhelperEnv(dir: string, env: NodeJS.ProcessEnv): TalhelperEnv {
  const vars = new Map<string, string>()
  for (const [k, v] of Object.entries(env)) if (v !== undefined) vars.set(k, v)
  const ignored: string[] = []
  for (const name of TALENV_FILES) {
    const path = join(dir, name)
    if (!existsSync(path)) continue
    const text = envFileText(path, env)
    // talhelper drops `---` lines (talhelper issue 220), then reads KEY: value / KEY=value lines
    const parsed = parseDotenv(text.replace(/^---\n/gm, '\n'))
    if ('error' in parsed) {
      ignored.push(`${path}:${parsed.line}: ${parsed.error}`)
      continue
    }
    for (const [k, v] of parsed.vars) vars.set(k, v)
  }
  return { vars, ignored }
}

/** An env file's text: decrypted with `sops -d` when it carries sops metadata, as talhelper does; never the ciphertext. */
function envFileText(path: string, env: NodeJS.ProcessEnv): string {
  let text: string
  try {
    text = readRegularFile(path)
  } catch (err) {
    throw new InputError(`cannot read the talhelper env file (${readErrorCode(err)})`, {
      file: path,
      fix: 'make it a readable file or remove it',
    })
  }
  if (text.length === 0) return text
  const lines = new LineCounter()
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false })
  const first = doc.errors[0]
  if (first) {
    throw new InputError(`YAML syntax error: ${first.message.split('\n')[0] ?? ''}`, {
      file: path,
      line: lines.linePos(first.pos[0]).line,
      fix: 'correct the YAML syntax of the env file (talhelper fails on it too)',
    })
  }
  const sops = (documentToJS(doc, path, lines) as { sops?: unknown } | null)?.sops
  const encrypted = sops !== null && typeof sops === 'object' && Object.keys(sops).length > 0
  if (!encrypted) return text
  const result = sopsDecrypt(path, env)
  if (result.ok) return result.text
  if (result.missing) {
    throw new InputError(`the env file is encrypted with SOPS and sops is needed to read it ("${result.binary}" not found)`, {
      file: path,
      fix: `install sops (or point ${SOPS_ENV} at it) with the key that decrypts this file, or export its variables and remove the file`,
    })
  }
  throw new InputError(`sops could not decrypt the env file: ${result.message}`, {
    file: path,
    fix: 'make the decryption key available to sops (e.g. SOPS_AGE_KEY_FILE), as for talhelper genconfig',
  })
}

type Dotenv = { vars: Map<string, string> } | { error: string; line: number }

const isBlank = (c: string | undefined): boolean =>
  c === ' ' || c === '\t' || c === '\v' || c === '\f' || c === '\r' || c === '\u0085' || c === '\u00a0'

/** KEY: value / KEY=value lines as godotenv v1.5.1 reads them (quotes, `export`, trailing comments, $VAR from earlier keys). */
export function parseDotenv(source: string): Dotenv {
  const src = source.replace(/\r\n/g, '\n')
  const vars = new Map<string, string>()
  const lineAt = (i: number): number => src.slice(0, i).split('\n').length
  let i = 0
  for (;;) {
    // statement start: skip whitespace and # comment lines
    while (i < src.length && /\s/.test(src[i] as string)) i++
    if (i >= src.length) break
    if (src[i] === '#') {
      const nl = src.indexOf('\n', i)
      if (nl < 0) break
      i = nl
      continue
    }
    if (src.startsWith('export', i) && isBlank(src[i + 6])) {
      i += 6
      while (isBlank(src[i])) i++
    }
    const keyStart = i
    let key: string | undefined
    for (; i < src.length; i++) {
      const c = src[i] as string
      if (isBlank(c)) continue
      if (c === '=' || c === ':') {
        key = src.slice(keyStart, i).trimEnd()
        i++
        break
      }
      if (!/[\p{L}\p{N}_.]/u.test(c)) return { error: `unexpected character ${JSON.stringify(c)} in variable name`, line: lineAt(i) }
    }
    // a last line without = or : is no variable (godotenv sets an empty name, which the environment refuses)
    if (key === undefined) break
    while (isBlank(src[i])) i++
    const quote = src[i] === '"' || src[i] === "'" ? (src[i] as string) : undefined
    let value: string
    if (!quote) {
      let end = src.indexOf('\n', i)
      if (end < 0) end = src.length
      let line = src.slice(i, end)
      const comment = /[\t\v\f\r \u0085\u00a0]#/.exec(line)
      if (comment) line = line.slice(0, comment.index)
      value = expandDotenv(line.replace(/^[\t\v\f\r \u0085\u00a0]+|[\t\v\f\r \u0085\u00a0]+$/g, ''), vars)
      i = end
    } else {
      let close = -1
      for (let j = i + 1; j < src.length; j++) {
        if (src[j] === quote && src[j - 1] !== '\\') {
          close = j
          break
        }
      }
      if (close < 0) return { error: 'unterminated quoted value', line: lineAt(i) }
      value = src.slice(i + 1, close)
      if (quote === '"')
        value = expandDotenv(
          value
            .replace(/\\n/g, '\n')
            .replace(/\\r/g, '\r')
            .replace(/\\([^$])/g, '$1'),
          vars,
        )
      i = close + 1
    }
    vars.set(key, value)
  }
  return { vars }
}

/** godotenv's expansion: `$VAR`/`${VAR}` of upper-case names from the same file (unknown: empty), `\$` kept literal. */
function expandDotenv(value: string, vars: Map<string, string>): string {
  return value.replace(
    /(\\)?(\$)(\()?\{?([A-Z0-9_]+)?\}?/g,
    (match, escaped: string | undefined, _d: string, _p: string | undefined, name: string | undefined) => {
      if (escaped) return match.slice(1)
      return name ? (vars.get(name) ?? '') : match
    },
  )
}

export interface SubstitutionError {
  message: string
  line: number
}

const NAME_CHAR = /[\p{L}\p{N}_]/u

/**
 * talconfig.yaml with `${VAR}`/`$VAR` replaced as talhelper does: comments first stripped (a `$` in a
 * comment is no variable), then a8m/envsubst with noUnset and noEmpty: `$$` is a literal `$`,
 * `${VAR:-default}`, `${VAR-default}`, `${VAR:=default}`, `${VAR=default}`, `${VAR:+alt}`, `${VAR+alt}`.
 * Comments are blanked rather than removed, so every line keeps its number for the error messages.
 */
export function substituteEnv(text: string, vars: Map<string, string>): { text: string; errors: SubstitutionError[] } {
  const src = blankComments(text)
  const errors: SubstitutionError[] = []
  const lineAt = (i: number): number => src.slice(0, i).split('\n').length
  const value = (name: string, at: number): string => {
    const v = vars.get(name)
    if (v === undefined) errors.push({ message: `variable \${${name}} not set`, line: lineAt(at) })
    else if (v === '') errors.push({ message: `variable \${${name}} set but empty`, line: lineAt(at) })
    return v ?? ''
  }
  let out = ''
  let i = 0
  while (i < src.length) {
    const c = src[i] as string
    if (c !== '$') {
      out += c
      i++
      continue
    }
    const next = src[i + 1]
    if (next === '$') {
      out += '$'
      i += 2
      continue
    }
    if (next !== undefined && NAME_CHAR.test(next)) {
      let j = i + 1
      while (j < src.length && NAME_CHAR.test(src[j] as string)) j++
      const name = src.slice(i + 1, j)
      out += name === '_' ? '$_' : value(name, i)
      i = j
      continue
    }
    if (next === '{' && src[i + 2] !== undefined && NAME_CHAR.test(src[i + 2] as string)) {
      const close = findClose(src, i + 2)
      if (close < 0) {
        errors.push({ message: 'closing brace expected', line: lineAt(i) })
        return { text: out, errors }
      }
      out += expression(src.slice(i + 2, close), i, vars, value)
      i = close + 1
      continue
    }
    if (next === '{' && (src[i + 2] === undefined || src[i + 2] === '\n' || src[i + 2] === '\r')) {
      errors.push({ message: 'closing brace expected', line: lineAt(i) })
      return { text: out, errors }
    }
    // `${}`, `${-x}`, `$-`, a lone `$`: text
    out += '$'
    i++
  }
  return { text: out, errors }
}

function findClose(src: string, from: number): number {
  for (let j = from; j < src.length; j++) {
    const c = src[j]
    if (c === '}') return j
    if (c === '\n' || c === '\r') return -1
  }
  return -1
}

/** The inside of `${...}`: NAME, then an optional operator and its default (a `$VAR` or text). */
function expression(body: string, at: number, vars: Map<string, string>, value: (name: string, at: number) => string): string {
  const name = /^[\p{L}\p{N}_]+/u.exec(body)?.[0] ?? ''
  const rest = body.slice(name.length)
  const op = /^(:-|:=|:\+|-|=|\+)/.exec(rest)?.[0]
  // an unknown operator (`${VAR.x}`) leaves only the variable, as envsubst's parser does
  if (!op) return value(name, at)
  const raw = rest.slice(op.length)
  const defVar = /^\$([\p{L}\p{N}_]+)(.*)$/u.exec(raw)
  const fallback = (): string => (defVar ? (defVar[2] ? defVar[2] : value(defVar[1] as string, at)) : raw)
  const set = vars.has(name)
  switch (op) {
    case ':-':
    case ':=':
      return vars.get(name) ? (vars.get(name) as string) : fallback()
    case '+':
    case ':+':
      return set ? fallback() : ''
    default:
      return set ? value(name, at) : fallback()
  }
}

/** Comments replaced by spaces (YAML's own lexer decides what is a comment). */
function blankComments(text: string): string {
  const spans: Array<[number, number]> = []
  const visit = (token: unknown): void => {
    if (Array.isArray(token)) {
      for (const t of token) visit(t)
      return
    }
    if (!token || typeof token !== 'object') return
    const t = token as { type?: unknown; offset?: unknown; source?: unknown }
    if (t.type === 'comment' && typeof t.offset === 'number' && typeof t.source === 'string') spans.push([t.offset, t.source.length])
    for (const v of Object.values(token)) if (v && typeof v === 'object') visit(v)
  }
  for (const token of new Parser().parse(text)) visit(token)
  if (spans.length === 0) return text
  let out = ''
  let last = 0
  for (const [offset, length] of spans.sort((a, b) => a[0] - b[0])) {
    if (offset < last) continue
    out += text.slice(last, offset) + ' '.repeat(length)
    last = offset + length
  }
  return out + text.slice(last)
}

const HOSTNAME = /^([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]{0,61}[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]{0,61}[a-zA-Z0-9]))*$/
const DOMAIN = /^([a-zA-Z0-9_][a-zA-Z0-9_-]{0,62})(\.[a-zA-Z0-9_][a-zA-Z0-9_-]{0,62})*[._]?$/

/** talhelper's isHostname: RFC 1123 labels joined by dots (an FQDN), upper case allowed, at most 255 characters. */
export function isHostname(name: string): boolean {
  return name.length >= 1 && name.length <= 255 && HOSTNAME.test(name)
}

/** talhelper's isDomain (an ipAddress entry that is not an IP address). */
export function isDomain(name: string): boolean {
  return name !== '' && name.length - (name.match(/\./g)?.length ?? 0) <= 255 && DOMAIN.test(name)
}

/** talhelper's GetIPAddresses: ipAddress split at commas, each entry trimmed. */
export function splitAddresses(ipAddress: string): string[] {
  return ipAddress.split(',').map((a) => a.trim())
}

export const DEFAULT_FILENAME_TMPL = '{{ .ClusterName }}-{{ .Hostname }}.yaml'

export interface FilenameData {
  ClusterName: string
  Hostname: string
  IPAddress: string
  Role: 'controlplane' | 'worker'
}

/**
 * A node's output file name from its filenameTmpl (Go text/template): field references
 * (`{{ .Hostname }}`, trim markers, comments) are evaluated; anything else is refused.
 */
export function renderFilename(template: string, data: FilenameData): { name: string } | { error: string } {
  let out = ''
  let i = 0
  while (i < template.length) {
    const open = template.indexOf('{{', i)
    if (open < 0) {
      out += template.slice(i)
      break
    }
    const close = template.indexOf('}}', open + 2)
    if (close < 0) return { error: 'unclosed {{ in filenameTmpl' }
    let text = template.slice(i, open)
    let action = template.slice(open + 2, close)
    let after = close + 2
    if (/^-\s/.test(action)) {
      text = text.replace(/\s+$/, '')
      action = action.slice(1)
    }
    let trimRight = false
    if (/\s-$/.test(action)) {
      trimRight = true
      action = action.slice(0, -1)
    }
    out += text
    action = action.trim()
    if (!/^\/\*[\s\S]*\*\/$/.test(action)) {
      const field = /^\.(ClusterName|Hostname|IPAddress|Role)$/.exec(action)?.[1] as keyof FilenameData | undefined
      if (!field)
        return { error: `filenameTmpl action {{ ${action} }} is not one this tool evaluates (.ClusterName, .Hostname, .IPAddress, .Role)` }
      out += data[field]
    }
    if (trimRight) while (after < template.length && /\s/.test(template[after] as string)) after++
    i = after
  }
  return { name: out }
}

/** talhelper's GetTalosVersion: a `v` in front when it was left out. */
export function talosVersionOf(version: string): string {
  return version.startsWith('v') ? version : `v${version}`
}

// What the secrets audit looks for: every secret value of the inputs, with where it came from, and the
// distinctive forms it could take in an output (as written, base64-decoded PEM body lines, base64 of it).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { parseAllDocuments } from 'yaml'

export interface Secret {
  /** where the value was read: `<file> <yaml path>` */
  origin: string
  /** the forms to search for, each long enough to be distinctive */
  needles: string[]
  /** stretches of a value that show up when it is printed cut short or wrapped */
  partial?: string[]
}

/** Keys whose values are secret in a Talos machine config or talosconfig (CA keys sit under `key`). */
const SECRET_KEYS = /^(key|token|secret|crt|[a-zA-Z]*(Secret|Token))$/
/** Keys that hold certificates, which are secret only in the talosconfig (the admin client cert). */
const CERT_KEYS = /^crt$/
const MIN_NEEDLE = 16

function pemBodyLines(pem: string): string[] {
  return pem
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length >= MIN_NEEDLE && !l.startsWith('-----'))
}

/** The value, and for a base64 PEM its body lines; for anything else its base64 form too. */
export function needlesOf(value: string): string[] {
  const v = value.trim()
  const needles = new Set<string>()
  if (v.length >= 8) needles.add(v)
  if (/^[A-Za-z0-9+/=]+$/.test(v) && v.length % 4 === 0) {
    const decoded = Buffer.from(v, 'base64').toString('utf8')
    if (decoded.includes('-----BEGIN')) {
      for (const line of pemBodyLines(decoded)) needles.add(line)
      return [...needles]
    }
  }
  if (v.length >= 8) needles.add(base64Stem(v))
  return [...needles]
}

/** base64 up to the last full 3-byte group: what any base64 blob starting with the value contains. */
function base64Stem(value: string): string {
  const bytes = Buffer.from(value, 'utf8')
  return bytes.subarray(0, bytes.length - (bytes.length % 3)).toString('base64')
}

/** The base64 of every PEM starts alike ("LS0tLS1CRUdJTi…"): a stretch from its middle, for cut-short prints. */
export function partialsOf(value: string): string[] {
  const v = value.trim()
  return /^[A-Za-z0-9+/=]{160,}$/.test(v) ? [v.slice(60, 120)] : []
}

function walk(value: unknown, path: string[], out: Array<{ path: string; value: string }>, certsToo: boolean): void {
  if (typeof value === 'string') {
    const key = path[path.length - 1] ?? ''
    if (SECRET_KEYS.test(key) && (certsToo || !CERT_KEYS.test(key)) && value.trim() !== '') out.push({ path: path.join('.'), value })
    return
  }
  if (Array.isArray(value)) value.forEach((v, i) => walk(v, [...path, String(i)], out, certsToo))
  else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) walk(v, [...path, k], out, certsToo)
}

/** Secret values of a YAML file (every document); certificates only when asked (the talosconfig). */
export function yamlSecrets(file: string, label: string, certsToo = false): Secret[] {
  const found: Array<{ path: string; value: string }> = []
  for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) walk(doc.toJS(), [], found, certsToo)
  return found
    .map((f) => ({ origin: `${label} ${f.path}`, needles: needlesOf(f.value), partial: partialsOf(f.value) }))
    .filter((s) => s.needles.length > 0)
}

/** A private key file (OpenSSH or PEM): its body lines, and the base64 of the whole file (as in a Secret). */
export function keyFileSecrets(file: string, label: string): Secret[] {
  const text = readFileSync(file, 'utf8')
  return [
    { origin: label, needles: [...pemBodyLines(text), base64Stem(text)], partial: [Buffer.from(text).toString('base64').slice(60, 120)] },
  ]
}

/** Every secret of a cluster dir as the simulator wrote it: machine configs, talosconfig, Flux deploy key. */
export function clusterSecrets(clusterDir: string): Secret[] {
  const secrets: Secret[] = []
  const configs = join(clusterDir, 'clusterconfig')
  for (const name of readdirSync(configs).sort()) {
    const file = join(configs, name)
    if (name === 'talosconfig') secrets.push(...yamlSecrets(file, 'clusterconfig/talosconfig', true))
    else if (name.endsWith('.yaml')) secrets.push(...yamlSecrets(file, `clusterconfig/${name}`))
  }
  const deployKey = join(clusterDir, 'flux-deploy-key')
  if (existsSync(deployKey)) secrets.push(...keyFileSecrets(deployKey, 'flux-deploy-key'))
  return secrets
}

/** Every file under a directory, recursively, with its text. */
export function filesUnder(dir: string): Array<{ path: string; text: string }> {
  if (!existsSync(dir)) return []
  const out: Array<{ path: string; text: string }> = []
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) out.push(...filesUnder(path))
    else out.push({ path, text: readFileSync(path, 'utf8') })
  }
  return out
}

export interface Leak {
  where: string
  origin: string
  needle: string
}

/** Every (output, secret) pair where a form of the secret appears in the output. */
export function findLeaks(outputs: Array<{ where: string; text: string }>, secrets: Secret[]): Leak[] {
  const leaks: Leak[] = []
  for (const out of outputs) {
    for (const secret of secrets) {
      const needle = [...secret.needles, ...(secret.partial ?? [])].find((n) => out.text.includes(n))
      if (needle) leaks.push({ where: out.where, origin: secret.origin, needle: `${needle.slice(0, 12)}…` })
    }
  }
  return leaks
}

export function describeLeaks(leaks: Leak[], base: string): string {
  return leaks
    .map((l) => `${l.where.startsWith(base) ? relative(base, l.where) : l.where}: secret from ${l.origin} (${l.needle})`)
    .join('\n')
}

import { parseAllDocuments } from 'yaml'
import { readRegularFile } from '../core/files.ts'

const SECRET_KEY = /^(key|token|secret|bootstraptoken|secretboxEncryptionSecret|aescbcEncryptionSecret|password|privateKey|identity)$/i
const MIN_SECRET_LENGTH = 8

/**
 * The parts of a v1alpha1 machine config that hold secrets (Talos pkg/machinery/config/types/v1alpha1):
 * tokens, CA keys, registry credentials, disk encryption keys, the cluster's secrets.
 */
const MACHINE_CONFIG_SECRET_SECTIONS: ReadonlyArray<readonly string[]> = [
  ['machine', 'token'],
  ['machine', 'ca', 'key'],
  ['machine', 'registries', 'config'],
  ['machine', 'systemDiskEncryption'],
  ['cluster', 'id'],
  ['cluster', 'secret'],
  ['cluster', 'token'],
  ['cluster', 'ca', 'key'],
  ['cluster', 'aggregatorCA', 'key'],
  ['cluster', 'serviceAccount'],
  ['cluster', 'etcd', 'ca', 'key'],
  ['cluster', 'secretboxEncryptionSecret'],
  ['cluster', 'aescbcEncryptionSecret'],
]

/** Subtrees of the other config documents that hold secrets, whatever their keys below. */
const SECRET_SECTION_KEY = /^(auth|encryption|keys|static|passphrase|password|identityToken|token|secret|key|clientIdentity)$/i

/** Keys inside those sections that say how, not what: their values are no secret. */
const STRUCTURAL_KEYS = new Set([
  'provider',
  'cipher',
  'keySize',
  'blockSize',
  'options',
  'slot',
  'lockToState',
  'insecureSkipVerify',
  'ca',
])

/** The base64 of a value up to its last full 3-byte group: the same whatever follows it in an encoded blob. */
function base64Stem(value: string): string {
  const bytes = Buffer.from(value, 'utf8')
  return bytes.subarray(0, bytes.length - (bytes.length % 3)).toString('base64')
}

/** Remembers secret values read from inputs and masks them in anything the tool writes out. */
export class Redactor {
  private readonly secrets = new Set<string>()
  /** short values known to be secret (a Secret's data): masked where they stand as a word of their own */
  private readonly shortSecrets = new Set<string>()
  private shortPattern: RegExp | undefined

  /** `anyLength`: a value known to be secret (a Secret's data/stringData), masked however short. */
  add(value: string, anyLength = false): void {
    const trimmed = value.trim()
    if (trimmed.length < MIN_SECRET_LENGTH) {
      if (!anyLength || trimmed === '') return
      this.shortSecrets.add(trimmed)
      this.shortSecrets.add(Buffer.from(trimmed, 'utf8').toString('base64'))
      this.shortPattern = undefined
      return
    }
    this.secrets.add(trimmed)
    // as a Kubernetes Secret's data shows it: base64, cut to the groups the value alone decides
    this.secrets.add(base64Stem(trimmed))
    // a base64 value may also show up decoded (a PEM) or line by line
    if (/^[A-Za-z0-9+/=]+$/.test(trimmed) && trimmed.length % 4 === 0) {
      const decoded = Buffer.from(trimmed, 'base64').toString('utf8')
      if (decoded.includes('-----BEGIN')) {
        for (const line of decoded.split('\n')) {
          if (line.length >= 16 && !line.startsWith('-----')) this.secrets.add(line.trim())
        }
      }
    }
  }

  /** Every value under a secret-looking key in a YAML file (talosconfig, a Secret manifest). */
  addFromYamlFile(path: string): void {
    let text: string
    try {
      text = readRegularFile(path)
    } catch {
      return
    }
    // every document, whatever follows its `---` (a trailing space, a comment)
    for (const document of parseAllDocuments(text)) {
      try {
        this.addFromValue(document.toJS())
      } catch {
        // unparsable documents are reported by validation, not here
      }
    }
  }

  /** Every value under a secret-looking key of a parsed document (a machine config's, say). */
  addFromValue(doc: unknown): void {
    this.walk(doc)
    this.addSecretData(doc)
  }

  /**
   * A machine config's document: every value of its secret-bearing sections, under any key (a
   * misspelt `pasword` too, which `talosctl validate` echoes) and whatever its length; then the
   * usual secret-looking keys anywhere.
   */
  addFromMachineConfig(doc: unknown): void {
    if (!doc || typeof doc !== 'object' || Array.isArray(doc)) return this.addFromValue(doc)
    const d = doc as Record<string, unknown>
    const at = (...keys: string[]): unknown =>
      keys.reduce<unknown>((v, k) => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>)[k] : undefined), d)
    if (d.version === 'v1alpha1' && d.kind === undefined) {
      for (const section of MACHINE_CONFIG_SECRET_SECTIONS) this.learnAll(at(...section))
    } else {
      // the other documents (VolumeConfig's encryption, RegistryAuthConfig, …): their secret subtrees
      this.walkSections(d)
    }
    this.addFromValue(doc)
  }

  /** Every scalar under `value`, whatever its key and length (structural keys such as `provider` aside). */
  private learnAll(value: unknown, key = ''): void {
    if (STRUCTURAL_KEYS.has(key)) return
    if (typeof value === 'string' || typeof value === 'number') {
      const text = String(value)
      this.add(text, true)
      for (const line of text.split('\n')) if (line !== text) this.add(line)
      return
    }
    if (Array.isArray(value)) for (const item of value) this.learnAll(item)
    else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) this.learnAll(v, k)
  }

  private walkSections(value: unknown): void {
    if (Array.isArray(value)) for (const item of value) this.walkSections(item)
    else if (value && typeof value === 'object')
      for (const [k, v] of Object.entries(value)) {
        if (SECRET_SECTION_KEY.test(k)) this.learnAll(v, k)
        else this.walkSections(v)
      }
  }

  /**
   * The credentials in a URL's user info (`https://user:token@host/`): the password, whatever its
   * length, and a user name that stands alone over http(s) (a token as the user, GitHub-style); an
   * ssh user without a password (`ssh://git@host/`) names an account, no secret.
   */
  addUrlCredentials(url: string): void {
    const m = /^([a-z][a-z0-9+.-]*):\/\/([^@/?#]*)@/i.exec(url)
    if (!m) return
    const scheme = (m[1] ?? '').toLowerCase()
    const userinfo = m[2] ?? ''
    const colon = userinfo.indexOf(':')
    const user = colon < 0 ? userinfo : userinfo.slice(0, colon)
    const password = colon < 0 ? '' : userinfo.slice(colon + 1)
    const decode = (v: string): string => {
      try {
        return decodeURIComponent(v)
      } catch {
        return v
      }
    }
    if (password) {
      this.add(password, true)
      this.add(decode(password), true)
      this.add(userinfo, true)
    }
    if (!password && user && /^(https?|oci)$/.test(scheme)) {
      this.add(user, true)
      this.add(decode(user), true)
    }
  }

  addFile(path: string): void {
    try {
      const text = readRegularFile(path)
      // a key file travels whole, base64-encoded, in a Secret (flux's identity)
      if (text.trim().length >= MIN_SECRET_LENGTH) this.secrets.add(base64Stem(text))
      for (const line of text.split('\n')) if (line.length >= 16 && !line.startsWith('-----')) this.secrets.add(line.trim())
    } catch {
      // a missing key file is reported where it is used
    }
  }

  /** A tool's error text: the whole (a multi-line value), then every line on its own. */
  redactLines(text: string): string {
    return this.redact(text)
      .split('\n')
      .map((line) => this.redact(line))
      .join('\n')
  }

  redact(text: string): string {
    let out = text
    for (const secret of this.secrets) {
      if (out.includes(secret)) out = out.split(secret).join('<redacted>')
    }
    if (this.shortSecrets.size === 0) return out
    // a short value inside a longer word is not it ("pass" in "password"); standing alone it is
    this.shortPattern ??= new RegExp(
      `(?<![A-Za-z0-9+/])(?:${[...this.shortSecrets]
        .sort((a, b) => b.length - a.length)
        .map((v) => v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('|')})(?![A-Za-z0-9])`,
      'g',
    )
    return out.replace(this.shortPattern, '<redacted>')
  }

  /** A Kubernetes Secret manifest: every value of data/stringData is secret, whatever its key (sops.agekey, username). */
  private addSecretData(doc: unknown): void {
    const secret = doc as { kind?: unknown; items?: unknown; data?: Record<string, unknown>; stringData?: Record<string, unknown> } | null
    // a List of manifests (kubectl get -o yaml writes one) holds its Secrets in items
    if (Array.isArray(secret?.items)) for (const item of secret.items) this.addSecretData(item)
    if (secret?.kind !== 'Secret') return
    for (const values of [secret.data, secret.stringData]) {
      for (const value of Object.values(values ?? {})) {
        if (typeof value !== 'string' && typeof value !== 'number') continue
        // data holds base64: its decoded form is the secret a tool would print
        const plain = values === secret.data ? [String(value), Buffer.from(String(value), 'base64').toString('utf8')] : [String(value)]
        for (const text of plain) {
          this.add(text, true)
          // a multi-line value (a key file, a config) can be quoted one line at a time (long lines:
          // a short line of it, a brace, is no secret on its own)
          for (const line of text.split('\n')) if (line !== text) this.add(line)
        }
      }
    }
  }

  private walk(value: unknown, key = ''): void {
    if (typeof value === 'string') {
      if (SECRET_KEY.test(key)) this.add(value)
      return
    }
    if (Array.isArray(value)) {
      for (const item of value) this.walk(item, key)
      return
    }
    if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) this.walk(v, k)
    }
  }
}

/**
 * Masks secrets in everything this process writes to stdout and stderr from now on: listr2's tree shows
 * tool errors and progress as they happen, before the summary and the report (which redact on their own).
 * A script runs one command, so this lasts until the process exits.
 */
export function redactProcessOutput(redactor: Redactor): void {
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean
    const redacting = (chunk: unknown, ...rest: unknown[]): boolean =>
      write(
        typeof chunk === 'string' ? redactor.redact(chunk) : Buffer.isBuffer(chunk) ? redactor.redact(chunk.toString('utf8')) : chunk,
        ...rest,
      )
    stream.write = redacting as typeof stream.write
  }
}

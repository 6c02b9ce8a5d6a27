import { readFileSync } from 'node:fs'
import { parse as parseYaml } from 'yaml'

const SECRET_KEY = /^(key|token|secret|bootstraptoken|secretboxEncryptionSecret|aescbcEncryptionSecret|password|privateKey|identity)$/i
const MIN_SECRET_LENGTH = 8

/** Remembers secret values read from inputs and masks them in anything the tool writes out. */
export class Redactor {
  private readonly secrets = new Set<string>()

  add(value: string): void {
    const trimmed = value.trim()
    if (trimmed.length < MIN_SECRET_LENGTH) return
    this.secrets.add(trimmed)
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

  /** Every value under a secret-looking key in a YAML file (machine config, talosconfig). */
  addFromYamlFile(path: string): void {
    let text: string
    try {
      text = readFileSync(path, 'utf8')
    } catch {
      return
    }
    for (const part of text.split(/^---$/m)) {
      try {
        this.walk(parseYaml(part))
      } catch {
        // unparsable documents are reported by validation, not here
      }
    }
  }

  addFile(path: string): void {
    try {
      const text = readFileSync(path, 'utf8')
      for (const line of text.split('\n')) if (line.length >= 16 && !line.startsWith('-----')) this.secrets.add(line.trim())
    } catch {
      // a missing key file is reported where it is used
    }
  }

  redact(text: string): string {
    let out = text
    for (const secret of this.secrets) {
      if (out.includes(secret)) out = out.split(secret).join('<redacted>')
    }
    return out
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

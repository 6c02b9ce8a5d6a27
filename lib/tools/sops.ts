import { which } from 'zx'
import type { ToolRunner } from './exec.js'

/** The sops wrapper: decrypts to memory (stdout), the age identity from a file, never to disk. */
export class Sops {
  constructor(
    private readonly runner: ToolRunner,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  /** sops on PATH (or $SOPS): without it an encrypted file cannot be applied. */
  available(): boolean {
    return Boolean(which.sync(this.runner.binary('sops'), { nothrow: true, path: this.env.PATH ?? '' }))
  }

  /** The plaintext of `file`, or the reason sops gave for refusing. */
  async decrypt(file: string, ageKeyFile: string | undefined): Promise<{ ok: true; text: string } | { ok: false; reason: string }> {
    // local: decrypting touches no node, so a dry run checks the files too
    const result = await this.runner.run({ tool: 'sops', args: ['--decrypt', file], mutates: false, local: true, env: ageKeyFile ? { SOPS_AGE_KEY_FILE: ageKeyFile } : {} })
    if (result.exitCode === 0 && !result.timedOut) return { ok: true, text: result.stdout }
    const reason = result.timedOut ? 'sops did not answer in time' : result.stderr.trim().split('\n').filter(Boolean).slice(-3).join('; ') || `sops exited ${result.exitCode ?? 'abnormally'}`
    return { ok: false, reason }
  }
}

/** A file sops encrypted: its name says so, or it carries sops metadata (a top-level `sops:` key with a MAC). */
export function isSopsEncrypted(file: string, text: string): boolean {
  return /\.sops\.ya?ml$/.test(file) || (/^sops:\s*$/m.test(text) && /^\s+mac:\s/m.test(text))
}

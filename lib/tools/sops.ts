import { spawnSync } from 'node:child_process'
import { runLocalSync, toolAvailable, toolBinary, type ToolRunner } from './exec.ts'

/** Environment variable that overrides the sops binary, like TALOSCTL for talosctl. */
export const SOPS_ENV = 'SOPS'

/** The sops wrapper: decrypts to memory (stdout), the age identity from a file, never to disk. */
export class Sops {
  private readonly runner: ToolRunner
  private readonly env: NodeJS.ProcessEnv
  constructor(runner: ToolRunner, env: NodeJS.ProcessEnv) {
    this.runner = runner
    this.env = env
  }

  /** sops on PATH (or $SOPS): without it an encrypted file cannot be applied. */
  available(): boolean {
    return toolAvailable(this.env, 'sops')
  }

  /** The plaintext of `file`, or the reason sops gave for refusing. */
  async decrypt(file: string, ageKeyFile: string | undefined): Promise<{ ok: true; text: string } | { ok: false; reason: string }> {
    // local: decrypting touches no node, so a dry run checks the files too
    const result = await this.runner.run({
      tool: 'sops',
      args: ['--decrypt', file],
      local: true,
      env: ageKeyFile ? { SOPS_AGE_KEY_FILE: ageKeyFile } : {},
    })
    if (result.ok) return { ok: true, text: result.stdout }
    const reason = result.timedOut
      ? 'sops did not answer in time'
      : sopsFailure(result.stderr) || `sops exited ${result.exitCode ?? 'abnormally'}`
    return { ok: false, reason }
  }
}

/** A file sops encrypted: its name says so, or it carries sops metadata (a top-level `sops:` key with a MAC). */
export function isSopsEncrypted(file: string, text: string): boolean {
  return /\.sops\.ya?ml$/.test(file) || (/^sops:\s*$/m.test(text) && /^\s+mac:\s/m.test(text))
}

export type SopsResult = { ok: true; text: string } | { ok: false; missing: boolean; binary: string; message: string }

/**
 * `sops -d` of a YAML file, as talhelper decrypts talenv.sops.yaml (pkg/decrypt/decrypt.go). Sync and not
 * through the ToolRunner: the inventory is read before the runner exists. The plaintext is returned, never logged.
 */
export function sopsDecrypt(file: string, env: NodeJS.ProcessEnv): SopsResult {
  const binary = toolBinary(env, 'sops')
  const result = spawnSync(binary, ['--decrypt', '--input-type', 'yaml', '--output-type', 'yaml', file], {
    env,
    encoding: 'utf8',
    timeout: 60_000,
  })
  if (result.error) {
    const missing = (result.error as NodeJS.ErrnoException).code === 'ENOENT'
    return { ok: false, missing, binary, message: result.error.message }
  }
  if (result.status !== 0) {
    return { ok: false, missing: false, binary, message: sopsFailure(result.stderr) || `exit ${String(result.status)}` }
  }
  return { ok: true, text: result.stdout }
}

/**
 * sops's failure on one line, its cause kept: the headline, then each key's own reason (the
 * `- | …` block under `<key>: FAILED`, which names the key file that is missing or the key that does
 * not match); the closing "Recovery failed … but none were." paragraph says nothing more.
 */
export function sopsFailure(stderr: string): string {
  const out: string[] = []
  let key = ''
  let cause: string[] = []
  const flush = (): void => {
    if (cause.length > 0) out.push(`${key ? `${key}: ` : ''}${cause.join(' ')}`)
    cause = []
  }
  for (const raw of stderr.split('\n')) {
    const line = raw.trim()
    if (!line || /^Group \d+: FAILED$/.test(line)) continue
    if (/^Recovery failed because/.test(line)) break
    const failedKey = /^(\S+): FAILED$/.exec(line)
    if (failedKey) {
      flush()
      key = failedKey[1] ?? ''
      continue
    }
    const part = /^(?:- )?\|\s?(.*)$/.exec(line)
    if (part) {
      cause.push((part[1] ?? '').trim())
      continue
    }
    flush()
    key = ''
    out.push(line)
  }
  flush()
  return out.join('; ').slice(0, 1000)
}

/**
 * `sops encrypt` of `text` given on stdin, under the creation rule .sops.yaml has for `file` (its
 * recipients): the plaintext never touches the disk. The ciphertext is returned for the caller to write.
 */
export function sopsEncrypt(file: string, text: string, env: NodeJS.ProcessEnv, cwd: string): SopsResult {
  const result = runLocalSync(env, 'sops', ['encrypt', '--filename-override', file, '--input-type', 'yaml', '--output-type', 'yaml'], {
    cwd,
    input: text,
    timeoutMs: 60_000,
  })
  if (result.ok) return { ok: true, text: result.stdout }
  return {
    ok: false,
    missing: result.missing,
    binary: toolBinary(env, 'sops'),
    message: sopsFailure(result.stderr) || `exit ${String(result.exitCode)}`,
  }
}

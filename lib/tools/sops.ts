import { spawnSync } from 'node:child_process'

/** Environment variable that overrides the sops binary, like TALOSCTL for talosctl. */
export const SOPS_ENV = 'SOPS'

export type SopsResult = { ok: true; text: string } | { ok: false; missing: boolean; binary: string; message: string }

/**
 * `sops -d` of a YAML file, as talhelper decrypts talenv.sops.yaml (pkg/decrypt/decrypt.go). Sync:
 * the inventory is read before anything else runs. The plaintext is returned, never logged.
 */
export function sopsDecrypt(file: string, env: NodeJS.ProcessEnv): SopsResult {
  const binary = env[SOPS_ENV] || 'sops'
  const result = spawnSync(binary, ['--decrypt', '--input-type', 'yaml', '--output-type', 'yaml', file], { env, encoding: 'utf8', timeout: 60_000 })
  if (result.error) {
    const missing = (result.error as NodeJS.ErrnoException).code === 'ENOENT'
    return { ok: false, missing, binary, message: result.error.message }
  }
  if (result.status !== 0) {
    // sops's own message (no key, wrong key): its last non-empty stderr line
    const lines = result.stderr.split('\n').map((l) => l.trim()).filter(Boolean)
    return { ok: false, missing: false, binary, message: lines[lines.length - 1] ?? `exit ${String(result.status)}` }
  }
  return { ok: true, text: result.stdout }
}

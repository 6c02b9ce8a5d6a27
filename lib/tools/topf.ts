// The topf wrapper (postfinance/topf cmd/topf/render.go, talosconfig.go): `render -o <dir>` writes
// `<dir>/<host>.yaml` per node, `talosconfig` prints the talosconfig; both run where topf.yaml is.
import { runLocalSync, type LocalResult } from './exec.ts'

export function render(env: NodeJS.ProcessEnv, dir: string, outDir: string): LocalResult {
  return runLocalSync(env, 'topf', ['render', '-o', outDir], { cwd: dir })
}

/** The talosconfig on stdout: it carries the admin key, so the caller writes it and never prints it. */
export function talosconfig(env: NodeJS.ProcessEnv, dir: string): LocalResult {
  return runLocalSync(env, 'topf', ['talosconfig'], { cwd: dir })
}

/** topf's failure: slog's `error="…"` value (main logs `level=ERROR msg=error error=…` and exits 1), else its stderr. */
export function topfFailure(result: LocalResult): string {
  const quoted = /error="((?:[^"\\]|\\.)*)"/.exec(result.stderr)?.[1]
  if (quoted !== undefined) return quoted.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? ' ' : c))
  return result.stderr.trim().split('\n').join(' ') || `exit ${String(result.exitCode)}`
}

import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'

/** Where `task tools` (scripts/tools.sh) puts the real talosctl, helm (4), helm3, helmfile and (for the tests) talhelper. */
export const TOOLS_BIN = resolve('.tools/bin')

export type RealTool = { path: string; skip?: undefined } | { path?: undefined; skip: string }

let ensured: { ok: boolean; why: string } | undefined

/**
 * The real `name` from the tools entry point, built on first use. Only a tool that cannot be had
 * (scripts/tools.sh exit 3: not on PATH and no source or Go to build it) gives a skip reason; any
 * other failure of the entry point is an error.
 */
export function realTool(name: 'talosctl' | 'helm' | 'helm3' | 'helmfile' | 'talhelper'): RealTool {
  const path = join(TOOLS_BIN, name)
  if (!ensured) {
    const run = spawnSync('bash', ['scripts/tools.sh'], { encoding: 'utf8', timeout: 15 * 60_000 })
    if (run.status === 3) ensured = { ok: false, why: run.stderr.trim() }
    else if (run.status !== 0) throw new Error(`scripts/tools.sh exited with ${run.status}: ${run.stderr}`)
    else ensured = { ok: true, why: '' }
  }
  if (!ensured.ok || !existsSync(path)) return { skip: `the real ${name} cannot be built here (task tools: ${ensured.why || 'missing'})` }
  return { path }
}

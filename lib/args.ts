import { parseArgs } from 'node:util'
import { InputError } from './errors.js'
import { SCALAR_SETTINGS } from './settings.js'

export interface CommandArgs {
  clusterDir: string
  nodes: string | undefined
  dryRun: boolean
  failFast: boolean
  reapply: boolean
  yes: boolean
  reset: boolean
  watch: boolean
  help: boolean
  node: string | undefined
  /** a report file (bootstrap:report) */
  run: string | undefined
  /** settings flags that were given (name without --) */
  settingFlags: Record<string, string | undefined>
}

const BOOLEAN_FLAGS = ['dry-run', 'fail-fast', 'reapply', 'yes', 'reset', 'watch', 'help'] as const

function truthy(value: string | undefined): boolean {
  return value !== undefined && /^(1|true|yes|on)$/i.test(value.trim())
}

/**
 * Flags beat the environment (DESIGN.md). Empty flag values (a Taskfile variable left unset)
 * count as not given. Unknown flags are bad input.
 */
export function parseCommandArgs(argv: string[], env: NodeJS.ProcessEnv, usage: string): CommandArgs {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {
    'cluster-dir': { type: 'string' },
    nodes: { type: 'string' },
    node: { type: 'string' },
    run: { type: 'string' },
  }
  for (const flag of BOOLEAN_FLAGS) options[flag] = { type: 'string' }
  for (const spec of SCALAR_SETTINGS) options[spec.flag] = { type: 'string' }
  // boolean flags may be written bare (--dry-run) or with a value (--dry-run=false, from the Taskfile)
  const normalized = argv.flatMap((arg, i) => {
    const bare = arg.startsWith('--') && !arg.includes('=') ? arg.slice(2) : undefined
    if (bare && (BOOLEAN_FLAGS as readonly string[]).includes(bare)) {
      const next = argv[i + 1]
      if (next === undefined || next.startsWith('--') || !/^(true|false|1|0|yes|no|)$/i.test(next)) return [`--${bare}=true`]
    }
    return [arg]
  })
  let values: Record<string, string | boolean | undefined>
  let positionals: string[]
  try {
    ;({ values, positionals } = parseArgs({ args: normalized, options, strict: true, allowPositionals: true }))
  } catch (err) {
    const text = err instanceof Error ? err.message : String(err)
    const flag = /'(-{1,2}[^']+)'/.exec(text)?.[1]
    throw new InputError(flag ? `unknown or malformed flag ${flag}` : text, { fix: `run with --help for the flags: ${usage}` })
  }
  if (positionals.length > 0) {
    throw new InputError(`unexpected argument ${JSON.stringify(positionals[0])}`, { fix: `flags only: ${usage}` })
  }
  const str = (name: string): string | undefined => {
    const v = values[name]
    return typeof v === 'string' && v !== '' ? v : undefined
  }
  const bool = (name: string, envName?: string): boolean => {
    const v = str(name)
    if (v !== undefined) return truthy(v)
    return envName ? truthy(env[envName]) : false
  }
  const settingFlags: Record<string, string | undefined> = {}
  for (const spec of SCALAR_SETTINGS) {
    const v = str(spec.flag)
    if (v !== undefined) settingFlags[spec.flag] = v
  }
  return {
    clusterDir: str('cluster-dir') ?? (env.CLUSTER_DIR || 'talos'),
    nodes: str('nodes') ?? (env.NODES || undefined),
    node: str('node') ?? (env.NODE || undefined),
    run: str('run'),
    dryRun: bool('dry-run', 'DRY_RUN'),
    failFast: bool('fail-fast', 'FAIL_FAST'),
    reapply: bool('reapply'),
    yes: bool('yes'),
    reset: bool('reset', 'RESET'),
    watch: bool('watch'),
    help: bool('help'),
    settingFlags,
  }
}

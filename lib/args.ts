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

/** Names of the variables that set a boolean flag, for the fix text. */
const BOOLEAN_ENV: Record<string, string> = { 'dry-run': 'DRY_RUN', 'fail-fast': 'FAIL_FAST', reset: 'RESET' }

/** A yes/no value; anything else (DRY_RUN=ture) is bad input rather than a silent "no". */
function yesNo(value: string, flag: string, where: string): boolean {
  const v = value.trim().toLowerCase()
  if (/^(1|true|yes|on)$/.test(v)) return true
  if (/^(0|false|no|off)$/.test(v)) return false
  const variable = BOOLEAN_ENV[flag]
  throw new InputError(`${where}: ${flag} must be true or false, got ${JSON.stringify(value)}`, {
    fix: variable ? `write ${variable}=true or ${variable}=false (or --${flag} / --${flag}=false)` : `write --${flag} or --${flag}=false`,
  })
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
  // boolean flags may be written bare (--dry-run) or with a value (--dry-run false, from the Taskfile);
  // a value that is neither yes nor no is refused below, not read as a stray argument
  const normalized = argv.flatMap((arg, i) => {
    const bare = arg.startsWith('--') && !arg.includes('=') ? arg.slice(2) : undefined
    if (bare && (BOOLEAN_FLAGS as readonly string[]).includes(bare)) {
      const next = argv[i + 1]
      if (next === undefined || next.startsWith('--')) return [`--${bare}=true`]
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
    if (v !== undefined) return yesNo(v, name, `flag --${name}`)
    const e = envName ? env[envName] : undefined
    return e && envName ? yesNo(e, name, `environment ${envName}`) : false
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

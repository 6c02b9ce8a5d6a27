import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { InputError } from '../core/errors.ts'
import { SCALAR_SETTINGS, type ScalarSpec } from '../input/settings.ts'

export interface CommandArgs {
  clusterDir: string
  nodes: string | undefined
  dryRun: boolean
  failFast: boolean
  reapply: boolean
  /** --no-generate: out-of-date machine configs are bad input instead of being regenerated */
  noGenerate: boolean
  yes: boolean
  reset: boolean
  watch: boolean
  help: boolean
  node: string | undefined
  /** a report file (bootstrap:report) */
  run: string | undefined
  /** cluster:apply: how changes are applied (MODE; checked by the phase) */
  mode: string | undefined
  /** upgrade:talos: the target (TALOS_VERSION or IMAGE), SCHEMATIC, and what the operator allows or asks of talosctl */
  upgrade: {
    talosVersion?: string
    image?: string
    schematic?: string
    allowDowngrade: boolean
    preserve: boolean
    force: boolean
    /** STAGE: `talosctl upgrade --stage` (the install on the next boot: two reboots) */
    stage: boolean
    /** REBOOT_MODE: `talosctl upgrade --reboot-mode` (default or powercycle) */
    rebootMode: 'default' | 'powercycle'
  }
  /** cluster:apply: configs carrying an older Kubernetes than a node runs are applied, not refused */
  allowK8sDowngrade: boolean
  /** upgrade:talos, cluster:apply: the only control plane may go down (its API with it) */
  acceptDowntime: boolean
  /** upgrade:k8s: the target (TO; checked by the phase) and the API endpoint talosctl upgrade-k8s is given */
  k8s: { to?: string; endpoint?: string }
  /** settings flags that were given (name without --) */
  settingFlags: Record<string, string | undefined>
}

const BOOLEAN_FLAGS = [
  'dry-run',
  'fail-fast',
  'reapply',
  'no-generate',
  'yes',
  'reset',
  'watch',
  'help',
  'allow-downgrade',
  'allow-k8s-downgrade',
  'preserve',
  'force',
  'accept-downtime',
  'stage',
] as const

/** Names of the variables that set a boolean flag, for the fix text. */
const BOOLEAN_ENV: Record<string, string> = { 'dry-run': 'DRY_RUN', 'fail-fast': 'FAIL_FAST', reset: 'RESET', stage: 'STAGE' }

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

/** REBOOT_MODE (talosctl upgrade --reboot-mode): default or powercycle; anything else is bad input. */
function rebootModeOf(value: string | undefined): 'default' | 'powercycle' {
  const v = (value ?? 'default').trim().toLowerCase()
  if (v === 'default' || v === 'powercycle') return v
  throw new InputError(`REBOOT_MODE must be default or powercycle, got ${JSON.stringify(value)}`, {
    fix: 'write REBOOT_MODE=powercycle (or leave it out for the default kexec reboot)',
  })
}

/** Flags that are not settings: name, its variable, its default, what it does. */
const COMMAND_FLAGS: ReadonlyArray<{ flag: string; value?: string; variable?: string; default: string; what: string }> = [
  {
    flag: 'cluster-dir',
    value: 'DIR',
    variable: 'CLUSTER_DIR',
    default: "the repository's talos/",
    what: 'the cluster definition (talconfig.yaml or nodes.yaml); relative to where task is run',
  },
  { flag: 'nodes', value: 'a,b', variable: 'NODES', default: 'every node', what: 'names or addresses to work on' },
  { flag: 'dry-run', variable: 'DRY_RUN', default: 'false', what: 'print what would run, per node; run nothing' },
  { flag: 'fail-fast', variable: 'FAIL_FAST', default: 'false', what: 'stop every node at the first failure' },
  { flag: 'reapply', default: 'false', what: 'bootstrap:apply: apply again to configured nodes (authenticated API)' },
  {
    flag: 'no-generate',
    default: 'false',
    what: 'never run talhelper genconfig / topf render: machine configs older than their inputs are an error',
  },
  { flag: 'node', value: 'NAME', variable: 'NODE', default: 'none', what: 'bootstrap:node: the one node to recover' },
  { flag: 'reset', variable: 'RESET', default: 'false', what: 'bootstrap:node: wipe the node back to maintenance first' },
  { flag: 'yes', default: 'false', what: 'bootstrap:node: confirm RESET=true without asking' },
  { flag: 'watch', default: 'false', what: 'bootstrap:status: refresh the table every poll interval' },
  { flag: 'run', value: 'FILE', variable: 'RUN', default: 'the last run', what: 'bootstrap:report: the report to draw' },
  {
    flag: 'mode',
    value: 'MODE',
    variable: 'MODE',
    default: 'auto',
    what: 'cluster:apply: auto, no-reboot, reboot, staged or try (talosctl apply-config --mode)',
  },
  {
    flag: 'talos-version',
    value: 'vX.Y.Z',
    variable: 'TALOS_VERSION',
    default: 'none',
    what: 'upgrade:talos: the Talos version to upgrade to',
  },
  {
    flag: 'image',
    value: 'REF',
    variable: 'IMAGE',
    default: "each node's installer at TALOS_VERSION",
    what: 'upgrade:talos: the installer image, as it is (instead of TALOS_VERSION)',
  },
  {
    flag: 'schematic',
    value: 'ID',
    variable: 'SCHEMATIC',
    default: "each node's running schematic",
    what: 'upgrade:talos: the Image Factory schematic of the installer',
  },
  { flag: 'allow-downgrade', default: 'false', what: 'upgrade:talos: allow a target older than a node runs' },
  {
    flag: 'accept-downtime',
    default: 'false',
    what: 'upgrade:talos, cluster:apply: let the only control plane go down (its API with it), after an etcd snapshot',
  },
  {
    flag: 'allow-k8s-downgrade',
    default: 'false',
    what: 'cluster:apply: apply configs that carry an older Kubernetes than a node runs',
  },
  { flag: 'preserve', default: 'false', what: "upgrade:talos: talosctl upgrade --preserve (skips Talos's own etcd check)" },
  { flag: 'force', default: 'false', what: "upgrade:talos: talosctl upgrade --force (skips Talos's own etcd check)" },
  {
    flag: 'stage',
    variable: 'STAGE',
    default: 'false',
    what: 'upgrade:talos: talosctl upgrade --stage (the install runs on the next boot: two reboots)',
  },
  {
    flag: 'reboot-mode',
    value: 'MODE',
    variable: 'REBOOT_MODE',
    default: 'default',
    what: 'upgrade:talos: talosctl upgrade --reboot-mode (default or powercycle)',
  },
  { flag: 'to', value: 'vX.Y.Z', variable: 'TO', default: 'none', what: 'upgrade:k8s: the Kubernetes version to upgrade to' },
  {
    flag: 'endpoint',
    value: 'URL',
    default: "the cluster endpoint, or a control plane's https://<address>:6443 when it does not answer",
    what: 'upgrade:k8s: the Kubernetes API endpoint talosctl upgrade-k8s uses (its --endpoint)',
  },
]

function settingDefault(spec: ScalarSpec): string {
  if (spec.default === undefined) return spec.key === 'bootstrapNode' ? 'the first control plane' : 'none'
  if (spec.kind !== 'duration' || typeof spec.default !== 'number') return String(spec.default)
  const ms = spec.default
  return ms % 60_000 === 0 ? `${ms / 60_000}m` : ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`
}

/** `-- --help`: the usage, every flag with its variable and default, and where the settings are documented. */
export function helpText(usage: string): string {
  const rows: Array<[string, string]> = [
    ...COMMAND_FLAGS.map((f): [string, string] => [
      `--${f.flag}${f.value ? ` ${f.value}` : ''}`,
      `${f.what} (${f.variable ? `${f.variable}; ` : ''}default: ${f.default})`,
    ]),
    ...SCALAR_SETTINGS.map((s): [string, string] => [
      `--${s.flag} ${s.kind === 'duration' ? 'DURATION' : s.kind === 'string' ? 'VALUE' : 'N'}`,
      `${s.file} in bootstrap.yaml (${s.env}; default: ${settingDefault(s)})`,
    ]),
    ['-h, --help', 'this help'],
  ]
  const width = Math.max(...rows.map(([flag]) => flag.length))
  return [
    `usage: ${usage}`,
    'Variables go before --, flags after it (a flag beats its variable, the variable beats bootstrap.yaml):',
    ...rows.map(([flag, what]) => `  ${flag.padEnd(width)}  ${what}`),
    `Settings (bootstrap.yaml keys, variables, flags, durations): ${resolve(import.meta.dirname, '..', '..', 'docs', 'settings.md')}`,
  ].join('\n')
}

/** Every flag name a command takes (for the nearest-flag suggestion). */
function knownFlags(): string[] {
  return [...COMMAND_FLAGS.map((f) => f.flag), ...SCALAR_SETTINGS.map((s) => s.flag), 'help']
}

/** Edit distance with adjacent swaps (`fsat` -> `fast` is one edit). */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)))
  const at = (i: number, j: number): number => d[i]?.[j] ?? 0
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1)
      ;(d[i] as number[])[j] = best
    }
  }
  return at(a.length, b.length)
}

/** The known flag nearest to a mistyped one, when it is close enough to be what was meant. */
export function nearestFlag(typed: string): string | undefined {
  const name = typed.replace(/^-+/, '').split('=')[0] ?? ''
  let best: { flag: string; d: number } | undefined
  for (const flag of knownFlags()) {
    const d = distance(name, flag)
    if (!best || d < best.d) best = { flag, d }
  }
  return best && best.d <= Math.max(1, Math.floor(name.length / 3)) ? `--${best.flag}` : undefined
}

/**
 * Flags beat the environment (docs/settings.md). Empty flag values (a Taskfile variable left unset)
 * count as not given. Unknown flags are bad input.
 */
export function parseCommandArgs(argv: string[], env: NodeJS.ProcessEnv, usage: string): CommandArgs {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {
    'cluster-dir': { type: 'string' },
    nodes: { type: 'string' },
    node: { type: 'string' },
    run: { type: 'string' },
    mode: { type: 'string' },
    'talos-version': { type: 'string' },
    image: { type: 'string' },
    schematic: { type: 'string' },
    'reboot-mode': { type: 'string' },
    to: { type: 'string' },
    endpoint: { type: 'string' },
  }
  for (const flag of BOOLEAN_FLAGS) options[flag] = { type: 'string' }
  for (const spec of SCALAR_SETTINGS) options[spec.flag] = { type: 'string' }
  // boolean flags may be written bare (--dry-run) or with a value (--dry-run false, from the Taskfile);
  // a value that is neither yes nor no is refused below, not read as a stray argument
  const normalized = argv
    .map((arg) => (arg === '-h' ? '--help' : arg))
    .flatMap((arg, i, all) => {
      const bare = arg.startsWith('--') && !arg.includes('=') ? arg.slice(2) : undefined
      if (bare && (BOOLEAN_FLAGS as readonly string[]).includes(bare)) {
        const next = all[i + 1]
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
    const near = flag ? nearestFlag(flag) : undefined
    throw new InputError(flag ? `unknown or malformed flag ${flag}` : text, {
      fix: `${near ? `did you mean ${near}? ` : ''}run with -- --help for every flag: ${usage}`,
    })
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
    mode: str('mode') ?? (env.MODE || undefined),
    allowK8sDowngrade: bool('allow-k8s-downgrade'),
    acceptDowntime: bool('accept-downtime'),
    upgrade: {
      ...(str('talos-version') !== undefined ? { talosVersion: str('talos-version') } : {}),
      ...(str('image') !== undefined ? { image: str('image') } : {}),
      ...(str('schematic') !== undefined ? { schematic: str('schematic') } : {}),
      allowDowngrade: bool('allow-downgrade'),
      preserve: bool('preserve'),
      force: bool('force'),
      stage: bool('stage'),
      rebootMode: rebootModeOf(str('reboot-mode')),
    },
    k8s: {
      ...(str('to') !== undefined ? { to: str('to') } : {}),
      ...(str('endpoint') !== undefined ? { endpoint: str('endpoint') } : {}),
    },
    dryRun: bool('dry-run', 'DRY_RUN'),
    failFast: bool('fail-fast', 'FAIL_FAST'),
    reapply: bool('reapply'),
    noGenerate: bool('no-generate'),
    yes: bool('yes'),
    reset: bool('reset', 'RESET'),
    watch: bool('watch'),
    help: bool('help'),
    settingFlags,
  }
}

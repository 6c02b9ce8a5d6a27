import { existsSync, realpathSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { parseDuration } from '../core/duration.ts'
import { InputError, InputErrors } from '../core/errors.ts'
import { controlPlanes, type Inventory } from '../core/model.ts'
import { outsideClusterDir } from './inside.ts'
import { TALENV_FILES } from './talhelper.ts'
import { YamlFile } from './yaml-file.ts'

export interface CniSettings {
  chart: string
  /** the chart repository's URL, given to helm as --repo (never a `helm repo add` alias) */
  repo?: string
  /** a CA bundle for the repository's TLS (helm --ca-file), absolute */
  caFile?: string
  version?: string
  release: string
  namespace: string
  values?: Record<string, unknown>
  daemonset: string
}

export interface ReadinessGate {
  name: string
  namespace: string
  selector: string
}

export interface FluxGitSettings {
  url: string
  branch: string
  path: string
  privateKeyFile?: string
  /** known_hosts lines for the Git host (operator mode: the deploy key Secret carries them) */
  knownHostsFile?: string
}

/** flux-operator from its Helm chart, then a FluxInstance syncing flux.git (cluster-template since 2025) */
export interface FluxOperatorSettings {
  chart: string
  /** a chart repository URL (`helm --repo`); without it `chart` is an OCI reference */
  repo?: string
  /** the repository's CA certificate (`helm --ca-file`) */
  caFile?: string
  version?: string
  /** the Flux distribution the FluxInstance asks for (a semver range) */
  fluxVersion: string
}

export interface FluxSettings {
  /** bootstrap: `flux bootstrap git`; operator: flux-operator + FluxInstance; existing: installed by another tool, only Secrets and the wait */
  mode: 'bootstrap' | 'operator' | 'existing'
  operator?: FluxOperatorSettings
  kustomization: string
  /** all: every Kustomization and HelmRelease Ready (default); root: the root Kustomization only */
  handover: 'all' | 'root'
  /** gates on what Flux deploys (a CSI driver...), checked after the handover */
  readinessGates: ReadinessGate[]
  git?: FluxGitSettings
  secrets: string[]
  /** an age private key file, stored as Secret sops-age (key age.agekey) before Flux starts */
  sopsAgeKeyFile?: string
}

/** The root Kustomization `flux.kustomization` names (`<namespace>/<name>`). */
export function fluxRoot(flux: Pick<FluxSettings, 'kustomization'>): { namespace: string; name: string } {
  const [namespace = 'flux-system', name = 'flux-system'] = flux.kustomization.split('/')
  return { namespace, name }
}

export interface Settings {
  concurrency: number
  retries: number
  retryDelayMs: number
  retryMaxDelayMs: number
  pollIntervalMs: number
  callTimeoutMs: number
  verifyTimeoutMs: number
  bootstrapTimeoutMs: number
  readyTimeoutMs: number
  fluxTimeoutMs: number
  resetTimeoutMs: number
  /** day 2: a node's drain (kubectl drain --timeout) before it reboots */
  drainTimeoutMs: number
  /** day 2: the operator's check after each node (`sh -c`), which must exit 0 within gateTimeout */
  gateCommand?: string
  gateTimeoutMs: number
  /** the time between two attempts of the gate command */
  gateIntervalMs: number
  /** upgrade:talos: talosctl upgrade's own --timeout (its tracker's wait for the node back), and how long a sent upgrade may take */
  upgradeTimeoutMs: number
  /** upgrade:k8s: the deadline of the whole `talosctl upgrade-k8s` call (its own waits have none) */
  k8sUpgradeTimeoutMs: number
  /** upgrade:k8s: a `talosctl upgrade-k8s` silent this long (no line printed) is cut, kind `stuck` */
  stallTimeoutMs: number
  bootstrapNode?: string
  kubeconfig: string
  /** talhelper's config file (genconfig -c), relative to CLUSTER_DIR */
  talconfig?: string
  /** talhelper's output folder (genconfig -o), relative to CLUSTER_DIR */
  talhelperOutDir?: string
  cni?: CniSettings
  readinessGates: ReadinessGate[]
  flux?: FluxSettings
}

type ScalarKey = Exclude<keyof Settings, 'cni' | 'readinessGates' | 'flux'>

export interface ScalarSpec {
  key: ScalarKey
  /** key in bootstrap.yaml */
  file: string
  env: string
  flag: string
  kind: 'count' | 'positive' | 'duration' | 'string'
  default: number | string | undefined
  /** the shortest duration that can work (a tool call needs a process start and a TLS handshake) */
  minMs?: number
}

/** Every scalar setting with its file key, environment variable and flag (docs/settings.md). */
export const SCALAR_SETTINGS: readonly ScalarSpec[] = [
  { key: 'concurrency', file: 'concurrency', env: 'CONCURRENCY', flag: 'concurrency', kind: 'positive', default: 1 },
  { key: 'retries', file: 'retries', env: 'BOOTSTRAP_RETRIES', flag: 'retries', kind: 'count', default: 5 },
  { key: 'retryDelayMs', file: 'retryDelay', env: 'BOOTSTRAP_RETRY_DELAY', flag: 'retry-delay', kind: 'duration', default: 3_000 },
  {
    key: 'retryMaxDelayMs',
    file: 'retryMaxDelay',
    env: 'BOOTSTRAP_RETRY_MAX_DELAY',
    flag: 'retry-max-delay',
    kind: 'duration',
    default: 60_000,
  },
  { key: 'pollIntervalMs', file: 'pollInterval', env: 'BOOTSTRAP_POLL_INTERVAL', flag: 'poll-interval', kind: 'duration', default: 5_000 },
  {
    key: 'callTimeoutMs',
    file: 'callTimeout',
    env: 'BOOTSTRAP_CALL_TIMEOUT',
    flag: 'call-timeout',
    kind: 'duration',
    default: 30_000,
    minMs: 1_000,
  },
  {
    key: 'verifyTimeoutMs',
    file: 'verifyTimeout',
    env: 'BOOTSTRAP_VERIFY_TIMEOUT',
    flag: 'verify-timeout',
    kind: 'duration',
    default: 300_000,
  },
  {
    key: 'bootstrapTimeoutMs',
    file: 'bootstrapTimeout',
    env: 'BOOTSTRAP_BOOTSTRAP_TIMEOUT',
    flag: 'bootstrap-timeout',
    kind: 'duration',
    default: 300_000,
  },
  {
    key: 'readyTimeoutMs',
    file: 'readyTimeout',
    env: 'BOOTSTRAP_READY_TIMEOUT',
    flag: 'ready-timeout',
    kind: 'duration',
    default: 600_000,
  },
  { key: 'fluxTimeoutMs', file: 'fluxTimeout', env: 'BOOTSTRAP_FLUX_TIMEOUT', flag: 'flux-timeout', kind: 'duration', default: 600_000 },
  // a graceful reset: up to 1 min for the cordon, 5 min of drain, 5 min of etcd leave retries, then the reboot
  {
    key: 'resetTimeoutMs',
    file: 'resetTimeout',
    env: 'BOOTSTRAP_RESET_TIMEOUT',
    flag: 'reset-timeout',
    kind: 'duration',
    default: 900_000,
  },
  // day 2: the same 5 minutes Talos's own drain and talosctl's take (pkg/kubernetes DrainTimeout)
  { key: 'drainTimeoutMs', file: 'drainTimeout', env: 'DRAIN_TIMEOUT', flag: 'drain-timeout', kind: 'duration', default: 300_000 },
  { key: 'gateCommand', file: 'gateCommand', env: 'GATE_COMMAND', flag: 'gate-command', kind: 'string', default: undefined },
  { key: 'gateTimeoutMs', file: 'gateTimeout', env: 'GATE_TIMEOUT', flag: 'gate-timeout', kind: 'duration', default: 600_000 },
  { key: 'gateIntervalMs', file: 'gateInterval', env: 'GATE_INTERVAL', flag: 'gate-interval', kind: 'duration', default: 10_000 },
  // upgrade:talos: talosctl upgrade's own --timeout default (cmd/talosctl/cmd/talos/upgrade.go, 30m)
  {
    key: 'upgradeTimeoutMs',
    file: 'upgradeTimeout',
    env: 'BOOTSTRAP_UPGRADE_TIMEOUT',
    flag: 'upgrade-timeout',
    kind: 'duration',
    default: 1_800_000,
  },
  // upgrade:k8s (docs/day2-design.md 2.7): talosctl upgrade-k8s's watches of a config update and of the
  // kubelet's restart have no timeout; its pod wait is 5 min, so the watchdog's default is longer
  {
    key: 'k8sUpgradeTimeoutMs',
    file: 'k8sUpgradeTimeout',
    env: 'BOOTSTRAP_K8S_UPGRADE_TIMEOUT',
    flag: 'k8s-upgrade-timeout',
    kind: 'duration',
    default: 3_600_000,
  },
  {
    key: 'stallTimeoutMs',
    file: 'stallTimeout',
    env: 'BOOTSTRAP_STALL_TIMEOUT',
    flag: 'stall-timeout',
    kind: 'duration',
    default: 600_000,
  },
  { key: 'bootstrapNode', file: 'bootstrapNode', env: 'BOOTSTRAP_NODE', flag: 'bootstrap-node', kind: 'string', default: undefined },
  { key: 'kubeconfig', file: 'kubeconfig', env: 'BOOTSTRAP_KUBECONFIG', flag: 'kubeconfig', kind: 'string', default: 'kubeconfig' },
  { key: 'talconfig', file: 'talconfig', env: 'BOOTSTRAP_TALCONFIG', flag: 'talconfig', kind: 'string', default: undefined },
  {
    key: 'talhelperOutDir',
    file: 'talhelperOutDir',
    env: 'BOOTSTRAP_TALHELPER_OUT_DIR',
    flag: 'talhelper-out-dir',
    kind: 'string',
    default: undefined,
  },
]

/** The longest delay setTimeout honours (2^31-1 ms, about 24.8 days). */
export const MAX_TIMER_MS = 2 ** 31 - 1

const STRUCTURED_KEYS = ['cni', 'readinessGates', 'flux'] as const
export const SETTINGS_FILE = 'bootstrap.yaml'

type Source = { describe: string; file?: YamlFile; path?: ReadonlyArray<string | number> }

function invalid(source: Source, message: string, fix: string): InputError {
  if (source.file && source.path) return source.file.error(source.path, message, fix)
  return new InputError(`${source.describe}: ${message}`, { fix })
}

function convert(spec: ScalarSpec, raw: unknown, source: Source): number | string {
  const text = typeof raw === 'number' ? String(raw) : typeof raw === 'string' ? raw.trim() : undefined
  if (text === undefined || text === '') {
    throw invalid(source, `${spec.file} must be ${describeKind(spec.kind)}, got ${JSON.stringify(raw)}`, example(spec))
  }
  switch (spec.kind) {
    case 'string':
      return text
    case 'duration': {
      const ms = parseDuration(text)
      if (ms === undefined || ms <= 0) {
        throw invalid(source, `${spec.file} must be a duration, got ${JSON.stringify(raw)}`, example(spec))
      }
      if (spec.minMs !== undefined && ms < spec.minMs) {
        throw invalid(
          source,
          `${spec.file} ${JSON.stringify(raw)} is too short: every tool call would be killed before it could answer (at least ${spec.minMs / 1000}s)`,
          example(spec),
        )
      }
      // a timer holds at most 2^31-1 ms; Node fires a longer one after 1 ms
      if (ms > MAX_TIMER_MS) {
        throw invalid(
          source,
          `${spec.file} ${JSON.stringify(raw)} is longer than a timer can hold (at most ${Math.floor(MAX_TIMER_MS / 3_600_000)}h)`,
          example(spec),
        )
      }
      return ms
    }
    case 'count':
    case 'positive': {
      const n = /^\d+$/.test(text) ? Number(text) : NaN
      const min = spec.kind === 'positive' ? 1 : 0
      if (!Number.isSafeInteger(n) || n < min) {
        throw invalid(source, `${spec.file} must be ${describeKind(spec.kind)}, got ${JSON.stringify(raw)}`, example(spec))
      }
      return n
    }
  }
}

function describeKind(kind: ScalarSpec['kind']): string {
  return {
    count: 'a whole number >= 0',
    positive: 'a whole number >= 1',
    duration: 'a duration such as 500ms, 3s or 5m',
    string: 'a non-empty string',
  }[kind]
}

function example(spec: ScalarSpec): string {
  const sample = spec.kind === 'duration' ? '5s' : spec.kind === 'string' ? 'cp-1' : '4'
  return `set ${spec.file}: ${sample} in ${SETTINGS_FILE}, ${spec.env}=${sample}, or --${spec.flag} ${sample}`
}

export interface SettingsInput {
  clusterDir: string
  env: NodeJS.ProcessEnv
  /** flag name (without --) to value, only flags that were given */
  flags: Record<string, string | undefined>
}

/** defaults <- bootstrap.yaml <- environment <- flags */
export function loadSettings(input: SettingsInput): Settings {
  const filePath = join(input.clusterDir, SETTINGS_FILE)
  const file = existsSync(filePath) ? YamlFile.read(filePath, `fix ${SETTINGS_FILE}`) : undefined
  const fromFile = file ? asRecord(file.toJS(), file) : {}

  for (const key of Object.keys(fromFile)) {
    const known = SCALAR_SETTINGS.some((s) => s.file === key) || (STRUCTURED_KEYS as readonly string[]).includes(key)
    if (!known && file) {
      const line = file.keyLine([], key)
      throw new InputError(`unknown setting "${key}"`, {
        file: file.path,
        ...(line ? { line } : {}),
        fix: `remove it or use one of: ${[...SCALAR_SETTINGS.map((s) => s.file), ...STRUCTURED_KEYS].join(', ')} (docs/settings.md)`,
      })
    }
  }

  const values: Record<string, number | string | undefined> = {}
  for (const spec of SCALAR_SETTINGS) {
    let value: number | string | undefined = spec.default
    if (fromFile[spec.file] !== undefined && fromFile[spec.file] !== null) {
      value = convert(spec, fromFile[spec.file], { describe: filePath, ...(file ? { file } : {}), path: [spec.file] })
    }
    const envValue = input.env[spec.env]
    if (envValue !== undefined && envValue !== '') value = convert(spec, envValue, { describe: `environment ${spec.env}` })
    const flagValue = input.flags[spec.flag]
    if (flagValue !== undefined) value = convert(spec, flagValue, { describe: `flag --${spec.flag}` })
    values[spec.key] = value
  }

  const settings = {
    ...(values as Record<ScalarKey, never>),
    readinessGates: file ? readGates(file, fromFile.readinessGates) : [],
  } as Settings
  if (file && fromFile.cni !== undefined) settings.cni = readCni(file, fromFile.cni, input.clusterDir)
  if (file && fromFile.flux !== undefined) settings.flux = readFlux(file, fromFile.flux, input.clusterDir)
  return settings
}

function asRecord(value: unknown, file: YamlFile, path: ReadonlyArray<string | number> = []): Record<string, unknown> {
  if (value === null || value === undefined) return {}
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw file.error(path, `${path.length ? path.join('.') : 'the file'} must be a mapping`, 'write key: value pairs (docs/settings.md)')
  }
  return value as Record<string, unknown>
}

function requireString(file: YamlFile, obj: Record<string, unknown>, path: Array<string | number>, key: string, fallback?: string): string {
  const value = obj[key]
  if (value === undefined || value === null) {
    if (fallback !== undefined) return fallback
    throw file.error(path, `${[...path, key].join('.')} is required`, `add ${key}: under ${path.join('.')} (docs/settings.md)`)
  }
  if (typeof value !== 'string' || value.trim() === '') {
    throw file.error([...path, key], `${[...path, key].join('.')} must be a non-empty string`, `quote the value of ${key}`)
  }
  return value
}

function rejectUnknown(file: YamlFile, obj: Record<string, unknown>, path: Array<string | number>, allowed: string[]): void {
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) {
      const line = file.keyLine(path, key)
      throw new InputError(`unknown setting "${[...path, key].join('.')}"`, {
        file: file.path,
        ...(line ? { line } : {}),
        fix: `remove it or use one of: ${allowed.join(', ')}`,
      })
    }
  }
}

/** the public cilium chart repository: where chart `cilium` comes from when no repo is set */
export const CILIUM_REPO = 'https://helm.cilium.io/'

/** A chart repository's CA certificate (`caFile`, relative to the cluster directory), which must exist. */
function readCaFile(file: YamlFile, obj: Record<string, unknown>, at: string[], clusterDir: string): string | undefined {
  if (obj.caFile === undefined) return undefined
  const caFile = resolve(clusterDir, requireString(file, obj, at, 'caFile'))
  if (existsSync(caFile) && !statSync(caFile).isFile())
    throw file.error(
      [...at, 'caFile'],
      `${at.join('.')}.caFile ${caFile} is not a regular file`,
      "point it at the chart repository's CA certificate (PEM)",
    )
  if (!existsSync(caFile))
    throw file.error(
      [...at, 'caFile'],
      `${at.join('.')}.caFile ${caFile} not found`,
      "write the chart repository's CA certificate (PEM) there or fix the path",
    )
  return caFile
}

const DNS1123_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/
const DNS1123_SUBDOMAIN = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/

/**
 * Names handed to helm and kubectl, checked as what they are before any of them runs: a value that
 * starts with a dash would be read as a flag, a newline would start another YAML document.
 */
const NAME_KINDS = {
  // Kubernetes namespace names (apimachinery validation.IsDNS1123Label)
  namespace: {
    ok: (v: string) => DNS1123_LABEL.test(v),
    what: 'a namespace name (a DNS-1123 label: lower-case letters, digits and dashes, at most 63)',
  },
  // helm's release names (pkg/chartutil ValidateReleaseName: a DNS-1123 subdomain of at most 53)
  release: {
    ok: (v: string) => v.length <= 53 && DNS1123_SUBDOMAIN.test(v),
    what: 'a helm release name (lower-case letters, digits, dashes and dots, at most 53)',
  },
  // object names (IsDNS1123Subdomain)
  object: {
    ok: (v: string) => v.length <= 253 && DNS1123_SUBDOMAIN.test(v),
    what: 'an object name (a DNS-1123 subdomain: lower-case letters, digits, dashes and dots)',
  },
  // a chart reference: a name, a path, an https or oci URL (helm pkg/downloader ResolveChartVersion)
  chart: {
    ok: (v: string) => /^(oci|https?):\/\/[^\s]+$/.test(v) || /^[A-Za-z0-9_.][\w.\/-]*$/.test(v),
    what: 'a chart reference (a chart name, a path, or an oci:// or https:// URL)',
  },
  url: { ok: (v: string) => /^(oci|https?):\/\/[^\s]+$/.test(v), what: 'a chart repository URL (https://, http:// or oci://)' },
  // a chart version or semver range (Masterminds/semver constraints)
  version: { ok: (v: string) => /^[\w.+~^<>=*|, ]+$/.test(v) && !v.startsWith('-'), what: 'a chart version or semver range' },
} as const

function requireName(
  file: YamlFile,
  obj: Record<string, unknown>,
  path: Array<string | number>,
  key: string,
  kind: keyof typeof NAME_KINDS,
  fallback?: string,
): string {
  const value = requireString(file, obj, path, key, fallback)
  const spec = NAME_KINDS[kind]
  if (!spec.ok(value)) {
    const where = obj[key] === undefined ? [...path] : [...path, key]
    throw file.error(where, `${[...path, key].join('.')} ${JSON.stringify(value)} is not ${spec.what}`, `write ${key}: as ${spec.what}`)
  }
  return value
}

function readCni(file: YamlFile, raw: unknown, clusterDir: string): CniSettings {
  const obj = asRecord(raw, file, ['cni'])
  rejectUnknown(file, obj, ['cni'], ['chart', 'repo', 'caFile', 'version', 'release', 'namespace', 'values', 'daemonset'])
  const chart = requireName(file, obj, ['cni'], 'chart', 'chart')
  const release = requireName(file, obj, ['cni'], 'release', 'release', chart.split('/').pop() ?? chart)
  const cni: CniSettings = {
    chart,
    release,
    namespace: requireName(file, obj, ['cni'], 'namespace', 'namespace', 'kube-system'),
    daemonset: requireName(file, obj, ['cni'], 'daemonset', 'object', release),
  }
  if (obj.repo !== undefined) cni.repo = requireName(file, obj, ['cni'], 'repo', 'url')
  else if (chart === 'cilium') cni.repo = CILIUM_REPO
  else if (/^[\w.-]+\/[\w.-]+$/.test(chart) && !existsSync(resolve(clusterDir, chart))) {
    // `alias/name` resolves only through `helm repo add` state on the operator's machine
    const name = chart.split('/')[1] ?? chart
    throw file.error(
      ['cni', 'chart'],
      `cni.chart "${chart}" names a chart through a \`helm repo add\` alias, which this tool does not rely on`,
      `write chart: ${name} and repo: ${name === 'cilium' ? CILIUM_REPO : '<the chart repository URL>'} under cni (docs/settings.md)`,
    )
  }
  const caFile = readCaFile(file, obj, ['cni'], clusterDir)
  if (caFile) cni.caFile = caFile
  if (obj.version !== undefined) cni.version = requireName(file, { version: String(obj.version) }, ['cni'], 'version', 'version')
  if (obj.values !== undefined) cni.values = asRecord(obj.values, file, ['cni', 'values'])
  return cni
}

function readGates(file: YamlFile, raw: unknown, at: string[] = ['readinessGates']): ReadinessGate[] {
  if (raw === undefined || raw === null) return []
  if (!Array.isArray(raw)) throw file.error(at, `${at.join('.')} must be a list`, 'write a list of {name, namespace, selector}')
  return raw.map((item, i) => {
    const obj = asRecord(item, file, [...at, i])
    rejectUnknown(file, obj, [...at, i], ['name', 'namespace', 'selector'])
    const selector = requireString(file, obj, [...at, i], 'selector')
    if (selector.startsWith('-') || /[\n\r]/.test(selector))
      throw file.error(
        [...at, i, 'selector'],
        `${[...at, i, 'selector'].join('.')} ${JSON.stringify(selector)} is not a label selector`,
        'write a label selector such as app=csi',
      )
    return {
      selector,
      namespace: requireName(file, obj, [...at, i], 'namespace', 'namespace'),
      name: requireString(file, obj, [...at, i], 'name', selector),
    }
  })
}

function readFlux(file: YamlFile, raw: unknown, clusterDir: string): FluxSettings {
  const obj = asRecord(raw, file, ['flux'])
  rejectUnknown(
    file,
    obj,
    ['flux'],
    ['mode', 'kustomization', 'git', 'secrets', 'sopsAgeKeyFile', 'handover', 'readinessGates', 'operator'],
  )
  const mode = requireString(file, obj, ['flux'], 'mode', 'bootstrap')
  if (mode === 'install') {
    // `flux install` creates no GitRepository or Kustomization: nothing would ever hand over
    throw file.error(
      ['flux', 'mode'],
      'flux.mode install can never hand over: `flux install` creates no GitRepository or Kustomization',
      'use flux.mode: bootstrap with flux.git, or flux.mode: existing when another tool installs Flux (docs/settings.md)',
    )
  }
  if (mode !== 'bootstrap' && mode !== 'operator' && mode !== 'existing') {
    throw file.error(
      ['flux', 'mode'],
      `flux.mode must be bootstrap, operator or existing, got "${mode}"`,
      'set flux.mode: bootstrap (with flux.git), operator or existing (docs/settings.md)',
    )
  }
  const handover = requireString(file, obj, ['flux'], 'handover', 'all')
  if (handover !== 'all' && handover !== 'root') {
    throw file.error(
      ['flux', 'handover'],
      `flux.handover must be all or root, got "${handover}"`,
      'use all (every Kustomization and HelmRelease Ready) or root',
    )
  }
  const kustomization = requireString(file, obj, ['flux'], 'kustomization', 'flux-system/flux-system')
  if (!/^[a-z0-9-]+\/[a-z0-9.-]+$/.test(kustomization)) {
    throw file.error(
      ['flux', 'kustomization'],
      `flux.kustomization must be <namespace>/<name>, got "${kustomization}"`,
      'write it as flux-system/flux-system',
    )
  }
  const flux: FluxSettings = {
    mode,
    kustomization,
    handover,
    secrets: [],
    readinessGates: readGates(file, obj.readinessGates, ['flux', 'readinessGates']),
  }
  if (mode === 'operator') {
    const op = asRecord(obj.operator, file, ['flux', 'operator'])
    rejectUnknown(file, op, ['flux', 'operator'], ['chart', 'repo', 'caFile', 'version', 'fluxVersion'])
    flux.operator = {
      chart: requireName(file, op, ['flux', 'operator'], 'chart', 'chart', 'oci://ghcr.io/controlplaneio-fluxcd/charts/flux-operator'),
      fluxVersion: requireString(file, op, ['flux', 'operator'], 'fluxVersion', '2.x'),
    }
    if (op.version !== undefined)
      flux.operator.version = requireName(file, { version: String(op.version) }, ['flux', 'operator'], 'version', 'version')
    // a chart repository instead of the OCI registry (a mirror, or the simulator's loopback repository)
    if (op.repo !== undefined) flux.operator.repo = requireName(file, op, ['flux', 'operator'], 'repo', 'url')
    const caFile = readCaFile(file, op, ['flux', 'operator'], clusterDir)
    if (caFile) flux.operator.caFile = caFile
  }
  if (obj.secrets !== undefined) {
    if (!Array.isArray(obj.secrets) || obj.secrets.some((s) => typeof s !== 'string')) {
      throw file.error(
        ['flux', 'secrets'],
        'flux.secrets must be a list of manifest file paths',
        'list files relative to the cluster directory',
      )
    }
    flux.secrets = obj.secrets as string[]
  }
  if (obj.sopsAgeKeyFile !== undefined) flux.sopsAgeKeyFile = requireString(file, obj, ['flux'], 'sopsAgeKeyFile')
  if (obj.git !== undefined) {
    const git = asRecord(obj.git, file, ['flux', 'git'])
    rejectUnknown(file, git, ['flux', 'git'], ['url', 'branch', 'path', 'privateKeyFile', 'knownHostsFile'])
    flux.git = {
      url: requireString(file, git, ['flux', 'git'], 'url'),
      branch: requireString(file, git, ['flux', 'git'], 'branch', 'main'),
      path: requireString(file, git, ['flux', 'git'], 'path'),
    }
    if (git.privateKeyFile !== undefined) flux.git.privateKeyFile = requireString(file, git, ['flux', 'git'], 'privateKeyFile')
    if (git.knownHostsFile !== undefined) flux.git.knownHostsFile = requireString(file, git, ['flux', 'git'], 'knownHostsFile')
  }
  if (mode !== 'existing' && !flux.git) {
    throw file.error(
      ['flux'],
      `flux.mode ${mode} needs flux.git (url, branch, path, privateKeyFile)`,
      'add flux.git, or set flux.mode: existing when another tool installs Flux',
    )
  }
  if (mode !== 'existing' && flux.git && !flux.git.privateKeyFile) {
    // flux bootstraps over SSH; run non-interactively (--silent) it would generate a deploy key
    // that nobody registers with the repository, and the GitRepository could never clone
    throw file.error(
      ['flux', 'git'],
      'flux.git.privateKeyFile is required: without it flux bootstrap generates a deploy key nobody registers with the repository',
      'add privateKeyFile: <a deploy key file whose public key the repository accepts>',
    )
  }
  return flux
}

/**
 * Where the effective value of a scalar setting came from (flag, environment, bootstrap.yaml with its
 * line), for an error about a value that parses but does not fit the cluster (a bootstrapNode that is
 * no control plane).
 */
export function settingOrigin(input: SettingsInput, key: ScalarKey): { file?: string; line?: number; describe: string } {
  const spec = SCALAR_SETTINGS.find((s) => s.key === key) as ScalarSpec
  if (input.flags[spec.flag] !== undefined) return { describe: `flag --${spec.flag}` }
  if (input.env[spec.env]) return { describe: `environment ${spec.env}` }
  const path = join(input.clusterDir, SETTINGS_FILE)
  if (!existsSync(path)) return { describe: 'default' }
  const line = YamlFile.read(path, `fix ${SETTINGS_FILE}`).lineOf([spec.file])
  return { file: path, ...(line ? { line } : {}), describe: SETTINGS_FILE }
}

/** Settings that parse but do not fit this cluster: bad input before any node is touched. */
export function checkSettingsFit(input: SettingsInput, settings: Settings, inventory: Inventory): void {
  const at = (key: ScalarKey, message: string, fix: string): InputError => {
    const origin = settingOrigin(input, key)
    return new InputError(origin.file ? message : `${origin.describe}: ${message}`, {
      ...(origin.file ? { file: origin.file } : {}),
      ...(origin.line ? { line: origin.line } : {}),
      fix,
    })
  }
  const wanted = settings.bootstrapNode
  if (wanted !== undefined) {
    const node = inventory.nodes.find((n) => n.name === wanted || n.address === wanted)
    const cps = controlPlanes(inventory).map((n) => n.name)
    const fix = `name a control plane (${cps.join(', ') || 'none in the inventory'}), or unset bootstrapNode to use the first`
    if (!node) throw at('bootstrapNode', `bootstrapNode "${wanted}" is no node of the inventory`, fix)
    if (node.role !== 'controlplane')
      throw at('bootstrapNode', `bootstrapNode "${wanted}" is a worker: etcd is bootstrapped on a control plane`, fix)
  }
  const kubeconfig = resolve(inventory.clusterDir, settings.kubeconfig)
  let isDir = false
  let special = false
  try {
    const stat = statSync(kubeconfig)
    isDir = stat.isDirectory()
    special = !isDir && !stat.isFile()
  } catch {
    // absent: the bootstrap phase writes it
  }
  const origin = settingOrigin(input, 'kubeconfig')
  const where = origin.file ? `${origin.file}${origin.line ? `:${origin.line}` : ''}` : origin.describe
  if (isDir) {
    throw new InputError(`is a directory, not a kubeconfig file (kubeconfig from ${where})`, {
      file: kubeconfig,
      fix: 'move the directory away, or point kubeconfig at a file path (bootstrap.yaml kubeconfig:, BOOTSTRAP_KUBECONFIG or --kubeconfig)',
    })
  }
  // every file the run reads lies in the cluster directory (no `../`, no link out of it)
  const outside = inputFiles(input.clusterDir, settings, inventory)
    .map((file) =>
      outsideClusterDir(inventory.clusterDir, file, 'this input file', 'move it into the cluster directory and name it relative to it'),
    )
    .filter((e): e is InputError => e !== undefined)
  if (outside.length === 1) throw outside[0]
  if (outside.length > 1) throw new InputErrors(outside)
  if (special) {
    throw new InputError(`is not a regular file (a FIFO, a socket or a device), not a kubeconfig file (kubeconfig from ${where})`, {
      file: kubeconfig,
      fix: 'move it away, or point kubeconfig at a file path (bootstrap.yaml kubeconfig:, BOOTSTRAP_KUBECONFIG or --kubeconfig)',
    })
  }
  // the kubeconfig is written: never over one of the files the run reads
  const clashing = inputFiles(input.clusterDir, settings, inventory).find((file) => samePath(file, kubeconfig))
  if (clashing) {
    throw new InputError(`is an input of this cluster (${clashing}), not a place to write the kubeconfig (kubeconfig from ${where})`, {
      file: kubeconfig,
      fix: 'point kubeconfig at a file of its own (bootstrap.yaml kubeconfig:, BOOTSTRAP_KUBECONFIG or --kubeconfig; default: kubeconfig in the cluster directory)',
    })
  }
}

/** Every file a run reads: the inventory, the talosconfig, the machine configs, the settings and the files they name. */
function inputFiles(clusterDir: string, settings: Settings, inventory: Inventory): string[] {
  return [
    inventory.source,
    inventory.talosconfig,
    ...inventory.nodes.map((n) => n.configFile),
    join(clusterDir, SETTINGS_FILE),
    ...TALENV_FILES.map((f) => join(clusterDir, f)),
    ...(settings.cni?.caFile ? [settings.cni.caFile] : []),
    ...(settings.flux?.git?.privateKeyFile ? [resolve(clusterDir, settings.flux.git.privateKeyFile)] : []),
    ...(settings.flux?.sopsAgeKeyFile ? [resolve(clusterDir, settings.flux.sopsAgeKeyFile)] : []),
    ...(settings.flux?.secrets ?? []).map((f) => resolve(clusterDir, f)),
    ...(settings.flux?.git?.knownHostsFile ? [resolve(clusterDir, settings.flux.git.knownHostsFile)] : []),
    ...(settings.flux?.operator?.caFile ? [settings.flux.operator.caFile] : []),
  ].map((f) => resolve(clusterDir, f))
}

/** Two paths name one file: the same path, or the same file through links. */
function samePath(a: string, b: string): boolean {
  if (resolve(a) === resolve(b)) return true
  try {
    return realpathSync(a) === realpathSync(b)
  } catch {
    return false
  }
}

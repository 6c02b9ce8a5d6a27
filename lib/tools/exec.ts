import { spawnSync } from 'node:child_process'
import { $, which } from 'zx/core'
import { ToolMissingError } from '../core/errors.ts'
import { shellWord } from '../core/shell.ts'
import type { Redactor } from '../input/redact.ts'
import { escapeControls } from '../core/text.ts'
import { answerKey, type ToolAnswers } from '../state/tool-answers.ts'

/** `sh`: the shell the operator's gate command runs in (`sh -c <GATE_COMMAND>`, docs/settings.md) */
export type ToolName = 'talosctl' | 'kubectl' | 'helm' | 'helmfile' | 'flux' | 'sops' | 'talhelper' | 'topf' | 'sh'

/** Environment variable that overrides each tool's binary (docs/settings.md). */
export const TOOL_ENV: Record<ToolName, string> = {
  talosctl: 'TALOSCTL',
  kubectl: 'KUBECTL',
  helm: 'HELM',
  helmfile: 'HELMFILE',
  flux: 'FLUX',
  sops: 'SOPS',
  talhelper: 'TALHELPER',
  topf: 'TOPF',
  sh: 'GATE_SHELL',
}

/** The one binary lookup: the tool's variable ($TALOSCTL, …) when set, else its name on PATH. */
export function toolBinary(env: NodeJS.ProcessEnv, tool: ToolName): string {
  return env[TOOL_ENV[tool]] || tool
}

/** The tool can be run here: its binary exists on PATH (or at its variable's path). */
export function toolAvailable(env: NodeJS.ProcessEnv, tool: ToolName): boolean {
  return Boolean(which.sync(toolBinary(env, tool), { nothrow: true, path: env.PATH ?? '' }))
}

/** Throws ToolMissingError (exit 3) for the first tool that cannot be run. */
export function requireTools(env: NodeJS.ProcessEnv, tools: ToolName[]): void {
  for (const tool of tools) {
    if (!toolAvailable(env, tool)) throw new ToolMissingError(tool, toolBinary(env, tool), TOOL_ENV[tool])
  }
}

export interface LocalResult {
  ok: boolean
  /** the binary was not found */
  missing: boolean
  stdout: string
  stderr: string
  exitCode: number | null
  durationMs: number
}

/**
 * A local tool run to completion before any runner exists (the config generators, which run before the
 * inventory is read): in `cwd`, stdin closed unless `input` is given, its output captured, never printed here.
 */
export function runLocalSync(
  env: NodeJS.ProcessEnv,
  tool: ToolName,
  args: string[],
  options: { cwd: string; input?: string; timeoutMs?: number },
): LocalResult {
  const started = performance.now()
  const result = spawnSync(toolBinary(env, tool), args, {
    cwd: options.cwd,
    env,
    encoding: 'utf8',
    timeout: options.timeoutMs ?? 300_000,
    ...(options.input !== undefined ? { input: options.input } : { stdio: ['ignore', 'pipe', 'pipe'] }),
  })
  const code = (result.error as NodeJS.ErrnoException | undefined)?.code
  const missing = code === 'ENOENT'
  // EPIPE: the tool exited before reading all its input; its exit code and stderr say why
  const error = code === 'EPIPE' ? undefined : result.error
  return {
    ok: !error && result.status === 0,
    missing,
    stdout: result.stdout ?? '',
    stderr: error && !missing ? `${result.stderr ?? ''}${error.message}` : (result.stderr ?? ''),
    exitCode: result.status,
    durationMs: performance.now() - started,
  }
}

export interface ToolCall {
  tool: ToolName
  args: string[]
  /** the node the call is about (for logs and the plan) */
  node?: string
  /** touches no node and no cluster (a client version, offline validation): runs in a dry run too */
  local?: boolean
  /**
   * changes a node or the cluster (an apply, the etcd bootstrap, a reset, a helm install): cut short
   * by an interruption, whether it took effect is unknown (ToolRunner.cutShort)
   */
  mutates?: boolean
  /** overrides the call timeout from settings */
  timeoutMs?: number
  /** extra environment for this call (merged over the process environment) */
  env?: Record<string, string>
  /** standard input (a decrypted manifest: it never touches the disk); never logged */
  input?: string
  /**
   * Left to finish when the run is killed (SIGKILL), not ended with it: a short install that, cut
   * half-way, leaves state the next run cannot go past (helm's pending-install release).
   */
  outlivesRun?: boolean
  /**
   * What the call answers in a dry run, where nothing is run: the happy path's output, so the
   * phases walk the same code and the plan lists every command they would run.
   */
  dryRunStdout?: string
  /** each line of standard error as it comes (redacted): a long call's progress (talosctl upgrade's tracker) */
  onStderrLine?: (line: string) => void
  /** each line of standard output as it comes (redacted): a long call's progress (talosctl upgrade-k8s's log) */
  onStdoutLine?: (line: string) => void
  /**
   * The watchdog: the call is cut (`stalled`) once it has printed nothing, on either stream, for this
   * long. For a long call whose waits have no deadline of their own (talosctl upgrade-k8s).
   */
  stallTimeoutMs?: number
  /**
   * The answer depends only on the binary, these arguments (`key`: kubectl's per-run cache flag left
   * out) and the bytes of `files`: a success is kept in the state directory and given back without
   * starting the tool again (lib/state/tool-answers.ts). For local calls that read nothing else.
   */
  reusable?: { key: string[]; files?: string[] }
}

/**
 * Go's garbage collector for a call that reads and returns: off up to a soft memory limit. Most of a
 * short talosctl, kubectl or helm run is its start-up, and collecting that garbage is wasted work: 13 %
 * of a `talosctl get`, 12 % of a `kubectl get`, 22 % of a `helm list` (docs/development.md). Past
 * 256 MiB the collector runs as usual, so a large answer costs no more memory than that. Calls that
 * stream for minutes (an upgrade's events, upgrade-k8s) or outlive the run keep Go's default, and so
 * does every call when the operator set GOGC or GOMEMLIMIT.
 */
function goCollector(call: ToolCall, env: NodeJS.ProcessEnv): Record<string, string> {
  const long = call.outlivesRun || call.onStdoutLine || call.onStderrLine || call.stallTimeoutMs !== undefined
  if (long || env.GOGC !== undefined || env.GOMEMLIMIT !== undefined) return {}
  return { GOGC: 'off', GOMEMLIMIT: '256MiB' }
}

export interface ToolResult {
  call: ToolCall
  /** exited 0, in time, not interrupted */
  ok: boolean
  exitCode: number | null
  stdout: string
  stderr: string
  durationMs: number
  timedOut: boolean
  /** cut by the watchdog: silent on both streams for the call's stallTimeoutMs (absent: no watchdog) */
  stalled?: boolean
  aborted: boolean
}

export interface PlannedCommand {
  node?: string
  command: string
}

export interface ToolRunnerOptions {
  env: NodeJS.ProcessEnv
  callTimeoutMs: number
  signal: AbortSignal
  dryRun: boolean
  redactor: Redactor
  /** takes one redacted line per finished call (the command log, .bootstrap/commands.log) */
  log?: (line: string) => void
  /**
   * the tools' TMPDIR (flux bootstrap clones the repository there): under .bootstrap, not the
   * operator's; `handed` through this process's handle, `plain` for a tool that may outlive the run
   */
  tmpDir?: { handed: string; plain: string }
  /** where the answers of `reusable` calls are kept (none in a dry run: nothing is written then) */
  answers?: ToolAnswers
}

/**
 * Linux's parent-death signal, set by util-linux's setpriv before it execs the tool: a tool outlives
 * a run killed with SIGKILL (no handler runs) unless the kernel ends it; an apply left running would
 * land after the kill. Nothing where setpriv is missing: a rerun then probes what landed (the journal marks a sent apply).
 */
function parentDeathWrapper(env: NodeJS.ProcessEnv): string[] {
  if (process.platform !== 'linux') return []
  const setpriv = which.sync('setpriv', { nothrow: true, path: env.PATH ?? '' })
  return setpriv ? [setpriv, '--pdeathsig', 'KILL', '--'] : []
}

/** Aborts its signal once `fed` has not been called for `silentMs` (a call's stall watchdog). */
class Watchdog {
  private readonly controller = new AbortController()
  private timer: NodeJS.Timeout

  private readonly silentMs: number
  constructor(silentMs: number) {
    this.silentMs = silentMs
    this.timer = setTimeout(() => this.controller.abort(), silentMs)
  }

  get signal(): AbortSignal {
    return this.controller.signal
  }

  fed(): void {
    if (this.controller.signal.aborted) return
    clearTimeout(this.timer)
    this.timer = setTimeout(() => this.controller.abort(), this.silentMs)
  }

  stop(): void {
    clearTimeout(this.timer)
  }
}

/** The one place that starts external tools: arrays of arguments, a deadline, the run's AbortSignal. */
export class ToolRunner {
  readonly plan: PlannedCommand[] = []
  /** changing calls an interruption cut short: the node or cluster may have taken them, or not */
  readonly cutShort: ToolCall[] = []
  /** every tool is started through it: ended by the kernel when this process dies */
  private readonly wrapper: string[]

  private readonly options: ToolRunnerOptions
  constructor(options: ToolRunnerOptions) {
    this.options = options
    this.wrapper = parentDeathWrapper(options.env)
  }

  binary(tool: ToolName): string {
    return toolBinary(this.options.env, tool)
  }

  get dryRun(): boolean {
    return this.options.dryRun
  }

  commandLine(call: ToolCall): string {
    return this.options.redactor.redact([this.binary(call.tool), ...call.args].map(shellWord).join(' '))
  }

  async run(call: ToolCall): Promise<ToolResult> {
    if (this.options.dryRun && !call.local) {
      this.plan.push({ ...(call.node ? { node: call.node } : {}), command: this.commandLine(call) })
      return { call, ok: true, exitCode: 0, stdout: call.dryRunStdout ?? '', stderr: '', durationMs: 0, timedOut: false, aborted: false }
    }
    this.options.signal.throwIfAborted()
    const reuse = this.reusableKey(call)
    const known = reuse === undefined ? undefined : this.options.answers?.get(reuse)
    if (known !== undefined)
      return { call, ok: true, exitCode: 0, stdout: known, stderr: '', durationMs: 0, timedOut: false, aborted: false }
    const timeoutMs = call.timeoutMs ?? this.options.callTimeoutMs
    const started = performance.now()
    const deadline = AbortSignal.timeout(timeoutMs)
    const watchdog = call.stallTimeoutMs !== undefined ? new Watchdog(call.stallTimeoutMs) : undefined
    const child = $({
      quiet: true,
      nothrow: true,
      signal: AbortSignal.any([this.options.signal, deadline, ...(watchdog ? [watchdog.signal] : [])]),
      env: { ...this.options.env, ...this.tmpEnv(call), ...goCollector(call, this.options.env), ...call.env },
      // no stdin: a tool never needs input here, and bash, started with a socket as stdin (node's
      // pipes are socketpairs) and SHLVL unset or 0, sources ~/.bashrc as if run by sshd: pyenv or
      // nvm set-up there then costs every call (measured: ~0.3–8 s per call at 300 nodes)
      ...(call.input !== undefined ? { input: call.input } : { stdio: ['ignore', 'pipe', 'pipe'] }),
    })`${[...(call.outlivesRun ? [] : this.wrapper), this.binary(call.tool), ...call.args]}`
    // a tool that exits before reading its input (a refused flag, a chart it cannot fetch) closes the
    // pipe under the write: its exit code and stderr say why; the EPIPE must not end this process
    child.stdin?.on('error', () => undefined)
    if (call.onStderrLine) this.streamLines(child.stderr, call.onStderrLine)
    if (call.onStdoutLine) this.streamLines(child.stdout, call.onStdoutLine)
    if (watchdog) for (const stream of [child.stdout, child.stderr]) stream.on('data', () => watchdog.fed())
    const output = await child.finally(() => watchdog?.stop())
    const aborted = this.options.signal.aborted
    const timedOut = deadline.aborted && !aborted
    const stalled = watchdog?.signal.aborted === true && !timedOut && !aborted
    const result: ToolResult = {
      call,
      ok: output.exitCode === 0 && !timedOut && !stalled && !aborted,
      exitCode: output.exitCode,
      stdout: output.stdout,
      // a tool's error text can quote any input (talosctl validate echoes a config's values): masked
      // here, before any step, hint or report sees it
      stderr: escapeControls(this.options.redactor.redactLines(output.stderr)),
      durationMs: performance.now() - started,
      timedOut,
      stalled,
      aborted,
    }
    if (aborted && call.mutates) this.cutShort.push(call)
    // the shell's or setpriv's (`failed to execute <binary>: No such file or directory`)
    if (output.exitCode === 127 && /command not found|No such file/i.test(output.stderr)) {
      throw new ToolMissingError(call.tool, this.binary(call.tool), TOOL_ENV[call.tool])
    }
    this.log(result)
    // kept as any output is shown: masked (a version or a validation names no secret, but nothing is assumed)
    if (reuse !== undefined && result.ok) this.options.answers?.set(reuse, this.options.redactor.redactLines(result.stdout))
    return result
  }

  /** The key a reusable call's answer is kept under; undefined when it is not reusable here. */
  private reusableKey(call: ToolCall): string | undefined {
    if (!call.reusable || !this.options.answers) return undefined
    const binary = which.sync(this.binary(call.tool), { nothrow: true, path: this.options.env.PATH ?? '' })
    return binary ? answerKey(binary, [call.tool, ...call.reusable.key], call.reusable.files ?? []) : undefined
  }

  /** Complete lines of a stream, each redacted, to `onLine` (the last one when the stream ends). */
  private streamLines(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
    let pending = ''
    const emit = (line: string): void => {
      const text = escapeControls(this.options.redactor.redactLines(line)).trim()
      if (text) onLine(text)
    }
    stream.on('data', (chunk: Buffer | string) => {
      pending += chunk.toString()
      const lines = pending.split('\n')
      pending = lines.pop() ?? ''
      for (const line of lines) emit(line)
    })
    stream.on('end', () => emit(pending))
  }

  private tmpEnv(call: ToolCall): Record<string, string> {
    const tmp = this.options.tmpDir
    return tmp ? { TMPDIR: call.outlivesRun ? tmp.plain : tmp.handed } : {}
  }

  private log(result: ToolResult): void {
    if (!this.options.log) return
    const outcome = result.timedOut ? 'timeout' : result.stalled ? 'stalled' : result.aborted ? 'aborted' : `exit ${result.exitCode}`
    const line = `${new Date().toISOString()} ${outcome} ${Math.round(result.durationMs)}ms ${this.commandLine(result.call)}\n`
    this.options.log(line)
  }
}

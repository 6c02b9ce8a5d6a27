import { $ } from 'zx'
import { ToolMissingError } from '../core/errors.js'
import type { Redactor } from '../input/redact.js'

export type ToolName = 'talosctl' | 'kubectl' | 'helm' | 'flux' | 'sops'

/** Environment variable that overrides each tool's binary (DESIGN.md). */
export const TOOL_ENV: Record<ToolName, string> = { talosctl: 'TALOSCTL', kubectl: 'KUBECTL', helm: 'HELM', flux: 'FLUX', sops: 'SOPS' }

export interface ToolCall {
  tool: ToolName
  args: string[]
  /** the node the call is about (for logs and the plan) */
  node?: string
  /** changes something: applied config, bootstrap, install... */
  mutates: boolean
  /** touches no node and no cluster (a client version, offline validation): runs in a dry run too */
  local?: boolean
  /** overrides the call timeout from settings */
  timeoutMs?: number
  /** extra environment for this call (merged over the process environment) */
  env?: Record<string, string>
  /** standard input (a decrypted manifest: it never touches the disk); never logged */
  input?: string
  /**
   * What the call answers in a dry run, where nothing is run: the happy path's output, so the
   * phases walk the same code and the plan lists every command they would run.
   */
  dryRunStdout?: string
}

export interface ToolResult {
  call: ToolCall
  exitCode: number | null
  stdout: string
  stderr: string
  durationMs: number
  timedOut: boolean
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
}

/** The one place that starts external tools: arrays of arguments, a deadline, the run's AbortSignal. */
export class ToolRunner {
  readonly plan: PlannedCommand[] = []
  readonly counts = new Map<string, number>()

  constructor(private readonly options: ToolRunnerOptions) {}

  binary(tool: ToolName): string {
    return this.options.env[TOOL_ENV[tool]] || tool
  }

  get dryRun(): boolean {
    return this.options.dryRun
  }

  commandLine(call: ToolCall): string {
    return this.options.redactor.redact([this.binary(call.tool), ...call.args].map(shellWord).join(' '))
  }

  async run(call: ToolCall): Promise<ToolResult> {
    const key = `${call.tool} ${call.args[0] ?? ''}`
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1)
    if (this.options.dryRun && !call.local) {
      this.plan.push({ ...(call.node ? { node: call.node } : {}), command: this.commandLine(call) })
      return { call, exitCode: 0, stdout: call.dryRunStdout ?? '', stderr: '', durationMs: 0, timedOut: false, aborted: false }
    }
    this.options.signal.throwIfAborted()
    const timeoutMs = call.timeoutMs ?? this.options.callTimeoutMs
    const started = performance.now()
    const controller = new AbortController()
    const onAbort = (): void => controller.abort()
    this.options.signal.addEventListener('abort', onAbort, { once: true })
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      controller.abort()
    }, timeoutMs)
    try {
      const output = await $({
        quiet: true,
        nothrow: true,
        signal: controller.signal,
        env: { ...this.options.env, ...call.env },
        // no stdin: a tool never needs input here, and bash, started with a socket as stdin (node's
        // pipes are socketpairs) and SHLVL unset or 0, sources ~/.bashrc as if run by sshd: pyenv or
        // nvm set-up there then costs every call (measured: ~0.3–8 s per call at 300 nodes)
        ...(call.input !== undefined ? { input: call.input } : { stdio: ['ignore', 'pipe', 'pipe'] }),
      })`${this.binary(call.tool)} ${call.args}`
      const result: ToolResult = {
        call,
        exitCode: output.exitCode,
        stdout: output.stdout,
        stderr: output.stderr,
        durationMs: performance.now() - started,
        timedOut,
        aborted: !timedOut && this.options.signal.aborted,
      }
      if (output.exitCode === 127 && /command not found|No such file/i.test(output.stderr)) {
        throw new ToolMissingError(call.tool, this.binary(call.tool), TOOL_ENV[call.tool])
      }
      this.log(result)
      return result
    } finally {
      clearTimeout(timer)
      this.options.signal.removeEventListener('abort', onAbort)
    }
  }

  private log(result: ToolResult): void {
    if (!this.options.log) return
    const outcome = result.timedOut ? 'timeout' : result.aborted ? 'aborted' : `exit ${result.exitCode}`
    const line = `${new Date().toISOString()} ${outcome} ${Math.round(result.durationMs)}ms ${this.commandLine(result.call)}\n`
    this.options.log(line)
  }
}

function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`
}

// The one wrapper every command runs in: flags (--help prints the usage), interruptions, and the
// exit code of an error that ends it (docs/design.md: 0 ok, 1 a node failed, 2 bad input, 3 a tool
// missing, 130 interrupted).
import { helpText, parseCommandArgs, type CommandArgs } from '../cli/args.ts'
import { output } from '../cli/output.ts'
import { ExitCode, InputError, InputErrors, InterruptedError, ToolMissingError } from '../core/errors.ts'

export interface CommandContext {
  args: CommandArgs
  env: NodeJS.ProcessEnv
  /** aborted on Ctrl-C, SIGTERM, SIGHUP, or when the parent process (go-task) is gone */
  signal: AbortSignal
}

export interface CommandOptions {
  usage: string
  /** say on stderr that the command is stopping, and what it still does (a run writes its report) */
  stopping?: string
}

/**
 * Runs `body` with parsed flags and an abort signal. A second signal exits at once (130). An error
 * out of `body` becomes its exit code: after an interruption, anything but bad input is 130.
 */
export async function runWrapped(
  options: CommandOptions,
  argv: string[],
  env: NodeJS.ProcessEnv,
  body: (ctx: CommandContext) => Promise<number>,
): Promise<number> {
  const controller = new AbortController()
  const stopListening = interruptions(controller, options.stopping)
  try {
    const args = parseCommandArgs(argv, env, options.usage)
    if (args.help) {
      output.info(helpText(options.usage))
      return ExitCode.ok
    }
    return await body({ args, env, signal: controller.signal })
  } catch (err) {
    if (controller.signal.aborted && !(err instanceof InputError || err instanceof InputErrors || err instanceof InterruptedError)) {
      return ExitCode.interrupted
    }
    return reportFatal(err)
  } finally {
    stopListening()
  }
}

/** Stops the command on Ctrl-C / SIGTERM / SIGHUP, and when the parent (go-task) went away without telling it. */
function interruptions(controller: AbortController, stopping: string | undefined): () => void {
  const parent = process.ppid
  const onSignal = (signal: NodeJS.Signals): void => {
    if (controller.signal.aborted) process.exit(ExitCode.interrupted)
    if (stopping) output.warn(`${signal} received: stopping (${stopping})`)
    controller.abort(new InterruptedError(`interrupted by ${signal}`))
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  process.on('SIGHUP', onSignal)
  const orphanCheck = setInterval(() => {
    if (process.ppid !== parent && !controller.signal.aborted) {
      if (stopping) output.warn('the parent process is gone: stopping')
      controller.abort(new InterruptedError('orphaned: parent process exited'))
    }
  }, 500)
  orphanCheck.unref()
  return () => {
    clearInterval(orphanCheck)
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
    process.off('SIGHUP', onSignal)
  }
}

/** Prints an error that ended a command before or outside the phases, and returns its exit code. */
export function reportFatal(err: unknown): number {
  // input errors read `<path>:<line>: <what is wrong> (fix: <what to do>)`, unprefixed
  if (err instanceof InputError) {
    output.plainError(err.format())
    return ExitCode.badInput
  }
  if (err instanceof InputErrors) {
    for (const e of err.errors) output.plainError(e.format())
    return ExitCode.badInput
  }
  if (err instanceof ToolMissingError) {
    output.error(err.message)
    return ExitCode.toolMissing
  }
  if (err instanceof InterruptedError) {
    output.error(err.message)
    return ExitCode.interrupted
  }
  output.error(`unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`)
  return ExitCode.nodeFailed
}

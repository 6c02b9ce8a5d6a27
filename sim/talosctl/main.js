// Entry point: cobra's Execute plus talosctl's error printing (no "Error:" prefix, usage block rule, exit 0/1).
import { cancelCalls, io } from '../cli-io.js'
import { buildTree } from './tree.js'

function printError(err, cmd) {
  const text = err.message ?? String(err)
  io().stderr.write(text + '\n')
  if (text.includes('arg(s)') || text.includes('flag') || text.includes('command')) {
    io().stderr.write('\n' + cmd.usageString() + '\n')
  }
}

/**
 * SIGINT/SIGTERM, as pkg/cli/context.go: the first cancels the calls in flight (they fail as a
 * cancelled context does); the second, or a first with nothing in flight, ends the run with exit 1.
 * Returns 'exit' when the caller must end the run now.
 */
export function interrupt() {
  const run = io()
  if (run.signalled) return 'exit'
  run.signalled = true
  run.stderr.write('Signal received, aborting, press Ctrl+C once again to abort immediately...\n')
  return cancelCalls() === 0 ? 'exit' : 'wait'
}

export async function main(argv) {
  const root = buildTree()
  const { cmd, args, err } = root.find(argv)
  if (err) { printError(new Error(err), cmd); return 1 }
  const fs = cmd.allFlags()
  let positional
  try {
    positional = fs.parse(args)
  } catch (e) {
    if (e.help) { io().stdout.write(cmd.helpString()); return 0 }
    printError(e, cmd)
    return 1
  }
  const flag = (name) => fs.lookup(name)?.value
  if (flag('help') || !cmd.runnable()) { io().stdout.write(cmd.helpString()); return 0 }
  if (cmd.args) {
    const e = cmd.args(cmd, positional)
    if (e) { printError(new Error(e), cmd); return 1 }
  }
  const missing = cmd.required.filter((n) => !fs.lookup(n).changed)
  if (missing.length) { printError(new Error(`required flag(s) "${missing.join('", "')}" not set`), cmd); return 1 }
  const g = {
    talosconfig: flag('talosconfig') ?? '',
    nodes: flag('nodes') ?? [],
    endpoints: flag('endpoints') ?? [],
    context: flag('context') ?? '',
    cluster: flag('cluster') ?? '',
  }
  const state = io()
  try {
    await cmd.run({ cmd, positional, flag, changed: (n) => fs.lookup(n)?.changed, g, state })
    return 0
  } catch (e) {
    if (!state.suppressErrors) printError(e, cmd)
    return 1
  }
}

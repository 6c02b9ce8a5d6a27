// Entry point: cobra's Execute plus talosctl's error printing (no "Error:" prefix, usage block rule, exit 0/1).
import { buildTree } from './tree.js'
import { cancelAll } from './inflight.js'

export const state = { suppressErrors: false }

function printError(err, cmd) {
  const text = err.message ?? String(err)
  process.stderr.write(text + '\n')
  if (text.includes('arg(s)') || text.includes('flag') || text.includes('command')) {
    process.stderr.write('\n' + cmd.usageString() + '\n')
  }
}

export async function main(argv) {
  const root = buildTree()
  let signalled = false
  const onSignal = () => {
    if (signalled) process.exit(1)
    signalled = true
    process.stderr.write('Signal received, aborting, press Ctrl+C once again to abort immediately...\n')
    if (cancelAll() === 0) process.exit(1)
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)

  const { cmd, args, err } = root.find(argv)
  if (err) { printError(new Error(err), cmd); return 1 }
  const fs = cmd.allFlags()
  let positional
  try {
    positional = fs.parse(args)
  } catch (e) {
    if (e.help) { process.stdout.write(cmd.helpString()); return 0 }
    printError(e, cmd)
    return 1
  }
  const flag = (name) => fs.lookup(name)?.value
  if (flag('help') || !cmd.runnable()) { process.stdout.write(cmd.helpString()); return 0 }
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
  try {
    await cmd.run({ cmd, positional, flag, changed: (n) => fs.lookup(n)?.changed, g, state })
    return 0
  } catch (e) {
    if (!state.suppressErrors) printError(e, cmd)
    return 1
  }
}

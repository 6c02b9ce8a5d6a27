// What one talosctl run reads and writes: its arguments, environment, working directory and
// output streams, and the calls it has in flight. Run by node (cli.js) these are the process's
// own; run inside the simulator for the thin client sim/bin/talosctl (server.js), each run has
// its own, so many runs share one process without seeing each other.
import { AsyncLocalStorage } from 'node:async_hooks'
import path from 'node:path'

const runs = new AsyncLocalStorage()

/** A run's context: streams are anything with write(text). */
export function newRun({ argv, env, cwd, stdout, stderr }) {
  return { argv, env, cwd, stdout, stderr, inflight: new Set(), suppressErrors: false, signalled: false }
}

let own
/** The current run's context (the process's own outside any server run). */
export function io() {
  const ctx = runs.getStore()
  if (ctx) return ctx
  own ??= newRun({ argv: process.argv.slice(2), env: process.env, cwd: process.cwd(), stdout: process.stdout, stderr: process.stderr })
  return own
}

export const withRun = (ctx, fn) => runs.run(ctx, fn)

/** A file argument as the caller meant it: relative to the caller's working directory. */
export const local = (p) => path.resolve(io().cwd, p)

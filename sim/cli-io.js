// What one run of a simulated CLI (talosctl, helm) reads and writes: its arguments, environment,
// working directory and output streams, the calls it has in flight and whether it was cancelled.
// Run as a node process (sim/<tool>/cli.js) these are the process's own; run inside the simulator
// for the thin client sim/cli-client.bash (cli-server.js), each run has its own, so many runs share
// one process without seeing each other.
import { AsyncLocalStorage } from 'node:async_hooks'
import os from 'node:os'
import path from 'node:path'

const runs = new AsyncLocalStorage()

/** A run's context: streams are anything with write(text). */
export function newRun({ argv, env, cwd, stdout, stderr }) {
  return { argv, env, cwd, stdout, stderr, inflight: new Set(), suppressErrors: false, signalled: false, cancelled: new AbortController() }
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

/** Cancels a run's calls in flight (they fail as a cancelled context does); returns how many. */
export function cancelCalls(run = io()) {
  const calls = [...run.inflight]
  for (const cancel of calls) cancel()
  return calls.length
}

/** A file argument as the caller meant it: relative to the caller's working directory. */
export const local = (p) => path.resolve(io().cwd, p)

/** The caller's home directory ($HOME, as Go's os.UserHomeDir reads it). */
export const home = () => io().env.HOME || os.homedir()

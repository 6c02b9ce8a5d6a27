import type { Run } from '../../engine/run.ts'

/**
 * What a phase keeps for one run, written by one step and read by the steps after it (a plan per
 * node): made on first use, forgotten with the run.
 */
export function perRun<T>(make: (run: Run) => T): (run: Run) => T {
  const byRun = new WeakMap<Run, T>()
  return (run) => {
    let value = byRun.get(run)
    if (value === undefined) byRun.set(run, (value = make(run)))
    return value
  }
}

/** A phase changes the cluster in this run (not DRY_RUN, which plans only). */
export const acts = (run: Run): boolean => run.options.planOnly !== true

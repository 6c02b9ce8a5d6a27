// Describes that run side by side while the tests inside each run one after another, in order.
// vitest 5 has no `describe.sequential`: the tests of a `{ concurrent: true }` describe inherit its
// `concurrent` unless they say otherwise, and sibling describes run at once only when each is concurrent.
import { it } from 'vitest'

/** options for a describe that runs alongside its concurrent siblings (its own cluster, its own range) */
export const SIDE_BY_SIDE = { concurrent: true } as const

/**
 * A test of a SIDE_BY_SIDE describe that runs after the one before it, in the order written: each
 * builds on what the earlier ones left on the describe's shared cluster.
 */
export function inTurn(name: string, fn: () => Promise<void>, timeout?: number): void {
  it(name, { concurrent: false, ...(timeout === undefined ? {} : { timeout }) }, fn)
}

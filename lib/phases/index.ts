import type { Phase } from '../phase.js'
import type { PhaseName } from '../results.js'
import { apply } from './apply.js'
import { preflight } from './preflight.js'
import { verify } from './verify.js'

/** Phases in the order a full bootstrap runs them. */
export const PHASES: Partial<Record<PhaseName, Phase>> = { preflight, apply, verify }

export function phasesFor(names: PhaseName[]): Phase[] {
  return names.map((name) => {
    const phase = PHASES[name]
    if (!phase) throw new Error(`phase ${name} is not implemented yet`)
    return phase
  })
}

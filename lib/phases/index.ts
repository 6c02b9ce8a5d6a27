import type { Phase } from '../engine/phase.ts'
import type { PhaseName } from '../core/results.ts'
import { apply } from './apply.ts'
import { clusterApply } from './cluster-apply.ts'
import { etcd } from './etcd.ts'
import { flux } from './flux.ts'
import { preflight } from './preflight.ts'
import { reset } from './reset.ts'
import { upgradeTalos } from './upgrade-talos.ts'
import { upgradeK8s } from './upgrade-k8s.ts'
import { verify } from './verify.ts'
import { waitReady } from './wait-ready.ts'

/** Phases in the order a full bootstrap runs them. */
export const PHASES: Record<PhaseName, Phase> = {
  preflight,
  reset,
  apply,
  verify,
  bootstrap: etcd,
  'wait-ready': waitReady,
  flux,
  'cluster-apply': clusterApply,
  'upgrade-talos': upgradeTalos,
  'upgrade-k8s': upgradeK8s,
}

export function phasesFor(names: PhaseName[]): Phase[] {
  return names.map((name) => PHASES[name])
}

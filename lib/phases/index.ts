import type { Phase } from '../engine/phase.js'
import type { PhaseName } from '../core/results.js'
import { apply } from './apply.js'
import { clusterApply } from './cluster-apply.js'
import { etcd } from './etcd.js'
import { flux } from './flux.js'
import { preflight } from './preflight.js'
import { reset } from './reset.js'
import { upgradeTalos } from './upgrade-talos.js'
import { upgradeK8s } from './upgrade-k8s.js'
import { verify } from './verify.js'
import { waitReady } from './wait-ready.js'

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

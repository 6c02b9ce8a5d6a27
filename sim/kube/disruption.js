// PodDisruptionBudgets, in one place for the API's pods/eviction subresource (handler.js), Talos's
// own drain (index.js drain) and the disruption controller's pass (controllers.js):
//   budgetStatus  the status the disruption controller writes (kubernetes pkg/controller/disruption/
//                 disruption.go: getExpectedPodCount, buildDisruptedPodMap, countHealthyPods,
//                 updatePdbStatus; k8s.io/component-helpers apps/poddisruptionbudget
//                 UpdateDisruptionAllowedCondition)
//   evict         the eviction registry (pkg/registry/core/pod/storage/eviction.go): a terminal,
//                 Pending or terminating pod is deleted; one covered by no budget is deleted; a
//                 budget that allows no disruption answers 429; more than one budget, 500; an
//                 allowed eviction takes one from status.disruptionsAllowed, notes the pod in
//                 status.disruptedPods and deletes the pod
import { ApiError, notFound } from './status.js'
import { setCondition } from '../kube-rules.js'
import { rfc3339 } from './util.js'

/** how long the controller leaves an evicted pod out of currentHealthy (disruption.go DeletionTimeout) */
const DELETION_TIMEOUT_S = 120
/** eviction.go MaxDisruptedPodSize */
const MAX_DISRUPTED_PODS = 2000

const emptySelector = (s) => !s || (!Object.keys(s.matchLabels || {}).length && !(s.matchExpressions || []).length)

/** metav1.LabelSelectorAsSelector: a missing selector selects nothing, an empty one every pod */
export function selects(selector, pod) {
  if (!selector) return false
  const labels = pod.metadata.labels || {}
  return (
    Object.entries(selector.matchLabels || {}).every(([k, v]) => labels[k] === v) &&
    (selector.matchExpressions || []).every((e) => {
      const has = Object.hasOwn(labels, e.key)
      switch (e.operator) {
        case 'In':
          return has && (e.values || []).includes(labels[e.key])
        case 'NotIn':
          return !has || !(e.values || []).includes(labels[e.key])
        case 'Exists':
          return has
        case 'DoesNotExist':
          return !has
        default:
          return false
      }
    })
  )
}

/** the budgets the eviction API holds `pod` to: same namespace, a selector neither missing nor empty, matching */
export function budgetsOf(pod, pdbs) {
  return pdbs.filter(
    (b) => b.metadata.namespace === pod.metadata.namespace && !emptySelector(b.spec?.selector) && selects(b.spec.selector, pod),
  )
}

const podReady = (p) => (p.status?.conditions || []).some((c) => c.type === 'Ready' && c.status === 'True')

// intstr.GetScaledValueFromIntOrPercent(v, total, roundUp=true)
function scaled(v, total) {
  if (typeof v === 'number') return v
  const m = /^(\d+)%$/.exec(String(v))
  if (!m) throw new Error(`invalid value for IntOrString: invalid value "${v}"`)
  return Math.ceil((Number(m[1]) * total) / 100)
}

// The DisruptionAllowed condition (UpdateDisruptionAllowedCondition; failSafe's SyncFailed).
function allowedCondition(status, now, failure) {
  const c = failure
    ? { type: 'DisruptionAllowed', status: 'False', observedGeneration: status.observedGeneration, reason: 'SyncFailed', message: failure }
    : status.disruptionsAllowed > 0
      ? { type: 'DisruptionAllowed', status: 'True', observedGeneration: status.observedGeneration, reason: 'SufficientPods', message: '' }
      : {
          type: 'DisruptionAllowed',
          status: 'False',
          observedGeneration: status.observedGeneration,
          reason: 'InsufficientPods',
          message: '',
        }
  // metav1.Condition's field order: type, status, observedGeneration, lastTransitionTime, reason, message
  return setCondition(status.conditions, c, now).map(({ type, status: s, observedGeneration, lastTransitionTime, reason, message }) => ({
    type,
    status: s,
    ...(observedGeneration ? { observedGeneration } : {}),
    lastTransitionTime,
    reason,
    message,
  }))
}

/**
 * The status the disruption controller gives `pdb`. pods: the pods of its namespace; scaleOf(ownerRef,
 * namespace) -> { uid, scale } | undefined: the scale of a pod's controller (the controller's finders).
 */
export function budgetStatus(pdb, pods, { scaleOf, now }) {
  const nowIso = rfc3339(now)
  const generation = pdb.metadata.generation || 1
  const mine = pods.filter((p) => p.metadata.namespace === pdb.metadata.namespace && selects(pdb.spec?.selector, p))
  const { minAvailable, maxUnavailable } = pdb.spec || {}
  let expectedPods = 0
  let desiredHealthy = 0
  try {
    // getExpectedScale: the sum of the scales of the pods' controllers (pods without one left out)
    const expectedScale = () => {
      const scales = new Map()
      for (const p of mine) {
        const ref = (p.metadata.ownerReferences || []).find((r) => r.controller)
        if (!ref || scales.has(ref.uid)) continue
        const found = scaleOf(ref, p.metadata.namespace)
        if (!found) throw new Error(`found no controllers for pod "${p.metadata.name}"`)
        scales.set(ref.uid, found.scale)
      }
      return [...scales.values()].reduce((a, b) => a + b, 0)
    }
    if (maxUnavailable !== undefined && maxUnavailable !== null) {
      expectedPods = expectedScale()
      desiredHealthy = Math.max(0, expectedPods - scaled(maxUnavailable, expectedPods))
    } else if (typeof minAvailable === 'number') {
      desiredHealthy = minAvailable
      expectedPods = mine.length
    } else if (typeof minAvailable === 'string') {
      expectedPods = expectedScale()
      desiredHealthy = scaled(minAvailable, expectedPods)
    }
  } catch (e) {
    // failSafe: no disruption allowed, the reason in the condition; observedGeneration stays
    const status = { ...(pdb.status || {}), disruptionsAllowed: 0 }
    return { ...status, conditions: allowedCondition(status, nowIso, e.message) }
  }
  // buildDisruptedPodMap: evicted pods not yet deleted, for DeletionTimeout
  const disruptedPods = {}
  for (const p of mine) {
    const at = pdb.status?.disruptedPods?.[p.metadata.name]
    if (p.metadata.deletionTimestamp || !at) continue
    if (Date.parse(at) + DELETION_TIMEOUT_S * 1000 >= now.getTime()) disruptedPods[p.metadata.name] = at
  }
  const currentHealthy = mine.filter((p) => !p.metadata.deletionTimestamp && !disruptedPods[p.metadata.name] && podReady(p)).length
  let disruptionsAllowed = currentHealthy - desiredHealthy
  if (expectedPods <= 0 || disruptionsAllowed <= 0) disruptionsAllowed = 0
  const status = {
    observedGeneration: generation,
    ...(Object.keys(disruptedPods).length ? { disruptedPods } : {}),
    disruptionsAllowed,
    currentHealthy,
    desiredHealthy,
    expectedPods,
    conditions: pdb.status?.conditions,
  }
  status.conditions = allowedCondition(status, nowIso)
  return status
}

const tooManyRequests = (cause, retryAfterSeconds) =>
  new ApiError(429, 'TooManyRequests', "Cannot evict pod as it would violate the pod's disruption budget.", {
    causes: [{ reason: 'DisruptionBudget', message: cause }],
    ...(retryAfterSeconds ? { retryAfterSeconds } : {}),
  })

/**
 * Evict `namespace/name` as POST .../pods/{name}/eviction does. store/PODS/PDBS: the store and the two
 * kinds; remove(pod): delete it (as a DELETE would); now: simulated time. Returns the pod deleted (or
 * that would be, with dryRun); throws the API's error, a refusal carrying `.pdb` (namespace/name).
 */
export function evict({ store, PODS, PDBS, remove, now }, namespace, name, { dryRun = false } = {}) {
  const pod = store.get(PODS, namespace, name)
  if (!pod) throw notFound(PODS, name)
  // canIgnorePDB: a terminal, Pending or terminating pod is deleted without looking at budgets
  const phase = pod.status?.phase
  if (['Succeeded', 'Failed', 'Pending'].includes(phase) || pod.metadata.deletionTimestamp) return dryRun ? pod : remove(pod)
  const pdbs = budgetsOf(pod, store.list(PDBS, namespace))
  if (pdbs.length > 1) {
    const e = new ApiError(
      500,
      undefined,
      'This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.',
    )
    e.pdb = pdbs.map((b) => `${b.metadata.namespace}/${b.metadata.name}`).join(', ')
    throw e
  }
  if (pdbs.length === 0) return dryRun ? pod : remove(pod)
  const pdb = pdbs[0]
  const st = pdb.status || {}
  const refuse = (e) => {
    e.pdb = `${pdb.metadata.namespace}/${pdb.metadata.name}`
    return e
  }
  // an unready pod counts for nothing: deleted without taking from the budget when the policy is
  // AlwaysAllow, or (IfHealthyBudget, the default) while the budget is met
  if (!podReady(pod)) {
    const alwaysAllow = pdb.spec?.unhealthyPodEvictionPolicy === 'AlwaysAllow'
    if (alwaysAllow || ((st.currentHealthy ?? 0) >= (st.desiredHealthy ?? 0) && (st.desiredHealthy ?? 0) > 0))
      return dryRun ? pod : remove(pod)
  }
  // checkAndDecrement
  if ((st.observedGeneration ?? 0) < (pdb.metadata.generation || 1))
    throw refuse(tooManyRequests(`The disruption budget ${pdb.metadata.name} is still being processed by the server.`, 10))
  const allowed = st.disruptionsAllowed ?? 0
  if (allowed < 0)
    throw refuse(
      new ApiError(
        403,
        'Forbidden',
        `poddisruptionbudget.policy "${pdb.metadata.name}" is forbidden: pdb disruptions allowed is negative`,
        { name: pdb.metadata.name, group: 'policy', kind: 'poddisruptionbudget' },
      ),
    )
  if (Object.keys(st.disruptedPods || {}).length > MAX_DISRUPTED_PODS)
    throw refuse(
      new ApiError(
        403,
        'Forbidden',
        `poddisruptionbudget.policy "${pdb.metadata.name}" is forbidden: DisruptedPods map too big - too many evictions not confirmed by PDB controller`,
        { name: pdb.metadata.name, group: 'policy', kind: 'poddisruptionbudget' },
      ),
    )
  if (allowed === 0)
    throw refuse(
      tooManyRequests(
        `The disruption budget ${pdb.metadata.name} needs ${st.desiredHealthy ?? 0} healthy pods and has ${st.currentHealthy ?? 0} currently`,
      ),
    )
  if (dryRun) return pod
  const status = { ...st, disruptionsAllowed: allowed - 1, disruptedPods: { ...(st.disruptedPods || {}), [name]: rfc3339(now) } }
  if (status.disruptionsAllowed === 0) status.conditions = allowedCondition(status, rfc3339(now))
  store.update(PDBS, { ...pdb, status }, { checkVersion: false })
  return remove(pod)
}

// helm v3's --wait readiness rules (pkg/kube/ready.go), applied by polling the API.
import { io } from '../cli-io.js'

/** intstr.GetScaledValueFromIntOrPercent */
function scaled(v, total, roundUp) {
  if (v === undefined || v === null) return null
  if (typeof v === 'number') return v
  const m = /^(\d+)%$/.exec(String(v))
  if (!m) return Number(v) || 0
  const x = (Number(m[1]) * total) / 100
  return roundUp ? Math.ceil(x) : Math.floor(x)
}

function generationObserved(obj) {
  const og = obj.status?.observedGeneration
  return og === undefined || og === null || obj.metadata?.generation === undefined || og >= obj.metadata.generation
}

export function daemonSetReady(ds) {
  if (!generationObserved(ds)) return false
  if ((ds.spec?.updateStrategy?.type || 'RollingUpdate') !== 'RollingUpdate') return true
  const st = ds.status || {}
  const desired = st.desiredNumberScheduled || 0
  if ((st.updatedNumberScheduled || 0) !== desired) return false
  let maxUnavailable = scaled(ds.spec?.updateStrategy?.rollingUpdate?.maxUnavailable ?? 1, desired, true)
  if (maxUnavailable === null) maxUnavailable = desired
  return (st.numberReady || 0) >= desired - maxUnavailable
}

export function deploymentReady(d) {
  if (d.spec?.paused) return true
  if (!generationObserved(d)) return false
  const replicas = d.spec?.replicas ?? 1
  let maxUnavailable = 0
  if ((d.spec?.strategy?.type || 'RollingUpdate') === 'RollingUpdate' && replicas > 0) {
    const ru = d.spec?.strategy?.rollingUpdate || {}
    const surge = scaled(ru.maxSurge ?? '25%', replicas, true)
    maxUnavailable = scaled(ru.maxUnavailable ?? '25%', replicas, false)
    if (surge === 0 && maxUnavailable === 0) maxUnavailable = 1
    if (maxUnavailable > replicas) maxUnavailable = replicas
  }
  return (d.status?.readyReplicas || 0) >= replicas - maxUnavailable
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/**
 * Wait until every DaemonSet and Deployment among `objects` is ready, polling the API.
 * Throws Error('context deadline exceeded') when `deadline` (epoch ms) passes.
 */
export async function waitForResources(client, objects, deadline, pollMs = Number(io().env.SIM_HELM_POLL_MS || 250)) {
  const pending = objects.filter((o) => o.kind === 'DaemonSet' || o.kind === 'Deployment')
  for (;;) {
    let allReady = true
    for (const o of pending) {
      let live = null
      try {
        live = await client.getOrNull(o.kind, o.metadata.namespace, o.metadata.name)
      } catch (e) {
        if (!e.transport) throw e
      }
      const ok = live && (o.kind === 'DaemonSet' ? daemonSetReady(live) : deploymentReady(live))
      if (!ok) {
        allReady = false
        break
      }
    }
    if (allReady) return
    // a thin client that went away (killed): stop waiting, as its process would have
    if (io().cancelled.signal.aborted) throw new Error('context canceled')
    if (Date.now() + pollMs > deadline) {
      await sleep(Math.max(0, deadline - Date.now()))
      throw new Error('context deadline exceeded')
    }
    await sleep(pollMs)
  }
}

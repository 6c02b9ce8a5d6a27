// What kube-apiserver's registry strategies do to an object on create/update: defaults,
// Secret stringData folding, status handling for kinds with a status subresource.

import { ApiError } from './status.js'

let serviceIp = 0
// Simulated cluster IPs stay inside loopback, like every address in this project.
const nextServiceIp = () => {
  serviceIp++
  return `127.96.${Math.floor(serviceIp / 250) % 250}.${(serviceIp % 250) + 1}`
}

// A Secret's data is []byte: JSON decoding rejects a value that is not base64
// (encoding/base64 CorruptInputError, as the apiserver's decoder reports it).
function checkBase64(obj) {
  for (const v of Object.values(obj.data || {})) {
    const text = String(v)
    const bad = [...text].findIndex((c) => !/[A-Za-z0-9+/=]/.test(c))
    const at = bad >= 0 ? bad : text.length % 4 ? text.length - (text.length % 4) : -1
    if (at >= 0)
      throw new ApiError(
        400,
        'BadRequest',
        `Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte ${at}`,
        {},
      )
  }
}

function foldStringData(obj) {
  checkBase64(obj)
  if (obj.stringData) {
    obj.data = { ...(obj.data || {}) }
    for (const [k, v] of Object.entries(obj.stringData)) obj.data[k] = Buffer.from(String(v)).toString('base64')
    delete obj.stringData
  }
  if (!obj.type) obj.type = 'Opaque'
}

function defaultWorkload(obj) {
  const spec = (obj.spec ||= {})
  if (obj.kind === 'Deployment') {
    if (spec.replicas === undefined) spec.replicas = 1
    spec.strategy ||= { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '25%', maxSurge: '25%' } }
    if (spec.progressDeadlineSeconds === undefined) spec.progressDeadlineSeconds = 600
  }
  if (obj.kind === 'DaemonSet') {
    spec.updateStrategy ||= { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1, maxSurge: 0 } }
  }
  if (spec.revisionHistoryLimit === undefined) spec.revisionHistoryLimit = 10
}

// Mutates `obj` (a new object about to be stored).
export function admitCreate(def, obj) {
  if (def.status && def.kind !== 'Node') delete obj.status
  switch (def.kind) {
    case 'Secret':
      foldStringData(obj)
      break
    case 'Namespace':
      obj.metadata.labels = { ...(obj.metadata.labels || {}), 'kubernetes.io/metadata.name': obj.metadata.name }
      obj.spec = { finalizers: ['kubernetes'], ...(obj.spec || {}) }
      obj.status = { phase: 'Active' }
      break
    case 'Service': {
      const spec = (obj.spec ||= {})
      spec.type ||= 'ClusterIP'
      if (!spec.clusterIP) spec.clusterIP = nextServiceIp()
      if (spec.clusterIP !== 'None') spec.clusterIPs = [spec.clusterIP]
      spec.sessionAffinity ||= 'None'
      spec.ipFamilies ||= ['IPv4']
      spec.ipFamilyPolicy ||= 'SingleStack'
      for (const p of spec.ports || []) {
        p.protocol ||= 'TCP'
        if (p.targetPort === undefined) p.targetPort = p.port
      }
      obj.status = { loadBalancer: {} }
      break
    }
    // the registry's PrepareForCreate clears the status; the disruption controller fills it in
    // (pkg/registry/policy/poddisruptionbudget/strategy.go)
    case 'PodDisruptionBudget':
      obj.status = { disruptionsAllowed: 0, currentHealthy: 0, desiredHealthy: 0, expectedPods: 0 }
      break
    case 'Pod':
      obj.spec ||= {}
      obj.status = { phase: 'Pending', qosClass: 'BestEffort' }
      break
    case 'Deployment':
    case 'DaemonSet':
    case 'StatefulSet':
    case 'ReplicaSet':
      defaultWorkload(obj)
      obj.status = {}
      break
    case 'CustomResourceDefinition': {
      // Established at once (`kubectl wait --for condition=established crd/...` after flux install).
      const t = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z')
      obj.status = {
        acceptedNames: obj.spec?.names || {},
        conditions: [
          { type: 'NamesAccepted', status: 'True', lastTransitionTime: t, reason: 'NoConflicts', message: 'no conflicts found' },
          {
            type: 'Established',
            status: 'True',
            lastTransitionTime: t,
            reason: 'InitialNamesAccepted',
            message: 'the initial names have been accepted',
          },
        ],
        storedVersions: (obj.spec?.versions || []).filter((v) => v.storage).map((v) => v.name),
      }
      break
    }
  }
}

// Mutates `obj` (the new version of `old`). `subresource` is 'status', 'approval' (a CSR's: its
// status conditions, kubernetes pkg/registry/certificates/certificates/strategy.go) or undefined.
export function admitUpdate(def, obj, old, subresource) {
  if (subresource === 'status' || subresource === 'approval') {
    const status = obj.status
    Object.assign(obj, structuredClone(old))
    obj.status = status
    return
  }
  if (def.status && old.status !== undefined) obj.status = structuredClone(old.status)
  if (def.kind === 'Secret') foldStringData(obj)
  if (['Deployment', 'DaemonSet', 'StatefulSet', 'ReplicaSet'].includes(def.kind)) defaultWorkload(obj)
  if (def.kind === 'Service' && old.spec?.clusterIP && obj.spec && !obj.spec.clusterIP) {
    obj.spec.clusterIP = old.spec.clusterIP
    obj.spec.clusterIPs = old.spec.clusterIPs
  }
}

// Server-side Tables (meta.k8s.io/v1) for `kubectl get`: the column sets kube-apiserver's
// printers (and the Flux CRDs' additionalPrinterColumns) produce. Cells are pre-formatted.
import { humanDuration } from './util.js'

const col = (name, priority = 0, type = 'string', format = '') => ({ name, type, format, description: '', priority })
const none = (v) => (v === undefined || v === null || v === '' ? '<none>' : v)
const age = (ts, now) => (ts ? humanDuration(now - Date.parse(ts)) : '<unknown>')
const cond = (o, type) => (o.status?.conditions || []).find((c) => c.type === type)
const containers = (tpl) => tpl?.spec?.containers || []
const selectorText = (sel) => {
  if (!sel) return '<none>'
  const parts = Object.entries(sel.matchLabels || {}).map(([k, v]) => `${k}=${v}`)
  for (const e of sel.matchExpressions || []) parts.push(`${e.key} ${e.operator.toLowerCase()} (${(e.values || []).join(',')})`)
  return parts.length ? parts.join(',') : '<none>'
}
const mapText = (m) =>
  m && Object.keys(m).length
    ? Object.entries(m)
        .map(([k, v]) => `${k}=${v}`)
        .join(',')
    : '<none>'

function podStatusText(p) {
  if (p.metadata.deletionTimestamp) return 'Terminating'
  let reason = p.status?.reason || p.status?.phase || 'Pending'
  for (const cs of p.status?.containerStatuses || []) {
    if (cs.state?.waiting?.reason) reason = cs.state.waiting.reason
    else if (cs.state?.terminated?.reason) reason = cs.state.terminated.reason
  }
  if (reason === 'Pending' && !p.spec?.nodeName) return 'Pending'
  return reason
}

function nodeRoles(n) {
  const roles = Object.keys(n.metadata.labels || {})
    .filter((k) => k.startsWith('node-role.kubernetes.io/'))
    .map((k) => k.slice('node-role.kubernetes.io/'.length))
    .filter(Boolean)
  return roles.length ? roles.sort().join(',') : '<none>'
}

function eventObject(e) {
  const io = e.involvedObject || {}
  return `${(io.kind || '').toLowerCase()}/${io.name || ''}`
}

const fluxReady = [col('Ready'), col('Status')]
const fluxReadyCells = (o) => [cond(o, 'Ready')?.status ?? '', cond(o, 'Ready')?.message ?? '']

const PRINTERS = {
  Node: {
    columns: [
      col('Name', 0, 'string', 'name'),
      col('Status'),
      col('Roles'),
      col('Age'),
      col('Version'),
      col('Internal-IP', 1),
      col('External-IP', 1),
      col('OS-Image', 1),
      col('Kernel-Version', 1),
      col('Container-Runtime', 1),
    ],
    cells: (n, now) => {
      const addr = (t) => none((n.status?.addresses || []).find((a) => a.type === t)?.address)
      let status = cond(n, 'Ready')?.status === 'True' ? 'Ready' : cond(n, 'Ready') ? 'NotReady' : 'Unknown'
      if (n.spec?.unschedulable) status += ',SchedulingDisabled'
      const info = n.status?.nodeInfo || {}
      return [
        n.metadata.name,
        status,
        nodeRoles(n),
        age(n.metadata.creationTimestamp, now),
        info.kubeletVersion || '',
        addr('InternalIP'),
        addr('ExternalIP'),
        none(info.osImage),
        none(info.kernelVersion),
        none(info.containerRuntimeVersion),
      ]
    },
  },
  Pod: {
    columns: [
      col('Name', 0, 'string', 'name'),
      col('Ready'),
      col('Status'),
      col('Restarts', 0, 'string'),
      col('Age'),
      col('IP', 1),
      col('Node', 1),
      col('Nominated Node', 1),
      col('Readiness Gates', 1),
    ],
    cells: (p, now) => {
      const cs = p.status?.containerStatuses || []
      const total = containers(p).length || cs.length
      const ready = cs.filter((c) => c.ready).length
      const restarts = cs.reduce((s, c) => s + (c.restartCount || 0), 0)
      return [
        p.metadata.name,
        `${ready}/${total}`,
        podStatusText(p),
        String(restarts),
        age(p.metadata.creationTimestamp, now),
        none(p.status?.podIP),
        none(p.spec?.nodeName),
        none(p.status?.nominatedNodeName),
        '<none>',
      ]
    },
  },
  Namespace: {
    columns: [col('Name', 0, 'string', 'name'), col('Status'), col('Age')],
    cells: (o, now) => [o.metadata.name, o.status?.phase || 'Active', age(o.metadata.creationTimestamp, now)],
  },
  Secret: {
    columns: [col('Name', 0, 'string', 'name'), col('Type'), col('Data', 0, 'string'), col('Age')],
    cells: (o, now) => [
      o.metadata.name,
      o.type || 'Opaque',
      String(Object.keys(o.data || {}).length),
      age(o.metadata.creationTimestamp, now),
    ],
  },
  ConfigMap: {
    columns: [col('Name', 0, 'string', 'name'), col('Data', 0, 'string'), col('Age')],
    cells: (o, now) => [
      o.metadata.name,
      String(Object.keys(o.data || {}).length + Object.keys(o.binaryData || {}).length),
      age(o.metadata.creationTimestamp, now),
    ],
  },
  // kubernetes pkg/printers/internalversion/printers.go printCertificateSigningRequest, extractCSRStatus
  CertificateSigningRequest: {
    columns: [
      col('Name', 0, 'string', 'name'),
      col('Age'),
      col('SignerName'),
      col('Requestor'),
      col('RequestedDuration'),
      col('Condition'),
    ],
    cells: (o, now) => {
      const has = (type) => (o.status?.conditions || []).some((c) => c.type === type)
      const condition = `${has('Denied') ? 'Denied' : has('Approved') ? 'Approved' : 'Pending'}${has('Failed') ? ',Failed' : ''}${o.status?.certificate ? ',Issued' : ''}`
      const requested = o.spec?.expirationSeconds ? humanDuration(o.spec.expirationSeconds * 1000) : '<none>'
      return [
        o.metadata.name,
        age(o.metadata.creationTimestamp, now),
        o.spec?.signerName || '',
        o.spec?.username || '',
        requested,
        condition,
      ]
    },
  },
  ServiceAccount: {
    columns: [col('Name', 0, 'string', 'name'), col('Secrets', 0, 'string'), col('Age')],
    cells: (o, now) => [o.metadata.name, String((o.secrets || []).length), age(o.metadata.creationTimestamp, now)],
  },
  Service: {
    columns: [
      col('Name', 0, 'string', 'name'),
      col('Type'),
      col('Cluster-IP'),
      col('External-IP'),
      col('Port(s)'),
      col('Age'),
      col('Selector', 1),
    ],
    cells: (o, now) => {
      const ports = (o.spec?.ports || []).map((p) => `${p.port}${p.nodePort ? `:${p.nodePort}` : ''}/${p.protocol || 'TCP'}`).join(',')
      return [
        o.metadata.name,
        o.spec?.type || 'ClusterIP',
        none(o.spec?.clusterIP),
        '<none>',
        ports || '<none>',
        age(o.metadata.creationTimestamp, now),
        mapText(o.spec?.selector),
      ]
    },
  },
  Event: {
    columns: [
      col('Last Seen'),
      col('Type'),
      col('Reason'),
      col('Object'),
      col('Subobject', 1),
      col('Source', 1),
      col('Message'),
      col('First Seen', 1),
      col('Count', 1, 'string'),
      col('Name', 1),
    ],
    cells: (e, now) => {
      const src = [e.source?.component, e.source?.host].filter(Boolean).join(', ')
      const last = e.lastTimestamp || e.eventTime || e.metadata.creationTimestamp
      return [
        age(last, now),
        e.type || '',
        e.reason || '',
        eventObject(e),
        e.involvedObject?.fieldPath || '',
        src,
        e.message || '',
        age(e.firstTimestamp || last, now),
        String(e.count || 1),
        e.metadata.name,
      ]
    },
  },
  DaemonSet: {
    columns: [
      col('Name', 0, 'string', 'name'),
      col('Desired', 0, 'integer'),
      col('Current', 0, 'integer'),
      col('Ready', 0, 'integer'),
      col('Up-to-date', 0, 'integer'),
      col('Available', 0, 'integer'),
      col('Node Selector'),
      col('Age'),
      col('Containers', 1),
      col('Images', 1),
      col('Selector', 1),
    ],
    cells: (d, now) => {
      const s = d.status || {}
      const cs = containers(d.spec?.template)
      return [
        d.metadata.name,
        s.desiredNumberScheduled || 0,
        s.currentNumberScheduled || 0,
        s.numberReady || 0,
        s.updatedNumberScheduled || 0,
        s.numberAvailable || 0,
        mapText(d.spec?.template?.spec?.nodeSelector),
        age(d.metadata.creationTimestamp, now),
        cs.map((c) => c.name).join(','),
        cs.map((c) => c.image).join(','),
        selectorText(d.spec?.selector),
      ]
    },
  },
  Deployment: {
    columns: [
      col('Name', 0, 'string', 'name'),
      col('Ready'),
      col('Up-to-date', 0, 'integer'),
      col('Available', 0, 'integer'),
      col('Age'),
      col('Containers', 1),
      col('Images', 1),
      col('Selector', 1),
    ],
    cells: (d, now) => {
      const s = d.status || {}
      const cs = containers(d.spec?.template)
      return [
        d.metadata.name,
        `${s.readyReplicas || 0}/${d.spec?.replicas ?? 1}`,
        s.updatedReplicas || 0,
        s.availableReplicas || 0,
        age(d.metadata.creationTimestamp, now),
        cs.map((c) => c.name).join(','),
        cs.map((c) => c.image).join(','),
        selectorText(d.spec?.selector),
      ]
    },
  },
  Job: {
    columns: [
      col('Name', 0, 'string', 'name'),
      col('Status'),
      col('Completions'),
      col('Duration'),
      col('Age'),
      col('Containers', 1),
      col('Images', 1),
      col('Selector', 1),
    ],
    cells: (j, now) => {
      const done = cond(j, 'Complete')?.status === 'True' ? 'Complete' : cond(j, 'Failed')?.status === 'True' ? 'Failed' : 'Running'
      const start = j.status?.startTime ? Date.parse(j.status.startTime) : undefined
      const end = j.status?.completionTime ? Date.parse(j.status.completionTime) : now
      const cs = containers(j.spec?.template)
      return [
        j.metadata.name,
        done,
        `${j.status?.succeeded || 0}/${j.spec?.completions ?? 1}`,
        start ? humanDuration(end - start) : '',
        age(j.metadata.creationTimestamp, now),
        cs.map((c) => c.name).join(','),
        cs.map((c) => c.image).join(','),
        selectorText(j.spec?.selector),
      ]
    },
  },
  CustomResourceDefinition: {
    columns: [col('Name', 0, 'string', 'name'), col('Created At', 0, 'date')],
    cells: (o) => [o.metadata.name, o.metadata.creationTimestamp],
  },
  Kustomization: {
    columns: [col('Name', 0, 'string', 'name'), col('Age'), ...fluxReady],
    cells: (o, now) => [o.metadata.name, age(o.metadata.creationTimestamp, now), ...fluxReadyCells(o)],
  },
  HelmRelease: {
    columns: [col('Name', 0, 'string', 'name'), col('Age'), ...fluxReady],
    cells: (o, now) => [o.metadata.name, age(o.metadata.creationTimestamp, now), ...fluxReadyCells(o)],
  },
  GitRepository: {
    columns: [col('Name', 0, 'string', 'name'), col('URL'), col('Age'), ...fluxReady],
    cells: (o, now) => [o.metadata.name, o.spec?.url || '', age(o.metadata.creationTimestamp, now), ...fluxReadyCells(o)],
  },
  HelmRepository: {
    columns: [col('Name', 0, 'string', 'name'), col('URL'), col('Age'), ...fluxReady],
    cells: (o, now) => [o.metadata.name, o.spec?.url || '', age(o.metadata.creationTimestamp, now), ...fluxReadyCells(o)],
  },
  OCIRepository: {
    columns: [col('Name', 0, 'string', 'name'), col('URL'), col('Ready'), col('Status'), col('Age')],
    cells: (o, now) => [o.metadata.name, o.spec?.url || '', ...fluxReadyCells(o), age(o.metadata.creationTimestamp, now)],
  },
}

const DEFAULT = {
  columns: [col('Name', 0, 'string', 'name'), col('Age')],
  cells: (o, now) => [o.metadata.name, age(o.metadata.creationTimestamp, now)],
}

// includeObject: None | Metadata (default) | Object
export function toTable(def, objects, { now, resourceVersion, includeObject = 'Metadata', withColumns = true }) {
  const printer = PRINTERS[def.kind] || DEFAULT
  const rows = objects.map((o) => {
    const row = { cells: printer.cells(o, now) }
    if (includeObject === 'Object') row.object = o
    else if (includeObject !== 'None') row.object = { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata }
    return row
  })
  const table = {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { resourceVersion },
    columnDefinitions: withColumns ? printer.columns : [],
    rows,
  }
  return table
}

// Parse and validate a scenario (YAML text, file path or object). Errors name the field and,
// for YAML, the line: `scenario.yaml:12: nodes[2].ip: "10.0.0.5" is not in 127.0.0.0/8`.
import { readFileSync } from 'node:fs'
import { parseDocument, LineCounter, isSeq } from 'yaml'
import { FAULT_KINDS, NODELESS_KINDS, STATIC_POD_NAMES } from './faults.js'

export class ScenarioError extends Error {
  constructor(message, { file, line, field } = {}) {
    super(`${file ?? 'scenario'}${line ? `:${line}` : ''}: ${field ? `${field}: ` : ''}${message}`)
    this.name = 'ScenarioError'
    this.field = field
    this.line = line
  }
}

export const TALOS_ROLES = ['os:admin', 'os:operator', 'os:reader', 'os:etcd:backup']
export const DEFAULT_TIMINGS = {
  maintenance: 3,
  install: 120,
  reboot: 40,
  boot: 30,
  etcd: 20,
  kubelet: 15,
  cni: 20,
  drain: 10,
  nodeMonitorGrace: 50,
  // how long ApplyConfiguration holds the node's apply mutex (the call's own work)
  apply: 0,
  // an installer image's pull (sim/talos/upgrade.js), and an upgrade sequence's phases 1-12 together
  pull: 20,
  upgrade: 10,
}
const NAME_RE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/
const SIZE_RE = /^(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?$/i
const UNITS = { b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3, tib: 1024 ** 4 }

export function isLoopback(ip) {
  const m = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(String(ip))
  return !!m && m.slice(1).every((p) => Number(p) <= 255)
}

export function parseSize(s) {
  if (typeof s === 'number') return s
  const m = SIZE_RE.exec(String(s).trim())
  if (!m) return null
  return Math.round(Number(m[1]) * UNITS[(m[2] ?? 'B').toLowerCase()])
}

/** load from a path (string ending in .yaml/.yml or an existing file), YAML text, or an object */
export function loadScenario(input) {
  if (typeof input === 'object' && input !== null) return validateScenario(structuredClone(input), {})
  let text = input,
    file
  if (!/\n/.test(input)) {
    file = input
    text = readFileSync(input, 'utf8')
  }
  return parseScenario(text, file ?? 'scenario.yaml')
}

export function parseScenario(text, file = 'scenario.yaml') {
  const lineCounter = new LineCounter()
  const doc = parseDocument(text, { lineCounter, prettyErrors: false })
  if (doc.errors.length) {
    const e = doc.errors[0]
    const line = e.linePos?.[0]?.line ?? lineCounter.linePos(e.pos[0]).line
    throw new ScenarioError(e.message.split('\n')[0], { file, line })
  }
  // map a field path (array of keys) to its line for error messages
  const lineOf = (path) => {
    for (let p = path.slice(); p.length; p.pop()) {
      const n = doc.getIn(p, true)
      const range = n?.range ?? (isSeq(n) ? n.range : null)
      if (range) return lineCounter.linePos(range[0]).line
    }
    return undefined
  }
  return validateScenario(doc.toJS() ?? {}, { file, lineOf })
}

/**
 * One fault of a scenario's `faults`, or one given to a running simulator (`sim/cli.js add-fault`):
 * its kind, node, trigger and the fields its kind takes, defaults filled in. `nodes`: {name, role}.
 */
function validateFault(f, p, nodes, { fail, q, obj, str, num, known }) {
  const names = new Set(nodes.map((n) => n.name))
  obj(f, p)
  known(f, ['node', 'on', 'kind', 'times', 'ms', 'message', 'path', 'offsetS', 'address', 'chart', 'pod', 'restarts', 'image'], p)
  const spec = FAULT_KINDS[f.kind]
  if (!spec) fail([...p, 'kind'], `unknown fault kind ${q(f.kind)} (known: ${Object.keys(FAULT_KINDS).join(', ')})`)
  if (f.node != null && !names.has(f.node)) fail([...p, 'node'], `${q(f.node)} is not a node of this scenario`)
  const on = f.on ?? spec.def
  if (f.node == null && !NODELESS_KINDS.includes(f.kind) && on !== 'kube')
    fail([...p, 'node'], `${/^[aeiou]/.test(f.kind) ? 'an' : 'a'} ${f.kind} fault needs a node`)
  if (on === 'kube' && f.node != null && nodes.find((n) => n.name === f.node)?.role !== 'controlplane')
    fail([...p, 'node'], `${q(f.node)} serves no Kubernetes API (a kube fault names a control plane, or no node for all)`)
  if (f.path != null && (on !== 'kube' || f.kind === 'refused'))
    fail([...p, 'path'], 'only kube faults acting on requests (unavailable, timeout, latency) take path')
  if (f.path != null) str(f.path, [...p, 'path'])
  if (!spec.on.includes(on)) fail([...p, 'on'], `${q(on)} is not valid for a ${f.kind} fault (use: ${spec.on.join(', ')})`)
  if (f.times != null && (!Number.isInteger(f.times) || f.times < 1)) fail([...p, 'times'], `must be an integer >= 1, got ${q(f.times)}`)
  if (f.kind === 'latency') num(f.ms, [...p, 'ms'])
  else if (f.ms != null) fail([...p, 'ms'], 'only latency faults take ms')
  if (f.message != null) str(f.message, [...p, 'message'])
  if (f.kind === 'clock') num(f.offsetS, [...p, 'offsetS'], -Infinity)
  else if (f.offsetS != null) fail([...p, 'offsetS'], 'only clock faults take offsetS')
  if (f.address != null && !['cert-sans', 'node-ip'].includes(f.kind))
    fail([...p, 'address'], 'only cert-sans and node-ip faults take address')
  if (f.address != null || f.kind === 'node-ip') str(f.address, [...p, 'address'])
  if (f.kind === 'etcd-crash' && nodes.find((n) => n.name === f.node)?.role !== 'controlplane')
    fail([...p, 'node'], `${q(f.node)} runs no etcd (an etcd-crash fault names a control plane)`)
  if (f.node != null && f.kind === 'static-pod' && nodes.find((n) => n.name === f.node)?.role !== 'controlplane')
    fail([...p, 'node'], `${q(f.node)} runs no control plane static pods (a static-pod fault names a control plane, or no node for all)`)
  if (f.kind === 'static-pod' && !STATIC_POD_NAMES.includes(f.pod))
    fail([...p, 'pod'], `${q(f.pod)} must be one of ${STATIC_POD_NAMES.join(', ')}`)
  else if (f.kind !== 'static-pod' && f.pod != null) fail([...p, 'pod'], 'only static-pod faults take pod')
  if (f.restarts != null && (f.kind !== 'static-pod' || typeof f.restarts !== 'boolean'))
    fail([...p, 'restarts'], 'only static-pod faults take restarts (true or false)')
  if (f.kind === 'image-pull') str(f.image, [...p, 'image'])
  else if (['image-missing', 'static-pod', 'kubelet-crashloop'].includes(f.kind) && f.image != null) str(f.image, [...p, 'image'])
  else if (f.image != null) fail([...p, 'image'], 'only image-pull, image-missing, static-pod and kubelet-crashloop faults take image')
  if (f.kind === 'chart') str(f.chart, [...p, 'chart'])
  else if (f.chart != null) fail([...p, 'chart'], 'only chart faults take chart')
  return {
    node: f.node ?? null,
    on,
    kind: f.kind,
    times: f.times ?? null,
    ms: f.ms ?? null,
    message: f.message ?? null,
    ...(f.path != null ? { path: f.path } : {}),
    ...(f.offsetS != null ? { offsetS: f.offsetS } : {}),
    ...(f.address != null ? { address: f.address } : {}),
    ...(f.chart != null ? { chart: f.chart } : {}),
    ...(f.pod != null ? { pod: f.pod, restarts: f.restarts ?? false } : {}),
    ...(f.image != null ? { image: f.image } : {}),
  }
}

/** a fault given at run time (the simulator's nodes): as a scenario's, named `fault` in its errors */
export function checkFault(fault, nodes) {
  return validateFault(fault, [], nodes, checkers({ file: 'fault' }))
}

// flux: what the Git repository's root Kustomization applies (sim/kube/controllers.js), and the
// age identity its SOPS secrets are encrypted to.
function validateFlux(f, { fail, obj, str, known, q }) {
  if (f == null) return { repository: [], git: { hostKeyScan: 'ok', deployKey: 'accepted' } }
  obj(f, ['flux'])
  known(f, ['repository', 'ageKey', 'git'], ['flux'])
  const git = { hostKeyScan: 'ok', deployKey: 'accepted' }
  if (f.git != null) {
    obj(f.git, ['flux', 'git'])
    known(f.git, ['hostKeyScan', 'deployKey'], ['flux', 'git'])
    if (f.git.hostKeyScan != null && !['ok', 'refused'].includes(f.git.hostKeyScan))
      fail(['flux', 'git', 'hostKeyScan'], `${q(f.git.hostKeyScan)} must be ok or refused`)
    if (f.git.deployKey != null && !['accepted', 'refused'].includes(f.git.deployKey))
      fail(['flux', 'git', 'deployKey'], `${q(f.git.deployKey)} must be accepted or refused`)
    Object.assign(git, f.git)
  }
  if (f.ageKey != null && !/^AGE-SECRET-KEY-1[0-9A-Z]+$/.test(String(f.ageKey)))
    fail(['flux', 'ageKey'], `${q(f.ageKey)} is not an age identity (AGE-SECRET-KEY-1...)`)
  const list = f.repository ?? []
  if (!Array.isArray(list)) fail(['flux', 'repository'], 'must be a list')
  const repository = list.map((e, i) => {
    const p = ['flux', 'repository', i]
    obj(e, p)
    known(e, ['kind', 'name', 'namespace', 'parent', 'wait', 'decryption', 'fail'], p)
    if (!['Kustomization', 'HelmRelease'].includes(e.kind)) fail([...p, 'kind'], `${q(e.kind)} must be Kustomization or HelmRelease`)
    str(e.name, [...p, 'name'])
    if (e.parent != null && !/^[a-z0-9-]+\/[a-z0-9-]+$/.test(String(e.parent)))
      fail([...p, 'parent'], `${q(e.parent)} must be namespace/name of a Kustomization`)
    for (const k of ['wait', 'decryption'])
      if (e[k] != null && typeof e[k] !== 'boolean') fail([...p, k], `must be true or false, got ${q(e[k])}`)
    if (e.fail != null) str(e.fail, [...p, 'fail'])
    return {
      kind: e.kind,
      name: e.name,
      namespace: e.namespace ?? 'flux-system',
      parent: e.parent ?? 'flux-system/flux-system',
      wait: e.wait ?? false,
      decryption: e.decryption ?? false,
      fail: e.fail ?? null,
    }
  })
  return { repository, ageKey: f.ageKey ?? null, git }
}

/** the checks every field goes through; an error names the field (and, for YAML, its line) */
function checkers({ file, lineOf }) {
  const fail = (path, msg) => {
    const field = path.reduce((acc, k) => (typeof k === 'number' ? `${acc}[${k}]` : acc ? `${acc}.${k}` : k), '')
    throw new ScenarioError(msg, { file, line: lineOf?.(path), field })
  }
  const q = (v) => JSON.stringify(v)
  const obj = (v, path) => {
    if (v == null || typeof v !== 'object' || Array.isArray(v)) fail(path, `must be a mapping, got ${q(v)}`)
    return v
  }
  const str = (v, path) => {
    if (typeof v !== 'string' || !v) fail(path, `must be a non-empty string, got ${q(v)}`)
    return v
  }
  const num = (v, path, min = 0) => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min) fail(path, `must be a number >= ${min}, got ${q(v)}`)
    return v
  }
  const known = (o, keys, path) => {
    for (const k of Object.keys(o)) if (!keys.includes(k)) fail([...path, k], `unknown field (known: ${keys.join(', ')})`)
  }
  return { fail, q, obj, str, num, known }
}

function validateScenario(s, { file, lineOf }) {
  const { fail, q, obj, str, num, known } = checkers({ file, lineOf })
  const loop = (v, path) => {
    if (!isLoopback(v)) fail(path, `${q(v)} is not in 127.0.0.0/8`)
    return v
  }

  obj(s, [])
  known(s, ['cluster', 'speed', 'timings', 'nodes', 'faults', 'flux', 'installers'], [])
  const c = obj(s.cluster, ['cluster'])
  known(
    c,
    [
      'name',
      'endpoint',
      'talosVersion',
      'kubernetesVersion',
      'vip',
      'discovery',
      'talosconfigRole',
      'configs',
      'allowSchedulingOnControlPlanes',
    ],
    ['cluster'],
  )
  // external: the operator's own configs are applied; the simulator writes none and takes each node's
  // identity and the cluster's PKI from what is applied to it
  const configs = c.configs ?? 'generated'
  if (!['generated', 'external'].includes(configs)) fail(['cluster', 'configs'], `${q(configs)} must be generated or external`)
  str(c.name, ['cluster', 'name'])
  if (!NAME_RE.test(c.name)) fail(['cluster', 'name'], `${q(c.name)} is not a valid cluster name (lower-case letters, digits, '-')`)
  for (const k of ['talosVersion', 'kubernetesVersion']) {
    if (c[k] != null && !/^v\d+\.\d+\.\d+$/.test(String(c[k]))) fail(['cluster', k], `${q(c[k])} is not a version like v1.12.0`)
  }
  // cluster discovery (the generated configs say the same): off unless asked for
  const discovery = c.discovery ?? 'disabled'
  if (!['enabled', 'disabled'].includes(discovery)) fail(['cluster', 'discovery'], `${q(discovery)} must be enabled or disabled`)
  // the generated control planes' cluster.allowSchedulingOnControlPlanes (Talos: untainted control planes)
  const allowSchedulingOnControlPlanes = c.allowSchedulingOnControlPlanes ?? false
  if (typeof allowSchedulingOnControlPlanes !== 'boolean')
    fail(['cluster', 'allowSchedulingOnControlPlanes'], `${q(allowSchedulingOnControlPlanes)} must be true or false`)
  // the role in the talosconfig's client certificate (internal/app/machined/pkg/system/services/machined.go rules)
  const talosconfigRole = c.talosconfigRole ?? 'os:admin'
  if (!TALOS_ROLES.includes(talosconfigRole))
    fail(['cluster', 'talosconfigRole'], `${q(talosconfigRole)} must be one of ${TALOS_ROLES.join(', ')}`)
  const talosVersion = c.talosVersion ?? 'v1.12.11'
  const minor = Number(talosVersion.split('.')[1])
  if (minor < 11 || minor > 13) fail(['cluster', 'talosVersion'], `${q(talosVersion)}: the simulator emulates v1.11 to v1.13`)

  const speed = s.speed == null ? 60 : num(s.speed, ['speed'], 0)
  if (!(speed > 0)) fail(['speed'], `must be > 0, got ${q(speed)}`)
  const timings = { ...DEFAULT_TIMINGS }
  if (s.timings != null) {
    obj(s.timings, ['timings'])
    known(s.timings, Object.keys(DEFAULT_TIMINGS), ['timings'])
    for (const [k, v] of Object.entries(s.timings)) timings[k] = num(v, ['timings', k])
  }

  if (!Array.isArray(s.nodes) || s.nodes.length === 0) fail(['nodes'], 'must be a non-empty list of nodes')
  const names = new Set(),
    ips = new Set()
  const nodes = s.nodes.map((n, i) => {
    const p = ['nodes', i]
    obj(n, p)
    known(
      n,
      [
        'name',
        'ip',
        'role',
        'image',
        'disks',
        'installDisk',
        'installDiskSelector',
        'secureBoot',
        'extensions',
        'schematic',
        'talosVersion',
        'memory',
      ],
      p,
    )
    // the Talos this node runs (a cluster mid-upgrade runs two): default the cluster's
    const nodeVersion = n.talosVersion ?? talosVersion
    if (!/^v\d+\.\d+\.\d+$/.test(String(nodeVersion))) fail([...p, 'talosVersion'], `${q(nodeVersion)} is not a version like v1.12.0`)
    const nodeMinor = Number(String(nodeVersion).split('.')[1])
    if (nodeMinor < 11 || nodeMinor > 13) fail([...p, 'talosVersion'], `${q(nodeVersion)}: the simulator emulates v1.11 to v1.13`)
    str(n.name, [...p, 'name'])
    if (!NAME_RE.test(n.name)) fail([...p, 'name'], `${q(n.name)} is not a valid hostname`)
    if (names.has(n.name)) fail([...p, 'name'], `duplicate node name ${q(n.name)}`)
    names.add(n.name)
    loop(n.ip, [...p, 'ip'])
    if (ips.has(n.ip)) fail([...p, 'ip'], `duplicate address ${q(n.ip)}`)
    ips.add(n.ip)
    if (!['controlplane', 'worker'].includes(n.role)) fail([...p, 'role'], `${q(n.role)} must be controlplane or worker`)
    const image = n.image ?? 'iso'
    if (!['iso', 'disk'].includes(image)) fail([...p, 'image'], `${q(image)} must be iso or disk`)
    let disks = n.disks ?? [{ dev: '/dev/sda', size: '100GB', model: 'QEMU HARDDISK' }]
    if (!Array.isArray(disks) || !disks.length) fail([...p, 'disks'], 'must be a non-empty list')
    disks = disks.map((d, j) => {
      const dp = [...p, 'disks', j]
      obj(d, dp)
      known(d, ['dev', 'size', 'model', 'serial', 'type', 'transport', 'rotational', 'readonly', 'wwid'], dp)
      str(d.dev, [...dp, 'dev'])
      if (!/^\/dev\/[a-z0-9]+$/.test(d.dev)) fail([...dp, 'dev'], `${q(d.dev)} is not a device path like /dev/sda`)
      const size = parseSize(d.size ?? '100GB')
      if (size == null) fail([...dp, 'size'], `${q(d.size)} is not a size like 100GB`)
      return {
        dev: d.dev,
        size,
        model: d.model ?? 'QEMU HARDDISK',
        serial: d.serial ?? '',
        type: d.type ?? 'hdd',
        transport: d.transport ?? 'virtio',
        rotational: d.rotational ?? false,
        readonly: d.readonly ?? false,
        wwid: d.wwid ?? '',
      }
    })
    // the machine's memory (MemTotal is this less what the kernel keeps: sim/talos/hardware.js)
    const memory = parseSize(n.memory ?? '4GiB')
    if (memory == null || !(memory > 0)) fail([...p, 'memory'], `${q(n.memory)} is not a size like 4GiB`)
    if (n.installDisk != null && n.installDiskSelector != null)
      fail([...p, 'installDisk'], 'give installDisk or installDiskSelector, not both')
    if (n.installDisk != null) str(n.installDisk, [...p, 'installDisk'])
    if (n.installDiskSelector != null) obj(n.installDiskSelector, [...p, 'installDiskSelector'])
    const installDiskSelector = n.installDiskSelector ?? null
    const extensionNames = (v, path) => {
      if (!Array.isArray(v)) fail(path, `must be a list of extension names, got ${q(v)}`)
      v.forEach((x, j) => str(x, [...path, j]))
      return v
    }
    if (n.secureBoot != null && typeof n.secureBoot !== 'boolean')
      fail([...p, 'secureBoot'], `must be true or false, got ${q(n.secureBoot)}`)
    if (n.schematic != null) {
      obj(n.schematic, [...p, 'schematic'])
      known(n.schematic, ['extensions'], [...p, 'schematic'])
    }
    const schematic =
      n.schematic != null ? { extensions: extensionNames(n.schematic.extensions ?? [], [...p, 'schematic', 'extensions']) } : null
    return {
      // what the node reports of itself: secure boot (SecurityState), the extensions it runs and the
      // schematic of the image it runs (ExtensionStatuses; the schematic's extensions are what it asks for)
      secureBoot: n.secureBoot ?? false,
      extensions: n.extensions != null ? extensionNames(n.extensions, [...p, 'extensions']) : (schematic?.extensions ?? []),
      schematic,
      name: n.name,
      ip: n.ip,
      role: n.role,
      image,
      disks,
      memory,
      installDisk: installDiskSelector ? null : (n.installDisk ?? disks[0].dev),
      installDiskSelector,
      talosVersion: nodeVersion,
      talosMinor: nodeMinor,
    }
  })
  if (!nodes.some((n) => n.role === 'controlplane')) fail(['nodes'], 'needs at least one controlplane node')

  // endpoint and VIP: an endpoint host that is not a node address is a VIP
  const firstCp = nodes.find((n) => n.role === 'controlplane')
  let vip = null
  if (c.vip != null) {
    obj(c.vip, ['cluster', 'vip'])
    known(c.vip, ['address', 'up'], ['cluster', 'vip'])
    loop(c.vip.address, ['cluster', 'vip', 'address'])
    if (ips.has(c.vip.address)) fail(['cluster', 'vip', 'address'], `${q(c.vip.address)} is also a node address`)
    const up = c.vip.up ?? 'after-bootstrap'
    if (!['after-bootstrap', 'never'].includes(up)) fail(['cluster', 'vip', 'up'], `${q(up)} must be after-bootstrap or never`)
    vip = { address: c.vip.address, up }
  }
  const endpoint = c.endpoint ?? `https://${vip?.address ?? firstCp.ip}:6443`
  const em = /^https:\/\/([^:/]+):(\d+)\/?$/.exec(String(endpoint))
  if (!em) fail(['cluster', 'endpoint'], `${q(endpoint)} is not a URL like https://127.0.10.10:6443`)
  loop(em[1], ['cluster', 'endpoint'])
  if (!ips.has(em[1])) {
    if (vip && vip.address !== em[1]) fail(['cluster', 'endpoint'], `${q(endpoint)} names neither a node nor the VIP ${vip.address}`)
    vip ??= { address: em[1], up: 'after-bootstrap' }
  } else if (!nodes.find((n) => n.ip === em[1] && n.role === 'controlplane')) {
    fail(['cluster', 'endpoint'], `${q(endpoint)} is a worker's address; the endpoint must be a control plane or a VIP`)
  }

  const faultList = s.faults ?? []
  if (!Array.isArray(faultList)) fail(['faults'], 'must be a list')
  const faults = faultList.map((f, i) => validateFault(f, ['faults', i], nodes, { fail, q, obj, str, num, known }))

  // the installer images the registry holds (sim/talos/upgrade.js registryHas; default: every release of v1.11 to v1.13)
  let installers = null
  if (s.installers != null) {
    if (!Array.isArray(s.installers)) fail(['installers'], 'must be a list of image references')
    installers = s.installers.map((ref, i) => {
      str(ref, ['installers', i])
      if (!/:v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(@sha256:[0-9a-f]{64})?$/.test(ref))
        fail(['installers', i], `${q(ref)} names no Talos version tag (like ghcr.io/siderolabs/installer:v1.13.9)`)
      return ref
    })
  }

  return {
    installers,
    cluster: {
      name: c.name,
      endpoint,
      talosVersion,
      kubernetesVersion: c.kubernetesVersion ?? 'v1.35.0',
      vip,
      discovery,
      talosconfigRole,
      configs,
      allowSchedulingOnControlPlanes,
    },
    talosMinor: minor,
    speed,
    timings,
    nodes,
    faults,
    flux: validateFlux(s.flux, { fail, obj, str, known, q }),
  }
}

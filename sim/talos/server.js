// The node API's JSON protocol (ARCHITECTURE.md) on a node's listener (sim/listeners.js):
// faults, the calls log, apid's proxying, then the node model's method.
import { rpc, RpcError, dialRefused, unknownAuthority } from './errors.js'
import { METHODS, MAINTENANCE_METHODS, ROLES, callKind } from './methods.js'
import { healthCheck } from './health.js'

const readBody = (req) => new Promise((resolve, reject) => {
  let b = ''
  req.setEncoding('utf8')
  req.on('data', (d) => { b += d })
  req.on('end', () => resolve(b))
  req.on('error', reject)
})

/** command and its args from talosctl's argv (flags may precede the sub-command) */
const VALUE_FLAGS = new Set(['-n', '--nodes', '-e', '--endpoints', '--talosconfig', '--context', '-c', '--cluster', '--siderov1-keys-dir'])
export function splitArgv(argv) {
  if (!Array.isArray(argv)) return { command: null, args: [] }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a.startsWith('-')) { if (!a.includes('=') && VALUE_FLAGS.has(a)) i++; continue }
    return { command: a, args: [...argv.slice(0, i), ...argv.slice(i + 1)] }
  }
  return { command: null, args: argv }
}
const METHOD_COMMANDS = { 'resources.Get': 'get', 'machine.ApplyConfiguration': 'apply-config', 'machine.Version': 'version',
  'machine.Bootstrap': 'bootstrap', 'machine.Kubeconfig': 'kubeconfig', 'machine.ServiceList': 'service', 'machine.ServiceAction': 'service',
  'machine.Reset': 'reset', 'machine.Reboot': 'reboot', 'machine.Dmesg': 'dmesg', 'cluster.HealthCheck': 'health' }

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const send = (res, obj) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(JSON.stringify(obj)) }
const errText = (e) => `rpc error: code = ${e.code} desc = ${e.message}`

export async function handleRequest(sim, endpoint, mode, req, res) {
  const method = decodeURIComponent(req.url.slice(1).split('?')[0])
  const raw = await readBody(req)
  let body = {}
  try { body = raw ? JSON.parse(raw) : {} } catch { return send(res, { error: rpc('InvalidArgument', 'invalid request body').toJSON() }) }
  let argv = null
  try { argv = JSON.parse(req.headers['x-sim-argv'] ?? 'null') } catch { /* log without argv */ }
  const { command, args } = splitArgv(argv)
  const insecure = mode === 'maintenance'
  const kind = callKind(method, insecure)
  // talosctl's own calls before the command's (version-skew probe, type resolution): logged, but faults neither fire on them nor count them
  const purpose = req.headers['x-sim-purpose'] ? String(req.headers['x-sim-purpose']) : null
  const rec = (node, outcome) => sim.record({ time: new Date().toISOString(), node: node?.name ?? null, ip: node?.ip ?? null, tool: 'talosctl',
    call: kind, command: command ?? METHOD_COMMANDS[method] ?? method, args, outcome, ...(purpose ? { purpose } : {}) })
  const takeFault = (name) => (purpose ? null : sim.takeCallFault(name, kind))

  // latency faults of the endpoint (every call, or one kind of call)
  const lat = sim.faults.find(endpoint.name, { kind: 'latency' }).filter((f) => f.on === 'any' || f.on === kind)
  for (const f of lat) { sim.faults.take(endpoint.name, { kind: 'latency', on: f.on }); await sleep(f.ms) }

  const topError = (e, node = endpoint) => { rec(node, `error: ${errText(e)}`); send(res, { error: e.toJSON() }) }
  const handler = METHODS[method]
  if (!handler && method !== 'cluster.HealthCheck') return topError(rpc('Unimplemented', `unknown method ${method}`))

  // call-scoped transport faults of the endpoint
  const fault = takeFault(endpoint.name)
  if (fault) {
    if (fault.kind === 'refused' || fault.kind === 'unreachable') {
      rec(endpoint, `error: ${errText(rpc('Unavailable', dialRefused(endpoint.ip)))}`)
      return send(res, { transportError: 'refused' })
    }
    if (fault.kind === 'timeout') { rec(endpoint, 'error: no answer (timeout)'); return } // never answer
    if (fault.kind === 'unavailable') return topError(rpc('Unavailable', 'error reading from server: EOF'))
  }

  if (insecure && !MAINTENANCE_METHODS.has(method)) return topError(rpc('Unimplemented', 'API is not implemented in maintenance mode'))
  // the client certificate's role (its Organization) against the method's rules, checked by apid first
  if (!insecure) {
    const roles = String(req.socket.getPeerCertificate?.()?.subject?.O ?? '').split(/\n|,/).map((r) => r.trim())
    if (!roles.some((r) => (ROLES[method] ?? ['os:admin']).includes(r))) return topError(rpc('PermissionDenied', 'not authorized'))
  }

  // which nodes the call targets (x-talos-nodes; none => this node, unnamed)
  const header = insecure ? '' : String(req.headers['x-talos-nodes'] ?? '').trim()
  let targets = header ? header.split(',').map((s) => s.trim()).filter(Boolean) : []
  const bad = targets.find((t) => /:\d+$/.test(t))
  if (bad) return topError(rpc('Internal', `invalid target "${bad}"`))
  const self = (t) => t === endpoint.ip || t === endpoint.name
  if (targets.length && endpoint.role === 'worker') {
    if (!targets.every(self)) return topError(rpc('PermissionDenied', 'no request forwarding'))
    targets = [] // handled locally: replies carry no hostname
  }
  const list = targets.length ? targets.map((t) => ({ str: t, node: sim.lookup(t) })) : [{ str: '', node: endpoint }]

  if (method === 'cluster.HealthCheck') {
    rec(endpoint, 'ok')
    return healthCheck(sim, endpoint, body, req, res)
  }

  // a call whose client went away (deadline, Ctrl-C) cancels what still waits for it
  const gone = new AbortController()
  res.on('close', () => gone.abort())
  const messages = []
  for (const { str, node } of list) {
    const ctx = { insecure, maintenance: insecure, signal: gone.signal }
    try {
      if (!node) throw rpc('Unavailable', /^\d+\.\d+\.\d+\.\d+$/.test(str) ? dialRefused(str) : `connection error: desc = "transport: Error while dialing: dial tcp: lookup ${str}: no such host"`)
      if (node !== endpoint) {
        // apid proxies to the target over mTLS: the target's listener decides what it sees
        const m = sim.listeners.modeOf(node)
        if (m === 'off') throw rpc('Unavailable', dialRefused(node.ip))
        if (m === 'hang') throw rpc('Unavailable', `connection error: desc = "transport: Error while dialing: dial tcp ${node.ip}:50000: i/o timeout"`)
        if (m === 'maintenance') throw rpc('Unavailable', unknownAuthority(false))
        if (m === 'pki') throw rpc('Unavailable', unknownAuthority(true))
        for (const f of sim.faults.find(node.name, { kind: 'latency' }).filter((x) => x.on === 'any' || x.on === kind)) {
          sim.faults.take(node.name, { kind: 'latency', on: f.on }); await sleep(f.ms)
        }
        const tf = takeFault(node.name)
        if (tf?.kind === 'refused' || tf?.kind === 'unreachable') throw rpc('Unavailable', dialRefused(node.ip))
        if (tf?.kind === 'timeout') throw rpc('DeadlineExceeded', 'context deadline exceeded')
        if (tf?.kind === 'unavailable') throw rpc('Unavailable', 'error reading from server: EOF')
      }
      const data = await handler(sim, node, body, ctx)
      rec(node, 'ok')
      messages.push({ node: str, error: null, data })
    } catch (e) {
      if (gone.signal.aborted) return // nobody to answer
      if (!(e instanceof RpcError)) throw e
      if (insecure) return topError(e, node ?? endpoint)
      rec(node ?? { name: null, ip: str }, `error: ${errText(e)}`)
      messages.push({ node: str, error: e.toJSON(), data: null })
    }
  }
  send(res, { messages })
}

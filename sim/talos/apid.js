// One call of the node API on the node whose listener took it, in process: the endpoint's call
// faults and latency, the maintenance API's limits, the client certificate's role (apid's
// authorizer), apid's routing to the target nodes (proxying over mTLS: what each target's listener
// would show the proxy), the node model's method (sim/talos/methods.js) per target, and one calls
// log record per node answered. sim/grpc/server.js puts the answers on the wire.
// Follows internal/app/apid/pkg/director/director.go (targets, no forwarding via a worker),
// pkg/grpc/middleware/authz/authorizer.go (roles), internal/app/maintenance/server.go (maintenance API).
import { rpc, RpcError, dialRefused, unknownAuthority } from './errors.js'
import { METHODS, MAINTENANCE_METHODS, ROLES, callKind } from './methods.js'
import { healthCheck } from './health.js'

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const never = () => new Promise(() => {})

/** the endpoint's (or a proxied target's) `latency` faults for this kind of call, each counted */
async function latency(sim, node, kind) {
  for (const f of sim.faults.find(node.name, { kind: 'latency' }).filter((x) => x.on === 'any' || x.on === kind)) {
    sim.faults.take(node.name, { kind: 'latency', on: f.on })
    await sleep(f.ms)
  }
}

/**
 * Serves `call` = {method, body, targets, words, purpose?, roles, signal?, emit?} on `endpoint`, whose
 * listener is in `mode` (maintenance | secure | pki):
 * - targets: the `nodes`/`node` metadata as talosctl sent it (none: the endpoint answers for itself);
 * - words: the talosctl command the call serves (the calls log's `command` and the head of its `args`);
 * - purpose: a call talosctl makes on its own (version-skew check, type resolution, --wait tracking):
 *   logged with it, and call faults neither fire on it nor count it;
 * - roles: the Organization of the client certificate; signal: aborts when the client goes away;
 * - emit(line): cluster.HealthCheck's progress lines.
 * Resolves with one answer per target, [{node: the target as given ('' when local), error: RpcError | null, data}];
 * rejects with an RpcError when the call fails as a whole; never settles for a hung call (fault `timeout`).
 */
export async function serveCall(
  sim,
  endpoint,
  mode,
  { method, body = {}, targets: given = [], words, purpose = null, roles = [], signal, emit },
) {
  const insecure = mode === 'maintenance'
  const kind = callKind(method, insecure)
  const args = [...words.slice(1), ...(insecure ? ['--insecure'] : []), '-e', endpoint.ip, '-n', given.join(',') || endpoint.ip]
  const rec = (node, outcome) =>
    sim.record({
      time: new Date().toISOString(),
      node: node?.name ?? null,
      ip: node?.ip ?? null,
      tool: 'talosctl',
      call: kind,
      command: words[0],
      args,
      outcome,
      ...(purpose ? { purpose } : {}),
      // the boot that answered: a call's answer from before or after a reboot (tests derive a node's down window)
      ...(outcome.startsWith('ok') && node?.bootId ? { boot: node.bootId } : {}),
    })
  const fail = (e, node = endpoint) => {
    rec(node, `error: ${e}`)
    throw e
  }
  const takeFault = (name) => (purpose ? null : sim.takeCallFault(name, kind))

  await latency(sim, endpoint, kind)
  const handler = METHODS[method]
  if (!handler && method !== 'cluster.HealthCheck') fail(rpc('Unimplemented', `unknown method ${method}`))

  // call-scoped transport faults of the endpoint: what the client sees of a refused dial, a hung call, a broken stream
  const fault = takeFault(endpoint.name)
  if (fault?.kind === 'refused' || fault?.kind === 'unreachable') fail(rpc('Unavailable', dialRefused(endpoint.ip)))
  if (fault?.kind === 'timeout') {
    rec(endpoint, 'error: no answer (timeout)')
    return never()
  }
  if (fault?.kind === 'unavailable') fail(rpc('Unavailable', 'error reading from server: EOF'))

  if (insecure && !MAINTENANCE_METHODS.has(method)) fail(rpc('Unimplemented', 'API is not implemented in maintenance mode'))
  // the client certificate's role (its Organization) against the method's rules, checked by apid first
  if (!insecure && !roles.some((r) => (ROLES[method] ?? ['os:admin']).includes(r))) fail(rpc('PermissionDenied', 'not authorized'))

  // which nodes the call targets (none => this node, unnamed)
  let targets = insecure ? [] : given.map((s) => String(s).trim()).filter(Boolean)
  const bad = targets.find((t) => /:\d+$/.test(t))
  if (bad) fail(rpc('Internal', `invalid target "${bad}"`))
  const self = (t) => t === endpoint.ip || t === endpoint.name
  if (targets.length && endpoint.role === 'worker') {
    if (!targets.every(self)) fail(rpc('PermissionDenied', 'no request forwarding'))
    targets = [] // handled locally: replies carry no hostname
  }

  // the health check runs on the endpoint, its progress streamed; its failure is the answer's error
  if (method === 'cluster.HealthCheck') {
    rec(endpoint, 'ok')
    return [{ node: '', error: await healthCheck(sim, endpoint, body, { emit, signal }), data: {} }]
  }

  const list = targets.length ? targets.map((t) => ({ str: t, node: sim.lookup(t) })) : [{ str: '', node: endpoint }]
  const answers = []
  let lostAnswer = null
  for (const { str, node } of list) {
    try {
      if (!node)
        throw rpc(
          'Unavailable',
          /^\d+\.\d+\.\d+\.\d+$/.test(str)
            ? dialRefused(str)
            : `connection error: desc = "transport: Error while dialing: dial tcp: lookup ${str}: no such host"`,
        )
      if (node !== endpoint) {
        // apid proxies to the target over mTLS: the target's listener decides what it sees
        const m = sim.listeners.modeOf(node)
        if (m === 'off') throw rpc('Unavailable', dialRefused(node.ip))
        if (m === 'hang')
          throw rpc('Unavailable', `connection error: desc = "transport: Error while dialing: dial tcp ${node.ip}:50000: i/o timeout"`)
        if (m === 'maintenance') throw rpc('Unavailable', unknownAuthority(false))
        if (m === 'pki') throw rpc('Unavailable', unknownAuthority(true))
        const x509 = sim.listeners.certificateError(node)
        if (x509)
          throw rpc(
            'Unavailable',
            `connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: ${x509}"`,
          )
        await latency(sim, node, kind)
        const tf = takeFault(node.name)
        if (tf?.kind === 'refused' || tf?.kind === 'unreachable') throw rpc('Unavailable', dialRefused(node.ip))
        if (tf?.kind === 'timeout') throw rpc('DeadlineExceeded', 'context deadline exceeded')
        if (tf?.kind === 'unavailable') throw rpc('Unavailable', 'error reading from server: EOF')
      }
      const data = await handler(sim, node, body, { insecure, maintenance: insecure, signal, emit })
      // done on the node, the answer lost on the way back (a cut connection, a client deadline)
      const lost = purpose
        ? null
        : (sim.faults.take(node.name, { on: kind, kind: 'answer-lost' }) ??
          sim.faults.take(node.name, { on: kind, kind: 'answer-timeout' }))
      rec(node, lost ? `ok (done; its answer lost: ${lost.kind === 'answer-lost' ? 'EOF' : 'no answer'})` : 'ok')
      lostAnswer ??= lost
      answers.push({ node: str, error: null, data })
    } catch (e) {
      if (signal?.aborted) return never() // nobody to answer
      if (!(e instanceof RpcError)) throw e
      if (insecure) fail(e, node ?? endpoint)
      rec(node ?? { name: null, ip: str }, `error: ${e}`)
      answers.push({ node: str, error: e, data: null })
    }
  }
  // the client sees the call fail as a whole, whatever the nodes did
  if (lostAnswer?.kind === 'answer-timeout') return never()
  if (lostAnswer) throw rpc('Unavailable', 'error reading from server: EOF')
  return answers
}

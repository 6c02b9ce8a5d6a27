// What WithClient / WithClientNoNodes / WithClientMaintenance give a command: a connection and its nodes.
import { io } from '../cli-io.js'
import { call, parseEndpoint } from './transport.js'
import { secureClient } from './talosconfig.js'
import { filterMessages, warn } from './errors.js'

export const NODES_NOT_SET = 'nodes are not set for the command: please use `--nodes` flag or configuration file to set the nodes to run the command against'

export class Session {
  constructor(conn, nodes) {
    this.conn = conn
    this.nodes = nodes
  }

  /** One RPC; `nodes` overrides the node metadata (get sends one node at a time). */
  rpc(method, body, opts = {}) {
    const nodes = opts.nodes !== undefined ? opts.nodes : this.nodes
    return call(this.conn, method, body, { ...opts, nodes: this.conn.insecure ? [] : nodes })
  }

  /** Multi-node unary call: good messages plus the multierror of failed nodes (client.FilterMessages). */
  async multi(method, body, opts) {
    const reply = await this.rpc(method, body, opts)
    return filterMessages(reply.messages ?? [])
  }

  /** The NODE a reply is labelled with: its hostname, or the peer address when it carries none. */
  nodeOf(m) {
    return m.node ? m.node : this.conn.host
  }
}

export async function withClient(g, { noNodes = false } = {}) {
  const { endpoints, nodes, creds } = await secureClient(g)
  if (!noNodes && nodes.length < 1) throw new Error(NODES_NOT_SET)
  const { host, port } = parseEndpoint(endpoints[0])
  return new Session({ host, port, insecure: false, creds }, noNodes ? [] : nodes)
}

export function withMaintenance(g) {
  if (!g.nodes.length) throw new Error('failed to determine endpoints')
  const { host, port } = parseEndpoint(g.nodes[0])
  return new Session({ host, port, insecure: true, creds: {} }, [])
}

export function clientVersion() {
  return io().env.SIM_TALOSCTL_VERSION || 'v1.12.11'
}

function semver(tag) {
  const m = String(tag).replace(/^v/, '').match(/^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?/)
  if (!m) return null
  return { major: +m[1], minor: +m[2], patch: +m[3], pre: m[4] ?? '', text: m[0] }
}

function cmpSemver(a, b) {
  for (const k of ['major', 'minor', 'patch']) if (a[k] !== b[k]) return a[k] < b[k] ? -1 : 1
  if (a.pre === b.pre) return 0
  if (!a.pre) return 1
  if (!b.pre) return -1
  return a.pre < b.pre ? -1 : 1
}

/** helpers.ClientVersionCheck: WARNING when a server is older than the client; errors ignored. */
export async function versionCheck(s) {
  let good = []
  try {
    ({ good } = await s.multi('machine.Version', {}, { purpose: 'version-check' }))
  } catch (e) {
    if (e.code === 'Canceled') throw e
    return
  }
  const client = semver(clientVersion())
  const warnings = []
  for (const m of good) {
    const server = semver(m.data?.tag)
    if (!server) throw new Error(`${m.node}: error parsing server version: No Major.Minor.Patch elements found`)
    if (cmpSemver(server, client) < 0) warnings.push(`${m.node}: server version ${server.text} is older than client version ${client.text}`)
  }
  if (warnings.length) warn(warnings.join(', '))
}

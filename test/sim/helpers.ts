// Shared helpers for simulator tests: build a scenario on a 127.x.y range, start it in a temp
// dir, and talk to a node's API directly over HTTPS (the JSON protocol sim/grpc translates the real
// talosctl's calls into; ARCHITECTURE.md). The real talosctl and helm: `sim.binDir` (task tools).
import https from 'node:https'
import tls from 'node:tls'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parse } from 'yaml'
import { startSimulator, type Simulator, type ScenarioInput, type Fault } from '../../sim/index.js'

export type { Simulator }
export interface ClusterOpts {
  cps?: number; workers?: number; image?: 'iso' | 'disk'; workerImage?: 'iso' | 'disk'
  speed?: number; talosVersion?: string; faults?: Fault[]; vip?: boolean; timings?: ScenarioInput['timings']
  discovery?: 'enabled' | 'disabled'
}

/** a scenario on `range` (three octets, e.g. "127.23.1"): cps at .11.., workers at .21.., VIP .10 */
export function scenarioOn(range: string, o: ClusterOpts = {}): ScenarioInput {
  const cps = o.cps ?? 1, workers = o.workers ?? 1
  const nodes = [
    ...Array.from({ length: cps }, (_, i) => ({ name: `cp-${i + 1}`, ip: `${range}.${11 + i}`, role: 'controlplane' as const, image: o.image ?? 'iso' })),
    ...Array.from({ length: workers }, (_, i) => ({ name: `wrkr-${i + 1}`, ip: `${range}.${21 + i}`, role: 'worker' as const, image: o.workerImage ?? o.image ?? 'iso' })),
  ]
  return {
    cluster: { name: 'test', talosVersion: o.talosVersion ?? 'v1.12.11', endpoint: `https://${o.vip === false ? `${range}.11` : `${range}.10`}:6443`,
      ...(o.vip === false ? {} : { vip: { address: `${range}.10`, up: 'after-bootstrap' as const } }), ...(o.discovery ? { discovery: o.discovery } : {}) },
    speed: o.speed ?? 1000,
    timings: { maintenance: 2, install: 60, reboot: 20, boot: 30, etcd: 20, kubelet: 15, cni: 20, ...o.timings },
    nodes, faults: o.faults ?? [],
  }
}

export interface Started { sim: Simulator; dir: string; stop(): Promise<void> }
export async function startOn(range: string, o: ClusterOpts = {}): Promise<Started> {
  const dir = mkdtempSync(join(tmpdir(), 'sim-test-'))
  const sim = await startSimulator({ scenario: scenarioOn(range, o), dir })
  return { sim, dir, async stop() { await sim.stop(); rmSync(dir, { recursive: true, force: true }) } }
}

export interface CallResult {
  socketError?: string
  messages?: { node: string; error: { code: string; message: string } | null; data: any }[]
  error?: { code: string; message: string }
  transportError?: string
}
export interface CallOpts { secure?: boolean; nodes?: string; argv?: string[]; timeoutMs?: number; creds?: { ca: Buffer; cert?: Buffer; key?: Buffer } }

/** the talosconfig's credentials (CA, admin cert/key) */
export function talosCreds(sim: Simulator) {
  const cfg = parse(readFileSync(sim.env.TALOSCONFIG, 'utf8'))
  const ctx = cfg.contexts[cfg.context]
  return { ca: Buffer.from(ctx.ca, 'base64'), cert: Buffer.from(ctx.crt, 'base64'), key: Buffer.from(ctx.key, 'base64') }
}

/** one node API call: POST /<method> to <ip>:50000 */
export function talosCall(sim: Simulator, ip: string, method: string, body: object = {}, o: CallOpts = {}): Promise<CallResult> {
  const tlsOpts = o.secure ? (o.creds ?? talosCreds(sim)) : { rejectUnauthorized: false }
  return new Promise((resolve) => {
    const req = https.request({ host: ip, port: 50000, method: 'POST', path: `/${method}`, agent: false, ...tlsOpts,
      checkServerIdentity: () => undefined,
      headers: { 'content-type': 'application/json', 'x-sim-argv': JSON.stringify(o.argv ?? ['test', method]), ...(o.nodes ? { 'x-talos-nodes': o.nodes } : {}) } }, (res) => {
      let b = ''
      res.on('data', (d) => { b += d })
      res.on('end', () => { try { resolve(JSON.parse(b)) } catch { resolve({ socketError: `bad body: ${b}` }) } })
    })
    if (o.timeoutMs) req.setTimeout(o.timeoutMs, () => { req.destroy(); resolve({ socketError: 'TIMEOUT' }) })
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ socketError: e.code ?? e.message }))
    req.end(JSON.stringify(body))
  })
}

/** resolves with the handshake outcome: 'ok' or the error code */
export function tlsHandshake(ip: string, opts: tls.ConnectionOptions): Promise<{ result: string; peer?: tls.PeerCertificate; authorizationError?: string }> {
  return new Promise((resolve) => {
    const s = tls.connect({ host: ip, port: 50000, checkServerIdentity: () => undefined, ...opts }, () => {
      // TLS 1.3: the server's verdict on our certificate arrives after the handshake
      s.once('data', () => {})
      const peer = s.getPeerCertificate()
      setTimeout(() => { resolve({ result: s.destroyed ? 'closed' : 'ok', peer }); s.destroy() }, 50)
    })
    s.on('error', (e: NodeJS.ErrnoException) => resolve({ result: e.code ?? e.message }))
  })
}

export const configPath = (sim: Simulator, node: string) => join(sim.clusterDir, 'clusterconfig', `test-${node}.yaml`)
export const configOf = (sim: Simulator, node: string) => readFileSync(configPath(sim, node), 'utf8')

/** insecure apply of the node's generated config */
export function applyInsecure(sim: Simulator, node: string, extra: object = {}) {
  const v = sim.node(node)!
  return talosCall(sim, v.ip, 'machine.ApplyConfiguration', { data: configOf(sim, node), mode: 'auto', ...extra },
    { argv: ['apply-config', '--insecure', '-n', v.ip, '-f', configPath(sim, node)] })
}

/** bootstrap through the node itself, retrying while it is not available yet */
export async function bootstrapWhenReady(sim: Simulator, node: string, tries = 400): Promise<CallResult> {
  const ip = sim.node(node)!.ip
  for (let i = 0; ; i++) {
    const r = await talosCall(sim, ip, 'machine.Bootstrap', {}, { secure: true, nodes: ip })
    const e = r.messages?.[0]?.error
    if (i >= tries || (!r.socketError && (!e || e.message !== 'bootstrap is not available yet'))) return r
    await new Promise((res) => setTimeout(res, 5))
  }
}

/** record every distinct stage a node goes through */
export function stageLog(sim: Simulator, node: string): string[] {
  const log = [sim.node(node)!.stage]
  sim.watch((v) => { if (v.name === node && log.at(-1) !== v.stage) log.push(v.stage) })
  return log
}
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** a CNI agent DaemonSet sim/kube makes nodes Ready with (kube-proxy-free: it reaches the API through
 *  KubePrism, as the generated configs need; test/sim/cni-network.test.ts) */
export const CNI_DAEMONSET = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: cilium, namespace: kube-system, annotations: {sim.talos-bootstrap.dev/cni: "true"}}
spec:
  selector: {matchLabels: {k8s-app: cilium}}
  template:
    metadata: {labels: {k8s-app: cilium}}
    spec: {hostNetwork: true, tolerations: [{operator: Exists}], containers: [{name: cilium-agent, image: "quay.io/cilium/cilium:v1.16.5", env: [{name: KUBERNETES_SERVICE_HOST, value: localhost}, {name: KUBERNETES_SERVICE_PORT, value: "7445"}]}]}
`

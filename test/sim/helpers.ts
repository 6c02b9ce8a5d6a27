// Shared helpers for simulator tests: build a scenario on a 127.x.y range, start it in a temp
// dir, and drive its nodes with the real talosctl (`sim.binDir`, from `task tools`) as the product does.
import { execFile } from 'node:child_process'
import tls from 'node:tls'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parse } from 'yaml'
import { startSimulator, type Simulator, type ScenarioInput, type Fault } from '../../sim/index.js'

export type { Simulator }
export interface ClusterOpts {
  cps?: number
  workers?: number
  image?: 'iso' | 'disk'
  workerImage?: 'iso' | 'disk'
  speed?: number
  talosVersion?: string
  faults?: Fault[]
  vip?: boolean
  timings?: ScenarioInput['timings']
  discovery?: 'enabled' | 'disabled'
  /** the Kubernetes side: sim/kube, the imitation (default, or SIM_KUBE), or the real control plane */
  kube?: 'model' | 'real'
  /** the installer images the registry holds (default: the simulator's) */
  installers?: string[]
}

/** a scenario on `range` (three octets, e.g. "127.23.1"): cps at .11.., workers at .21.., VIP .10 */
export function scenarioOn(range: string, o: ClusterOpts = {}): ScenarioInput {
  const cps = o.cps ?? 1,
    workers = o.workers ?? 1
  const nodes = [
    ...Array.from({ length: cps }, (_, i) => ({
      name: `cp-${i + 1}`,
      ip: `${range}.${11 + i}`,
      role: 'controlplane' as const,
      image: o.image ?? 'iso',
    })),
    ...Array.from({ length: workers }, (_, i) => ({
      name: `wrkr-${i + 1}`,
      ip: `${range}.${21 + i}`,
      role: 'worker' as const,
      image: o.workerImage ?? o.image ?? 'iso',
    })),
  ]
  return {
    cluster: {
      name: 'test',
      talosVersion: o.talosVersion ?? 'v1.12.11',
      endpoint: `https://${o.vip === false ? `${range}.11` : `${range}.10`}:6443`,
      ...(o.vip === false ? {} : { vip: { address: `${range}.10`, up: 'after-bootstrap' as const } }),
      ...(o.discovery ? { discovery: o.discovery } : {}),
    },
    speed: o.speed ?? 1000,
    timings: { maintenance: 2, install: 60, reboot: 20, boot: 30, etcd: 20, kubelet: 15, cni: 20, ...o.timings },
    nodes,
    faults: o.faults ?? [],
    ...(o.installers ? { installers: o.installers } : {}),
  }
}

export interface Started {
  sim: Simulator
  dir: string
  stop(): Promise<void>
}
export async function startOn(range: string, o: ClusterOpts = {}): Promise<Started> {
  const dir = mkdtempSync(join(tmpdir(), 'sim-test-'))
  const sim = await startSimulator({ scenario: scenarioOn(range, o), dir, ...(o.kube ? { kube: o.kube } : {}) })
  return {
    sim,
    dir,
    async stop() {
      await sim.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** the talosconfig's credentials (CA, admin cert/key) */
export function talosCreds(sim: Simulator) {
  const cfg = parse(readFileSync(sim.env.TALOSCONFIG, 'utf8'))
  const ctx = cfg.contexts[cfg.context]
  return { ca: Buffer.from(ctx.ca, 'base64'), cert: Buffer.from(ctx.crt, 'base64'), key: Buffer.from(ctx.key, 'base64') }
}

/** what one talosctl run did: its exit code (-1 when killed at `timeoutMs`), output, and how long it took */
export interface Run {
  code: number
  stdout: string
  stderr: string
  killed: boolean
  ms: number
}

/** the real talosctl (`bin`: another build of it) with the simulator's talosconfig; killed after `timeoutMs` (a call that never answers) */
/**
 * Runs the real talosctl against the simulator. `until`: a run that waits on something that never comes
 * (the real tool's own wait has no end, or minutes) is killed (SIGKILL, `killed`) as soon as `until` holds
 * for its output so far (looked at on each output and every 100 ms), instead of at `timeoutMs`, which
 * stays the bound when it never holds.
 */
export function talosctl(
  sim: Simulator,
  args: string[],
  {
    timeoutMs = 30_000,
    talosconfig,
    bin,
    until,
  }: { timeoutMs?: number; talosconfig?: string; bin?: string; until?: (output: string) => boolean } = {},
): Promise<Run> {
  const t0 = Date.now()
  return new Promise((done) => {
    let timer: NodeJS.Timeout | undefined
    const child = execFile(
      bin ?? join(sim.binDir, 'talosctl'),
      args,
      {
        encoding: 'utf8',
        timeout: timeoutMs,
        killSignal: 'SIGKILL',
        env: { PATH: process.env.PATH ?? '', HOME: sim.dir, TALOSCONFIG: talosconfig ?? sim.env.TALOSCONFIG },
      },
      (err, stdout, stderr) => {
        clearInterval(timer)
        done({
          code: err ? (typeof err.code === 'number' ? err.code : -1) : 0,
          stdout,
          stderr,
          killed: !!err?.killed,
          ms: Date.now() - t0,
        })
      },
    )
    if (!until) return
    let output = ''
    const check = () => {
      if (child.exitCode === null && !child.killed && until(output)) child.kill('SIGKILL')
    }
    const add = (chunk: string | Buffer) => {
      output += chunk.toString()
      check()
    }
    child.stdout?.on('data', add)
    child.stderr?.on('data', add)
    timer = setInterval(check, 100)
  })
}

/** `-e ip -n ip`: the node answers for itself, through its own apid */
export const at = (ip: string, nodes = ip): string[] => ['-e', ip, '-n', nodes]
/** resources as `talosctl get -o json` prints them (one JSON document after another) */
export const jsonDocs = (text: string): Array<Record<string, any>> =>
  text
    .split(/\n(?=\{)/)
    .filter((t) => t.trim())
    .map((t) => JSON.parse(t))

/** a node's machinestatus spec (`get machinestatus -o json`), or what talosctl printed when it failed ('TIMEOUT' when it hung) */
export async function machineStatus(sim: Simulator, ip: string, { insecure = false, timeoutMs = 30_000 } = {}): Promise<any> {
  const r = await talosctl(sim, ['get', 'machinestatus', ...(insecure ? ['--insecure'] : []), ...at(ip), '-o', 'json'], { timeoutMs })
  if (r.killed) return 'TIMEOUT'
  return r.code === 0 ? jsonDocs(r.stdout)[0]?.spec : r.stderr
}

export const configPath = (sim: Simulator, node: string) => join(sim.clusterDir, 'clusterconfig', `test-${node}.yaml`)
export const configOf = (sim: Simulator, node: string) => readFileSync(configPath(sim, node), 'utf8')
/** a config text written to a file talosctl can apply */
export function configFile(sim: Simulator, name: string, text: string): string {
  const path = join(sim.dir, `${name}.yaml`)
  writeFileSync(path, text)
  return path
}

/** insecure apply of the node's generated config (or `file`), as the product's apply phase runs it */
export function applyInsecure(sim: Simulator, node: string, extra: string[] = [], file = configPath(sim, node)): Promise<Run> {
  const ip = sim.node(node)!.ip
  return talosctl(sim, ['apply-config', '--insecure', ...at(ip), '-f', file, ...extra])
}

/** bootstrap through the node itself, retrying while it is not available yet (or its API not up yet) */
export async function bootstrapWhenReady(sim: Simulator, node: string, timeoutMs = 30_000): Promise<Run> {
  const ip = sim.node(node)!.ip
  const end = Date.now() + timeoutMs
  for (;;) {
    const r = await talosctl(sim, ['bootstrap', ...at(ip)])
    const retry = /bootstrap is not available yet|connection refused|certificate required|broken pipe|connection reset/.test(r.stderr)
    if (!retry || Date.now() > end) return r
    await sleep(20)
  }
}

/** the members `talosctl etcd members` prints (its table read by the header's columns: a learner's cells may be empty) */
export interface Member {
  node: string
  id: string
  hostname: string
  peerUrls: string[]
  clientUrls: string[]
  isLearner: boolean
}
export function membersTable(stdout: string): Member[] {
  const [header, ...rows] = stdout.trimEnd().split('\n')
  if (!header) return []
  const names = ['NODE', 'ID', 'HOSTNAME', 'PEER URLS', 'CLIENT URLS', 'LEARNER'].filter((h) => header.includes(h))
  const starts = names.map((h) => header.indexOf(h))
  return rows.map((row) => {
    const cell = (h: string) => {
      const i = names.indexOf(h)
      return i < 0 ? '' : row.slice(starts[i], i + 1 < starts.length ? starts[i + 1] : undefined).trim()
    }
    const list = (h: string) => (cell(h) ? cell(h).split(',') : [])
    return {
      node: cell('NODE'),
      id: cell('ID'),
      hostname: cell('HOSTNAME'),
      peerUrls: list('PEER URLS'),
      clientUrls: list('CLIENT URLS'),
      isLearner: cell('LEARNER') === 'true',
    }
  })
}
/** `talosctl etcd members` on ip (or through it, `nodes`): the members, or what talosctl printed ('TIMEOUT' when it hung) */
export async function etcdMembers(sim: Simulator, ip: string, { nodes = ip, timeoutMs = 30_000 } = {}): Promise<Member[] | string> {
  const r = await talosctl(sim, ['etcd', 'members', ...at(ip, nodes)], { timeoutMs })
  if (r.killed) return 'TIMEOUT'
  return r.code === 0 ? membersTable(r.stdout) : r.stderr
}

/** one `talosctl service <id>` block: state, health, events (newest first) */
export async function service(
  sim: Simulator,
  ip: string,
  id: string,
): Promise<{ state: string; health: string; lastHealthMessage: string; events: string[] } | string> {
  const r = await talosctl(sim, ['service', id, ...at(ip)])
  if (r.code !== 0) return r.stderr
  const field = (name: string) => new RegExp(`^${name} +(.*)$`, 'm').exec(r.stdout)?.[1] ?? ''
  const events = r.stdout
    .slice(r.stdout.indexOf('EVENTS'))
    .replace(/^EVENTS/, '')
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
  return { state: field('STATE'), health: field('HEALTH'), lastHealthMessage: field('LAST HEALTH MSG'), events }
}

/** resolves with the handshake outcome: 'ok' or the error code */
export function tlsHandshake(
  ip: string,
  opts: tls.ConnectionOptions,
): Promise<{ result: string; peer?: tls.PeerCertificate; authorizationError?: string }> {
  return new Promise((resolve) => {
    // ALPN h2, as a gRPC client offers it
    const s = tls.connect({ host: ip, port: 50000, checkServerIdentity: () => undefined, ALPNProtocols: ['h2'], ...opts }, () => {
      // TLS 1.3: the server's verdict on our certificate arrives after the handshake
      s.once('data', () => {})
      const peer = s.getPeerCertificate()
      setTimeout(() => {
        resolve({ result: s.destroyed ? 'closed' : 'ok', peer })
        s.destroy()
      }, 50)
    })
    s.on('error', (e: NodeJS.ErrnoException) => resolve({ result: e.code ?? e.message }))
  })
}

/** record every distinct stage a node goes through */
export function stageLog(sim: Simulator, node: string): string[] {
  const log = [sim.node(node)!.stage]
  sim.watch((v) => {
    if (v.name === node && log.at(-1) !== v.stage) log.push(v.stage)
  })
  return log
}
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** a CNI agent DaemonSet sim/kube makes nodes Ready with (kube-proxy-free: it reaches the API through
 *  KubePrism, as the generated configs need; test/sim/cni-network.test.ts); its pods carry the CNI
 *  annotation too, which the kubelets on the real API (SIM_KUBE=real) read from each pod */
export const CNI_DAEMONSET = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: cilium, namespace: kube-system, annotations: {sim.talos-bootstrap.dev/cni: "true"}}
spec:
  selector: {matchLabels: {k8s-app: cilium}}
  template:
    metadata: {labels: {k8s-app: cilium}, annotations: {sim.talos-bootstrap.dev/cni: "true"}}
    spec: {hostNetwork: true, tolerations: [{operator: Exists}], containers: [{name: cilium-agent, image: "quay.io/cilium/cilium:v1.16.5", env: [{name: KUBERNETES_SERVICE_HOST, value: localhost}, {name: KUBERNETES_SERVICE_PORT, value: "7445"}]}]}
`

/** kubectl with the started cluster's kubeconfig (`<dir>/kubeconfig`): its exit code and output */
export function kubectl(s: Started, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) =>
    execFile(
      'kubectl',
      args,
      { env: { PATH: s.sim.env.PATH, HOME: s.dir, KUBECONFIG: join(s.dir, 'kubeconfig') }, timeout: 30_000 },
      (err, stdout, stderr) => done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    ),
  )
}

/**
 * The cluster brought up as an operator does, with the real talosctl and kubectl: each node's
 * config applied, the first control plane (`cp1`, its address) bootstrapped, every Node registered,
 * the kubeconfig written to `<dir>/kubeconfig`, the CNI DaemonSet applied (so the Nodes turn Ready).
 * Throws what failed.
 */
export async function bringUp(s: Started, names: string[], cp1: string): Promise<void> {
  for (const n of names) {
    const r = await applyInsecure(s.sim, n)
    // the answer lost as the node closed its maintenance API for the install (a loaded machine: the
    // graceful stop cut the connection first, as Talos's does): the node took the config all the same
    const lost = /code = Unavailable desc = error reading from server: EOF/.test(r.stderr) && s.sim.node(n)?.configured === true
    if (r.code !== 0 && !lost) throw new Error(`apply ${n}: ${r.stderr}`)
  }
  await s.sim.until(() => s.sim.node('cp-1')?.listener === 'secure', 30_000)
  const b = await bootstrapWhenReady(s.sim, 'cp-1')
  if (b.code !== 0) throw new Error(`bootstrap: ${b.stderr}`)
  await s.sim.until(() => names.every((n) => s.sim.node(n)?.registered), 90_000)
  const k = await talosctl(s.sim, ['kubeconfig', join(s.dir, 'kubeconfig'), '--merge=false', '--force', ...at(cp1)])
  if (k.code !== 0) throw new Error(`kubeconfig: ${k.stderr}`)
  writeFileSync(join(s.dir, 'cni.yaml'), CNI_DAEMONSET)
  const applied = await kubectl(s, ['apply', '-f', join(s.dir, 'cni.yaml')])
  if (applied.code !== 0) throw new Error(`kubectl apply: ${applied.stdout}`)
}

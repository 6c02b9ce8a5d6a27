// The seed's approach, as the baseline of the benchmark: apply one node, wait until it is up, then
// the next (the control planes, then bootstrap etcd and wait for the members, then the workers);
// then fetch the kubeconfig, install the CNI and wait until every node is Ready. The same talosctl/kubectl/helm calls the product makes, one at a
// time, with the same retry delay and poll interval (from the cluster's bootstrap.yaml).
// usage: node --import tsx bench/baseline.ts --cluster-dir <dir>
import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { parse, stringify } from 'yaml'

interface Node {
  name: string
  ip: string
  cp: boolean
  config: string
}
interface Talconfig {
  clusterName: string
  nodes: { hostname: string; ipAddress: string; controlPlane?: boolean }[]
}
interface Settings {
  retries?: number
  retryDelay?: string
  pollInterval?: string
  cni?: {
    chart: string
    repo?: string
    caFile?: string
    version?: string
    release: string
    namespace: string
    values?: Record<string, unknown>
  }
}

const { values } = parseArgs({ options: { 'cluster-dir': { type: 'string' } } })
const dir = values['cluster-dir'] ?? process.env.CLUSTER_DIR
if (!dir) throw new Error('--cluster-dir is required')
const ms = (d: string | undefined, dflt: number): number => {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(d ?? '')
  return m ? Number(m[1]) * { ms: 1, s: 1000, m: 60000 }[m[2] as 'ms' | 's' | 'm'] : dflt
}
const tal = parse(readFileSync(join(dir, 'talconfig.yaml'), 'utf8')) as Talconfig
const settings = parse(readFileSync(join(dir, 'bootstrap.yaml'), 'utf8')) as Settings
const poll = ms(settings.pollInterval, 5000)
const retryDelay = ms(settings.retryDelay, 3000)
const retries = settings.retries ?? 5
const talosconfig = join(dir, 'clusterconfig', 'talosconfig')
const kubeconfig = join(dir, 'kubeconfig')
const nodes: Node[] = tal.nodes.map((n) => ({
  name: n.hostname,
  ip: n.ipAddress,
  cp: n.controlPlane === true,
  config: join(dir, 'clusterconfig', `${tal.clusterName}-${n.hostname}.yaml`),
}))
const first = nodes.find((n) => n.cp)
if (!first) throw new Error('no control plane in talconfig.yaml')
let calls = 0

function sh(tool: string, args: string[]): Promise<{ ok: boolean; out: string }> {
  calls++
  return new Promise((resolve) => {
    execFile(tool, args, { timeout: 30_000, maxBuffer: 64 << 20 }, (err, stdout, stderr) =>
      resolve({ ok: !err, out: err ? `${stdout}${stderr}` : stdout }),
    )
  })
}
const secure = (n: Node): string[] => ['--talosconfig', talosconfig, '-e', n.ip, '-n', n.ip]

async function retry(what: string, fn: () => Promise<{ ok: boolean; out: string }>): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const r = await fn()
    if (r.ok) return r.out
    if (attempt >= retries) throw new Error(`${what}: ${r.out.trim()}`)
    await sleep(Math.min(retryDelay * 2 ** attempt, 60_000))
  }
}

async function until(what: string, done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 600_000
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what}: not done within 10m`)
    await sleep(poll)
  }
}

/** the product's verify condition: a worker running; a control plane running or booting with etcd waiting */
async function up(n: Node): Promise<boolean> {
  const r = await sh('talosctl', ['get', 'machinestatus', ...secure(n), '-o', 'json'])
  const stage = r.ok ? /"stage":\s*"(\w+)"/.exec(r.out)?.[1] : undefined
  if (stage === 'running') return true
  if (!n.cp || stage !== 'booting') return false
  const etcd = await sh('talosctl', ['service', 'etcd', ...secure(n)])
  return /^STATE\s+(Preparing|Waiting)/m.test(etcd.out)
}

const started = performance.now()
const log = (msg: string): void => {
  process.stdout.write(`[${((performance.now() - started) / 1000).toFixed(1)}s] ${msg}\n`)
}

async function applyAndWait(n: Node): Promise<void> {
  await retry(`apply ${n.name}`, () => sh('talosctl', ['apply-config', '--insecure', '-n', n.ip, '-e', n.ip, '-f', n.config]))
  await until(`${n.name} up`, () => up(n))
  log(`${n.name} applied and up`)
}

// the control planes first: behind a VIP with discovery off a worker's API comes up only once etcd
// is bootstrapped (its apid waits for trustd through the VIP), so one node at a time in inventory
// order would wait on the first worker for ever
const cps = nodes.filter((n) => n.cp)
for (const n of cps) await applyAndWait(n)
await retry('bootstrap', () => sh('talosctl', ['bootstrap', ...secure(first)]))
await until('etcd members', async () => {
  const r = await sh('talosctl', ['etcd', 'members', ...secure(first)])
  return r.ok && cps.every((c) => new RegExp(`\\s${c.name}\\s.*\\sfalse\\s*$`, 'm').test(r.out))
})
log('etcd bootstrapped, every control plane a member')
for (const n of nodes.filter((m) => !m.cp)) await applyAndWait(n)
await retry('kubeconfig', () => sh('talosctl', ['kubeconfig', kubeconfig, ...secure(first), '--merge=false', '--force']))
await until('API', async () => (await sh('kubectl', ['--kubeconfig', kubeconfig, 'get', '--raw', '/readyz'])).ok)
const cni = settings.cni
if (cni) {
  // the chart's values as the product passes them (kube-proxy-free cilium needs k8sServiceHost)
  const valuesFile = join(dir, '.bootstrap-baseline-values.yaml')
  writeFileSync(valuesFile, stringify(cni.values ?? {}))
  await retry('helm', () =>
    sh('helm', [
      'upgrade',
      '--install',
      cni.release,
      cni.chart,
      '--namespace',
      cni.namespace,
      '--create-namespace',
      '--kubeconfig',
      kubeconfig,
      '--wait',
      '--timeout',
      '10m',
      '--values',
      valuesFile,
      ...(cni.repo ? ['--repo', cni.repo] : []),
      ...(cni.caFile ? ['--ca-file', resolve(dir, cni.caFile)] : []),
      ...(cni.version ? ['--version', cni.version] : []),
    ]),
  )
}
await until('nodes Ready', async () => {
  const r = await sh('kubectl', ['--kubeconfig', kubeconfig, 'get', 'nodes', '-o', 'json'])
  if (!r.ok) return false
  const items = (JSON.parse(r.out) as { items: { status?: { conditions?: { type: string; status: string }[] } }[] }).items
  return items.length === nodes.length && items.every((i) => i.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
})
log(`every node Ready (${calls} tool calls)`)

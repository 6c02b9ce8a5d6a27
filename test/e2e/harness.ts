// End-to-end harness: a simulator in this process on its own 127.x.y range, and the real `task`
// (and through it the real scripts) run against it as an operator would.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, join, resolve } from 'node:path'
import { startSimulator, type CallRecord, type Fault, type ScenarioInput, type ScenarioNode, type Simulator } from '../../sim/index.js'
import { afterAll, beforeAll, expect } from 'vitest'
import type { Report } from '../../lib/core/results.js'
import { goBin } from '../support/go-bin.js'

export const ROOT = resolve(import.meta.dirname, '../..')

const GO_BIN = goBin()

/**
 * The test timeout of a case that bootstraps a whole cluster (`bootstrap:talos`) and then works on it.
 * vitest's 60 s were sim/kube's budget, which answers at once; a real control plane (SIM_KUBE=real)
 * adds its kube-apiserver's start (about 3 s of CPU: 4 s idle, up to 25 s on this 2-core machine
 * with other clusters starting), the kubelets' registration and the CNI's pods, on top of real etcd's
 * own pace (a joining control plane waits until its peers have been connected 5 s).
 */
export const CLUSTER_CASE_TIMEOUT = 180_000

export interface ClusterShape {
  cps?: number
  workers?: number
  image?: 'iso' | 'disk'
  talosVersion?: string
  /** the Kubernetes version the generated configs carry (default v1.35.0) */
  kubernetesVersion?: string
  /** the talosctl the simulator's bin links, and so the tasks run (default: .tools/bin's) */
  talosctl?: string
  vip?: 'after-bootstrap' | 'never' | false
  discovery?: 'enabled' | 'disabled'
  /** the simulator's Kubernetes: the real control plane, or sim/kube (default: SIM_KUBE, else sim/kube) */
  kube?: 'real' | 'model'
  /** the control planes' configs allow workloads on them (a cluster without workers that runs Flux needs it) */
  allowSchedulingOnControlPlanes?: boolean
  talosconfigRole?: 'os:admin' | 'os:operator' | 'os:reader' | 'os:etcd:backup'
  /** the nodes' names in order, control planes first (default cp-1.., wrkr-1..) */
  names?: string[]
  /** external: the simulator writes no configs; the test brings the operator's own */
  configs?: 'generated' | 'external'
  faults?: Fault[]
  speed?: number
  timings?: ScenarioInput['timings']
  flux?: ScenarioInput['flux']
  /** per node name: its disks and install disk or selector, its memory, instead of the defaults */
  nodeOverrides?: Record<
    string,
    Partial<
      Pick<ScenarioNode, 'disks' | 'installDisk' | 'installDiskSelector' | 'image' | 'secureBoot' | 'extensions' | 'schematic' | 'memory'>
    >
  >
}

/** cps at <range>.11.., workers at <range>.21.., the VIP at <range>.10 */
export function scenario(range: string, shape: ClusterShape = {}): ScenarioInput {
  const cps = shape.cps ?? 1
  const workers = shape.workers ?? 2
  const disks = [{ dev: '/dev/sda', size: '100GB', model: 'QEMU HARDDISK' }]
  const vip = shape.vip ?? 'after-bootstrap'
  return {
    cluster: {
      name: 'e2e',
      endpoint: `https://${range}.${vip === false ? 11 : 10}:6443`,
      talosVersion: shape.talosVersion ?? 'v1.12.11',
      kubernetesVersion: shape.kubernetesVersion ?? 'v1.35.0',
      ...(vip === false ? {} : { vip: { address: `${range}.10`, up: vip } }),
      ...(shape.discovery ? { discovery: shape.discovery } : {}),
      ...(shape.allowSchedulingOnControlPlanes ? { allowSchedulingOnControlPlanes: true } : {}),
      ...(shape.talosconfigRole ? { talosconfigRole: shape.talosconfigRole } : {}),
      ...(shape.configs ? { configs: shape.configs } : {}),
    },
    speed: shape.speed ?? 600,
    timings: { install: 120, reboot: 40, boot: 30, etcd: 20, kubelet: 15, cni: 20, ...shape.timings },
    nodes: [
      ...Array.from({ length: cps }, (_, i) => ({
        name: shape.names?.[i] ?? `cp-${i + 1}`,
        ip: `${range}.${11 + i}`,
        role: 'controlplane' as const,
        image: shape.image ?? 'iso',
        disks,
        ...shape.nodeOverrides?.[`cp-${i + 1}`],
      })),
      ...Array.from({ length: workers }, (_, i) => ({
        name: shape.names?.[cps + i] ?? `wrkr-${i + 1}`,
        ip: `${range}.${21 + i}`,
        role: 'worker' as const,
        image: shape.image ?? 'iso',
        disks,
        ...shape.nodeOverrides?.[`wrkr-${i + 1}`],
      })),
    ],
    faults: shape.faults ?? [],
    ...(shape.flux ? { flux: shape.flux } : {}),
  }
}

export interface TaskResult {
  code: number | null
  stdout: string
  stderr: string
}

export class E2eCluster {
  readonly sim: Simulator
  readonly dir: string
  private constructor(sim: Simulator, dir: string) {
    this.sim = sim
    this.dir = dir
  }

  static async start(range: string, shape: ClusterShape = {}): Promise<E2eCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'tb-e2e-'))
    const sim = await startSimulator({
      scenario: scenario(range, shape),
      dir,
      ...(shape.talosctl ? { talosctl: shape.talosctl } : {}),
      ...(shape.kube ? { kube: shape.kube } : {}),
    })
    return new E2eCluster(sim, dir)
  }

  get clusterDir(): string {
    return this.sim.clusterDir
  }

  env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    const { CI: _ci, NODES: _n, CONCURRENCY: _c, DRY_RUN: _d, ...base } = process.env
    return {
      ...base,
      PATH: [this.sim.binDir, GO_BIN, process.env.PATH ?? ''].join(delimiter),
      TALOSCONFIG: this.sim.env.TALOSCONFIG,
      KUBECONFIG: this.sim.env.KUBECONFIG,
      CLUSTER_DIR: this.clusterDir,
      // the simulator's OCI registry and the trust bundle that makes helm accept it (.sim/env)
      ...(this.sim.env.SSL_CERT_FILE ? { SSL_CERT_FILE: this.sim.env.SSL_CERT_FILE } : {}),
      ...(this.sim.env.SIM_OCI_REGISTRY ? { SIM_OCI_REGISTRY: this.sim.env.SIM_OCI_REGISTRY } : {}),
      NO_COLOR: '1',
      ...extra,
    }
  }

  /** `task -x <name> CLUSTER_DIR=… VAR=… -- flags`, as an operator types it. */
  task(name: string, vars: Record<string, string> = {}, flags: string[] = [], extraEnv: Record<string, string> = {}): Promise<TaskResult> {
    const args = ['-x', name, `CLUSTER_DIR=${this.clusterDir}`, ...Object.entries(vars).map(([k, v]) => `${k}=${v}`)]
    if (flags.length) args.push('--', ...flags)
    return run('task', args, this.env(extraEnv))
  }

  /** Starts a task in its own process group (as a terminal does) and hands back the child. */
  spawnTask(name: string, vars: Record<string, string> = {}, flags: string[] = []): { child: ChildProcess; done: Promise<TaskResult> } {
    const args = ['-x', name, `CLUSTER_DIR=${this.clusterDir}`, ...Object.entries(vars).map(([k, v]) => `${k}=${v}`)]
    if (flags.length) args.push('--', ...flags)
    const child = spawn('task', args, { cwd: ROOT, env: this.env(), stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    return { child, done: collect(child) }
  }

  /** The real kubectl against the cluster, with its own discovery cache. */
  kubectl(args: string[]): Promise<TaskResult> {
    return run(
      'kubectl',
      ['--kubeconfig', join(this.clusterDir, 'kubeconfig'), '--cache-dir', join(this.dir, 'kube-cache'), ...args],
      this.env(),
    )
  }

  /** The configs made newer than an edited talconfig.yaml, as `talhelper genconfig` leaves them (else a run finds them stale). */
  generated(): void {
    const dir = join(this.clusterDir, 'clusterconfig')
    const later = Date.now() / 1000 + 5
    for (const f of readdirSync(dir)) utimesSync(join(dir, f), later, later)
  }

  report(): Report {
    return JSON.parse(readFileSync(join(this.clusterDir, '.bootstrap', 'last-run.json'), 'utf8')) as Report
  }

  calls(): CallRecord[] {
    return this.sim.calls()
  }

  async stop(): Promise<void> {
    await this.sim.stop()
    if (existsSync(this.dir)) rmSync(this.dir, { recursive: true, force: true })
  }
}

/** The `next:` line printed for `who` (a node, or phase/step), and the command at its end. */
export function hintOf(stderr: string, who: string): { hint: string; command: string } {
  const lines = stderr.split('\n')
  const at = lines.findIndex((l) => l.startsWith(`error: ${who} `) || l.startsWith(`error: ${who}:`))
  const next = lines.slice(at + 1).find((l) => /^error:\s+next: /.test(l))
  expect(at, `no failure line for ${who} in:\n${stderr}`).toBeGreaterThanOrEqual(0)
  const hint = (next ?? '').replace(/^error:\s+next: /, '')
  // the last command offered is the one that recovers once the cause is gone
  const command = /.*(?:run(?: again)?|with): ((?:task|talosctl) .+)$/.exec(hint)?.[1] ?? ''
  expect(command, `no command in the hint: ${hint}`).not.toBe('')
  return { hint, command }
}

/**
 * A printed command (a hint) run verbatim in a fresh shell, as an operator would: PATH and HOME
 * only, another directory; and SSL_CERT_FILE, which stands for the machine's trust store (an
 * operator's chart registry is trusted by the system, the simulator's through that file).
 */
export function runInFreshShell(cluster: E2eCluster, command: string): Promise<TaskResult> {
  const trust = cluster.env().SSL_CERT_FILE
  return run(
    'bash',
    ['-c', command],
    { PATH: cluster.env().PATH ?? '', HOME: process.env.HOME ?? tmpdir(), ...(trust ? { SSL_CERT_FILE: trust } : {}) },
    tmpdir(),
  )
}

export function run(command: string, args: string[], env: NodeJS.ProcessEnv, cwd = ROOT): Promise<TaskResult> {
  return collect(spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] }))
}

function collect(child: ChildProcess): Promise<TaskResult> {
  return new Promise((resolvePromise, reject) => {
    let stdout = ''
    let stderr = ''
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
    child.on('error', reject)
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }))
  })
}

/** status of every node in one phase of the report, by node name */
export function statuses(report: Report, phase: string): Record<string, string> {
  const found = report.phases.find((p) => p.name === phase)
  if (!found) throw new Error(`phase ${phase} not in the report (phases: ${report.phases.map((p) => p.name).join(', ')})`)
  return Object.fromEntries(found.nodes.map((n) => [n.name, n.status]))
}

export function nodeIn(report: Report, phase: string, name: string) {
  const node = report.phases.find((p) => p.name === phase)?.nodes.find((n) => n.name === name)
  if (!node) throw new Error(`${name} not in phase ${phase}`)
  return node
}

/** pids of live processes whose command line mentions `text` (stray-process checks) */
export function processesMentioning(text: string): number[] {
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
  return out
    .split('\n')
    .filter((line) => line.includes(text) && !line.includes('ps -eo'))
    .map((line) => Number.parseInt(line.trim(), 10))
    .filter((pid) => pid !== process.pid)
}

/** waits until `predicate` holds, polling every 50 ms, at most `ms` */
export async function waitFor(predicate: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** calls of one kind (probe, apply, get, bootstrap, ...) made to a node */
export function callsTo(calls: CallRecord[], node: string, call?: string): CallRecord[] {
  return calls.filter((c) => c.node === node && (!call || c.call === call))
}

/**
 * A TALOSCTL for `cluster` whose insecure apply to `ip` waits until the file `gate` exists (a slow
 * start, a slow dial: the call has not left yet); every other call is the real talosctl's.
 */
export function gatedTalosctl(cluster: E2eCluster, ip: string, gate: string): string {
  const path = join(cluster.dir, `gated-talosctl-${ip}`)
  writeFileSync(
    path,
    `#!/bin/sh\ncase "$*" in *"apply-config --insecure -n ${ip} "*) while [ ! -e ${gate} ]; do sleep 0.1; done ;; esac\nexec ${join(cluster.sim.binDir, 'talosctl')} "$@"\n`,
  )
  chmodSync(path, 0o755)
  return path
}

/**
 * One cluster for every case of a describe block, booted with `bootstrap:talos` (`flags`) before the
 * first case and stopped after the last: the cases run in order, each from what the one before left.
 */
export function sharedCluster(range: string, shape: ClusterShape, flags: string[]): () => E2eCluster {
  let cluster: E2eCluster | undefined
  beforeAll(async () => {
    cluster = await E2eCluster.start(range, shape)
    const boot = await cluster.task('bootstrap:talos', {}, flags)
    expect(boot.code, boot.stdout + boot.stderr).toBe(0)
  }, CLUSTER_CASE_TIMEOUT)
  afterAll(async () => {
    await cluster?.stop()
  })
  return () => {
    if (!cluster) throw new Error(`the cluster on ${range} did not start`)
    return cluster
  }
}

/** kill -9 of the product script `scripts/<script>.ts` a task of `cluster` runs (no handler of its own runs); fails when none runs */
export function killScript(cluster: E2eCluster, script: string): void {
  const pid = processesMentioning(`--cluster-dir=${cluster.clusterDir}`).find((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(`scripts/${script}.ts`)
    } catch {
      return false
    }
  })
  expect(pid, `no scripts/${script}.ts running for ${cluster.clusterDir}`).toBeDefined()
  process.kill(pid as number, 'SIGKILL')
}

/**
 * One pod `guarded` on `node` (a ReplicaSet in default) under a PodDisruptionBudget `guarded` of
 * `budget` (`minAvailable: 1`, `maxUnavailable: 0`: no eviction allowed), applied with the real
 * kubectl; returns once the budget holds (1 healthy, 0 disruptions allowed).
 */
export async function guardPodOn(cluster: E2eCluster, node: string, budget: string): Promise<void> {
  const guarded = [
    'apiVersion: policy/v1',
    'kind: PodDisruptionBudget',
    'metadata: {name: guarded, namespace: default}',
    `spec: {${budget}, selector: {matchLabels: {app: guarded}}}`,
    '---',
    'apiVersion: apps/v1',
    'kind: ReplicaSet',
    'metadata: {name: guarded, namespace: default}',
    'spec:',
    '  replicas: 1',
    '  selector: {matchLabels: {app: guarded}}',
    '  template:',
    '    metadata: {labels: {app: guarded}}',
    '    spec:',
    `      nodeSelector: {kubernetes.io/hostname: ${node}}`,
    '      tolerations: [{operator: Exists}]',
    '      containers: [{name: app, image: registry.k8s.io/pause:3.10}]',
  ].join('\n')
  const file = join(cluster.dir, 'guarded.yaml')
  writeFileSync(file, guarded)
  const applied = await cluster.kubectl(['apply', '-f', file])
  expect(applied.code, applied.stderr).toBe(0)
  const jsonpath = 'jsonpath={.status.currentHealthy}/{.status.disruptionsAllowed}'
  let held = ''
  for (let i = 0; i < 240 && held !== '1/0'; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 500))
    held = (await cluster.kubectl(['-n', 'default', 'get', 'pdb', 'guarded', '-o', jsonpath])).stdout
  }
  expect(held, 'the budget guarded: currentHealthy/disruptionsAllowed').toBe('1/0')
}

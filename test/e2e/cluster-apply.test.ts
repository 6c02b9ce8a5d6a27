// task cluster:apply end to end (docs/day2-design.md 2.5) with the real talosctl, kubectl and task
// against one simulated cluster of 3 control planes and 2 workers on the real control plane (drains
// go through the real eviction API; sim/kube's model has one too: test/sim/kube.test.ts). The cases run
// in order on the same cluster, each starting from what the one before left. Range 127.248.1.0/24.
process.env.SIM_KUBE = 'real'
// vite sets MODE=test in the environment; the task reads MODE (cluster:apply's mode) from it
delete process.env.MODE

import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parse, stringify } from 'yaml'
import { CLUSTER_CASE_TIMEOUT, E2eCluster, guardPodOn, hintOf, nodeIn, runInFreshShell } from './harness.js'
import { tagOf as tagOfImage } from '../../lib/input/versions.js'
import { fastWith } from '../faults/helpers.js'
import { at, jsonDocs, talosctl } from '../sim/helpers.js'

const R = '127.248.1'
const IP: Record<string, string> = { 'cp-1': `${R}.11`, 'cp-2': `${R}.12`, 'cp-3': `${R}.13`, 'wrkr-1': `${R}.21`, 'wrkr-2': `${R}.22` }
const CPS = ['cp-1', 'cp-2', 'cp-3']
const CASE_TIMEOUT = 240_000
/**
 * faults/helpers.ts's short waits, with a real API server's 60 s for the endpoint and the API
 * (helpers.ts reads SIM_KUBE when it is imported, before this file sets it)
 */
const FAST = fastWith('--bootstrap-timeout', '60s').map((v, i, all) => (all[i - 1] === '--ready-timeout' ? '60s' : v))

interface Cfg {
  machine: { env?: Record<string, string>; nodeLabels?: Record<string, string>; [k: string]: unknown }
  [k: string]: unknown
}

describe('task cluster:apply', () => {
  let cluster: E2eCluster
  const configFile = (name: string): string => join(cluster.clusterDir, 'clusterconfig', `e2e-${name}.yaml`)
  /** the node's config file edited (the generated config's documents kept, the v1alpha1 one changed) */
  function edit(name: string, change: (cfg: Cfg) => void): void {
    const docs = readFileSync(configFile(name), 'utf8').split(/^---$/m)
    const at0 = docs.findIndex((d) => !/^kind:/m.test(d) && /^machine:/m.test(d))
    const cfg = parse(docs[at0]!) as Cfg
    change(cfg)
    docs[at0] = `\n${stringify(cfg)}`
    writeFileSync(configFile(name), docs.join('---'))
  }
  /** the node's MachineConfigs by ID (`v1alpha1`, `persistent`) as the real talosctl reads them */
  async function machineConfigs(name: string): Promise<Record<string, Cfg>> {
    const r = await talosctl(cluster.sim, ['get', 'machineconfigs', ...at(IP[name]!), '-o', 'json'])
    expect(r.code, r.stderr).toBe(0)
    return Object.fromEntries(jsonDocs(r.stdout).map((d) => [String(d.metadata.id), d.spec as Cfg]))
  }
  const bootId = (name: string): string => cluster.sim.node(name)!.bootId
  /** the product's own command log (.bootstrap/commands.log): every command line it ran */
  const commandLines = (): string[] => {
    const file = join(cluster.clusterDir, '.bootstrap', 'commands.log')
    return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []
  }
  /** the `apply-config` commands the product ran after line `from` of its log, dry runs apart */
  const applies = (from: number): { dry: string[]; real: string[] } => {
    const lines = commandLines()
      .slice(from)
      .filter((l) => l.includes(' apply-config '))
    return { dry: lines.filter((l) => l.includes('--dry-run')), real: lines.filter((l) => !l.includes('--dry-run')) }
  }
  const addressIn = (line: string): string => / -n (\S+)/.exec(line)?.[1] ?? ''
  async function kubeNode(
    name: string,
  ): Promise<{ spec?: { unschedulable?: boolean }; metadata: { annotations?: Record<string, string> } }> {
    const r = await cluster.kubectl(['get', 'node', name, '-o', 'json'])
    expect(r.code, r.stderr).toBe(0)
    return JSON.parse(r.stdout) as { spec?: { unschedulable?: boolean }; metadata: { annotations?: Record<string, string> } }
  }
  const detail = (name: string): string | undefined => nodeIn(cluster.report(), 'cluster-apply', name).detail

  beforeAll(async () => {
    cluster = await E2eCluster.start(R, { cps: 3, workers: 2, image: 'disk', speed: 600 })
    const boot = await cluster.task('bootstrap:talos', {}, FAST)
    expect(boot.code, boot.stdout + boot.stderr).toBe(0)
  }, CLUSTER_CASE_TIMEOUT)
  afterAll(async () => {
    await cluster?.stop()
  })

  it(
    'no change: every node planned as no change, nothing applied',
    async () => {
      const from = commandLines().length
      const r = await cluster.task('cluster:apply', {}, FAST)
      expect(r.code, r.stdout + r.stderr).toBe(0)
      for (const name of Object.keys(IP)) expect(detail(name)).toBe('no change')
      // one dry run per node, always in mode try, and no other apply
      const { dry, real } = applies(from)
      expect(dry.map(addressIn).sort()).toEqual(Object.values(IP).sort())
      for (const line of dry) expect(line).toContain('--dry-run --mode try')
      expect(real).toEqual([])
    },
    CASE_TIMEOUT,
  )

  it(
    'configs that lower Kubernetes (not generated again after upgrade:k8s): refused naming the versions, nothing applied; --allow-k8s-downgrade plans it; the printed hint, once they are generated again',
    async () => {
      const original = readFileSync(configFile('cp-2'), 'utf8')
      const images = (c: Cfg) => [
        (c.machine as { kubelet: { image: string } }).kubelet,
        (c.cluster as { apiServer: { image: string } }).apiServer,
      ]
      const running = tagOfImage(images(parse(original.split(/^---$/m).find((d) => /^machine:/m.test(d))!) as Cfg)[0]!.image) ?? ''
      expect(running).toMatch(/^v\d+\.\d+\.\d+$/)
      const [major, minor, patch] = running.slice(1).split('.').map(Number)
      const lower = patch! > 0 ? `v${major}.${minor}.${patch! - 1}` : `v${major}.${minor! - 1}.0`
      edit('cp-2', (c) => {
        for (const image of images(c)) image.image = image.image.replace(/:v[\d.]+$/, `:${lower}`)
      })
      const from = commandLines().length
      const r = await cluster.task('cluster:apply', {}, FAST)
      expect(r.code, r.stdout + r.stderr).toBe(1)
      const cp2 = nodeIn(cluster.report(), 'cluster-apply', 'cp-2')
      expect(cp2.error?.kind).toBe('version-skew')
      expect(cp2.error?.message).toBe(
        `${configFile('cp-2')} carries Kubernetes ${lower} (machine.kubelet.image ${lower}, cluster.apiServer.image ${lower}), the node runs ${running}: applying it would downgrade Kubernetes, so nothing was applied`,
      )
      for (const name of ['cp-1', 'cp-3', 'wrkr-1', 'wrkr-2']) expect(detail(name)).toBe('no change')
      expect(applies(from).real).toEqual([])

      const allowed = await cluster.task('cluster:apply', { NODES: 'cp-2', DRY_RUN: 'true' }, [...FAST, '--allow-k8s-downgrade'])
      expect(allowed.code, allowed.stdout + allowed.stderr).toBe(0)
      expect(allowed.stdout).toMatch(/cp-2 \(127\.248\.1\.12\): (?:live|reboot) -> /)
      expect(allowed.stdout).toContain(`:${lower}`)

      const { command } = hintOf(r.stderr, 'cp-2')
      expect(command).toMatch(/ cluster:apply CLUSTER_DIR=\S+ NODES=cp-2$/)
      writeFileSync(configFile('cp-2'), original)
      const again = await runInFreshShell(cluster, command)
      expect(again.code, again.stdout + again.stderr).toBe(0)
      expect(detail('cp-2')).toBe('no change')
      expect(applies(from).real).toEqual([])
    },
    CASE_TIMEOUT,
  )

  it(
    'DRY_RUN=true: prints the plan with the redacted diff and changes nothing',
    async () => {
      edit('wrkr-1', (c) => (c.machine.env = { ...c.machine.env, FOO: 'bar' }))
      edit('wrkr-2', (c) => (c.machine.nodeLabels = { ...c.machine.nodeLabels, zone: 'b' }))
      const before = { w1: bootId('wrkr-1'), w2: bootId('wrkr-2') }
      const r = await cluster.task('cluster:apply', { DRY_RUN: 'true' }, FAST)
      expect(r.code, r.stdout + r.stderr).toBe(0)
      expect(r.stdout).toContain('PLAN (cluster:apply)')
      expect(r.stdout).toMatch(/wrkr-1 \(127\.248\.1\.21\): reboot -> rolling: apply --mode reboot/)
      expect(r.stdout).toMatch(/wrkr-2 \(127\.248\.1\.22\): live -> apply --mode no-reboot/)
      expect(r.stdout).toContain('+        FOO: bar')
      expect(r.stdout).toContain('+        zone: b')
      // the CA key lines of a diff are never printed (the redactor knows the configs' secrets)
      expect(r.stdout).not.toMatch(/key: [A-Za-z0-9+/=]{20,}/)
      expect(cluster.report().dryRun).toBe(true)
      expect(bootId('wrkr-1')).toBe(before.w1)
      expect(bootId('wrkr-2')).toBe(before.w2)
      expect((await machineConfigs('wrkr-1')).v1alpha1!.machine.env?.FOO).toBeUndefined()
      expect((await machineConfigs('wrkr-2')).v1alpha1!.machine.nodeLabels?.zone).toBeUndefined()
    },
    CASE_TIMEOUT,
  )

  it(
    'a live change and a change that needs a reboot on workers: applied live; cordoned, drained, rebooted, uncordoned',
    async () => {
      const before = { w1: bootId('wrkr-1'), w2: bootId('wrkr-2') }
      const r = await cluster.task('cluster:apply', { CONCURRENCY: '2' }, FAST)
      expect(r.code, r.stdout + r.stderr).toBe(0)
      expect(detail('wrkr-2')).toBe('applied live')
      expect(detail('wrkr-1')).toBe('rebooted, uncordoned')
      expect(bootId('wrkr-2')).toBe(before.w2)
      expect(bootId('wrkr-1')).not.toBe(before.w1)
      expect((await machineConfigs('wrkr-1')).v1alpha1!.machine.env?.FOO).toBe('bar')
      expect((await machineConfigs('wrkr-2')).v1alpha1!.machine.nodeLabels?.zone).toBe('b')
      const node = await kubeNode('wrkr-1')
      expect(node.spec?.unschedulable).toBeFalsy()
      expect(node.metadata.annotations?.['talos-bootstrap.dev/cordoned']).toBeUndefined()
      // a rerun finds nothing to do
      const again = await cluster.task('cluster:apply', {}, FAST)
      expect(again.code, again.stdout + again.stderr).toBe(0)
      for (const name of Object.keys(IP)) expect(detail(name)).toBe('no change')
    },
    CASE_TIMEOUT,
  )

  it(
    "a live change of the API server's flags: waited for until kube-apiserver's mirror pod runs the new config version and is Ready",
    async () => {
      const versionOf = async (): Promise<string | undefined> => {
        const r = await cluster.kubectl(['-n', 'kube-system', 'get', 'pod', 'kube-apiserver-cp-2', '-o', 'json'])
        expect(r.code, r.stderr).toBe(0)
        return (JSON.parse(r.stdout) as { metadata: { annotations?: Record<string, string> } }).metadata.annotations?.[
          'talos.dev/config-version'
        ]
      }
      const from = await versionOf()
      edit('cp-2', (c) => {
        const cl = c.cluster as { apiServer?: { extraArgs?: Record<string, string> } }
        cl.apiServer = { ...cl.apiServer, extraArgs: { ...cl.apiServer?.extraArgs, 'audit-log-maxage': '7' } }
      })
      const before = bootId('cp-2')
      const r = await cluster.task('cluster:apply', { NODES: 'cp-2' }, FAST)
      expect(r.code, r.stdout + r.stderr).toBe(0)
      expect(detail('cp-2')).toBe('applied live')
      expect(bootId('cp-2')).toBe(before)
      const to = await versionOf()
      expect(to).toBeDefined()
      expect(to).not.toBe(from)
      expect(r.stdout).toMatch(/the static pods at the new config version and Ready|waiting for the static pods/)
    },
    CASE_TIMEOUT,
  )

  it(
    'a live change on a control plane: applied without a reboot, its static pods Ready',
    async () => {
      edit('cp-2', (c) => (c.machine.nodeLabels = { ...c.machine.nodeLabels, rack: 'r2' }))
      const before = bootId('cp-2')
      const r = await cluster.task('cluster:apply', { NODES: 'cp-2' }, FAST)
      expect(r.code, r.stdout + r.stderr).toBe(0)
      // the node serves its APIServerConfigs: the detail carries no note that only readiness was checked
      expect(detail('cp-2')).toBe('applied live')
      expect(bootId('cp-2')).toBe(before)
      expect((await machineConfigs('cp-2')).v1alpha1!.machine.nodeLabels?.rack).toBe('r2')
    },
    CASE_TIMEOUT,
  )

  it(
    'control planes that need a reboot: one at a time behind the quorum gate, never two down together',
    async () => {
      for (const cp of CPS) edit(cp, (c) => (c.machine.env = { ...c.machine.env, CP: 'x' }))
      const before = Object.fromEntries(CPS.map((cp) => [cp, bootId(cp)]))
      const down = new Set<string>()
      let most = 0
      /** when each control plane was seen back at running after being down */
      const back = new Map<string, number>()
      const stop = cluster.sim.watch((v) => {
        if (!CPS.includes(v.name)) return
        if (v.stage === 'running') {
          if (down.delete(v.name)) back.set(v.name, Date.now())
        } else down.add(v.name)
        most = Math.max(most, down.size)
      })
      const callsFrom = cluster.calls().length
      const from = commandLines().length
      let r
      try {
        r = await cluster.task('cluster:apply', { CONCURRENCY: '3' }, FAST)
      } finally {
        stop()
      }
      expect(r.code, r.stdout + r.stderr).toBe(0)
      expect(most).toBe(1)
      for (const cp of CPS) {
        expect(bootId(cp)).not.toBe(before[cp])
        expect(detail(cp)).toMatch(
          /^gate: 3\/3 members healthy, leader \S+, raft \d+; etcd member healthy and caught up \(leader \S+, raft \d+\); rebooted, uncordoned$/,
        )
      }
      // from the calls log: each control plane's apply (mode reboot) only after the one before answered again
      // the simulator's calls log: each control plane's last ApplyConfiguration (its apply with a reboot)
      // came after the control plane before it was back at running
      const lastApply = (cp: string): number =>
        Math.max(
          ...cluster
            .calls()
            .slice(callsFrom)
            .filter((c) => c.node === cp && c.call === 'apply' && c.outcome === 'ok')
            .map((c) => Date.parse(c.time)),
        )
      for (let i = 1; i < CPS.length; i++) expect(lastApply(CPS[i]!)).toBeGreaterThan(back.get(CPS[i - 1]!) ?? Infinity)
      // the last control plane has no gate after it: its own member's etcd status was read once it was back
      const last = CPS[CPS.length - 1]!
      const statusReadsOfLast = cluster
        .calls()
        .slice(callsFrom)
        .filter((c) => c.node === last && c.call === 'etcd' && c.args[0] === 'status' && Date.parse(c.time) > (back.get(last) ?? Infinity))
      expect(statusReadsOfLast.length).toBeGreaterThanOrEqual(2)
      const reboots = applies(from).real
      expect(reboots.map(addressIn)).toEqual(CPS.map((cp) => IP[cp]))
      for (const line of reboots) expect(line).toContain('--mode reboot')
    },
    CASE_TIMEOUT,
  )

  it(
    'a staged config pending: planned as such, taken by a reboot',
    async () => {
      edit('wrkr-2', (c) => (c.machine.env = { ...c.machine.env, STAGED: 'yes' }))
      const staged = await talosctl(cluster.sim, ['apply-config', ...at(IP['wrkr-2']!), '--mode', 'staged', '-f', configFile('wrkr-2')])
      expect(staged.code, staged.stderr).toBe(0)
      expect((await machineConfigs('wrkr-2')).persistent?.machine.env?.STAGED).toBe('yes')
      const before = bootId('wrkr-2')
      const r = await cluster.task('cluster:apply', { NODES: 'wrkr-2' }, FAST)
      expect(r.code, r.stdout + r.stderr).toBe(0)
      expect(r.stdout).toContain('staged config pending')
      expect(detail('wrkr-2')).toBe('rebooted, uncordoned')
      expect(bootId('wrkr-2')).not.toBe(before)
      expect((await machineConfigs('wrkr-2')).v1alpha1!.machine.env?.STAGED).toBe('yes')
    },
    CASE_TIMEOUT,
  )

  it(
    'a try in effect: planned as such, committed by the apply (persistent = active, no reboot)',
    async () => {
      // only a try applied in a boot that set `persistent` can be seen (after a reboot there is none:
      // docs/day2-design.md 1.5 step 8), so the node's current config is applied first in this boot
      const current = await talosctl(cluster.sim, ['apply-config', ...at(IP['wrkr-1']!), '--mode', 'no-reboot', '-f', configFile('wrkr-1')])
      expect(current.code, current.stderr).toBe(0)
      edit('wrkr-1', (c) => (c.machine.nodeLabels = { ...c.machine.nodeLabels, tried: 'yes' }))
      // the try's timer runs at the scenario's speed: 300 simulated minutes are 30 s here (10 s ran out
      // before the plan read it at load 20)
      const tried = await talosctl(cluster.sim, [
        'apply-config',
        ...at(IP['wrkr-1']!),
        '--mode',
        'try',
        '--timeout',
        '300m',
        '-f',
        configFile('wrkr-1'),
      ])
      expect(tried.code, tried.stderr).toBe(0)
      const during = await machineConfigs('wrkr-1')
      expect(during.v1alpha1!.machine.nodeLabels?.tried).toBe('yes')
      expect(during.persistent?.machine.nodeLabels?.tried).toBeUndefined()
      const before = bootId('wrkr-1')
      const r = await cluster.task('cluster:apply', { NODES: 'wrkr-1' }, FAST)
      expect(r.code, r.stdout + r.stderr).toBe(0)
      expect(r.stdout).toContain('try in effect')
      expect(detail('wrkr-1')).toBe('applied live')
      expect(bootId('wrkr-1')).toBe(before)
      const after = await machineConfigs('wrkr-1')
      expect(after.persistent?.machine.nodeLabels?.tried).toBe('yes')
      expect(after.v1alpha1!.machine.nodeLabels?.tried).toBe('yes')
    },
    CASE_TIMEOUT,
  )

  it(
    'busy: the node holds its apply mutex once; the plan retries and the run succeeds',
    async () => {
      edit('wrkr-1', (c) => (c.machine.nodeLabels = { ...c.machine.nodeLabels, busy: 'once' }))
      cluster.sim.addFault({ node: 'wrkr-1', on: 'apply', kind: 'apply-busy', times: 1 })
      const r = await cluster.task('cluster:apply', { NODES: 'wrkr-1' }, FAST)
      expect(r.code, r.stdout + r.stderr).toBe(0)
      const node = nodeIn(cluster.report(), 'cluster-apply', 'wrkr-1')
      expect(node.status).toBe('ok')
      expect(node.detail).toBe('applied live')
      expect(node.retries?.map((x) => x.kind)).toContain('busy')
      expect(node.retries?.find((x) => x.kind === 'busy')?.message).toContain('another apply configuration is already in progress')
    },
    CASE_TIMEOUT,
  )

  it(
    'MODE=no-reboot refuses a change that needs a reboot (exit 1, kind needs-reboot), nothing applied; the printed command, run in a fresh shell, reboots the node into it',
    async () => {
      edit('wrkr-2', (c) => (c.machine.env = { ...c.machine.env, LATER: '1' }))
      const before = bootId('wrkr-2')
      const from = commandLines().length
      const r = await cluster.task('cluster:apply', { NODES: 'wrkr-2', MODE: 'no-reboot' }, FAST)
      expect(r.code, r.stdout + r.stderr).toBe(1)
      const node = nodeIn(cluster.report(), 'cluster-apply', 'wrkr-2')
      expect(node.error?.kind).toBe('needs-reboot')
      // the hint ends in the command that applies it now: the same node in MODE=auto (a rolling reboot)
      const { command } = hintOf(r.stderr, 'wrkr-2')
      expect(command).toMatch(/ cluster:apply CLUSTER_DIR=\S+ MODE=auto NODES=wrkr-2$/)
      expect(bootId('wrkr-2')).toBe(before)
      expect(applies(from).real).toEqual([])
      const bad = await cluster.task('cluster:apply', { NODES: 'wrkr-2', MODE: 'sometimes' }, FAST)
      expect(bad.code).toBe(2)
      expect(bad.stderr).toContain('MODE must be one of auto, no-reboot, reboot, staged, try')

      // nothing to clear (the refusal was the mode's): as printed, it applies the change with a reboot
      const now = await runInFreshShell(cluster, command)
      expect(now.code, `${command}\n${now.stdout}\n${now.stderr}`).toBe(0)
      expect(detail('wrkr-2')).toBe('rebooted, uncordoned')
      expect(bootId('wrkr-2')).not.toBe(before)
      expect((await machineConfigs('wrkr-2')).v1alpha1!.machine.env?.LATER).toBe('1')
      expect((await kubeNode('wrkr-2')).spec?.unschedulable).toBeFalsy()
    },
    CASE_TIMEOUT,
  )

  it(
    'a PodDisruptionBudget that allows no eviction: the drain runs out, nothing applied, the node stays cordoned; a rerun once it allows finishes',
    async () => {
      await guardPodOn(cluster, 'wrkr-1', 'minAvailable: 1')
      edit('wrkr-1', (c) => (c.machine.env = { ...c.machine.env, DRAINED: 'yes' }))
      const before = bootId('wrkr-1')
      const from = commandLines().length
      const r = await cluster.task('cluster:apply', { NODES: 'wrkr-1' }, [...FAST, '--drain-timeout', '5s'])
      expect(r.code, r.stdout + r.stderr).toBe(1)
      const node = nodeIn(cluster.report(), 'cluster-apply', 'wrkr-1')
      expect(node.error?.kind).toBe('drain-blocked')
      expect(node.error?.message).toMatch(
        /^drain not done within 5s: PodDisruptionBudget default\/guarded allows no disruption of default\/guarded-\w+; nothing applied, the node stays cordoned$/,
      )
      expect(node.error?.hint).toContain('cluster:apply')
      expect(applies(from).real).toEqual([])
      expect(bootId('wrkr-1')).toBe(before)
      const cordoned = await kubeNode('wrkr-1')
      expect(cordoned.spec?.unschedulable).toBe(true)
      expect(cordoned.metadata.annotations?.['talos-bootstrap.dev/cordoned']).toBe('cluster:apply')

      // the budget relaxed: the rerun drains again, applies, and uncordons the node it cordoned
      expect((await cluster.kubectl(['-n', 'default', 'delete', 'pdb', 'guarded'])).code).toBe(0)
      const again = await cluster.task('cluster:apply', { NODES: 'wrkr-1' }, FAST)
      expect(again.code, again.stdout + again.stderr).toBe(0)
      expect(detail('wrkr-1')).toBe('rebooted, uncordoned')
      expect(bootId('wrkr-1')).not.toBe(before)
      const after = await kubeNode('wrkr-1')
      expect(after.spec?.unschedulable).toBeFalsy()
      expect(after.metadata.annotations?.['talos-bootstrap.dev/cordoned']).toBeUndefined()
    },
    CASE_TIMEOUT,
  )

  it(
    'a node cordoned by someone else stays cordoned after its reboot',
    async () => {
      expect((await cluster.kubectl(['cordon', 'wrkr-2'])).code).toBe(0)
      edit('wrkr-2', (c) => (c.machine.env = { ...c.machine.env, THEIRS: '1' }))
      const r = await cluster.task('cluster:apply', { NODES: 'wrkr-2' }, FAST)
      expect(r.code, r.stdout + r.stderr).toBe(0)
      expect(detail('wrkr-2')).toBe('rebooted; left cordoned (it was cordoned before this run)')
      expect((await kubeNode('wrkr-2')).spec?.unschedulable).toBe(true)
      expect((await cluster.kubectl(['uncordon', 'wrkr-2'])).code).toBe(0)
    },
    CASE_TIMEOUT,
  )

  it(
    'GATE_COMMAND after a rebooted node: failing once, tried again after GATE_INTERVAL, then passing',
    async () => {
      const marks = join(cluster.dir, 'gate-marks')
      const once = join(cluster.dir, 'gate-failed-once')
      edit('wrkr-2', (c) => (c.machine.env = { ...c.machine.env, GATED: '1' }))
      const r = await cluster.task(
        'cluster:apply',
        {
          NODES: 'wrkr-2',
          GATE_COMMAND: `echo "$NODE $NODE_IP $NODE_ROLE $PHASE" >> '${marks}'; test -f '${once}' || { touch '${once}'; echo not yet; exit 3; }`,
          GATE_INTERVAL: '1s',
        },
        FAST,
      )
      expect(r.code, r.stdout + r.stderr).toBe(0)
      expect(detail('wrkr-2')).toBe('rebooted, uncordoned; gate command passed after 2 attempts')
      expect(readFileSync(marks, 'utf8')).toBe(`wrkr-2 ${IP['wrkr-2']} worker cluster-apply\n`.repeat(2))

      // a gate that never passes fails the node with its output, once the node itself is done
      edit('wrkr-2', (c) => (c.machine.env = { ...c.machine.env, GATED: '2' }))
      const never = await cluster.task(
        'cluster:apply',
        { NODES: 'wrkr-2', GATE_COMMAND: 'echo storage degraded >&2; exit 4', GATE_INTERVAL: '1s', GATE_TIMEOUT: '3s' },
        FAST,
      )
      expect(never.code, never.stdout + never.stderr).toBe(1)
      const node = nodeIn(cluster.report(), 'cluster-apply', 'wrkr-2')
      expect(node.error?.kind).toBe('gate-command')
      expect(node.error?.message).toMatch(
        /^wrkr-2 is done, but the gate command after it did not pass within \d+s \(\d+ attempts\): gate command attempt \d+: exit 4: storage degraded$/,
      )
      expect((await machineConfigs('wrkr-2')).v1alpha1!.machine.env?.GATED).toBe('2')
    },
    CASE_TIMEOUT,
  )

  it(
    "a config only the node's own validation refuses (talosctl validate passes it): planned invalid with the node's text, exit 1, nothing applied",
    async () => {
      edit('wrkr-1', (c) => (c.machine.nodeLabels = { ...c.machine.nodeLabels, refused: 'yes' }))
      const text = 'machine.network.interfaces[0].deviceSelector: no network device matches the selector'
      cluster.sim.addFault({ node: 'wrkr-1', on: 'apply', kind: 'config-rejected', message: text, times: 1 })
      const from = commandLines().length
      const r = await cluster.task('cluster:apply', { NODES: 'wrkr-1' }, FAST)
      expect(r.code, r.stdout + r.stderr).toBe(1)
      const node = nodeIn(cluster.report(), 'cluster-apply', 'wrkr-1')
      expect(node.status).toBe('failed')
      expect(node.error?.kind).toBe('config-invalid')
      expect(node.error?.message).toMatch(/^the node refuses \S+e2e-wrkr-1\.yaml: /)
      expect(node.error?.message).toContain(text)
      expect(node.error?.hint).toMatch(/talosctl validate --mode metal -c \S+e2e-wrkr-1\.yaml/)
      expect(applies(from).dry.map(addressIn)).toEqual([IP['wrkr-1']])
      expect(applies(from).real).toEqual([])
      expect((await machineConfigs('wrkr-1')).v1alpha1!.machine.nodeLabels?.refused).toBeUndefined()
      // the fault was once: the same change is applied by the next run
      const again = await cluster.task('cluster:apply', { NODES: 'wrkr-1' }, FAST)
      expect(again.code, again.stdout + again.stderr).toBe(0)
      expect(detail('wrkr-1')).toBe('applied live')
    },
    CASE_TIMEOUT,
  )

  it(
    'a config the node would refuse: stopped before any node is touched (exit 2) with the validation text',
    async () => {
      edit('wrkr-1', (c) => (c.machine.install = { ...(c.machine.install as object), extraKernelArgs: ['a=b'], grubUseUKICmdline: true }))
      const from = commandLines().length
      const r = await cluster.task('cluster:apply', { NODES: 'wrkr-1' }, FAST)
      expect(r.code, r.stdout + r.stderr).toBe(2)
      expect(r.stderr).toContain("install.extraKernelArgs and install.grubUseUKICmdline can't be used together")
      expect(applies(from).dry).toEqual([])
      expect(applies(from).real).toEqual([])
    },
    CASE_TIMEOUT,
  )
})

// task upgrade:k8s end to end (docs/day2-design.md 2.7) with the real talosctl v1.12.11, kubectl and task
// against one simulated cluster of 2 control planes and 1 worker bootstrapped at Kubernetes v1.34.1
// (sim/talos/k8s.js serves the typed resources the real `talosctl upgrade-k8s` reads and changes). The
// cases share the cluster and run in order, each starting from what the one before left: bad input,
// the dry run, the refusals (nothing changed), the upgrade itself run from a refusal's printed hint in a
// fresh shell once its cause is cleared, the rerun, the rerun and the 1.36 path with talosctl v1.13.9
// (TALOSCTL), a kubelet that does not come back at v1.35.1 (the stall watchdog cuts upgrade-k8s), the
// rerun while it is still down (the call itself fails, kind k8s-upgrade) and, once it runs, the hint
// resuming only what is left; the deadline (BOOTSTRAP_K8S_UPGRADE_TIMEOUT) cutting v1.35.2 and its hint;
// the VIP down (a control plane's own API server, `--endpoint`), a stale control-plane pod refused by the
// pre-check, then refusals only the upgraded cluster shows. Beside it, a Talos v1.13 cluster driven by talosctl v1.13.9 goes v1.35.0 -> v1.36.0.
// Ranges 127.247.1.0/24 and 127.238.7.0/24.
delete process.env.TO

import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { inTurn, SIDE_BY_SIDE } from '../support/in-turn.js'
import { parse, stringify } from 'yaml'
import { CLUSTER_CASE_TIMEOUT, E2eCluster, hintOf, nodeIn, runInFreshShell, sharedCluster, type TaskResult } from './harness.js'
import { FAST } from '../faults/helpers.js'
import { at, configFile, talosctl } from '../sim/helpers.js'
import type { Fault } from '../../sim/index.js'

const R = '127.247.1'
const IP: Record<string, string> = { 'cp-1': `${R}.11`, 'cp-2': `${R}.12`, 'wrkr-1': `${R}.21` }
const NODES = Object.keys(IP)
const COMPONENTS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']
const CASE_TIMEOUT = 300_000
const TALOSCTL_113 = resolve('.tools/talosctl-v1.13.9/talosctl')
const has113 = existsSync(TALOSCTL_113)
/**
 * The stall watchdog's and the deadline's cut: a whole `talosctl upgrade-k8s` of this cluster took
 * 2.3-3.6 s at load 20-27 (commands.log); its longest silence is a kubelet's "waiting for node update",
 * which asks the Node again only every 10 s (pkg/cluster/kubernetes/kubelet.go: retry.Constant with
 * 10 s units), and a kubelet posts its new version a moment after it turns healthy: past 15 s is only
 * the kubelet that never comes back
 */
const CUT = '15s'

/** `task upgrade:k8s` on `cluster` with `vars` (flags and environment as `task` takes them), checked to exit `code` */
async function upgradeK8s(
  cluster: E2eCluster,
  code: number,
  vars: Record<string, string>,
  flags: string[] = FAST,
  env: Record<string, string> = {},
): Promise<TaskResult> {
  const r = await cluster.task('upgrade:k8s', vars, flags, env)
  expect(r.code, r.stdout + r.stderr).toBe(code)
  return r
}

describe('task upgrade:k8s', SIDE_BY_SIDE, () => {
  let cluster: E2eCluster
  /** ApplyConfiguration calls the simulator saw after `from` (the only way upgrade-k8s changes a node) */
  const applies = (from: number) =>
    cluster
      .calls()
      .slice(from)
      .filter((c) => c.call === 'apply')
  const result = (name: string): ReturnType<typeof nodeIn> => nodeIn(cluster.report(), 'upgrade-k8s', name)
  /** the failed cluster step of the last run's upgrade-k8s phase */
  const failedStep = () =>
    cluster
      .report()
      .phases.find((p) => p.name === 'upgrade-k8s')
      ?.steps?.find((s) => s.status === 'failed')
  /** from now on wrkr-1's kubelet, once upgrade-k8s moves it to `version`, never comes back (machined restarts it forever) */
  const kubeletNeverBackAt = (version: string): void =>
    cluster.sim.addFault({ kind: 'kubelet-crashloop', node: 'wrkr-1', image: `ghcr.io/siderolabs/kubelet:${version}` } as Fault)
  /**
   * The hint printed for `who` names upgrade:k8s with TO=`to`; once `clear` has removed the cause, run as
   * printed in a fresh shell, it exits 0: its output.
   */
  async function hintRecovers(stderr: string, who: string, to: string, clear: () => void): Promise<string> {
    const { command } = hintOf(stderr, who)
    expect(command).toMatch(new RegExp(` upgrade:k8s CLUSTER_DIR=\\S+ TO=${to.replace(/\./g, '\\.')}$`))
    clear()
    const run = await runInFreshShell(cluster, command)
    expect(run.code, `${command}\n${run.stdout}\n${run.stderr}`).toBe(0)
    return run.stdout + run.stderr
  }
  /** every mirror pod's image and every Node's kubelet, as kubectl reads them */
  async function kubeState(): Promise<{ pods: Record<string, string>; kubelets: Record<string, string> }> {
    const pods = JSON.parse((await cluster.kubectl(['get', 'pods', '-n', 'kube-system', '-o', 'json'])).stdout) as {
      items: Array<{ metadata: { name: string; labels?: Record<string, string> }; spec: { containers: Array<{ image: string }> } }>
    }
    const nodes = JSON.parse((await cluster.kubectl(['get', 'nodes', '-o', 'json'])).stdout) as {
      items: Array<{ metadata: { name: string }; status: { nodeInfo: { kubeletVersion: string } } }>
    }
    return {
      pods: Object.fromEntries(
        pods.items
          .filter((p) => COMPONENTS.includes(p.metadata.labels?.['k8s-app'] ?? ''))
          .map((p) => [p.metadata.name, p.spec.containers[0]?.image ?? '']),
      ),
      kubelets: Object.fromEntries(nodes.items.map((n) => [n.metadata.name, n.status.nodeInfo.kubeletVersion])),
    }
  }
  async function expectAt(version: string): Promise<void> {
    const state = await kubeState()
    expect(Object.keys(state.pods)).toHaveLength(6)
    for (const image of Object.values(state.pods)) expect(image.endsWith(`:${version}`), image).toBe(true)
    expect(state.kubelets).toEqual(Object.fromEntries(NODES.map((n) => [n, version])))
  }

  beforeAll(async () => {
    cluster = await E2eCluster.start(R, { cps: 2, workers: 1, image: 'disk', speed: 600, kubernetesVersion: 'v1.34.1' })
    const boot = await cluster.task('bootstrap:talos', {}, FAST)
    expect(boot.code, boot.stdout + boot.stderr).toBe(0)
  }, CLUSTER_CASE_TIMEOUT)
  afterAll(async () => {
    await cluster?.stop()
  })

  inTurn('a malformed TO, or none, is exit 2 before any node is read', async () => {
    const from = cluster.calls().length
    const r = await upgradeK8s(cluster, 2, { TO: '1.35' })
    expect(r.stderr).toContain('TO "1.35" is not a Kubernetes version like v1.35.0')
    const none = await upgradeK8s(cluster, 2, {})
    expect(none.stderr).toContain('upgrade:k8s needs a target')
    expect(cluster.calls().slice(from)).toEqual([])
  })

  inTurn(
    'DRY_RUN=true prints every node and component with its version and changes nothing',
    async () => {
      const from = cluster.calls().length
      const r = await upgradeK8s(cluster, 0, { TO: 'v1.35.0', DRY_RUN: 'true' })
      expect(r.stdout).toContain('PLAN (upgrade:k8s to v1.35.0, from v1.34.1')
      expect(r.stdout).toMatch(
        /cp-2 \(127\.247\.1\.12, controlplane\): Talos v1\.12\.11; kubelet v1\.34\.1 \(spec v1\.34\.1\); kube-apiserver v1\.34\.1 \(config v1\.34\.1\); kube-controller-manager v1\.34\.1 \(config v1\.34\.1\); kube-scheduler v1\.34\.1 \(config v1\.34\.1\)/,
      )
      expect(r.stdout).toContain('wrkr-1 (127.247.1.21, worker): Talos v1.12.11; kubelet v1.34.1 (spec v1.34.1)')
      // the simulator's cluster runs Cilium without kube-proxy: the DaemonSet is read only where it exists
      const proxy = await cluster.kubectl(['get', 'daemonset', 'kube-proxy', '-n', 'kube-system', '-o', 'name'])
      expect(r.stdout).toContain(`kube-proxy DaemonSet: ${proxy.code === 0 ? 'v1.34.1' : 'none'}`)
      expect(result('cp-1').status).toBe('ok')
      expect(applies(from)).toEqual([])
      await expectAt('v1.34.1')
    },
    CASE_TIMEOUT,
  )

  inTurn(
    'refusals change nothing (exit 1): two minors at once lists the steps, and Kubernetes 1.36 is outside Talos 1.12 (upgrade:talos first)',
    async () => {
      const from = cluster.calls().length
      await upgradeK8s(cluster, 1, { TO: 'v1.36.0' })
      const step = failedStep()
      expect(step?.name).toBe('pre-check')
      expect(step?.error?.kind).toBe('version-skew')
      expect(step?.error?.message).toContain('unsupported upgrade path 1.34->1.36 (from "1.34.1" to "1.36.0")')
      expect(step?.error?.message).toContain('one minor at a time: TO=v1.35.x, then TO=v1.36.x')
      expect(step?.error?.message).toContain('wrkr-1: version of Kubernetes 1.36.0 is too new to be used with Talos 1.12.11')
      expect(step?.error?.hint).toContain('upgrade:talos')
      expect(step?.error?.hint).toContain('TALOS_VERSION=v1.13.x')
      // the nodes fail with the pre-check's cause; the call was never made
      for (const n of NODES) expect(result(n).error?.kind).toBe('version-skew')
      const upgrade = cluster
        .report()
        .phases.find((p) => p.name === 'upgrade-k8s')
        ?.steps?.find((s) => s.name === 'upgrade-k8s')
      expect(upgrade?.status).toBe('not-run')
      await upgradeK8s(cluster, 1, { TO: 'v1.33.0' })
      expect(failedStep()?.error?.message).toContain('v1.34.1 already runs: Kubernetes is never downgraded')
      expect(applies(from)).toEqual([])
      await expectAt('v1.34.1')
    },
    CASE_TIMEOUT,
  )

  inTurn(
    'an API server not Ready is refused; once it is back, the printed hint run in a fresh shell upgrades every node and component to v1.35.0',
    async () => {
      cluster.sim.addFault({ kind: 'static-pod', node: 'cp-2', pod: 'kube-apiserver' })
      const from = cluster.calls().length
      const r = await upgradeK8s(cluster, 1, { TO: 'v1.35.0' })
      expect(failedStep()?.error?.kind).toBe('k8s-upgrade')
      expect(failedStep()?.error?.message).toMatch(/kube-apiserver-cp-2 is not Ready/)
      expect(applies(from)).toEqual([])
      const out = await hintRecovers(r.stderr, 'upgrade-k8s/pre-check', 'v1.35.0', () => cluster.sim.clearFault(null, 'static-pod'))
      // the tool's lines as per-node progress, plain in a pipe
      expect(out).toMatch(/cp-2: kube-apiserver v1\.34\.1 -> 1\.35\.0: waiting for kube-apiserver pod update/)
      expect(out).toMatch(/wrkr-1: kubelet 1\.34\.1 -> 1\.35\.0: waiting for kubelet restart/)
      // upgrade-k8s's manifest diffs (the bootstrap token's secret among them) are never shown
      expect(out).not.toMatch(/token-secret|^\S* ?\+apiVersion/m)
      expect(out).toContain('the generated configs must now carry kubernetesVersion v1.35.0 (talconfig.yaml / topf.yaml')
      for (const n of NODES) {
        expect(result(n).status, n).toBe('ok')
        expect(result(n).detail).toContain('kubelet v1.34.1 -> v1.35.0')
        expect(result(n).detail).toContain('Talos v1.12.11')
      }
      expect(result('cp-2').detail).toContain('kube-scheduler v1.34.1 -> v1.35.0')
      await expectAt('v1.35.0')
      // every change went through NO_REBOOT applies: three components and kube-proxy per control plane, the kubelet everywhere
      const done = applies(from).filter((c) => c.outcome === 'ok')
      expect(done.filter((c) => c.node === 'cp-1')).toHaveLength(5)
      expect(done.filter((c) => c.node === 'wrkr-1')).toHaveLength(1)
    },
    CASE_TIMEOUT,
  )

  inTurn(
    'a rerun is a plain rerun: upgrade-k8s skips what is at TO',
    async () => {
      const from = cluster.calls().length
      await upgradeK8s(cluster, 0, { TO: 'v1.35.0' })
      const pre = cluster
        .report()
        .phases.find((p) => p.name === 'upgrade-k8s')
        ?.steps?.find((s) => s.name === 'pre-check')
      expect(pre?.detail).toContain('every node and component already runs v1.35.0')
      for (const n of NODES) expect(result(n).detail).toMatch(/^at v1\.35\.0, Ready: kubelet v1\.35\.0;/)
      // only kube-proxy's patch applies a config (upgrade-k8s has no skip for it), changing nothing
      expect(applies(from).map((c) => c.node)).toEqual(['cp-1', 'cp-2'])
      await expectAt('v1.35.0')
    },
    CASE_TIMEOUT,
  )

  ;(has113 ? inTurn : it.skip)(
    'with talosctl v1.13.9 (TALOSCTL): the rerun goes through its own client; TO=v1.36.0 is within its path but outside Talos 1.12',
    async () => {
      const from = cluster.calls().length
      const r = await upgradeK8s(cluster, 0, { TO: 'v1.35.0', TALOSCTL: TALOSCTL_113 })
      expect(r.stdout).toContain('talosctl v1.13.9')
      expect(r.stdout + r.stderr).toMatch(/cp-1: pre-check: Talos version 1\.12\.11 is compatible with Kubernetes version 1\.35\.0/)
      for (const n of NODES) expect(result(n).detail).toMatch(/^at v1\.35\.0, Ready: /)
      await upgradeK8s(cluster, 1, { TO: 'v1.36.0', TALOSCTL: TALOSCTL_113 })
      const message = failedStep()?.error?.message ?? ''
      expect(message).toContain('cp-1: version of Kubernetes 1.36.0 is too new to be used with Talos 1.12.11')
      expect(message).not.toContain('upgrades Kubernetes to')
      expect(failedStep()?.error?.hint).toContain('TALOS_VERSION=v1.13.x')
      // the rerun's kube-proxy patch only (upgrade-k8s has no skip for it), nothing from the refused run
      expect(applies(from).map((c) => c.node)).toEqual(['cp-1', 'cp-2'])
      await expectAt('v1.35.0')
    },
    CASE_TIMEOUT,
  )

  inTurn(
    'v1.35.0 -> v1.35.1 with a kubelet that never comes back: upgrade-k8s waits without a word, the watchdog cuts it (stuck), naming the kubelet on wrkr-1',
    async () => {
      kubeletNeverBackAt('v1.35.1')
      const from = cluster.calls().length
      const r = await upgradeK8s(cluster, 1, { TO: 'v1.35.1' }, [...FAST, '--stall-timeout', CUT])
      const step = failedStep()
      expect(step?.name).toBe('upgrade-k8s')
      expect(step?.error?.kind).toBe('stuck')
      expect(step?.error?.message).toContain(`talosctl upgrade-k8s printed nothing for ${CUT} and was cut (at kubelet on wrkr-1)`)
      expect(step?.error?.hint).toContain('TO=v1.35.1')
      expect(r.stdout).toMatch(/wrkr-1: kubelet 1\.35\.0 -> 1\.35\.1: waiting for kubelet restart/)
      // the control planes were done before the cut; the worker's kubelet is not back
      const state = await kubeState()
      for (const image of Object.values(state.pods)) expect(image.endsWith(':v1.35.1'), image).toBe(true)
      expect(state.kubelets['wrkr-1']).toBe('v1.35.0')
      expect(applies(from).filter((c) => c.outcome === 'ok' && c.node === 'wrkr-1')).toHaveLength(1)
    },
    CASE_TIMEOUT,
  )

  inTurn(
    "wrkr-1's kubelet still down: the rerun is refused by the pre-check naming it, nothing patched; once it runs, the printed command resumes, patching nothing the cut run did",
    async () => {
      const from = cluster.calls().length
      const r = await upgradeK8s(cluster, 1, { TO: 'v1.35.1' })
      const step = failedStep()
      expect(step?.name).toBe('pre-check')
      expect(step?.error?.kind).toBe('k8s-upgrade')
      // upgrade-k8s would start wrkr-1's kubelet step from its Service resource, absent while it crash-loops
      expect(step?.error?.message).toMatch(
        /^the upgrade is refused, nothing was changed: wrkr-1: its kubelet is not running and healthy \(Waiting: Error running Containerd\(kubelet\), going to restart forever/,
      )
      expect(step?.error?.hint).toContain(`-n ${IP['wrkr-1']} service kubelet`)
      expect(applies(from)).toEqual([])
      let mark = 0
      const out = await hintRecovers(r.stderr, 'upgrade-k8s/pre-check', 'v1.35.1', () => {
        cluster.sim.clearFault('wrkr-1', 'kubelet-crashloop')
        mark = cluster.calls().length
      })
      // the kubelet spec was already at v1.35.1: upgrade-k8s waits only for the Node to post it
      expect(out).toMatch(/wrkr-1: kubelet -> 1\.35\.1: waiting for node update/)
      expect(out).not.toMatch(/waiting for kubelet restart/)
      expect(applies(mark).map((c) => c.node)).toEqual(['cp-1', 'cp-2'])
      // its Node may have posted v1.35.1 before this run's pre-check read it
      expect(result('wrkr-1').detail).toMatch(/^at v1\.35\.1, Ready: kubelet (?:v1\.35\.0 -> )?v1\.35\.1;/)
      await expectAt('v1.35.1')
    },
    CASE_TIMEOUT,
  )

  inTurn(
    'the deadline (BOOTSTRAP_K8S_UPGRADE_TIMEOUT) cuts upgrade-k8s: kind timeout, no talosctl left running; the printed command finishes v1.35.2',
    async () => {
      kubeletNeverBackAt('v1.35.2')
      const r = await upgradeK8s(cluster, 1, { TO: 'v1.35.2' }, FAST, { BOOTSTRAP_K8S_UPGRADE_TIMEOUT: CUT })
      const step = failedStep()
      expect(step?.error?.kind).toBe('timeout')
      expect(step?.error?.message).toMatch(new RegExp(`^talosctl upgrade-k8s did not finish within ${CUT} and was cut \\(at `))
      const left = execFileSync('ps', ['-eo', 'args='], { encoding: 'utf8' })
        .split('\n')
        .filter((l) => l.includes('upgrade-k8s') && l.includes(cluster.clusterDir))
      expect(left).toEqual([])
      await hintRecovers(r.stderr, 'upgrade-k8s/upgrade-k8s', 'v1.35.2', () => cluster.sim.clearFault('wrkr-1', 'kubelet-crashloop'))
      await expectAt('v1.35.2')
    },
    CASE_TIMEOUT,
  )

  inTurn(
    "the VIP down: the run reads through a control plane's own API server and gives it to upgrade-k8s as --endpoint; a failure's kubectl hints go there too and work as printed",
    async () => {
      cluster.sim.breakVip()
      try {
        const direct = `https://${IP['cp-1']}:6443`
        const through = `the endpoint https://${R}.10:6443 does not answer: reading through cp-1's own API server, and upgrade-k8s gets --endpoint ${direct}`
        // a deadline no run can meet: upgrade-k8s is cut at once, and its hint names kubectl commands
        const cut = await upgradeK8s(cluster, 1, { TO: 'v1.35.2' }, FAST, { BOOTSTRAP_K8S_UPGRADE_TIMEOUT: '1ms' })
        expect(cut.stdout).toContain(through)
        expect(failedStep()?.error?.kind).toBe('timeout')
        const { hint } = hintOf(cut.stderr, 'upgrade-k8s/upgrade-k8s')
        const kubectls = [...hint.matchAll(/`(kubectl [^`]+)`/g)].map((m) => m[1]!)
        expect(kubectls).toHaveLength(2)
        for (const command of kubectls) {
          expect(command).toContain(` --server ${direct} `)
          // as printed, in a fresh shell: through cp-1's API server, while the kubeconfig's endpoint is down
          const shown = await runInFreshShell(cluster, command)
          expect(shown.code, `${command}\n${shown.stderr}`).toBe(0)
          expect(shown.stdout).toMatch(command.endsWith('get nodes -o wide') ? /^wrkr-1 +Ready /m : /^kube-apiserver-cp-1 +1\/1 +Running /m)
          // without it, the same command goes to the endpoint and fails: the flag is what makes it work
          const viaEndpoint = await runInFreshShell(cluster, `${command.replace(` --server ${direct}`, '')} --request-timeout=5s`)
          expect(viaEndpoint.code, viaEndpoint.stdout).not.toBe(0)
        }

        // the deadline gone (the hint's command does not carry it), as printed: the run through cp-1 finishes
        const out = await hintRecovers(cut.stderr, 'upgrade-k8s/upgrade-k8s', 'v1.35.2', () => undefined)
        expect(out).toContain(through)
        const call = cluster
          .report()
          .phases.find((p) => p.name === 'upgrade-k8s')
          ?.steps?.find((s) => s.name === 'upgrade-k8s')
        expect(call?.detail).toBe(`talosctl upgrade-k8s --to 1.35.2 through cp-1 with --endpoint ${direct}: done`)
        for (const n of NODES) expect(result(n).detail).toMatch(/^at v1\.35\.2, Ready: kubelet v1\.35\.2;/)
        expect(cluster.report().versions?.kubernetes).toEqual({ 'v1.35.2': NODES })
      } finally {
        cluster.sim.fixVip()
      }
    },
    CASE_TIMEOUT,
  )

  inTurn(
    'a stale control-plane pod (its mirror pod runs another image than its config) is refused by the pre-check, naming the pod and what to wait for; nothing changed',
    async () => {
      // the state a change not settled yet leaves (the kubelet has not replaced the mirror pod): the
      // mirror pod's image set back a version, its config (KubeSchedulerConfig) still at v1.35.2
      const pod = 'kube-scheduler-cp-2'
      const setImage = async (tag: string): Promise<void> => {
        const r = await cluster.kubectl([
          '-n',
          'kube-system',
          'set',
          'image',
          `pod/${pod}`,
          `kube-scheduler=registry.k8s.io/kube-scheduler:${tag}`,
        ])
        expect(r.code, r.stderr).toBe(0)
      }
      await setImage('v1.35.0')
      try {
        const from = cluster.calls().length
        const r = await upgradeK8s(cluster, 1, { TO: 'v1.35.2' })
        const step = failedStep()
        expect(step?.name).toBe('pre-check')
        expect(step?.error?.kind).toBe('k8s-upgrade')
        expect(step?.error?.message).toBe(`the upgrade is refused, nothing was changed: ${pod} runs v1.35.0, its config says v1.35.2`)
        expect(step?.error?.hint).toMatch(
          new RegExp(
            `^wait until ${pod} runs its config's image \\(\`kubectl [^\`]*-n kube-system get pod ${pod}\`, \`talosctl [^\`]*-n ${IP['cp-2']!.replace(/\./g, '\\.')} get staticpodstatus\`\\), then run: .* upgrade:k8s CLUSTER_DIR=\\S+ TO=v1\\.35\\.2$`,
          ),
        )
        expect(r.stderr).toContain(`${pod} runs v1.35.0, its config says v1.35.2`)
        // talosctl upgrade-k8s never ran: no node took a config, the step is not-run
        expect(applies(from)).toEqual([])
        const call = cluster
          .report()
          .phases.find((p) => p.name === 'upgrade-k8s')
          ?.steps?.find((s) => s.name === 'upgrade-k8s')
        expect(call?.status).toBe('not-run')
        for (const n of NODES) expect(result(n).error?.kind, n).toBe('k8s-upgrade')
        expect((await kubeState()).pods[pod]).toBe('registry.k8s.io/kube-scheduler:v1.35.0')
      } finally {
        await setImage('v1.35.2')
      }
      await expectAt('v1.35.2')
    },
    CASE_TIMEOUT,
  )

  inTurn(
    "refused on the upgraded cluster: TO=v1.36.0 is beyond talosctl v1.12.11's path; a control plane with a staged config pending",
    async () => {
      const from = cluster.calls().length
      await upgradeK8s(cluster, 1, { TO: 'v1.36.0' })
      expect(failedStep()?.error?.message).toContain('talosctl v1.12.11 upgrades Kubernetes to 1.35 at most; use talosctl ≥ v1.13')
      expect(failedStep()?.error?.hint).toContain('use talosctl v1.13 or newer')

      // cp-2's generated config with one more label, staged: its next boot loads it
      const docs = readFileSync(join(cluster.clusterDir, 'clusterconfig', 'e2e-cp-2.yaml'), 'utf8').split(/^---$/m)
      const main = docs.findIndex((d) => !/^kind:/m.test(d) && /^machine:/m.test(d))
      const cfg = parse(docs[main]!) as { machine: { nodeLabels?: Record<string, string> } }
      cfg.machine.nodeLabels = { ...cfg.machine.nodeLabels, staged: 'yes' }
      docs[main] = `\n${stringify(cfg)}`
      const st = await talosctl(cluster.sim, [
        'apply-config',
        '--mode',
        'staged',
        '-f',
        configFile(cluster.sim, 'staged', docs.join('---')),
        ...at(IP['cp-2']!),
      ])
      expect(st.code, st.stderr).toBe(0)
      await upgradeK8s(cluster, 1, { TO: 'v1.35.0' })
      expect(failedStep()?.error?.message).toContain('cp-2 has a staged or try config pending')
      expect(failedStep()?.error?.hint).toContain('cluster:apply')
      expect(applies(from).filter((c) => c.outcome === 'ok' && c.node !== 'cp-2')).toEqual([])
      // the staged config is still what cp-2's next boot loads
      const persistent = await talosctl(cluster.sim, ['get', 'machineconfig', 'persistent', '-o', 'jsonpath={.spec}', ...at(IP['cp-2']!)])
      expect(persistent.stdout).toMatch(/\bstaged"?:\s*"?yes/)
    },
    CASE_TIMEOUT,
  )
})

describe.skipIf(!has113)('task upgrade:k8s on Talos v1.13 nodes with talosctl v1.13.9', SIDE_BY_SIDE, () => {
  const shared = sharedCluster(
    '127.238.7',
    {
      cps: 1,
      workers: 1,
      image: 'disk',
      speed: 600,
      talosVersion: 'v1.13.9',
      talosctl: TALOSCTL_113,
      kubernetesVersion: 'v1.35.0',
    },
    FAST,
  )

  inTurn(
    'v1.35.0 -> v1.36.0, a minor beyond the v1.12 client: every node and component at v1.36.0',
    async () => {
      const from = shared().calls().length
      const r = await upgradeK8s(shared(), 0, { TO: 'v1.36.0' })
      expect(r.stdout).toContain('talosctl v1.13.9')
      const out = r.stdout + r.stderr
      expect(out).toMatch(/cp-1: kube-apiserver v?1\.35\.0 -> 1\.36\.0: waiting for kube-apiserver pod update/)
      expect(out).toMatch(/wrkr-1: kubelet v?1\.35\.0 -> 1\.36\.0: waiting for kubelet restart/)
      const report = shared().report()
      for (const n of ['cp-1', 'wrkr-1']) {
        expect(nodeIn(report, 'upgrade-k8s', n).detail, n).toMatch(/^at v1\.36\.0, Ready: kubelet v1\.35\.0 -> v1\.36\.0;/)
        expect(nodeIn(report, 'upgrade-k8s', n).detail, n).toContain('Talos v1.13.9')
      }
      for (const c of COMPONENTS) expect(nodeIn(report, 'upgrade-k8s', 'cp-1').detail).toContain(`${c} v1.35.0 -> v1.36.0`)
      expect(report.versions?.kubernetes).toEqual({ 'v1.36.0': ['cp-1', 'wrkr-1'] })
      const done = shared()
        .calls()
        .slice(from)
        .filter((c) => c.call === 'apply' && c.outcome === 'ok')
      expect(done.filter((c) => c.node === 'wrkr-1')).toHaveLength(1)
    },
    CASE_TIMEOUT,
  )
})

// Every upgrade:talos failure hint runs as printed (issue 31, lib/cli/hints.ts; the bootstrap kinds
// are test/e2e/hints.test.ts): fail an upgrade, take the hint from stderr, clear the cause, run the
// hint's command verbatim in a fresh shell (PATH and HOME only, another directory, no CLUSTER_DIR):
// it must finish the upgrade. One simulated cluster of three control planes and a worker (real
// talosctl v1.12.11: the legacy Upgrade, Talos's own etcd check), each case upgrading the next node
// to v1.13.9. Range 127.249.2.0/24.
import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { hintOf, nodeIn, runInFreshShell, sharedCluster, waitFor } from './harness.js'
import { fastWith } from '../faults/helpers.js'
import { at, talosctl } from '../sim/helpers.js'

const R = '127.249.2'
const IP: Record<string, string> = { 'cp-1': `${R}.11`, 'cp-2': `${R}.12`, 'cp-3': `${R}.13`, 'wrkr-1': `${R}.21` }
const CASE_TIMEOUT = 420_000
const TARGET = 'v1.13.9'
/** faults/helpers.ts's waits, with room for a loaded machine: the cases wait for no timeout to run out but the gate command's */
const SLOW_OK = fastWith('--ready-timeout', '60s', fastWith('--call-timeout', '20s'))
const FLAGS = [...SLOW_OK, '--upgrade-timeout', '2m']

describe('every upgrade:talos hint runs as printed once its cause is gone', () => {
  const shared = sharedCluster(R, { cps: 3, workers: 1, image: 'disk', speed: 60, kube: 'model' }, SLOW_OK)
  const escaped = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  async function tag(name: string): Promise<string> {
    const r = await talosctl(shared().sim, ['version', '--short', ...at(IP[name]!)])
    return /Server:\s+NODE:\s+\S+\s+Tag:\s+(\S+)/.exec(r.stdout)?.[1] ?? `${r.stdout}${r.stderr}`
  }
  async function kubeletVersion(name: string): Promise<string> {
    const r = await shared().kubectl(['get', 'node', name, '-o', 'jsonpath={.status.nodeInfo.kubeletVersion}'])
    return r.stdout.trim()
  }
  /** the hint printed for `who`: it names upgrade:talos with this cluster, the target and `vars`, and runs recovered in a fresh shell */
  async function hintRecovers(stderr: string, who: string, vars: string, clear: () => Promise<void> | void): Promise<void> {
    const { command } = hintOf(stderr, who)
    expect(command).toMatch(
      new RegExp(`^task -d \\S+ upgrade:talos CLUSTER_DIR=${escaped(shared().clusterDir)} TALOS_VERSION=${escaped(TARGET)}${vars}$`),
    )
    await clear()
    const recovered = await runInFreshShell(shared(), command)
    expect(recovered.code, `${command}\n${recovered.stdout}\n${recovered.stderr}`).toBe(0)
    expect(shared().report().ok).toBe(true)
  }

  it(
    'version-skew: a kubelet too old for the target; once Kubernetes is in range the same upgrade runs',
    async () => {
      const dir = join(shared().clusterDir, 'clusterconfig')
      const file = join(dir, readdirSync(dir).find((f) => f.endsWith('-wrkr-1.yaml')) ?? '')
      const text = readFileSync(file, 'utf8')
      expect(text).toContain('ghcr.io/siderolabs/kubelet:v1.35.0')
      const old = join(shared().dir, 'wrkr-1-kubelet-1.30.yaml')
      writeFileSync(old, text.replace('ghcr.io/siderolabs/kubelet:v1.35.0', 'ghcr.io/siderolabs/kubelet:v1.30.14'))
      const apply = async (f: string, version: string): Promise<void> => {
        const r = await talosctl(shared().sim, ['apply-config', ...at(IP['wrkr-1']!), '--mode', 'no-reboot', '-f', f])
        expect(r.code, r.stderr).toBe(0)
        const deadline = Date.now() + 60_000
        while ((await kubeletVersion('wrkr-1')) !== version && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500))
        expect(await kubeletVersion('wrkr-1')).toBe(version)
      }
      await apply(old, 'v1.30.14')

      const failed = await shared().task('upgrade:talos', { TALOS_VERSION: TARGET, NODES: 'wrkr-1' }, FLAGS)
      expect(failed.code, failed.stdout + failed.stderr).toBe(1)
      expect(nodeIn(shared().report(), 'upgrade-talos', 'wrkr-1').error?.kind).toBe('version-skew')
      const { hint } = hintOf(failed.stderr, 'upgrade-talos/plan')
      expect(hint).toMatch(/^nothing was touched: upgrade Kubernetes first/)
      expect(failed.stderr).toMatch(/upgrade:k8s CLUSTER_DIR=\S+ TO=v1\.31\.x/)
      expect(await tag('wrkr-1')).toBe('v1.12.11')
      // the cause gone: the operator's configs (Kubernetes v1.35.0) applied again
      await hintRecovers(failed.stderr, 'upgrade-talos/plan', ' NODES=wrkr-1', () => apply(file, 'v1.35.0'))
      expect(await tag('wrkr-1')).toBe(TARGET)
    },
    CASE_TIMEOUT,
  )

  // a fault on the node itself: the upgrade fails named, the fault cleared, the hint upgrades the node
  const nodeFaults = [
    { kind: 'image-missing', node: 'cp-1', fault: 'image-missing', what: 'the node could not pull the installer', state: 'cordoned' },
    { kind: 'rolled-back', node: 'cp-2', fault: 'upgrade-rollback', what: 'the new image did not boot', state: 'rolled back' },
  ] as const
  for (const row of nodeFaults) {
    it(
      `${row.kind}: ${row.what}; once the fault is gone, the hint upgrades it`,
      async () => {
        shared().sim.addFault({ node: row.node, kind: row.fault })
        const failed = await shared().task('upgrade:talos', { TALOS_VERSION: TARGET, NODES: row.node }, FLAGS)
        expect(failed.code, failed.stdout + failed.stderr).toBe(1)
        expect(nodeIn(shared().report(), 'upgrade-talos', row.node).error?.kind).toBe(row.kind)
        expect(nodeIn(shared().report(), 'upgrade-talos', row.node).day2?.state).toBe(row.state)
        expect(await tag(row.node)).toBe('v1.12.11')
        await hintRecovers(failed.stderr, row.node, ` NODES=${row.node}`, () => shared().sim.clearFault(row.node, row.fault))
        expect(await tag(row.node)).toBe(TARGET)
      },
      CASE_TIMEOUT,
    )
  }

  it(
    "upgrade-refused: Talos's own etcd check finds a member gone after the quorum gate passed; once it is back, the hint upgrades the node",
    async () => {
      // the Upgrade call to cp-3 waits (after the gate, the cordon and the drain) until a member is cut off
      const waiting = join(shared().dir, 'upgrade-waiting')
      const go = join(shared().dir, 'upgrade-go')
      const wrapper = join(shared().dir, 'talosctl-held-upgrade')
      writeFileSync(
        wrapper,
        `#!/bin/sh\ncase "$*" in "upgrade "*"-n ${IP['cp-3']} "*) touch ${waiting}; while [ ! -e ${go} ]; do sleep 0.1; done ;; esac\nexec ${join(shared().sim.binDir, 'talosctl')} "$@"\n`,
      )
      chmodSync(wrapper, 0o755)
      // a member that is neither cp-3 nor etcd's leader (no election in the way of cp-3's own reads)
      const status = await talosctl(shared().sim, [
        'etcd',
        'status',
        '-e',
        IP['cp-3']!,
        '-n',
        ['cp-1', 'cp-2', 'cp-3'].map((n) => IP[n]).join(','),
      ])
      const leaderIp = status.stdout
        .split('\n')
        .slice(1)
        .map((l) => l.trim().split(/\s{2,}/))
        .find((c) => c[1] && c[1] === c[4])?.[0]
      const victim = IP['cp-1'] === leaderIp ? 'cp-2' : 'cp-1'
      const run = shared().task('upgrade:talos', { TALOS_VERSION: TARGET, NODES: 'cp-3' }, FLAGS, { TALOSCTL: wrapper })
      await waitFor(() => existsSync(waiting), 240_000, 'the upgrade call to cp-3')
      shared().sim.addFault({ node: victim, on: 'any', kind: 'unreachable' })
      writeFileSync(go, '')
      const failed = await run
      expect(failed.code, failed.stdout + failed.stderr).toBe(1)
      const cp3 = nodeIn(shared().report(), 'upgrade-talos', 'cp-3')
      expect(cp3.error?.kind).toBe('upgrade-refused')
      expect(cp3.day2?.state).toBe('cordoned')
      expect(cp3.error?.message).toMatch(/^cordoned: .*error validating etcd for upgrade: etcd member \S+ is not healthy/)
      expect(await tag('cp-3')).toBe('v1.12.11')
      await hintRecovers(failed.stderr, 'cp-3', ' NODES=cp-3', () => shared().sim.clearFault(victim, 'unreachable'))
      expect(await tag('cp-3')).toBe(TARGET)
      const node = JSON.parse((await shared().kubectl(['get', 'node', 'cp-3', '-o', 'json'])).stdout) as {
        spec?: { unschedulable?: boolean }
      }
      expect(node.spec?.unschedulable).toBeFalsy()
    },
    CASE_TIMEOUT,
  )
})

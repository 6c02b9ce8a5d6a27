// upgrade:talos's plan checks a control plane's static pods against the target's Kubernetes range,
// not only its kubelet (docs/day2-design.md 2.6 Refusals): after an upgrade:k8s that stopped part-way
// they run another version than the kubelet. Here cp-1's kube-apiserver is put on v1.30.14 (too old
// for Talos v1.13) while its kubelet stays on v1.35.0: the plan refuses, naming the pod, and touches
// nothing; with the apiserver back on v1.35.0 the same plan passes, and the hint's command, run as
// printed, upgrades the node. One control plane (real talosctl v1.12.11). Range 127.248.4.0/24.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { hintOf, runInFreshShell, sharedCluster } from './harness.js'
import { fastWith } from '../faults/helpers.js'
import { at, talosctl } from '../sim/helpers.js'

const R = '127.248.4'
const CASE_TIMEOUT = 240_000
const TARGET = 'v1.13.9'
const SLOW_OK = fastWith('--ready-timeout', '60s', fastWith('--call-timeout', '20s'))

describe('upgrade:talos plan: the static pods', () => {
  const shared = sharedCluster(R, { cps: 1, workers: 0, image: 'disk', speed: 60, kube: 'model' }, SLOW_OK)
  const apiserverImage = async (): Promise<string> =>
    (
      await shared().kubectl(['-n', 'kube-system', 'get', 'pod', 'kube-apiserver-cp-1', '-o', 'jsonpath={.spec.containers[0].image}'])
    ).stdout.trim()
  /** cp-1's config with its kube-apiserver image at `version`, applied live; waited for until its mirror pod runs it */
  async function apiserverAt(version: string): Promise<void> {
    const dir = join(shared().clusterDir, 'clusterconfig')
    const original = join(dir, readdirSync(dir).find((f) => f.endsWith('-cp-1.yaml')) ?? '')
    const file = join(shared().dir, `cp-1-apiserver-${version}.yaml`)
    writeFileSync(
      file,
      readFileSync(original, 'utf8').replace('registry.k8s.io/kube-apiserver:v1.35.0', `registry.k8s.io/kube-apiserver:${version}`),
    )
    const r = await talosctl(shared().sim, ['apply-config', ...at(`${R}.11`), '--mode', 'no-reboot', '-f', file])
    expect(r.code, r.stderr).toBe(0)
    const deadline = Date.now() + 60_000
    while ((await apiserverImage()) !== `registry.k8s.io/kube-apiserver:${version}` && Date.now() < deadline)
      await new Promise((res) => setTimeout(res, 500))
    expect(await apiserverImage()).toBe(`registry.k8s.io/kube-apiserver:${version}`)
  }

  it(
    'a kube-apiserver outside the target range is refused by name, nothing touched; back in range, the plan passes and the hint, run as printed, upgrades it',
    async () => {
      await apiserverAt('v1.30.14')
      const from = shared().calls().length
      // --accept-downtime: the only control plane; the hint's rerun repeats it
      const refused = await shared().task('upgrade:talos', { TALOS_VERSION: TARGET, DRY_RUN: 'true' }, [...SLOW_OK, '--accept-downtime'])
      expect(refused.code, refused.stdout + refused.stderr).toBe(1)
      expect(refused.stderr).toContain(
        'cp-1: kube-apiserver on cp-1 runs v1.30.14: version of Kubernetes 1.30.14 is too old to be used with Talos 1.13.9: upgrade Kubernetes first',
      )
      const { hint, command } = hintOf(refused.stderr, 'upgrade-talos/plan')
      expect(hint).toMatch(/^nothing was touched: upgrade Kubernetes first/)
      expect(refused.stderr).toMatch(/upgrade:k8s CLUSTER_DIR=\S+ TO=v1\.31\.x/)
      expect(
        shared()
          .calls()
          .slice(from)
          .filter((c) => c.call === 'upgrade'),
      ).toEqual([])

      await apiserverAt('v1.35.0')
      const planned = await shared().task('upgrade:talos', { TALOS_VERSION: TARGET, DRY_RUN: 'true' }, SLOW_OK)
      expect(planned.code, planned.stdout + planned.stderr).toBe(0)
      expect(planned.stdout + planned.stderr).toMatch(
        /cp-1 \(127\.248\.4\.11, controlplane, etcd leader: last\): v1\.12\.11 -> ghcr\.io\/siderolabs\/installer:v1\.13\.9/,
      )
      // the cause cleared, the hint's last command as printed, in a fresh shell: the upgrade itself
      expect(command).toMatch(/ upgrade:talos CLUSTER_DIR=\S+ TALOS_VERSION=v1\.13\.9 -- --accept-downtime$/)
      const upgraded = await runInFreshShell(shared(), command)
      expect(upgraded.code, `${command}\n${upgraded.stdout}\n${upgraded.stderr}`).toBe(0)
      const tag = await talosctl(shared().sim, ['version', '--short', ...at(`${R}.11`)])
      expect(/Server:\s+NODE:\s+\S+\s+Tag:\s+(\S+)/.exec(tag.stdout)?.[1]).toBe(TARGET)
    },
    CASE_TIMEOUT,
  )
})

// Issue 31 (Tests): task upgrade:talos of a cluster of 3 control planes and 2 workers on Talos v1.12.11
// to v1.13.9 with the real talosctl v1.13.9 (TALOSCTL; `task tools` builds it into
// .tools/talosctl-v1.13.9), which upgrades v1.12 nodes through the legacy MachineService Upgrade
// (its LifecycleService needs a v1.13 node). The cluster is booted with the default talosctl
// v1.12.11, on sim/kube (its drains go through pods/eviction too; test/e2e/upgrade-talos.test.ts runs
// the same upgrade on the real control plane). Range 127.253.12.0/24.
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect } from 'vitest'
import { inTurn } from '../support/in-turn.js'
import { CLUSTER_CASE_TIMEOUT, E2eCluster, nodeIn } from './harness.js'
import { fastWith } from '../faults/helpers.js'
import { at, talosctl } from '../sim/helpers.js'
import { downWindows, expectGateBeforeEachNode, gateMarks, markingGate, overlapping, watchingDown } from './rolling-order.js'

const R = '127.253.12'
const IP: Record<string, string> = {
  'cp-1': `${R}.11`,
  'cp-2': `${R}.12`,
  'cp-3': `${R}.13`,
  'wrkr-1': `${R}.21`,
  'wrkr-2': `${R}.22`,
}
const CPS = ['cp-1', 'cp-2', 'cp-3']
const WORKERS = ['wrkr-1', 'wrkr-2']
const TARGET = 'v1.13.9'
const TALOSCTL_113 = resolve('.tools/talosctl-v1.13.9/talosctl')
/** as test/e2e/upgrade-talos.test.ts: a real API server's 60 s, and 2 min for talosctl upgrade's own wait */
const FAST = [
  ...fastWith('--bootstrap-timeout', '60s').map((v, i, all) => (all[i - 1] === '--ready-timeout' ? '60s' : v)),
  '--upgrade-timeout',
  '2m',
]

describe.skipIf(!existsSync(TALOSCTL_113))('task upgrade:talos v1.12.11 -> v1.13.9 with TALOSCTL=talosctl v1.13.9', () => {
  let cluster: E2eCluster
  /** the version a node runs, as talosctl v1.13.9 reads it */
  async function tag(name: string): Promise<string> {
    const r = await talosctl(cluster.sim, ['version', '--short', ...at(IP[name]!)], { bin: TALOSCTL_113 })
    return /Server:\s+NODE:\s+\S+\s+Tag:\s+(\S+)/.exec(r.stdout)?.[1] ?? `${r.stdout}${r.stderr}`
  }

  beforeAll(async () => {
    cluster = await E2eCluster.start(R, { cps: 3, workers: 2, image: 'disk', speed: 60, kube: 'model' })
    const boot = await cluster.task('bootstrap:talos', {}, FAST)
    expect(boot.code, boot.stdout + boot.stderr).toBe(0)
  }, CLUSTER_CASE_TIMEOUT)
  afterAll(async () => {
    await cluster?.stop()
  })

  inTurn(
    'every node at v1.13.9 through the legacy Upgrade; control planes one at a time (never two down), the gate before each node; none left cordoned',
    async () => {
      const marks = join(cluster.dir, 'gate-marks')
      const from = cluster.calls().length
      const { value: r, most } = await watchingDown(cluster.sim, CPS, () =>
        cluster.task('upgrade:talos', { TALOS_VERSION: TARGET, GATE_COMMAND: markingGate(marks), TALOSCTL: TALOSCTL_113 }, FAST),
      )
      expect(r.code, r.stdout + r.stderr).toBe(0)
      expect(r.stdout).toMatch(/^talosctl v1\.13\.9, /m)
      for (const name of Object.keys(IP)) {
        expect(await tag(name)).toBe(TARGET)
        expect(nodeIn(cluster.report(), 'upgrade-talos', name).detail).toMatch(/^upgraded v1\.12\.11 -> v1\.13\.9; .*gate command passed$/)
      }
      const calls = cluster.calls().slice(from)
      // v1.12 nodes: the client's legacy path, one Upgrade call per node, no LifecycleService call answered
      expect(calls.filter((c) => c.call === 'lifecycle' && c.outcome === 'ok')).toEqual([])
      const sent = calls.filter((c) => c.call === 'upgrade').map((c) => c.node ?? '')
      expect([...sent].sort()).toEqual(Object.keys(IP))
      const cpsSent = sent.filter((n) => CPS.includes(n))
      expect(sent.slice(0, 3)).toEqual(cpsSent)

      // the control planes never two down: in process (the stages), and from the calls log (each one's
      // Upgrade call to the first answer from its new boot)
      expect(most, r.stdout + r.stderr).toBe(1)
      const windows = downWindows(calls, CPS)
      expect(windows.map((w) => w.node)).toEqual(cpsSent)
      expect(overlapping(windows)).toEqual([])

      // the gate before each node: before the first, after each control plane in turn; the workers
      // (bootstrap.yaml: concurrency 4) one batch after the last control plane's gate
      const run = gateMarks(marks)
      expect(run.slice(0, 4).map((m) => m.node)).toEqual(['', ...cpsSent])
      expect(new Set(run.slice(4).map((m) => m.node))).toEqual(new Set(WORKERS))
      expectGateBeforeEachNode(calls, run, [...cpsSent.map((cp) => [cp]), WORKERS])

      // nothing left cordoned, no mark of ours left
      const nodes = JSON.parse((await cluster.kubectl(['get', 'nodes', '-o', 'json'])).stdout) as {
        items: { metadata: { name: string; annotations?: Record<string, string> }; spec?: { unschedulable?: boolean } }[]
      }
      expect(nodes.items.map((n) => n.metadata.name).sort()).toEqual(Object.keys(IP))
      for (const n of nodes.items) {
        expect(n.spec?.unschedulable, n.metadata.name).toBeFalsy()
        expect(n.metadata.annotations?.['talos-bootstrap.dev/cordoned'], n.metadata.name).toBeUndefined()
      }
    },
    300_000,
  )
})

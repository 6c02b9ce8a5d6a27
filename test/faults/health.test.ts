// Ready means at least what `talosctl health` means (issue 30): wait-ready ends with its checks, in
// its order, each a step with per-node results; each failure path of the simulator (sim/health-faults.js)
// is named with its component, node and reason, with a hint that runs. Rows on 127.250.<row>.0/24.
import { describe, expect, it } from 'vitest'
import { hintOf, nodeIn, runInFreshShell } from '../e2e/harness.js'
import { fastWith, ROW_TIMEOUT, stepIn, withCluster } from './helpers.js'
import type { Report } from '../../lib/core/results.js'

/** the health steps, in `talosctl health`'s order, then the product's own */
const CHECKS = [
  'etcd-healthy',
  'etcd-members-consistent',
  'etcd-members-control-planes',
  'apid-ready',
  'diagnostics',
  'kubelet-healthy',
  'boot-sequence',
  'nodes-report',
  'static-pods',
  'control-plane-components',
  'nodes-ready',
  'node-addresses',
  'kube-proxy',
  'coredns',
  'nodes-schedulable',
]

// a healthy cluster passes every check within a second or two of wait-ready at speed 600
const READY_SHORT = fastWith('--ready-timeout', '8s')

const stepNames = (report: Report): string[] => report.phases.find((p) => p.name === 'wait-ready')?.steps.map((s) => s.name) ?? []

describe.concurrent('wait-ready: what talosctl health checks', () => {
  it(
    'a healthy cluster passes every check, each a step with every node named',
    () =>
      withCluster('127.250.1', { cps: 3, workers: 1 }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, fastWith('--ready-timeout', '30s'))
        expect(result.code, result.stderr).toBe(0)
        const report = cluster.report()
        // in talosctl health's order, after the per-node wait and before the readiness gates
        expect(stepNames(report).filter((s) => CHECKS.includes(s))).toEqual(CHECKS)
        expect(stepNames(report).at(-1)).toBe('readiness-gates')
        const detail = (name: string): string => stepIn(report, 'wait-ready', name).detail ?? ''
        for (const name of CHECKS.filter((c) => c !== 'kube-proxy')) expect(stepIn(report, 'wait-ready', name).status, name).toBe('ok')
        const cps = ['cp-1', 'cp-2', 'cp-3']
        const all = [...cps, 'wrkr-1']
        for (const cp of cps) {
          expect(detail('etcd-healthy')).toContain(`${cp}: Running, healthy`)
          expect(detail('etcd-members-consistent')).toContain(`${cp}: 3 members`)
          expect(detail('etcd-members-control-planes')).toMatch(new RegExp(`${cp}: member [0-9a-f]+`))
          expect(detail('static-pods')).toContain(`${cp}: kube-apiserver, kube-controller-manager, kube-scheduler running`)
          expect(detail('control-plane-components')).toContain(`${cp}: Ready`)
        }
        for (const n of all) {
          expect(detail('apid-ready')).toContain(`${n}: answers`)
          expect(detail('diagnostics')).toContain(`${n}: none`)
          expect(detail('kubelet-healthy')).toContain(`${n}: Running, healthy`)
          expect(detail('boot-sequence')).toContain(`${n}: running`)
          expect(detail('nodes-report')).toContain(`${n}: registered`)
          expect(detail('nodes-ready')).toContain(`${n}: Ready`)
          expect(detail('node-addresses')).toMatch(new RegExp(`${n}: InternalIP 127\\.250\\.1\\.\\d+`))
          expect(detail('nodes-schedulable')).toContain(`${n}: schedulable`)
        }
        // the simulator's configs disable kube-proxy (cilium replaces it): said, not checked
        expect(stepIn(report, 'wait-ready', 'kube-proxy')).toMatchObject({ status: 'skipped', detail: expect.stringContaining('no kube-proxy DaemonSet') })
        expect(detail('coredns')).toMatch(/coredns-\S+: Ready on \S+/)
      }),
    ROW_TIMEOUT,
  )

  it(
    'kube-controller-manager down everywhere: no Node registers, named as the controller manager, not the kubelet',
    () =>
      withCluster('127.250.2', { cps: 1, workers: 1, faults: [{ kind: 'static-pod', pod: 'kube-controller-manager', restarts: true, message: 'E0101 flag provided but not defined: -bad-flag' }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, READY_SHORT)
        expect(result.code).toBe(1)
        const report = cluster.report()
        for (const name of ['cp-1', 'wrkr-1']) {
          const failed = nodeIn(report, 'wait-ready', name)
          expect(failed.error?.kind, failed.error?.message).toBe('control-plane')
          expect(failed.error?.message).toContain('kube-controller-manager runs on no control plane')
          expect(failed.error?.message).toContain('CrashLoopBackOff')
          expect(failed.error?.message).toContain('flag provided but not defined: -bad-flag')
          expect(failed.error?.hint).toContain('get staticpodstatus')
          expect(failed.error?.hint).not.toContain('service kubelet restart')
        }
        const statics = stepIn(report, 'wait-ready', 'static-pods')
        expect(statics.status).toBe('failed')
        expect(statics.error?.message).toContain('kube-controller-manager on cp-1 is not running')
        // the hint's commands run as printed; cleared, the task it names finishes the job
        const { hint, command } = hintOf(result.stderr, 'cp-1')
        const look = /`(talosctl [^`]* get staticpodstatus)`/.exec(hint)?.[1] ?? 'false'
        const shown = await runInFreshShell(cluster, look)
        expect(shown.code, shown.stderr).toBe(0)
        expect(shown.stdout).toContain('kube-system/kube-controller-manager-cp-1')
        const logs = /`(talosctl [^`]* logs -k [^`]*)`/.exec(hint)?.[1] ?? 'false'
        const log = await runInFreshShell(cluster, logs)
        expect(log.stdout, log.stderr).toContain('flag provided but not defined: -bad-flag')
        cluster.sim.clearFault(null, 'static-pod')
        const again = await runInFreshShell(cluster, command)
        expect(again.code, again.stderr).toBe(0)
      }),
    ROW_TIMEOUT,
  )
})

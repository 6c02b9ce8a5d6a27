// Ready means at least what `talosctl health` means (issue 30): wait-ready ends with its checks, in
// its order, each a step with per-node results; each failure path of the simulator (sim/health-faults.js)
// is named with its component, node and reason, with a hint that runs. Rows on 127.250.<row>.0/24.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseDocument } from 'yaml'
import { describe, expect, it } from 'vitest'
import { hintOf, nodeIn, runInFreshShell, type E2eCluster } from '../e2e/harness.js'
import { fastWith, ROW_TIMEOUT, stepIn, withCluster } from './helpers.js'
import type { Report } from '../../lib/core/results.js'

/** the health steps, in `talosctl health`'s order, then the product's own */
const CHECKS = [
  'etcd-healthy',
  'etcd-members-consistent',
  'etcd-members-control-planes',
  'apid-ready',
  'memory-sizes',
  'disk-sizes',
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
// rows queue for a slot (three at a time) and run slowly on a loaded machine: twice a row's usual deadline
const HEALTH_ROW_TIMEOUT = 2 * ROW_TIMEOUT

// bootstrap:status reads with a 3 s deadline by default; the matrix runs three clusters at once, and
// a healthy cluster's read must not be cut short on a loaded machine (status.test.ts covers the 3 s)
const STATUS_FLAGS = ['--call-timeout', '30s']
const READY_SHORT = fastWith('--ready-timeout', '8s')

/**
 * the task a hint ends with (`…, then run: task …`); the first one where a step joins its failures'
 * hints (`…; also: …`: Talos's CoreDNS runs two replicas, each failing pod has its own)
 */
const taskOf = (hint: string | undefined): string => /run: (task [^;]*)/.exec(hint ?? '')?.[1] ?? 'false'

/** a printed command run verbatim in a fresh shell succeeds */
async function succeeds(cluster: E2eCluster, command: string): Promise<void> {
  const again = await runInFreshShell(cluster, command)
  expect(again.code, `${command}\n${again.stderr}`).toBe(0)
}

/** a wait-ready step that failed */
function failedStep(report: Report, name: string): ReturnType<typeof stepIn> {
  const step = stepIn(report, 'wait-ready', name)
  expect(step.status, `${name}: ${step.detail ?? ''}`).toBe('failed')
  return step
}

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
          // the simulator's default machine: 4 GiB (MemTotal 100 MiB less), a 100 GB install disk
          expect(detail('memory-sizes')).toContain(`${n}: 3996 MiB (minimum ${cps.includes(n) ? 1698 : 874} MiB)`)
          expect(detail('disk-sizes')).toMatch(new RegExp(`${n}: EPHEMERAL /dev/sda6 \\d+ MiB \\(minimum 3932 MiB\\)`))
          expect(detail('diagnostics')).toContain(`${n}: none`)
          expect(detail('kubelet-healthy')).toContain(`${n}: Running, healthy`)
          expect(detail('boot-sequence')).toContain(`${n}: running`)
          expect(detail('nodes-report')).toContain(`${n}: registered`)
          expect(detail('nodes-ready')).toContain(`${n}: Ready`)
          expect(detail('node-addresses')).toMatch(new RegExp(`${n}: InternalIP 127\\.250\\.1\\.\\d+`))
          expect(detail('nodes-schedulable')).toContain(`${n}: schedulable`)
        }
        // the simulator's configs disable kube-proxy (cilium replaces it): said, not checked
        expect(stepIn(report, 'wait-ready', 'kube-proxy')).toMatchObject({
          status: 'skipped',
          detail: expect.stringContaining('no kube-proxy DaemonSet'),
        })
        expect(detail('coredns')).toMatch(/coredns-\S+: Ready on \S+/)
        // bootstrap:status shows the same checks
        const status = await cluster.task('bootstrap:status', {}, STATUS_FLAGS)
        expect(status.code, status.stderr).toBe(0)
        expect(status.stdout).toContain(
          'health: etcd to be healthy: ok (cp-1: Running, healthy; cp-2: Running, healthy; cp-3: Running, healthy)',
        )
        expect(status.stdout).toContain(
          'health: all control plane static pods to be running: ok (cp-1: kube-apiserver, kube-controller-manager, kube-scheduler running;',
        )
        expect(status.stdout).toContain('health: kube-proxy to report ready: skipped (no kube-proxy DaemonSet')
        expect(status.stdout).toContain(
          'health: all nodes memory sizes: ok (cp-1: 3996 MiB (minimum 1698 MiB); cp-2: 3996 MiB (minimum 1698 MiB); cp-3: 3996 MiB (minimum 1698 MiB); wrkr-1: 3996 MiB (minimum 874 MiB))',
        )
        expect(status.stdout).toMatch(/health: all nodes disk sizes: ok \(cp-1: EPHEMERAL \/dev\/sda6 \d+ MiB \(minimum 3932 MiB\);/)
        expect(status.stdout).toMatch(
          /health: all k8s nodes to report schedulable: ok \(cp-1: schedulable; cp-2: schedulable; cp-3: schedulable; wrkr-1: schedulable\)/,
        )
      }),
    HEALTH_ROW_TIMEOUT,
  )

  it(
    'kube-controller-manager down everywhere: no Node registers, named as the controller manager, not the kubelet',
    () =>
      withCluster(
        '127.250.2',
        {
          cps: 1,
          workers: 1,
          faults: [
            {
              kind: 'static-pod',
              pod: 'kube-controller-manager',
              restarts: true,
              message: 'E0101 flag provided but not defined: -bad-flag',
            },
          ],
        },
        async (cluster) => {
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
          const statics = failedStep(report, 'static-pods')
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
          await succeeds(cluster, command)
        },
      ),
    HEALTH_ROW_TIMEOUT,
  )

  it(
    'kube-scheduler down everywhere: the CNI pods are never bound, named as the scheduler',
    () =>
      withCluster('127.250.3', { cps: 1, workers: 1, faults: [{ kind: 'static-pod', pod: 'kube-scheduler' }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, READY_SHORT)
        expect(result.code).toBe(1)
        const report = cluster.report()
        for (const name of ['cp-1', 'wrkr-1']) {
          const failed = nodeIn(report, 'wait-ready', name)
          expect(failed.error?.kind, failed.error?.message).toBe('control-plane')
          expect(failed.error?.message).toContain('no CNI pod scheduled on the node')
          expect(failed.error?.message).toContain('kube-scheduler runs on no control plane')
          // never started: the registry's answer for its image
          expect(failed.error?.message).toMatch(/ImagePullBackOff: Back-off pulling image "registry\.k8s\.io\/kube-scheduler:v1\.35\.0"/)
          expect(failed.error?.hint).toContain('kube-system/kube-scheduler-cp-1')
        }
        // no scheduler, no FailedScheduling event: the pods are Pending and unbound
        const pods = await cluster.kubectl([
          '-n',
          'kube-system',
          'get',
          'pods',
          '-l',
          'k8s-app=cilium',
          '-o',
          'jsonpath={.items[*].spec.nodeName}',
        ])
        expect(pods.stdout.trim()).toBe('')
        cluster.sim.clearFault(null, 'static-pod')
        const { command } = hintOf(result.stderr, 'wrkr-1')
        await succeeds(cluster, command)
      }),
    HEALTH_ROW_TIMEOUT,
  )

  it(
    'kube-apiserver crash-looping on one control plane of three: named with its node and message',
    () =>
      withCluster(
        '127.250.4',
        {
          cps: 3,
          workers: 0,
          faults: [{ node: 'cp-2', kind: 'static-pod', pod: 'kube-apiserver', restarts: true, message: 'Error: unknown flag: --bogus' }],
        },
        async (cluster) => {
          const result = await cluster.task('bootstrap:talos', {}, READY_SHORT)
          expect(result.code).toBe(1)
          const report = cluster.report()
          const statics = failedStep(report, 'static-pods')
          expect(statics.error?.message).toContain('kube-apiserver on cp-2 is not running')
          expect(statics.error?.message).toContain('Error: unknown flag: --bogus')
          expect(nodeIn(report, 'wait-ready', 'cp-2').error?.kind).toBe('control-plane')
          expect(nodeIn(report, 'wait-ready', 'cp-1').status).toBe('ok')
          expect(nodeIn(report, 'wait-ready', 'cp-3').status).toBe('ok')
          expect(stepIn(report, 'wait-ready', 'control-plane-components').error?.message).toContain('kube-apiserver on cp-2 is not Ready')
          expect(statics.error?.hint).toContain('-n 127.250.4.12 logs -k kube-system/kube-apiserver-cp-2')
        },
      ),
    HEALTH_ROW_TIMEOUT,
  )

  it(
    'kube-apiserver never starting on the only control plane: the API hint reads the static pod, not a service',
    () =>
      withCluster('127.250.5', { cps: 1, workers: 0, faults: [{ kind: 'static-pod', pod: 'kube-apiserver' }] }, async (cluster) => {
        // no API server, so the VIP's /readyz never answers either: the endpoint's wait (FAST's 20 s,
        // one control plane: no join behind it) only has to run out before wait-ready's api step
        const result = await cluster.task('bootstrap:talos', {}, fastWith('--bootstrap-timeout', '8s', READY_SHORT))
        expect(result.code).toBe(1)
        const api = failedStep(cluster.report(), 'api')
        expect(api.error?.hint).not.toContain('service kube-apiserver')
        const look = /`(talosctl [^`]* get staticpodstatus)`/.exec(api.error?.hint ?? '')?.[1] ?? 'false'
        const shown = await runInFreshShell(cluster, look)
        expect(shown.code, shown.stderr).toBe(0)
        expect(shown.stdout).toMatch(/kube-system\/kube-apiserver-cp-1\s+\S+\s+False/)
        cluster.sim.clearFault(null, 'static-pod')
        await succeeds(cluster, taskOf(api.error?.hint))
        const logs = /`(talosctl [^`]* logs -k [^`]*)`/.exec(api.error?.hint ?? '')?.[1] ?? 'false'
        const log = await runInFreshShell(cluster, logs)
        expect(log.code, log.stderr).toBe(0)
      }),
    HEALTH_ROW_TIMEOUT,
  )

  it(
    "the CNI image the registry does not have: fails at once with the registry's text",
    () =>
      withCluster(
        '127.250.6',
        {
          cps: 1,
          workers: 1,
          faults: [{ kind: 'image-pull', image: 'quay.io/cilium/cilium', message: 'quay.io/cilium/cilium:v1.18.4: not found' }],
        },
        async (cluster) => {
          // a reason no wait clears fails at once: a row that sat out this timeout would time out itself
          const result = await cluster.task('bootstrap:talos', {}, fastWith('--ready-timeout', '10m'))
          expect(result.code).toBe(1)
          const failed = nodeIn(cluster.report(), 'wait-ready', 'wrkr-1')
          expect(failed.error?.kind).toBe('cni')
          expect(failed.error?.message).toMatch(
            /ImagePullBackOff: Back-off pulling image "quay\.io\/cilium\/cilium:v[\d.]+": ErrImagePull: quay\.io\/cilium\/cilium:v1\.18\.4: not found/,
          )
          // the image there (a mirror set up): the hint's task, as printed, brings the node in
          cluster.sim.clearFault(null, 'image-pull')
          await succeeds(cluster, taskOf(failed.error?.hint))
        },
      ),
    HEALTH_ROW_TIMEOUT,
  )

  it(
    'CoreDNS never ready: named with its pod, node and failing probe',
    () =>
      withCluster('127.250.7', { cps: 1, workers: 1, faults: [{ kind: 'coredns' }] }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, READY_SHORT)
        expect(result.code).toBe(1)
        const step = failedStep(cluster.report(), 'coredns')
        expect(step.error?.kind).toBe('addon')
        expect(step.error?.message).toMatch(/CoreDNS 0\/\d ready: pod coredns-\S+ on \S+ Running, container coredns running, not ready/)
        expect(step.error?.message).toContain('Readiness probe failed: HTTP probe failed with statuscode: 503')
        const see = /`(kubectl [^`]*describe pod[^`]*)`/.exec(step.error?.hint ?? '')?.[1] ?? 'false'
        const shown = await runInFreshShell(cluster, see)
        expect(shown.code, shown.stderr).toBe(0)
        cluster.sim.clearFault(null, 'coredns')
        await succeeds(cluster, taskOf(step.error?.hint))
      }),
    HEALTH_ROW_TIMEOUT,
  )

  it(
    'kubelet serving CSRs never approved on two workers: each Ready, each named by the kubelet-csr diagnostic, each hint approving its own CSR verbatim',
    () =>
      withCluster(
        '127.250.8',
        {
          cps: 1,
          workers: 2,
          faults: [
            { node: 'wrkr-1', kind: 'kubelet-serving-csr' },
            { node: 'wrkr-2', kind: 'kubelet-serving-csr' },
          ],
        },
        async (cluster) => {
          const result = await cluster.task('bootstrap:talos', {}, READY_SHORT)
          expect(result.code).toBe(1)
          const report = cluster.report()
          const step = failedStep(report, 'diagnostics')
          for (const name of ['wrkr-1', 'wrkr-2'])
            expect(step.error?.message).toMatch(
              new RegExp(
                `Talos diagnostics on ${name}: kubelet-csr: kubelet server certificate rotation is enabled, but CSR is not approved \\(.*pending CSRs: csr-\\w+\\)`,
              ),
            )
          expect(nodeIn(report, 'wait-ready', 'cp-1').status).toBe('ok')
          const nodes = await cluster.kubectl(['get', 'nodes', '--no-headers'])
          expect(nodes.stdout).toMatch(/^wrkr-1\s+Ready/m)
          expect(nodes.stdout).toMatch(/^wrkr-2\s+Ready/m)
          // the API's serving CSRs: who asked for each
          const listed = await cluster.kubectl([
            'get',
            'csr',
            '-o',
            'jsonpath={range .items[*]}{.metadata.name}={.spec.username}{"\\n"}{end}',
          ])
          const requester = new Map(
            listed.stdout
              .trim()
              .split('\n')
              .map((l) => l.split('=') as [string, string]),
          )
          const approvals: string[] = []
          for (const name of ['wrkr-1', 'wrkr-2']) {
            const failed = nodeIn(report, 'wait-ready', name)
            expect(failed.error?.kind).toBe('diagnostics')
            // its own hint: its own pending CSR, requested by its own kubelet
            const approve = /`(kubectl [^`]* certificate approve (csr-\w+))`/.exec(failed.error?.hint ?? '')
            expect(approve?.[2] && requester.get(approve[2]), failed.error?.hint).toBe(`system:node:${name}`)
            // the hint's list, as printed, shows it
            const list = /`(kubectl [^`]* get csr [^`]*)`/.exec(failed.error?.hint ?? '')?.[1] ?? 'false'
            const csrs = await runInFreshShell(cluster, list)
            expect(csrs.code, csrs.stderr).toBe(0)
            expect(csrs.stdout).toMatch(new RegExp(`^${approve?.[2] ?? 'none'}\\s.*Pending`, 'm'))
            approvals.push(approve?.[1] ?? 'false')
          }
          // approved as printed (the fault stays: no approver runs), the diagnostics clear and the task finishes
          // the step's hint: each node's own approval, the task said once at its end
          for (const command of approvals) expect(step.error?.hint).toContain(command)
          expect(taskOf(step.error?.hint)).toBe(taskOf(nodeIn(report, 'wait-ready', 'wrkr-2').error?.hint))
          for (const command of approvals) await succeeds(cluster, command)
          await succeeds(cluster, taskOf(step.error?.hint))
        },
      ),
    HEALTH_ROW_TIMEOUT,
  )

  it(
    'a Node registered at another InternalIP than the inventory names: not ready, named with both',
    () =>
      withCluster(
        '127.250.9',
        { cps: 1, workers: 1, faults: [{ node: 'wrkr-1', kind: 'node-ip', address: '127.250.109.21' }] },
        async (cluster) => {
          const result = await cluster.task('bootstrap:talos', {}, READY_SHORT)
          expect(result.code).toBe(1)
          const report = cluster.report()
          const step = failedStep(report, 'node-addresses')
          expect(step.error?.message).toContain(
            "Node wrkr-1 registered at another address than the inventory's: InternalIP 127.250.109.21, not 127.250.9.21",
          )
          expect(step.error?.hint).toContain('machine.kubelet.nodeIP.validSubnets')
          expect(nodeIn(report, 'wait-ready', 'wrkr-1').status).toBe('failed')
          cluster.sim.clearFault('wrkr-1', 'node-ip')
          await succeeds(cluster, taskOf(step.error?.hint))
        },
      ),
    HEALTH_ROW_TIMEOUT,
  )

  it(
    'a node cordoned by someone else: not ready, named, not "ok with a note"',
    () =>
      withCluster('127.250.10', { cps: 1, workers: 1 }, async (cluster) => {
        const first = await cluster.task('bootstrap:talos', {}, READY_SHORT)
        expect(first.code, first.stderr).toBe(0)
        const cordon = await cluster.kubectl(['cordon', 'wrkr-1'])
        expect(cordon.code, cordon.stderr).toBe(0)
        const result = await cluster.task('bootstrap:wait-ready', {}, READY_SHORT)
        expect(result.code).toBe(1)
        const report = cluster.report()
        const step = failedStep(report, 'nodes-schedulable')
        expect(step.error?.message).toMatch(/Node wrkr-1 is not schedulable: cordoned \(spec.unschedulable\)( by \S+)?, not by Talos/)
        expect(nodeIn(report, 'wait-ready', 'wrkr-1').status).toBe('failed')
        expect(nodeIn(report, 'wait-ready', 'cp-1').status).toBe('ok')
        // bootstrap:status says the same
        const status = await cluster.task('bootstrap:status', {}, STATUS_FLAGS)
        expect(status.code).toBe(1)
        expect(status.stdout).toMatch(/health: all k8s nodes to report schedulable: failed \(Node wrkr-1 is not schedulable: cordoned/)
        // the hint's uncordon, then its task, as printed
        const uncordon = /`(kubectl [^`]* uncordon wrkr-1)`/.exec(step.error?.hint ?? '')?.[1] ?? 'false'
        expect((await runInFreshShell(cluster, uncordon)).code).toBe(0)
        await succeeds(cluster, taskOf(step.error?.hint))
      }),
    HEALTH_ROW_TIMEOUT,
  )

  it(
    "a node with less memory than Talos's minimum, another with too small an install disk: each fails at once, named with its figure and minimum",
    () =>
      withCluster(
        '127.250.12',
        {
          cps: 1,
          workers: 2,
          // MemTotal 800 MiB (900 MiB less what the kernel keeps); 6 GB is 5722 MiB, EPHEMERAL what the Talos partitions leave
          nodeOverrides: {
            'wrkr-1': { memory: '900MiB' },
            'wrkr-2': { memory: '900MiB' },
            'cp-1': { disks: [{ dev: '/dev/sda', size: '6GB', model: 'QEMU HARDDISK' }] },
          },
        },
        async (cluster) => {
          // a figure no wait changes fails at once: a row that sat out this timeout would time out itself
          const result = await cluster.task('bootstrap:talos', {}, fastWith('--ready-timeout', '10m'))
          expect(result.code).toBe(1)
          // preflight said so before the install
          expect(result.stderr).toContain("only 6 GB, under Talos's minimum of 6 GiB")
          const report = cluster.report()
          const memory = failedStep(report, 'memory-sizes')
          expect(memory.error?.message).toBe(
            'wrkr-1 (127.250.12.21) does not meet memory requirements: expected at least 874 MiB for a worker, actual 800 MiB (MemTotal); ' +
              'wrkr-2 (127.250.12.22) does not meet memory requirements: expected at least 874 MiB for a worker, actual 800 MiB (MemTotal)',
          )
          // each node failed with its own cause and a hint that names it, not the first node's
          for (const [name, ip] of [
            ['wrkr-1', '127.250.12.21'],
            ['wrkr-2', '127.250.12.22'],
          ] as const) {
            const own = nodeIn(report, 'wait-ready', name)
            expect(own.error?.kind).toBe('hardware')
            expect(own.error?.message).toBe(
              `memory-sizes: ${name} (${ip}) does not meet memory requirements: expected at least 874 MiB for a worker, actual 800 MiB (MemTotal)`,
            )
            expect(own.error?.hint).toContain(`give ${name} more memory: a worker needs at least 1 GiB of RAM`)
            expect(own.error?.hint).toContain(`-e ${ip} -n ${ip} memory\``)
          }
          const worker = nodeIn(report, 'wait-ready', 'wrkr-2')
          const disk = failedStep(report, 'disk-sizes')
          expect(disk.error?.message).toMatch(
            /^the ephemeral partition \/dev\/sda6 of cp-1 \(127\.250\.12\.11\) is too small: expected at least 3932 MiB, actual 3519 MiB \(on \/dev\/sda\)$/,
          )
          const cp = nodeIn(report, 'wait-ready', 'cp-1')
          expect(cp.error?.kind).toBe('hardware')
          expect(cp.error?.hint).toContain('Talos needs an install disk of at least 6 GiB')
          expect(cp.error?.hint).toMatch(/bootstrap:node CLUSTER_DIR=\S+ NODE=cp-1 RESET=true -- --yes$/)
          // the hints' commands, as printed, show the figures
          const free = /`(talosctl [^`]* memory)`/.exec(worker.error?.hint ?? '')?.[1] ?? 'false'
          const shown = await runInFreshShell(cluster, free)
          expect(shown.code, shown.stderr).toBe(0)
          expect(shown.stdout).toMatch(/^127\.250\.12\.22\s+800\s/m)
          const disks = /`(talosctl [^`]* get disks)`/.exec(cp.error?.hint ?? '')?.[1] ?? 'false'
          const listed = await runInFreshShell(cluster, disks)
          expect(listed.code, listed.stderr).toBe(0)
          expect(listed.stdout).toMatch(/\bsda\b.*\b6(?:\.0)? GB\b/)
          // the real talosctl health fails the same two checks, in Talos's words
          const health = await runInFreshShell(
            cluster,
            free.replace(/ -e \S+ -n \S+ memory$/, ' -e 127.250.12.11 -n 127.250.12.11 health --wait-timeout 3s'),
          )
          expect(health.code).not.toBe(0)
          expect(health.stderr).toContain(
            'waiting for all nodes memory sizes: 2 errors occurred:\n\t* node "127.250.12.21" does not meet memory requirements: expected at least 874 MiB, actual 800 MiB\n\t* node "127.250.12.22" does not meet memory requirements: expected at least 874 MiB, actual 800 MiB',
          )
          // bootstrap:status shows both
          const status = await cluster.task('bootstrap:status', {}, STATUS_FLAGS)
          expect(status.stdout).toContain(
            'health: all nodes memory sizes: failed (wrkr-1 (127.250.12.21) does not meet memory requirements',
          )
          expect(status.stdout).toContain('health: all nodes disk sizes: failed (the ephemeral partition /dev/sda6 of cp-1')
        },
      ),
    HEALTH_ROW_TIMEOUT,
  )

  it(
    'preflight warns on a cluster of control planes only that keeps them tainted, and not once they allow scheduling',
    () =>
      withCluster('127.250.11', { cps: 1, workers: 0 }, async (cluster) => {
        const warned = await cluster.task('bootstrap:preflight', {}, READY_SHORT)
        expect(warned.code, warned.stderr).toBe(0)
        expect(warned.stderr).toMatch(
          /every node is a control plane and cp-1 \(\S+\) does not set cluster\.allowSchedulingOnControlPlanes: true/,
        )
        const file = join(cluster.clusterDir, 'clusterconfig', 'e2e-cp-1.yaml')
        const doc = parseDocument(readFileSync(file, 'utf8'))
        doc.setIn(['cluster', 'allowSchedulingOnControlPlanes'], true)
        writeFileSync(file, doc.toString())
        cluster.generated()
        const quiet = await cluster.task('bootstrap:preflight', {}, READY_SHORT)
        expect(quiet.code, quiet.stderr).toBe(0)
        expect(quiet.stderr).not.toContain('allowSchedulingOnControlPlanes')
      }),
    HEALTH_ROW_TIMEOUT,
  )
})

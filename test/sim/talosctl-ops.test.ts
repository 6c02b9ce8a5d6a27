// The real talosctl v1.12.11 (`task tools`) against the simulator for what the README and the
// product's hints tell an operator to run by hand: dmesg, logs <svc>, health, reboot and reset with
// their default --wait, and the error texts lib/tools/classify.ts reads. What the nodes serve follows:
// internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go (Dmesg, Logs, Read, Events,
// Reboot, Reset), v1alpha1_cluster.go (HealthCheck), internal/app/storaged/server.go (Disks, also in
// maintenance), internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_controller.go and
// v1alpha1_sequencer.go (the sequence/phase/task events), internal/app/apid/pkg/director/director.go
// (one-2-one `node` vs one-2-many `nodes`); the client side: cmd/talosctl/pkg/talos/action/tracker.go
// and node.go (--wait), cmd/talosctl/cmd/talos/{dmesg,logs,health,reboot,reset}.go. Range 127.31.1.x.
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CNI_DAEMONSET, scenarioOn, startOn, sleep, type Started } from './helpers.js'
import { startSimulator } from '../../sim/index.js'
import { realTool } from '../support/real-tools.js'

const tool = realTool('talosctl')
if (tool.skip) console.warn(`SKIPPED test/sim/talosctl-ops.test.ts: ${tool.skip}`)

const R = '127.31.1'
const CP1 = `${R}.11`,
  CP2 = `${R}.12`,
  W1 = `${R}.21`,
  NOBODY = `${R}.99`
const esc = (s: string) => s.replace(/\./g, '\\.')

interface Run {
  code: number
  stdout: string
  stderr: string
}

describe.skipIf(!!tool.skip)('the real talosctl: what an operator runs by hand', () => {
  let s: Started
  const run = (bin: string, args: string[], timeout = 60_000): Promise<Run> =>
    new Promise((done) => {
      execFile(
        bin,
        args,
        {
          encoding: 'utf8',
          timeout,
          env: { PATH: s.sim.env.PATH, HOME: s.dir, TALOSCONFIG: s.sim.env.TALOSCONFIG, KUBECONFIG: join(s.dir, 'kubeconfig') },
        },
        (err, stdout, stderr) => done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
      )
    })
  const talosctl = (...args: string[]) => run(tool.path!, args)
  const ready = async (names: string[]) => {
    for (let i = 0; i < 300 && !names.every((n) => s.sim.node(n)?.ready); i++) await sleep(100)
    expect(names.map((n) => [n, s.sim.node(n)?.ready])).toEqual(names.map((n) => [n, true]))
  }

  // disk images (no install reboot); a reboot lasts 2 s of real time, longer than talosctl's 1 s
  // retry interval as every real reboot does (a node back before the client looks again leaves
  // --wait waiting for a RUNNING event that already went by, until --timeout)
  beforeAll(async () => {
    s = await startOn(R, { cps: 2, workers: 1, image: 'disk', speed: 1000, timings: { reboot: 2000 } })
    for (const [name, ip] of [
      ['cp-1', CP1],
      ['cp-2', CP2],
      ['wrkr-1', W1],
    ] as const) {
      expect(
        await talosctl('apply-config', '--insecure', '-n', ip, '-f', join(s.sim.clusterDir, 'clusterconfig', `test-${name}.yaml`)),
      ).toMatchObject({ code: 0 })
    }
    await s.sim.until(() => s.sim.node('cp-1')?.listener === 'secure', 30_000)
    let boot: Run | undefined
    for (let i = 0; i < 200 && boot?.code !== 0; i++) {
      boot = await talosctl('-e', CP1, '-n', CP1, 'bootstrap')
      if (boot.code) await sleep(50)
    }
    expect(boot?.code).toBe(0)
    await s.sim.until(() => ['cp-1', 'cp-2', 'wrkr-1'].every((n) => s.sim.node(n)?.registered), 30_000)
    expect(await talosctl('-e', CP1, '-n', CP1, 'kubeconfig', join(s.dir, 'kubeconfig'), '--merge=false', '--force')).toMatchObject({
      code: 0,
    })
    writeFileSync(join(s.dir, 'cni.yaml'), CNI_DAEMONSET)
    expect(await run('kubectl', ['apply', '-f', join(s.dir, 'cni.yaml')])).toMatchObject({ code: 0 })
    await ready(['cp-1', 'cp-2', 'wrkr-1'])
  }, 120_000)
  afterAll(async () => {
    await s?.stop()
  })

  it('dmesg: the kernel ring buffer as machined streams it, through the endpoint too', async () => {
    const own = await talosctl('-e', CP1, '-n', CP1, 'dmesg')
    expect(own.code, own.stderr).toBe(0)
    const lines = own.stdout.trimEnd().split('\n')
    expect(lines[0]).toMatch(
      new RegExp(`^${esc(CP1)}: kern:  notice: \\[\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?Z\\]: Linux version `),
    )
    expect(lines).toContainEqual(
      expect.stringMatching(new RegExp(`^${esc(CP1)}: user: warning: \\[[^\\]]+\\]: \\[talos\\] etcd is healthy$`)),
    )
    // one-2-many through the endpoint: each record names its node; the node that cannot be reached is an error
    const two = await talosctl('-e', CP1, '-n', `${W1},${NOBODY}`, 'dmesg')
    expect(two.stdout).toMatch(new RegExp(`^${esc(W1)}: kern:  notice: `))
    expect(two.stdout).not.toContain(NOBODY)
    expect(two.code).toBe(1)
    expect(two.stderr).toContain(`dial tcp ${NOBODY}:50000: connect: connection refused`)
  })

  it('logs <service>: the service log once its process started; a log never written is not registered', async () => {
    const kubelet = await talosctl('-e', CP1, '-n', W1, 'logs', 'kubelet')
    expect(kubelet).toMatchObject({ code: 0, stderr: '' })
    expect(kubelet.stdout).toMatch(
      new RegExp(
        `^${esc(W1)}: I\\d{4} \\d\\d:\\d\\d:\\d\\d\\.\\d{6} +\\d+ server\\.go:\\d+\\] "Kubelet version" kubeletVersion="v1\\.35\\.0"\\n$`,
      ),
    )
    // a worker runs no etcd: its log was never registered (runtime/logging/circular.go Reader)
    expect(await talosctl('-e', CP1, '-n', W1, 'logs', 'etcd')).toEqual({
      code: 1,
      stdout: '',
      stderr: 'ERROR: rpc error: code = Unknown desc = log "etcd" was not registered\n',
    })
  })

  it('health: the server-side check (its default) streams each check until the cluster is healthy', async () => {
    const h = await talosctl('-e', CP1, '-n', CP1, 'health', '--wait-timeout', '30s')
    expect(h.code, h.stderr).toBe(0)
    const lines = h.stderr.trimEnd().split('\n')
    expect(lines[0]).toBe(`discovered nodes: ["${CP1}" "${CP2}" "${W1}"]`)
    expect(lines).toContain('waiting for etcd to be healthy: OK')
    expect(lines.at(-1)).toBe('waiting for all k8s nodes to report schedulable: OK')
    // a worker has no kubeconfig to check Kubernetes with
    const w = await talosctl('-e', W1, '-n', W1, 'health', '--wait-timeout', '5s')
    expect(w).toEqual({
      code: 1,
      stdout: '',
      stderr: 'rpc error: code = Unknown desc = error getting kubernetes client: kubeconfig is only available on control plane nodes\n',
    })
  })

  it('dmesg -f --tail: only what the node logs from then on, until the node goes down under the endpoint', async () => {
    const follow = execFile(tool.path!, ['-e', CP1, '-n', W1, 'dmesg', '-f', '--tail'], {
      encoding: 'utf8',
      env: { PATH: s.sim.env.PATH, HOME: s.dir, TALOSCONFIG: s.sim.env.TALOSCONFIG },
    })
    let out = '',
      err = ''
    follow.stdout?.on('data', (d: string) => {
      out += d
    })
    follow.stderr?.on('data', (d: string) => {
      err += d
    })
    const exited = new Promise<number | null>((done) => follow.on('exit', (code) => done(code)))
    await sleep(500)
    expect(out).toBe('')
    expect(await talosctl('-e', CP1, '-n', W1, 'reboot', '--wait=false')).toEqual({ code: 0, stdout: '', stderr: '' })
    expect(await exited).toBe(1)
    expect(out).toMatch(new RegExp(`^${esc(W1)}: user: warning: \\[[^\\]]+\\]: \\[talos\\] stage: rebooting\n$`))
    expect(err).toContain('rpc error: code = Unavailable desc = error reading from server: EOF')
    await s.sim.until(() => s.sim.node('wrkr-1')?.stage === 'running', 30_000)
    await ready(['wrkr-1'])
  })

  it('reboot (--wait): follows the reboot sequence, waits for the node RUNNING and Ready and a new boot ID', async () => {
    const before = s.sim.node('wrkr-1')!.bootId
    const r = await talosctl('-e', CP1, '-n', W1, 'reboot')
    expect(r.code, r.stderr).toBe(0)
    const q = `"${W1}": `
    expect(r.stderr).toMatch(new RegExp(`^${q}waiting for actor ID\n${q}actor ID: [0-9a-f-]{36}\n${q}sequence: reboot action: START\n`))
    expect(r.stderr).toContain(`${q}unavailable, retrying...\n`)
    expect(r.stderr).toMatch(new RegExp(`${q}events check condition met\n${q}post check passed\n$`))
    expect(s.sim.node('wrkr-1')).toMatchObject({ stage: 'running', ready: true })
    expect(s.sim.node('wrkr-1')!.bootId).not.toBe(before)
  })

  it('reboot (--wait) of a node that never comes back fails when --timeout runs out', async () => {
    s.sim.addFault({ node: 'wrkr-1', on: 'boot', kind: 'boot-loop' })
    const r = await talosctl('-e', CP1, '-n', W1, 'reboot', '--timeout', '8s')
    s.sim.clearFault('wrkr-1', 'boot-loop')
    await s.sim.until(() => s.sim.node('wrkr-1')?.stage === 'running' && s.sim.node('wrkr-1')?.listener === 'secure', 30_000)
    // the tracker's own updates are all it prints (common.SuppressErrors): the last says what it waited on
    expect(r.code).toBe(1)
    expect(r.stderr).toContain(`"${W1}": sequence: reboot action: START\n`)
    expect(r.stderr).toContain(`"${W1}": unavailable, retrying...\n`)
    expect(r.stderr).not.toContain('events check condition met')
    expect(r.stderr).not.toContain('post check passed')
  })

  // what lib/tools/classify.ts reads (test/unit/classify.test.ts has these texts as rows)
  it('error texts: refused, DeadlineExceeded, another CA, Unavailable from a proxied node, unknown authority of a maintenance node', async () => {
    expect(await talosctl('-e', NOBODY, '-n', NOBODY, 'get', 'machinestatus')).toEqual({
      code: 1,
      stdout: '',
      stderr: `rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp ${NOBODY}:50000: connect: connection refused"\n`,
    })
    s.sim.addFault({ node: 'wrkr-1', on: 'get', kind: 'timeout', times: 1 })
    expect(await talosctl('-e', CP1, '-n', W1, 'get', 'machinestatus')).toEqual({
      code: 1,
      stdout: 'NODE   NAMESPACE   TYPE   ID   VERSION   STAGE   READY\n',
      stderr: '1 error occurred:\n\t* rpc error: code = DeadlineExceeded desc = context deadline exceeded\n\n\n',
    })
    s.sim.addFault({ node: 'wrkr-1', on: 'get', kind: 'unavailable', times: 1 })
    // a node whose identity comes from another CA named talos: Go's hint about the candidate authority
    s.sim.addFault({ node: 'wrkr-1', kind: 'pki-mismatch' })
    await s.sim.until(() => s.sim.node('wrkr-1')?.listener === 'pki', 10_000)
    expect(await talosctl('-e', W1, '-n', W1, 'get', 'machinestatus')).toEqual({
      code: 1,
      stdout: '',
      stderr:
        'rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly because of \\"x509: Ed25519 verification failure\\" while trying to verify candidate authority certificate \\"talos\\")"\n',
    })
    s.sim.clearFault('wrkr-1', 'pki-mismatch')
    await s.sim.until(() => s.sim.node('wrkr-1')?.listener === 'secure', 10_000)
    const svc = await talosctl('-e', CP1, '-n', W1, 'service', 'kubelet')
    expect(svc).toEqual({
      code: 1,
      stdout: '',
      stderr: `error listing services: 1 error occurred:\n\t* ${W1}: rpc error: code = Unavailable desc = error reading from server: EOF\n\n\n`,
    })
  })

  it('reset (--wait) of a worker without --reboot: done at stopAllServices, the node powers off', async () => {
    s.sim.addFault({ node: 'wrkr-1', on: 'reset', kind: 'latency', ms: 300, times: 1 })
    const r = await talosctl('-e', CP1, '-n', W1, 'reset')
    expect(r.code, r.stderr).toBe(0)
    const q = `"${W1}": `
    // a worker leaves no etcd; without --reboot there is no post check
    expect(r.stderr).not.toContain('leaveEtcd')
    expect(r.stderr).toMatch(
      new RegExp(
        `${q}phase: dbus action: STOP\n${q}phase: preReset action: START\n[^]*${q}phase: stopEverything action: START\n${q}events check condition met\n$`,
      ),
    )
    await s.sim.until(() => s.sim.node('wrkr-1')?.stage === 'shutting down', 10_000)
  })

  // the tracker opens its event stream and sends the reset without waiting for each other (action/node.go
  // run): a real reset's drain and cleanup take seconds before the events it waits for; here the node
  // model runs them at once, so the reset call answers 300 ms late (a latency fault) to leave the stream time
  it('reset --reboot (--wait) of a control plane: the reset sequence to stopAllServices, then the node answers in maintenance', async () => {
    s.sim.addFault({ node: 'cp-2', on: 'reset', kind: 'latency', ms: 300, times: 1 })
    const r = await talosctl('-e', CP1, '-n', CP2, 'reset', '--reboot')
    expect(r.code, r.stderr).toBe(0)
    const q = `"${CP2}": `
    // graceful: drain, cleanup, dbus, leave etcd, then every service stops (v1alpha1_sequencer.go Reset)
    expect(r.stderr).toMatch(
      new RegExp(`${q}sequence: reset action: START\n${q}phase: drain action: START\n${q}task: cordonAndDrainNode action: START\n`),
    )
    expect(r.stderr).toContain(`${q}task: leaveEtcd action: STOP\n`)
    expect(r.stderr).toMatch(
      new RegExp(
        `${q}phase: stopEverything action: START\n${q}events check condition met\n(${q}unavailable, retrying...\n)*${q}post check passed\n$`,
      ),
    )
    expect(s.sim.node('cp-2')).toMatchObject({ stage: 'maintenance', configured: false })
    // now a maintenance node: the cluster CA does not know its certificate
    expect(await talosctl('-e', CP2, '-n', CP2, 'get', 'machinestatus')).toEqual({
      code: 1,
      stdout: '',
      stderr:
        'rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"\n',
    })
  })

  it('reset (--wait) whose etcd leave is refused fails with the sequence error', async () => {
    s.sim.addFault({ node: 'cp-1', kind: 'etcd-leave', times: 1 })
    s.sim.addFault({ node: 'cp-1', on: 'reset', kind: 'latency', ms: 300, times: 1 })
    const r = await talosctl('-e', CP1, '-n', CP1, 'reset', '--timeout', '30s')
    expect(r.code, r.stderr).toBe(1)
    const q = `"${CP1}": `
    expect(r.stderr).toContain(`${q}sequence: reset action: STOP\n`)
    const why =
      'sequence failed: error running phase 4 in reset sequence: task 1/1: failed, failed to leave cluster: etcdserver: re-configuration failed due to not enough started members'
    // (the tracker prints the error's message where its code belongs: action/node.go handleEvent)
    expect(r.stderr).toContain(`${q}sequence: reset action: NOOP error: [code: ${why} message: FATAL]\n`)
    expect(r.stderr.endsWith(`${q}error: sequence error: ${why}\n${q}1 error(s) occurred:\n\tsequence error: ${why}\n`)).toBe(true)
    expect(s.sim.node('cp-1')).toMatchObject({ stage: 'resetting', configured: true })
  })
})

// a talosconfig whose role is os:reader (pkg/grpc/middleware/authz/authorizer.go; the rules in
// internal/app/machined/pkg/system/services/machined.go): dmesg is a read, reset is not. Range 127.31.2.x.
describe.skipIf(!!tool.skip)('the real talosctl with an os:reader talosconfig', () => {
  it('reads dmesg; reset is not authorized', async () => {
    const scenario = scenarioOn('127.31.2', { cps: 1, workers: 0, image: 'disk', vip: false })
    scenario.cluster.talosconfigRole = 'os:reader'
    const dir = mkdtempSync(join(tmpdir(), 'sim-ops-reader-'))
    const sim = await startSimulator({ scenario, dir })
    try {
      const talosctl = (...args: string[]): Promise<Run> =>
        new Promise((done) =>
          execFile(
            tool.path!,
            args,
            { encoding: 'utf8', timeout: 30_000, env: { PATH: sim.env.PATH, HOME: dir, TALOSCONFIG: sim.env.TALOSCONFIG } },
            (err, stdout, stderr) => done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
          ),
        )
      const ip = '127.31.2.11'
      expect(
        await talosctl('apply-config', '--insecure', '-n', ip, '-f', join(sim.clusterDir, 'clusterconfig', 'test-cp-1.yaml')),
      ).toMatchObject({ code: 0 })
      await sim.until(() => sim.node('cp-1')?.listener === 'secure', 30_000)
      expect((await talosctl('-e', ip, '-n', ip, 'dmesg')).code).toBe(0)
      expect(await talosctl('-e', ip, '-n', ip, 'reset', '--wait=false')).toEqual({
        code: 1,
        stdout: '',
        stderr: 'error executing reset: rpc error: code = PermissionDenied desc = not authorized\n',
      })
    } finally {
      await sim.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

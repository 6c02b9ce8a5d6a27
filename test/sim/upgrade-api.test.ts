// Talos upgrades against the simulator with the real talosctl v1.12.11 and v1.13.9 (docs/day2-design.md
// 1.1-1.3; sim/talos/upgrade.js). The legacy MachineService.Upgrade: the ack, the installer pull and
// a missing image (fault image-missing and an image no registry holds), the etcd upgrade mutex held by
// another session, ValidateForUpgrade's three refusals against the real etcd members (two members, a
// member never started, a member that does not answer), all skipped with --preserve; the Upgrade
// sequence's phases and stages with `--wait`, the installer refusing the path at phase 9 and the
// reboot into the old version, fault upgrade-rollback (a new boot ID, the old version), --stage's two
// reboots. v1.13: ImageService.Pull and LifecycleService.Upgrade for a v1.13 node (a v1.12 node answers
// Unimplemented: the client falls back to ImagePull and to the legacy upgrade). Range 127.246.1.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { applyInsecure, at, bootstrapWhenReady, bringUp, kubectl, sleep, startOn, talosctl, type Run, type Started } from './helpers.js'
import { realTool } from '../support/real-tools.js'

const tool = realTool('talosctl')
if (tool.skip) console.warn(`SKIPPED test/sim/upgrade-api.test.ts: ${tool.skip}`)
const TALOSCTL_113 = resolve('.tools/talosctl-v1.13.9/talosctl')
const has113 = existsSync(TALOSCTL_113)

const R = '127.246.1'
const [CP1, CP2, CP3, W1] = [`${R}.11`, `${R}.12`, `${R}.13`, `${R}.21`]
const INSTALLER = (v: string) => `ghcr.io/siderolabs/installer:${v}`
/** the image fault image-missing takes away (the registry holds it) */
const MISSING = INSTALLER('v1.13.8')
const ALL = ['cp-1', 'cp-2', 'cp-3', 'wrkr-1']
/** an Image Factory installer of a schematic no node runs */
const SCHEMATIC = 'ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515'
const FACTORY = `factory.talos.dev/installer/${SCHEMATIC}:v1.13.9`

/** Sequencer.Upgrade's phases and tasks (v1alpha1_sequencer.go, the names of v1alpha1_sequencer_tasks.go) */
const UPGRADE_PHASES: Array<[string, string]> = [
  ['drain', 'cordonAndDrainNode'],
  ['cleanup', 'stopAllPods'],
  ['dbus', 'stopDBus'],
  ['stopServices', 'stopServicesForUpgrade'],
  ['unmount', 'unmountPodMounts'],
  ['unmountBind', 'unmountSystemDiskBindMounts'],
  ['unmountSystem', 'unmountEphemeralPartition'],
  ['volumeFinalize', 'teardownLifecycle'],
  ['upgrade', 'upgrade'],
  ['meta', 'reloadMeta'],
  ['kexec', 'kexecPrepare'],
  ['stopEverything', 'stopAllServices'],
]

describe.skipIf(!!tool.skip)('Talos upgrades: MachineService.Upgrade and v1.13 LifecycleService (real talosctl)', () => {
  let s: Started
  const upgrade = (ip: string, args: string[], bin?: string, timeoutMs = 90_000): Promise<Run> =>
    talosctl(s.sim, ['upgrade', ...args, ...at(ip)], { timeoutMs, ...(bin ? { bin } : {}) })
  const version = (name: string) => s.sim.node(name)!
  const tag = async (ip: string, bin?: string) => {
    const r = await talosctl(s.sim, ['version', '--short', ...at(ip)], bin ? { bin } : {})
    return /Server:\s+NODE:\s+\S+\s+Tag:\s+(\S+)/.exec(r.stdout)?.[1] ?? r.stdout + r.stderr
  }
  /** readiness also follows the Kubernetes side (no node change announces it): polled */
  async function ready(names = ALL) {
    const ok = () => names.every((n) => s.sim.node(n)?.ready && (n.startsWith('wrkr') || s.sim.node(n)?.etcdHealthy))
    for (let i = 0; i < 1200 && !ok(); i++) await sleep(100)
    const why = (n: string) => {
      const v = s.sim.node(n)
      return v?.ready && (n.startsWith('wrkr') || v.etcdHealthy) ? null : `${n}: ${v?.stage} ${JSON.stringify(v?.unmetConditions)}`
    }
    expect(names.map(why).filter(Boolean)).toEqual([])
  }
  /** every distinct stage of a node from now on, and the boot IDs it took */
  function track(name: string) {
    const stages = [s.sim.node(name)!.stage]
    const boots = [s.sim.node(name)!.bootId]
    const stop = s.sim.watch((v) => {
      if (v.name !== name) return
      if (stages.at(-1) !== v.stage) stages.push(v.stage)
      if (boots.at(-1) !== v.bootId) boots.push(v.bootId)
    })
    return { stages, boots, stop }
  }

  beforeAll(async () => {
    s = await startOn(R, {
      cps: 3,
      workers: 1,
      image: 'disk',
      vip: false,
      speed: 40,
      timings: { boot: 6, reboot: 20, pull: 80, upgrade: 10 },
      faults: [
        { kind: 'image-missing', image: MISSING },
        { node: 'cp-3', kind: 'upgrade-rollback', times: 1 },
      ],
      // the registry: these installers only (a 1.10 one for the installer's refusal at phase 9)
      installers: [...['v1.10.9', 'v1.11.6', 'v1.12.11', 'v1.13.8', 'v1.13.9'].map(INSTALLER), FACTORY],
    })
    await bringUp(s, ALL, CP1)
    await ready()
  }, 180_000)
  afterAll(async () => {
    await s?.stop()
  })

  it('the pull: an image the registry lacks fails in the call after its one NotFound retry (code Unknown); nothing starts', async () => {
    const before = version('cp-1').bootId
    const r = await upgrade(CP1, ['--wait=false', '--image', MISSING])
    expect(r.code, r.stderr).toBe(1)
    expect(r.stderr).toContain(
      `rpc error: code = Unknown desc = error validating installer image "${MISSING}": failed to pull image "${MISSING}": failed to resolve reference "${MISSING}": ${MISSING}: not found`,
    )
    // an image no registry holds: the same, without any fault
    const none = 'registry.example.com/nothing/installer:v1.13.9'
    const r2 = await upgrade(W1, ['--wait=false', '--image', none])
    expect(r2.code, r2.stderr).toBe(1)
    expect(r2.stderr).toContain(`failed to resolve reference "${none}": ${none}: not found`)
    expect(version('cp-1')).toMatchObject({ stage: 'running', bootId: before })
    const calls = s.sim.calls().filter((c) => c.call === 'upgrade')
    expect(calls.map((c) => [c.node, c.command, c.args.slice(0, 2)])).toEqual([
      ['cp-1', 'upgrade', ['--image', MISSING]],
      ['wrkr-1', 'upgrade', ['--image', none]],
    ])
  })

  it('a client killed during the pull: the call ends with it, nothing starts (the node stays on its version)', async () => {
    const before = version('wrkr-1').bootId
    const child = spawn(join(s.sim.binDir, 'talosctl'), ['upgrade', '--wait=false', '--image', INSTALLER('v1.13.9'), ...at(W1)], {
      env: { PATH: s.sim.env.PATH, HOME: s.dir, TALOSCONFIG: s.sim.env.TALOSCONFIG },
      stdio: 'ignore',
    })
    const exited = new Promise<void>((done) => child.on('exit', () => done()))
    // the call arrived (Talos logs it before the pull, which takes 2 s here): then the client dies
    const arrived = `validating "${INSTALLER('v1.13.9')}"`
    let log = ''
    for (let i = 0; i < 100 && !log.includes(arrived); i++) {
      log = (await talosctl(s.sim, ['dmesg', ...at(W1)])).stdout
      if (!log.includes(arrived)) await sleep(50)
    }
    expect(log).toContain(arrived)
    child.kill('SIGKILL')
    await exited
    await sleep(3000) // the pull would have ended and the sequence started by now
    expect(version('wrkr-1')).toMatchObject({ stage: 'running', bootId: before })
    expect(await tag(W1)).toBe('v1.12.11')
  })

  it('the upgrade mutex held by another session refuses a control plane; --preserve skips it (and every etcd check)', async () => {
    const release = await s.sim.holdUpgradeMutex('cp-2')
    try {
      const r = await upgrade(CP1, ['--wait=false', '--image', INSTALLER('v1.13.9')])
      expect(r.code, r.stderr).toBe(1)
      expect(r.stderr).toContain(
        'rpc error: code = Unknown desc = failed to acquire upgrade mutex: error trying to lock etcd upgrade mutex: mutex: Locked by another session',
      )
      // the same with talosctl v1.13.9: a v1.12 node is outside the new API's range, so it falls back to the legacy call
      if (has113) {
        const r13 = await upgrade(CP1, ['--drain=false', '--wait=false', '--image', INSTALLER('v1.13.9')], TALOSCTL_113)
        expect(r13.code, r13.stderr).toBe(1)
        expect(r13.stdout + r13.stderr).toContain('New upgrade API is not available, falling back to legacy')
        expect(r13.stderr).toContain('mutex: Locked by another session')
      }
      // --preserve: no etcd client, no mutex, no validation; the installer then refuses the path at
      // phase 9 (host 1.12.11 is too new for a 1.10 installer) and machined reboots into the old version
      const cp1 = track('cp-1')
      const r2 = await upgrade(CP1, ['--preserve', '--timeout', '60s', '--image', INSTALLER('v1.10.9')])
      expect(r2.code, r2.stderr).toBe(1)
      const q = `"${CP1}": `
      for (const [p, t] of UPGRADE_PHASES.slice(0, 9)) {
        expect(r2.stderr).toContain(`${q}phase: ${p} action: START\n`)
        expect(r2.stderr).toContain(`${q}task: ${t} action: START\n`)
      }
      const fatal = 'sequence failed: error running phase 9 in upgrade sequence: task 1/1: failed, task "upgrade" failed: exit code 1'
      expect(r2.stderr).toContain(`${q}sequence: upgrade action: NOOP error: [code: ${fatal} message: FATAL]\n`)
      expect(r2.stderr).toContain(`${q}error: sequence error: ${fatal}\n`)
      expect(r2.stderr).not.toContain('phase: meta')
      await ready()
      cp1.stop()
      expect(cp1.stages).toEqual(['running', 'upgrading', 'rebooting', 'booting', 'running'])
      expect(cp1.boots.length).toBeGreaterThan(1)
      expect(await tag(CP1)).toBe('v1.12.11')
      const logs = await talosctl(s.sim, ['dmesg', ...at(CP1)])
      expect(logs.stdout).toContain('pre-flight checks failed: host version 1.12.11 is too new to downgrade to Talos 1.10.9')
      expect(logs.stdout).toContain('rebooting in 10 seconds')
    } finally {
      await release()
    }
  })

  it('ValidateForUpgrade against the real members: a member never started, a member that does not answer', async () => {
    // a learner that never starts: etcd lists it without a name (etcd refuses a member change for a
    // while after cp-1's member came back: `unhealthy cluster`)
    await ready()
    let id = ''
    for (let i = 0; i < 100 && !id; i++)
      id = await s.sim.addUnstartedMember('cp-1', `https://${R}.99:2380`).catch(async (e: Error) => {
        expect(e.message).toBe('etcdserver: unhealthy cluster')
        await sleep(200)
        return ''
      })
    const r = await upgrade(CP2, ['--wait=false', '--image', INSTALLER('v1.13.9')])
    expect(r.code, r.stderr).toBe(1)
    expect(r.stderr).toContain(
      `rpc error: code = Unknown desc = error validating etcd for upgrade: etcd member ${id} is not started, all members must be running to perform an upgrade`,
    )
    expect((await talosctl(s.sim, ['etcd', 'remove-member', id, ...at(CP1)])).code).toBe(0)

    // cp-3's etcd crashing: its quorum read waits out QuorumCheckTimeout
    s.sim.addFault({ node: 'cp-3', kind: 'etcd-crash' })
    await s.sim.until(() => !s.sim.node('cp-3')!.etcdHealthy, 30_000)
    const member3 = s.sim.node('cp-3')!.etcdMember
    const r2 = await upgrade(CP2, ['--wait=false', '--image', INSTALLER('v1.13.9')])
    expect(r2.code, r2.stderr).toBe(1)
    expect(r2.stderr).toContain(
      `rpc error: code = Unknown desc = error validating etcd for upgrade: etcd member ${member3} is not healthy; all members must be healthy to perform an upgrade: context deadline exceeded`,
    )
    // the mutex was released when the refused call returned: another session takes it at once
    const release = await s.sim.holdUpgradeMutex('cp-1')
    await release()
    s.sim.clearFault('cp-3', 'etcd-crash')
    await s.sim.until(() => s.sim.node('cp-3')!.etcdHealthy, 60_000)
  })

  it('--wait to v1.13.9 (talosctl v1.12.11): the phases, upgrading -> rebooting -> booting -> running, the new version and osImage', async () => {
    await ready()
    const w = track('wrkr-1')
    const from = s.sim.calls().length
    const r = await upgrade(W1, ['--timeout', '60s', '--image', INSTALLER('v1.13.9')])
    w.stop()
    expect(r.code, r.stderr).toBe(0)
    // the calls log names the boot that answered: the Upgrade call the old one, the tracker's post check the new one
    const answered = s.sim
      .calls()
      .slice(from)
      .filter((c) => c.node === 'wrkr-1')
    expect(answered.find((c) => c.call === 'upgrade')?.boot).toBe(w.boots[0])
    expect([...new Set(answered.flatMap((c) => (c.boot ? [c.boot] : [])))]).toEqual([w.boots[0], w.boots.at(-1)])
    expect(answered.filter((c) => !c.outcome.startsWith('ok')).every((c) => c.boot === undefined)).toBe(true)
    const q = `"${W1}": `
    const lines = r.stderr.split('\n')
    const seen = UPGRADE_PHASES.map(([p]) => lines.indexOf(`${q}phase: ${p} action: START`))
    expect(seen.every((i) => i >= 0)).toBe(true)
    expect([...seen].sort((a, b) => a - b)).toEqual(seen)
    expect(r.stderr).toContain(`${q}task: stopAllServices action: START\n${q}error: stopAllServices task completed\n`)
    expect(r.stderr).toMatch(new RegExp(`${q}events check condition met\n${q}post check passed\n$`))
    expect(w.stages).toEqual(['running', 'upgrading', 'rebooting', 'booting', 'running'])
    expect(await tag(W1)).toBe('v1.13.9')
    const node = (await kubectl(s, ['get', 'node', 'wrkr-1', '-o', 'jsonpath={.status.nodeInfo.osImage}'])).stdout
    expect(node).toBe('Talos (v1.13.9)')
    await ready()
  })

  it('fault upgrade-rollback: the new image does not boot; --wait passes on the boot ID, the version is the old one', async () => {
    const c = track('cp-3')
    const r = await upgrade(CP3, ['--timeout', '60s', '--image', INSTALLER('v1.13.9')])
    c.stop()
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr).toContain(`"${CP3}": post check passed\n`)
    expect(new Set(c.boots).size).toBeGreaterThan(1)
    expect(await tag(CP3)).toBe('v1.12.11')
    const logs = await talosctl(s.sim, ['dmesg', ...at(CP3)])
    expect(logs.stdout).toContain('boot of Talos v1.13.9 failed, the bootloader falls back to v1.12.11')
    await ready()
  })

  it('--stage: the StageUpgrade sequence reboots, the Install sequence writes the image and reboots again', async () => {
    await ready()
    const c = track('cp-2')
    const r = await upgrade(CP2, ['--stage', '--timeout', '60s', '--image', INSTALLER('v1.13.9')])
    c.stop()
    expect(r.code, r.stderr).toBe(0)
    const q = `"${CP2}": `
    expect(r.stderr).toContain(`${q}sequence: stageUpgrade action: START\n`)
    expect(r.stderr).not.toContain('phase: upgrade action')
    expect(c.stages).toEqual(['running', 'upgrading', 'rebooting', 'booting', 'installing', 'rebooting', 'booting', 'running'])
    expect(await tag(CP2)).toBe('v1.13.9')
    await ready()
  })

  it.skipIf(!has113)('talosctl v1.13.9 on a v1.13 node: ImageService.Pull, LifecycleService.Upgrade, then the reboot', async () => {
    await ready()
    // a refused path: exit code 1 from the installer, no reboot
    const before = version('wrkr-1').bootId
    const r = await upgrade(W1, ['--drain=false', '--timeout', '60s', '--image', INSTALLER('v1.11.6')], TALOSCTL_113)
    expect(r.code, r.stderr).toBe(1)
    expect(r.stdout + r.stderr).toContain(`${W1}: pulled image ghcr.io/siderolabs/installer@sha256:`)
    expect(r.stdout + r.stderr).toContain(`upgrade failed with exit code 1`)
    expect(version('wrkr-1').bootId).toBe(before)
    // a missing image: NotFound at once from ImageService.Pull
    const r2 = await upgrade(W1, ['--drain=false', '--timeout', '60s', '--image', MISSING], TALOSCTL_113)
    expect(r2.code, r2.stderr).toBe(1)
    expect(r2.stderr).toContain(`error pulling upgrade image`)
    expect(r2.stderr).toContain(`code = NotFound desc = error pulling image: failed to pull image "${MISSING}"`)
    // LifecycleService.Upgrade has no etcd check: a v1.13 control plane upgrades while another session holds the mutex
    const release = await s.sim.holdUpgradeMutex('cp-1')
    try {
      const cp = await upgrade(CP2, ['--drain=false', '--timeout', '60s', '--image', INSTALLER('v1.13.9')], TALOSCTL_113)
      expect(cp.code, cp.stderr).toBe(0)
      expect(cp.stdout + cp.stderr).toContain(`${CP2}: upgrade completed`)
    } finally {
      await release()
    }
    await ready()
    // accepted: the installer's output and exit code 0, then the reboot through the tracker; an Image
    // Factory installer: the node then runs that schematic (ExtensionStatus `schematic`, its ID)
    const w = track('wrkr-1')
    const r3 = await upgrade(W1, ['--drain=false', '--timeout', '60s', '--image', FACTORY], TALOSCTL_113)
    w.stop()
    expect(r3.code, r3.stderr).toBe(0)
    expect(r3.stdout + r3.stderr).toContain(`${W1}: upgrade completed`)
    expect(new Set(w.boots).size).toBeGreaterThan(1)
    const ext = await talosctl(s.sim, ['get', 'extensionstatuses', '-o', 'json', ...at(W1)], { bin: TALOSCTL_113 })
    expect(ext.code, ext.stderr).toBe(0)
    expect(ext.stdout).toContain(`"version": "${SCHEMATIC}"`)
    const kinds = s.sim
      .calls()
      .filter((c) => c.node === 'wrkr-1' && ['image', 'lifecycle', 'upgrade'].includes(c.call))
      .map((c) => `${c.call} ${c.outcome.split(':')[0]}`)
    expect(kinds.slice(-5)).toEqual(['image ok', 'lifecycle ok', 'image error', 'image ok', 'lifecycle ok'])
    await ready()
  })

  it.skipIf(!has113)(
    'image pull: a v1.13 node serves ImageService.Pull; a v1.12 node answers Unimplemented and the client falls back to ImagePull',
    async () => {
      const r = await talosctl(s.sim, ['image', 'pull', INSTALLER('v1.13.9'), ...at(W1)], { bin: TALOSCTL_113 })
      expect(r.code, r.stderr).toBe(0)
      const r2 = await talosctl(s.sim, ['image', 'pull', INSTALLER('v1.13.9'), ...at(CP1)], { bin: TALOSCTL_113 })
      expect(r2.code, r2.stderr).toBe(0)
      const pulls = s.sim
        .calls()
        .filter((c) => c.call === 'image')
        .slice(-3)
        .map((c) => [c.node, c.outcome.replace(/desc = .*/, 'desc')])
      expect(pulls).toEqual([
        ['wrkr-1', 'ok'],
        ['cp-1', 'error: rpc error: code = Unimplemented desc'],
        ['cp-1', 'ok'],
      ])
    },
  )

  it('a second upgrade while the first runs: its ack, then `locked`; a drain a budget blocks is only logged; --reboot-mode powercycle has no kexec phase', async () => {
    await ready()
    // the drain phase runs Talos's whole DrainTimeout (5 simulated minutes) against a blocking budget
    s.sim.addFault({ node: 'wrkr-1', kind: 'drain-blocked', times: 1 })
    const w = track('wrkr-1')
    const first = upgrade(W1, ['--reboot-mode', 'powercycle', '--timeout', '60s', '--image', INSTALLER('v1.13.9')])
    await s.sim.until(() => s.sim.node('wrkr-1')!.stage === 'upgrading', 30_000)
    const second = await upgrade(W1, ['--wait=false', '--image', INSTALLER('v1.13.9')])
    expect(second.code, second.stderr).toBe(0)
    expect(second.stdout).toMatch(new RegExp(`^NODE +ACK +STARTED\n${W1.replace(/\./g, '\\.')} +Upgrade request received +`))
    const r = await first
    await ready()
    w.stop()
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr).toContain(`"${W1}": phase: stopEverything action: START\n`)
    expect(r.stderr).not.toContain('phase: kexec')
    // one sequence, one reboot; MachineStatus stays upgrading until the machine goes down
    expect(w.stages).toEqual(['running', 'upgrading', 'rebooting', 'booting', 'running'])
    expect(new Set(w.boots).size).toBe(2)
    const log = (await talosctl(s.sim, ['dmesg', ...at(W1)])).stdout
    expect(log).toContain('upgrade failed: locked')
    expect(log).toContain('WARNING: failed to evict pod: failed to evict pod')
    const calls = s.sim.calls().filter((c) => c.node === 'wrkr-1' && c.call === 'upgrade')
    expect(calls.slice(-2).map((c) => [c.args.slice(0, 4), c.outcome])).toEqual([
      [['--image', INSTALLER('v1.13.9'), '--reboot-mode', 'powercycle'], 'ok'],
      [['--image', INSTALLER('v1.13.9'), '-e', W1], 'ok'],
    ])
  })
})

describe.skipIf(!!tool.skip)('ValidateForUpgrade: two members', () => {
  let s: Started
  afterAll(async () => {
    await s?.stop()
  })
  it('a control plane of a two-member cluster is refused (with both talosctl versions)', async () => {
    s = await startOn(R, { cps: 2, workers: 0, image: 'disk', vip: false, speed: 40, timings: { boot: 6, pull: 20 } })
    for (const n of ['cp-1', 'cp-2']) expect(await applyInsecure(s.sim, n)).toMatchObject({ code: 0 })
    expect((await bootstrapWhenReady(s.sim, 'cp-1')).code).toBe(0)
    await s.sim.until(() => ['cp-1', 'cp-2'].every((n) => s.sim.node(n)?.etcdHealthy && s.sim.node(n)?.stage === 'running'), 90_000)
    const text =
      'rpc error: code = Unknown desc = error validating etcd for upgrade: etcd member count(2) is insufficient to maintain quorum if upgrade commences'
    const r = await talosctl(s.sim, ['upgrade', '--wait=false', '--image', INSTALLER('v1.13.9'), ...at(CP1)])
    expect(r.code, r.stderr).toBe(1)
    expect(r.stderr).toContain(text)
    if (has113) {
      const r13 = await talosctl(s.sim, ['upgrade', '--drain=false', '--wait=false', '--image', INSTALLER('v1.13.9'), ...at(CP2)], {
        bin: TALOSCTL_113,
      })
      expect(r13.code, r13.stderr).toBe(1)
      expect(r13.stderr).toContain(text)
    }
    expect(s.sim.node('cp-1')!.stage).toBe('running')
  })
})

// task upgrade:talos STAGE=true and REBOOT_MODE=powercycle end to end with the real talosctl v1.12.11
// against one shared cluster (1 control plane, 2 workers): the flags sent (the simulator's calls
// log), a staged upgrade followed through both of its reboots to the version it runs, a bad
// REBOOT_MODE refused as bad input, and both workers at once (their reads batched). Range 127.237.20.0/24.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { hintOf, nodeIn, runInFreshShell, sharedCluster } from './harness.js'
import { fastWith } from '../faults/helpers.js'
import { at, talosctl } from '../sim/helpers.js'

const R = '127.237.20'
const SLOW_OK = fastWith('--ready-timeout', '60s', fastWith('--call-timeout', '20s'))
const FLAGS = [...SLOW_OK, '--upgrade-timeout', '2m']
const TARGET = 'v1.13.9'
const CASE_TIMEOUT = 300_000

describe('task upgrade:talos STAGE and REBOOT_MODE', () => {
  const shared = sharedCluster(R, { cps: 1, workers: 2, image: 'disk', speed: 60, kube: 'model' }, SLOW_OK)
  const upgradeArgs = (from: number, node: string): string[][] =>
    shared()
      .calls()
      .slice(from)
      .filter((c) => c.call === 'upgrade' && c.node === node)
      .map((c) => c.args)

  it('a REBOOT_MODE other than default or powercycle is exit 2 naming the variable; nothing is sent', async () => {
    const from = shared().calls().length
    const r = await shared().task('upgrade:talos', { TALOS_VERSION: TARGET, REBOOT_MODE: 'kexec' }, FLAGS)
    expect(r.code, r.stdout + r.stderr).toBe(2)
    expect(r.stderr).toContain('REBOOT_MODE must be default or powercycle, got "kexec"')
    expect(
      shared()
        .calls()
        .slice(from)
        .filter((c) => c.call === 'upgrade'),
    ).toEqual([])
  })

  it(
    'STAGE=true sends --stage and follows both reboots to the target; REBOOT_MODE=powercycle sends --reboot-mode powercycle',
    async () => {
      const sim = shared().sim
      const boots = new Set<string>([sim.node('wrkr-1')!.bootId])
      const stop = sim.watch((v) => {
        if (v.name === 'wrkr-1') boots.add(v.bootId)
      })
      const from = shared().calls().length
      let staged
      try {
        staged = await shared().task('upgrade:talos', { TALOS_VERSION: TARGET, NODES: 'wrkr-1', STAGE: 'true' }, FLAGS)
      } finally {
        stop()
      }
      expect(staged.code, staged.stdout + staged.stderr).toBe(0)
      const sent = upgradeArgs(from, 'wrkr-1')
      expect(sent).toHaveLength(1)
      expect(sent[0]).toContain('--stage')
      expect(sent[0]).not.toContain('--reboot-mode')
      // the boot before, the install boot (old version), the boot into the target: two reboots
      expect(boots.size).toBeGreaterThanOrEqual(3)
      const w1 = nodeIn(shared().report(), 'upgrade-talos', 'wrkr-1')
      expect(w1.status).toBe('ok')
      expect(w1.detail).toContain(`upgraded v1.12.11 -> ${TARGET}`)
      // the version running at the end, as the real talosctl reads it
      const v = await talosctl(sim, ['version', '--short', ...at(sim.node('wrkr-1')!.ip)])
      expect(/Server:\s+NODE:\s+\S+\s+Tag:\s+(\S+)/.exec(v.stdout)?.[1]).toBe(TARGET)

      const from2 = shared().calls().length
      const power = await shared().task('upgrade:talos', { TALOS_VERSION: TARGET, NODES: 'wrkr-2', REBOOT_MODE: 'powercycle' }, FLAGS)
      expect(power.code, power.stdout + power.stderr).toBe(0)
      const sent2 = upgradeArgs(from2, 'wrkr-2')
      expect(sent2).toHaveLength(1)
      expect(sent2[0]).toEqual(expect.arrayContaining(['--reboot-mode', 'powercycle']))
      expect(sent2[0]).not.toContain('--stage')
      expect(nodeIn(shared().report(), 'upgrade-talos', 'wrkr-2').detail).toContain(`upgraded v1.12.11 -> ${TARGET}`)
    },
    CASE_TIMEOUT,
  )

  it(
    'a staged install whose new image does not boot: named rolled back on the boot that runs the old version, not a timeout; the printed hint stages it again',
    async () => {
      const sim = shared().sim
      // after the case above wrkr-1 runs v1.13.9: staged back to v1.13.8, whose boot fails once
      sim.addFault({ node: 'wrkr-1', kind: 'upgrade-rollback', times: 1 })
      const down = { TALOS_VERSION: 'v1.13.8', NODES: 'wrkr-1', STAGE: 'true' }
      const r = await shared().task('upgrade:talos', down, [...FLAGS, '--allow-downgrade'])
      expect(r.code, r.stdout + r.stderr).toBe(1)
      const w1 = nodeIn(shared().report(), 'upgrade-talos', 'wrkr-1')
      expect(w1.error?.kind, JSON.stringify(w1)).toBe('rolled-back')
      expect(w1.error?.message).toBe(
        `rolled back: the node rebooted (a new boot ID) but runs ${TARGET}, not v1.13.8: the staged install did not complete (it failed, or the bootloader went back from the new image)`,
      )
      expect(w1.day2?.state).toBe('rolled back')
      const node = await shared().kubectl(['get', 'node', 'wrkr-1', '-o', 'jsonpath={.spec.unschedulable}'])
      expect(node.stdout).toBe('')

      // the hint, run as printed in a fresh shell, stages the same upgrade again (the fault is spent)
      const { command } = hintOf(r.stderr, 'wrkr-1')
      expect(command).toContain('STAGE=true')
      expect(command).toContain('--allow-downgrade')
      const again = await runInFreshShell(shared(), command)
      expect(again.code, again.stdout + again.stderr).toBe(0)
      const v = await talosctl(sim, ['version', '--short', ...at(sim.node('wrkr-1')!.ip)])
      expect(/Server:\s+NODE:\s+\S+\s+Tag:\s+(\S+)/.exec(v.stdout)?.[1]).toBe('v1.13.8')
    },
    CASE_TIMEOUT,
  )

  it(
    'a staged upgrade whose node stops answering after the reboot: down, named, left cordoned; once it answers, the printed hint finishes it',
    async () => {
      const sim = shared().sim
      // after the cases above wrkr-2 runs v1.13.9: staged back to v1.13.8; its API refused from its first new boot on
      const before = sim.node('wrkr-2')!.bootId
      let refused = false
      const stop = sim.watch((v) => {
        if (refused || v.name !== 'wrkr-2' || v.bootId === before) return
        refused = true
        sim.addFault({ node: 'wrkr-2', kind: 'refused' })
      })
      let r
      try {
        r = await shared().task('upgrade:talos', { TALOS_VERSION: 'v1.13.8', NODES: 'wrkr-2', STAGE: 'true' }, [
          ...SLOW_OK,
          '--upgrade-timeout',
          '15s',
          '--allow-downgrade',
        ])
      } finally {
        stop()
      }
      expect(r.code, r.stdout + r.stderr).toBe(1)
      const w2 = nodeIn(shared().report(), 'upgrade-talos', 'wrkr-2')
      expect(w2.error?.kind, JSON.stringify(w2)).toBe('timeout')
      expect(w2.error?.message).toMatch(
        /^down: the staged upgrade to v1\.13\.8 did not complete within \d+s \(the node did not come back\)/,
      )
      expect(w2.day2?.state).toBe('down')
      const cordoned = await shared().kubectl(['get', 'node', 'wrkr-2', '-o', 'jsonpath={.spec.unschedulable}'])
      expect(cordoned.stdout).toBe('true')

      const { command } = hintOf(r.stderr, 'wrkr-2')
      expect(command).toContain('STAGE=true')
      sim.clearFault('wrkr-2', 'refused')
      const again = await runInFreshShell(shared(), command)
      expect(again.code, again.stdout + again.stderr).toBe(0)
      const v = await talosctl(sim, ['version', '--short', ...at(sim.node('wrkr-2')!.ip)])
      expect(/Server:\s+NODE:\s+\S+\s+Tag:\s+(\S+)/.exec(v.stdout)?.[1]).toBe('v1.13.8')
      const uncordoned = await shared().kubectl(['get', 'node', 'wrkr-2', '-o', 'jsonpath={.spec.unschedulable}'])
      expect(uncordoned.stdout).toBe('')
    },
    CASE_TIMEOUT,
  )

  it(
    'CONCURRENCY=2: the workers in flight are read through the control plane in batched calls, never alone; each checked at the target and uncordoned',
    async () => {
      // after the cases above both workers run v1.13.8
      const log = join(shared().clusterDir, '.bootstrap', 'commands.log')
      const logFrom = readFileSync(log, 'utf8').length
      const r = await shared().task('upgrade:talos', { TALOS_VERSION: TARGET, NODES: 'wrkr-1,wrkr-2', CONCURRENCY: '2' }, FLAGS)
      expect(r.code, r.stdout + r.stderr).toBe(0)
      const sim = shared().sim
      const [cp, w1, w2] = ['cp-1', 'wrkr-1', 'wrkr-2'].map((n) => sim.node(n)!.ip)
      // the reads of a worker after its send go through cp-1 (first in the call), never a worker alone
      const lines = readFileSync(log, 'utf8').slice(logFrom).split('\n')
      const reads = lines.slice(lines.findIndex((l) => / talosctl upgrade /.test(l))).flatMap((l) => {
        const m = /talosctl (service kubelet|get machinestatus|get extensions|version) .*-e (\S+) -n (\S+)/.exec(l)
        return m ? [{ what: m[1], via: m[2], nodes: (m[3] ?? '').split(',') }] : []
      })
      expect(reads.filter((c) => c.nodes.length === 1 && c.nodes[0] !== cp)).toEqual([])
      for (const what of ['service kubelet', 'get machinestatus']) {
        const batched = reads.filter((c) => c.what === what)
        expect(batched.length, JSON.stringify(reads)).toBeGreaterThan(0)
        expect(batched.every((c) => c.via === cp && c.nodes[0] === cp)).toBe(true)
        expect(new Set(batched.flatMap((c) => c.nodes))).toEqual(new Set([cp, w1, w2]))
      }
      for (const name of ['wrkr-1', 'wrkr-2']) {
        expect(nodeIn(shared().report(), 'upgrade-talos', name).detail).toBe(`upgraded v1.13.8 -> ${TARGET}; rebooted, uncordoned`)
        const v = await talosctl(sim, ['version', '--short', ...at(sim.node(name)!.ip)])
        expect(/Server:\s+NODE:\s+\S+\s+Tag:\s+(\S+)/.exec(v.stdout)?.[1]).toBe(TARGET)
        const node = await shared().kubectl(['get', 'node', name, '-o', 'jsonpath={.spec.unschedulable}'])
        expect(node.stdout).toBe('')
      }
    },
    CASE_TIMEOUT,
  )

  it(
    "an upgrade the node takes but never starts (machined's lock held): named not-started, not down; left cordoned; the printed hint upgrades it",
    async () => {
      const sim = shared().sim
      const before = sim.node('wrkr-2')!.bootId
      sim.addFault({ node: 'wrkr-2', on: 'upgrade', kind: 'upgrade-locked', times: 1 })
      const r = await shared().task('upgrade:talos', { TALOS_VERSION: 'v1.13.8', NODES: 'wrkr-2' }, [
        ...SLOW_OK,
        '--upgrade-timeout',
        '15s',
        '--allow-downgrade',
      ])
      expect(r.code, r.stdout + r.stderr).toBe(1)
      const w2 = nodeIn(shared().report(), 'upgrade-talos', 'wrkr-2')
      expect(w2.error?.kind).toBe('not-started')
      expect(w2.error?.message).toMatch(
        /^talosctl upgrade --image \S+:v1\.13\.8 was taken, but wrkr-2 kept answering on the boot it had for \d+s: its sequence never started \(nothing changed on it; it stays cordoned\)$/,
      )
      expect(w2.day2?.state).toBe('cordoned')
      expect(sim.node('wrkr-2')!.bootId).toBe(before)
      const { command } = hintOf(r.stderr, 'wrkr-2')
      expect(hintOf(r.stderr, 'wrkr-2').hint).toContain('dmesg')
      const again = await runInFreshShell(shared(), command)
      expect(again.code, again.stdout + again.stderr).toBe(0)
      const v = await talosctl(sim, ['version', '--short', ...at(sim.node('wrkr-2')!.ip)])
      expect(/Server:\s+NODE:\s+\S+\s+Tag:\s+(\S+)/.exec(v.stdout)?.[1]).toBe('v1.13.8')
      expect(sim.node('wrkr-2')!.bootId).not.toBe(before)
    },
    CASE_TIMEOUT,
  )
})

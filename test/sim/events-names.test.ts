// The reboot sequence's events as Talos names them, and the 2 s floor on every reboot's API-down
// window. Phases and tasks: internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_sequencer.go (Reboot,
// stopAllPhaselist with kexec) and the names the tasks give themselves in v1alpha1_sequencer_tasks.go
// (StopServicesEphemeral is `stopServicesForUpgrade`, TeardownVolumeLifecycle `teardownLifecycle`,
// KexecPrepare `kexecPrepare`); FORCE skips the teardown. The client: the real talosctl v1.12.11 (and
// v1.13.9) `reboot --wait`, whose tracker (cmd/talosctl/pkg/talos/action/node.go) watches again 1 s
// after the reboot sequence starts, still with tail 0: at speed 120 a reboot of 20 simulated seconds
// would be back before that and leave --wait hanging, so the node stays down 2 s of wall clock.
// Range 127.240.1.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { at, bringUp, sleep, startOn, talosctl, type Started } from './helpers.js'
import { realTool } from '../support/real-tools.js'

const tool = realTool('talosctl')
if (tool.skip) console.warn(`SKIPPED test/sim/events-names.test.ts: ${tool.skip}`)
const TALOSCTL_113 = resolve('.tools/talosctl-v1.13.9/talosctl')

const R = '127.240.1'
const CP1 = `${R}.11`,
  W1 = `${R}.21`

/** Sequencer.Reboot in DEFAULT and POWERCYCLE mode: cleanup, dbus, stopAllPhaselist(r, true), reboot */
const TEARDOWN: Array<[string, string]> = [
  ['cleanup', 'stopAllPods'],
  ['dbus', 'stopDBus'],
  ['stopServices', 'stopServicesForUpgrade'],
  ['umount', 'unmountPodMounts'],
  ['unmountBind', 'unmountSystemDiskBindMounts'],
  ['unmountSystem', 'unmountEphemeralPartition'],
  ['volumeFinalize', 'teardownLifecycle'],
  ['kexec', 'kexecPrepare'],
  ['stopEverything', 'stopAllServices'],
]
/** what runPhase/runTask publish around each task (v1alpha1_controller.go), the last phase only started */
const rebootEvents = (teardown: Array<[string, string]>) => [
  'SequenceEvent reboot START',
  ...teardown.flatMap(([p, t]) => [`PhaseEvent ${p} START`, `TaskEvent ${t} START`, `TaskEvent ${t} STOP`, `PhaseEvent ${p} STOP`]),
  'PhaseEvent reboot START',
  'TaskEvent reboot START',
]

interface Ev {
  type: string
  actor: string
  text: string
}
/** `talosctl events` output: per event a line `<node> <id> talos/runtime/machine.<Type>`, then `<actor> <name> <action>` */
function parseEvents(stdout: string): Ev[] {
  const lines = stdout.split('\n')
  const out: Ev[] = []
  for (let i = 0; i < lines.length - 1; i++) {
    const m = /talos\/runtime\/machine\.(\w+)\s*$/.exec(lines[i]!)
    if (!m) continue
    const cells = lines[i + 1]!.trim().split(/\s+/)
    const [name, action] = cells.slice(-2)
    out.push({ type: m[1]!, actor: cells.length > 2 ? cells[0]! : '', text: `${m[1]} ${name} ${action}` })
  }
  return out
}

describe.skipIf(!!tool.skip)('the reboot sequence as Talos names it; every reboot down 2 s of wall clock (real talosctl)', () => {
  let s: Started
  const env = () => ({ PATH: s.sim.env.PATH, HOME: s.dir, TALOSCONFIG: s.sim.env.TALOSCONFIG, KUBECONFIG: join(s.dir, 'kubeconfig') })

  /** `talosctl events --tail -1` on the worker from before the reboot until its stream ends (the node goes down) */
  async function follow(bin: string): Promise<() => Promise<Ev[]>> {
    const child = spawn(bin, ['events', '--tail', '-1', ...at(W1)], { env: env() })
    let out = ''
    child.stdout.on('data', (d: Buffer) => (out += d.toString()))
    const ended = new Promise<void>((done) => child.on('exit', () => done()))
    // the boot's own events replayed: the stream is open
    for (let i = 0; i < 200 && !out.includes('MachineStatusEvent'); i++) await sleep(50)
    expect(out).toContain('MachineStatusEvent')
    return async () => {
      await Promise.race([ended, sleep(30_000)])
      child.kill('SIGKILL')
      return parseEvents(out)
    }
  }

  /** wall-clock ms from each `rebooting` of the worker to its next `booting` */
  function downWindows(): number[] {
    const windows: number[] = []
    let since: number | null = null
    s.sim.watch((v) => {
      if (v.name !== 'wrkr-1') return
      if (v.stage === 'rebooting' && since == null) since = Date.now()
      if (v.stage === 'booting' && since != null) {
        windows.push(Date.now() - since)
        since = null
      }
    })
    return windows
  }

  async function ready() {
    for (let i = 0; i < 600 && !['cp-1', 'wrkr-1'].every((n) => s.sim.node(n)?.ready); i++) await sleep(50)
    expect(['cp-1', 'wrkr-1'].map((n) => [n, s.sim.node(n)?.ready])).toEqual([
      ['cp-1', true],
      ['wrkr-1', true],
    ])
  }

  // disk images (no install reboot), the helpers' reboot of 20 simulated seconds: 167 ms at speed 120
  beforeAll(async () => {
    s = await startOn(R, { cps: 1, workers: 1, image: 'disk', speed: 120 })
    await bringUp(s, ['cp-1', 'wrkr-1'], CP1)
    await ready()
  }, 120_000)
  afterAll(async () => {
    await s?.stop()
  })

  it('reboot --wait at speed 120: the sequence with stopServicesForUpgrade, teardownLifecycle and the kexec phase; down 2 s; the tracker finds the node down and passes', async () => {
    const before = s.sim.node('wrkr-1')!.bootId
    const windows = downWindows()
    const events = await follow(join(s.sim.binDir, 'talosctl'))
    const r = await talosctl(s.sim, ['reboot', '--timeout', '40s', ...at(CP1, W1)], { timeoutMs: 50_000 })
    expect(r.code, r.stderr).toBe(0)
    const q = `"${W1}": `
    const actor = new RegExp(`${q}actor ID: ([0-9a-f-]{36})\n`).exec(r.stderr)?.[1]
    expect(actor).toBeDefined()
    // the re-watch 1 s after `sequence: reboot` found the API closed (tail -1 from then on), then the new boot
    expect(r.stderr).toContain(`${q}sequence: reboot action: START\n${q}error: reboot sequence completed\n${q}unavailable, retrying...\n`)
    expect(r.stderr).toMatch(new RegExp(`${q}events check condition met\n${q}post check passed\n$`))
    expect(s.sim.node('wrkr-1')!.bootId).not.toBe(before)
    const seen = (await events()).filter((e) => e.actor === actor).map((e) => e.text)
    expect(seen).toEqual(rebootEvents(TEARDOWN))
    // timers never fire early by more than a millisecond of rounding
    expect(windows).toHaveLength(1)
    expect(windows[0]).toBeGreaterThanOrEqual(1995)
    await ready()
  })

  it('--mode powercycle keeps the kexec phase (KexecPrepare skips itself); --mode force has only the reboot phase', async () => {
    const power = await follow(join(s.sim.binDir, 'talosctl'))
    const r1 = await talosctl(s.sim, ['reboot', '--timeout', '40s', '--mode', 'powercycle', ...at(CP1, W1)], { timeoutMs: 50_000 })
    expect(r1.code, r1.stderr).toBe(0)
    const actor1 = /actor ID: ([0-9a-f-]{36})/.exec(r1.stderr)?.[1]
    expect((await power()).filter((e) => e.actor === actor1).map((e) => e.text)).toEqual(rebootEvents(TEARDOWN))
    await ready()
    const forced = await follow(join(s.sim.binDir, 'talosctl'))
    const r2 = await talosctl(s.sim, ['reboot', '--timeout', '40s', '--mode', 'force', ...at(CP1, W1)], { timeoutMs: 50_000 })
    expect(r2.code, r2.stderr).toBe(0)
    const actor2 = /actor ID: ([0-9a-f-]{36})/.exec(r2.stderr)?.[1]
    expect((await forced()).filter((e) => e.actor === actor2).map((e) => e.text)).toEqual(rebootEvents([]))
    await ready()
  })

  it.skipIf(!existsSync(TALOSCTL_113))('talosctl v1.13.9: reboot --wait passes at speed 120 and sees the same names', async () => {
    const before = s.sim.node('wrkr-1')!.bootId
    const windows = downWindows()
    const events = await follow(TALOSCTL_113)
    const r = await talosctl(s.sim, ['reboot', '--timeout', '40s', ...at(CP1, W1)], { timeoutMs: 50_000, bin: TALOSCTL_113 })
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr).toContain(`"${W1}": unavailable, retrying...\n`)
    expect(r.stderr).toContain(`"${W1}": post check passed\n`)
    expect(s.sim.node('wrkr-1')!.bootId).not.toBe(before)
    const actor = /actor ID: ([0-9a-f-]{36})/.exec(r.stderr)?.[1]
    expect((await events()).filter((e) => e.actor === actor).map((e) => e.text)).toEqual(rebootEvents(TEARDOWN))
    expect(windows).toHaveLength(1)
    expect(windows[0]).toBeGreaterThanOrEqual(1995)
    await ready()
  })
})

// ApplyConfiguration on a configured node (internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go):
// validated (InvalidArgument), then by mode; Runtime.CanApplyImmediate
// (internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_runtime.go) decides whether auto reboots.
// Driven with the real talosctl's apply-config. Range 127.44.x.y.
import { afterEach, describe, expect, it } from 'vitest'
import { parse, stringify } from 'yaml'
import { applyInsecure, at, configFile, configOf, stageLog, startOn, talosctl, type Started } from './helpers.js'

let c: Started | null = null
afterEach(async () => {
  await c?.stop()
  c = null
})

describe('authenticated apply', () => {
  it('auto applies a live change without a reboot, reboots for another; no-reboot refuses it; a bad config is InvalidArgument', async () => {
    // the reboot an apply asks for starts min(10 s, reboot/4) later (services stop first): 1 s real here
    c = await startOn('127.44.1', { cps: 1, workers: 1, image: 'disk', vip: false, speed: 10, timings: { boot: 10, reboot: 40 } })
    for (const n of ['cp-1', 'wrkr-1']) await applyInsecure(c.sim, n)
    await c.sim.until(() => c!.sim.node('wrkr-1')!.stage === 'running')
    const ip = '127.44.1.21'
    const apply = (name: string, cfg: unknown, mode: string) =>
      talosctl(c!.sim, ['apply-config', ...at(ip), '-f', configFile(c!.sim, name, stringify(cfg)), '--mode', mode])
    // a worker answers a call for its own address locally (apid): a plain error, not a per-node one
    const failed = (desc: string) => `error applying new configuration: rpc error: code = ${desc}\n`
    const base = configOf(c.sim, 'wrkr-1')
    const labelled = parse(base)
    labelled.machine.nodeLabels = { zone: 'a' }
    expect(await apply('labelled', labelled, 'auto')).toMatchObject({ code: 0, stderr: 'Applied configuration without a reboot\n' })
    expect(c.sim.node('wrkr-1')!.stage).toBe('running')
    const changed = parse(base)
    changed.machine.env = { FOO: 'bar' }
    // the refusal carries the diff of what needs a reboot (CanApplyImmediate; test/sim/apply-day2.test.ts has more)
    expect((await apply('changed', changed, 'no-reboot')).stderr).toMatch(
      /^error applying new configuration: rpc error: code = InvalidArgument desc = this config change can't be applied in immediate mode\ndiff:\n--- a\n\+\+\+ b\n@@ [^\n]+ @@\n(?:.*\n)*\+ {4}env:\n\+ {8}FOO: bar\n/,
    )
    const bad = parse(base)
    bad.machine.type = 'nonsense'
    expect((await apply('bad', bad, 'auto')).stderr).toMatch(
      /^error applying new configuration: rpc error: code = InvalidArgument desc = 1 error occurred:\n\t\* v1alpha1\.Config: 1 error occurred:\n\t\* unknown machine type "nonsense"\n/,
    )
    const log = stageLog(c.sim, 'wrkr-1')
    const rebooting = await apply('changed', changed, 'auto')
    expect(rebooting.code).toBe(0)
    expect(rebooting.stderr).toMatch(
      /^Applied configuration with a reboot: this config change can't be applied in immediate mode\ndiff:\n--- a\n/,
    )
    // a second apply before the reboot is refused
    expect((await apply('changed', changed, 'auto')).stderr).toBe(
      failed(
        'FailedPrecondition desc = configuration was already applied and node is rebooting, cannot apply more configuration changes until next reboot',
      ),
    )
    await c.sim.until(() => log.length > 2 && c!.sim.node('wrkr-1')!.stage === 'running')
    expect(log).toEqual(['running', 'rebooting', 'booting', 'running'])
  })

  it('staged waits for the next reboot; try applies live; dry-run changes nothing', async () => {
    c = await startOn('127.44.2', { cps: 1, workers: 1, image: 'disk', vip: false, speed: 50 })
    for (const n of ['cp-1', 'wrkr-1']) await applyInsecure(c.sim, n)
    await c.sim.until(() => c!.sim.node('wrkr-1')!.stage === 'running')
    const ip = '127.44.2.21'
    const changed = parse(configOf(c.sim, 'wrkr-1'))
    changed.machine.env = { FOO: 'bar' }
    const file = configFile(c.sim, 'changed', stringify(changed))
    const log = stageLog(c.sim, 'wrkr-1')
    expect(await talosctl(c.sim, ['apply-config', ...at(ip), '-f', file, '--mode', 'staged'])).toMatchObject({
      code: 0,
      stderr: 'Staged configuration to be applied after the next reboot\n',
    })
    const dry = await talosctl(c.sim, ['apply-config', ...at(ip), '-f', file, '--dry-run'])
    expect(dry).toMatchObject({ code: 0 })
    expect(dry.stderr).toMatch(/^Dry run summary:\nApplied configuration with a reboot \(skipped in dry-run\)\./)
    const labelled = parse(configOf(c.sim, 'wrkr-1'))
    labelled.machine.nodeLabels = { zone: 'b' }
    const tried = await talosctl(c.sim, [
      'apply-config',
      ...at(ip),
      '-f',
      configFile(c.sim, 'labelled', stringify(labelled)),
      '--mode',
      'try',
    ])
    expect(tried).toMatchObject({ code: 0 })
    expect(tried.stderr).toMatch(/^Applied configuration without a reboot\nThe config is applied in 'try' mode/)
    expect(log).toEqual(['running'])
  })
})

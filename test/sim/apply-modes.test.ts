// ApplyConfiguration on a configured node (internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go):
// validated (InvalidArgument), then by mode; Runtime.CanApplyImmediate
// (internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_runtime.go) decides whether auto reboots. Range 127.44.x.y.
import { afterEach, describe, expect, it } from 'vitest'
import { parse, stringify } from 'yaml'
import { applyInsecure, configOf, stageLog, startOn, talosCall, type Started } from './helpers.js'

let c: Started | null = null
afterEach(async () => { await c?.stop(); c = null })

describe('authenticated apply', () => {
  it('auto applies a live change without a reboot, reboots for another; no-reboot refuses it; a bad config is InvalidArgument', async () => {
    c = await startOn('127.44.1', { cps: 1, workers: 1, image: 'disk', vip: false, speed: 50 })
    for (const n of ['cp-1', 'wrkr-1']) await applyInsecure(c.sim, n)
    await c.sim.until(() => c!.sim.node('wrkr-1')!.stage === 'running')
    const ip = '127.44.1.21'
    const apply = (data: string, mode: string) => talosCall(c!.sim, ip, 'machine.ApplyConfiguration', { data, mode }, { secure: true, nodes: ip })
    const base = configOf(c.sim, 'wrkr-1')
    const labelled = parse(base); labelled.machine.nodeLabels = { zone: 'a' }
    expect((await apply(stringify(labelled), 'auto')).messages?.[0]?.data.modeDetails).toBe('Applied configuration without a reboot')
    expect(c.sim.node('wrkr-1')!.stage).toBe('running')
    const changed = parse(base); changed.machine.env = { FOO: 'bar' }
    const refused = await apply(stringify(changed), 'no-reboot')
    expect(refused.messages?.[0]?.error?.code).toBe('InvalidArgument')
    expect(refused.messages?.[0]?.error?.message).toMatch(/^this config change can't be applied in immediate mode/)
    const bad = parse(base); bad.machine.type = 'nonsense'
    expect((await apply(stringify(bad), 'auto')).messages?.[0]?.error).toMatchObject({ code: 'InvalidArgument' })
    const log = stageLog(c.sim, 'wrkr-1')
    expect((await apply(stringify(changed), 'auto')).messages?.[0]?.data.modeDetails).toBe('Applied configuration with a reboot')
    // a second apply before the reboot is refused
    expect((await apply(stringify(changed), 'auto')).messages?.[0]?.error?.code).toBe('FailedPrecondition')
    await c.sim.until(() => log.length > 2 && c!.sim.node('wrkr-1')!.stage === 'running')
    expect(log).toEqual(['running', 'rebooting', 'booting', 'running'])
  })
})

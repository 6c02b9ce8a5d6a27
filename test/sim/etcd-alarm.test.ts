// etcd alarms through the real talosctl's `etcd alarm list|disarm` (v1alpha1_server.go EtcdAlarmList,
// EtcdAlarmDisarm: the local etcd client's AlarmList, cluster-wide; a control plane running etcd
// only). Fault `etcd-nospace`: the member of that node over its quota raises NOSPACE. Range 127.39.1.x.
import { afterEach, describe, expect, it } from 'vitest'
import { applyInsecure, at, bootstrapWhenReady, startOn, talosctl, type Started } from './helpers.js'

let c: Started | null = null
afterEach(async () => {
  await c?.stop()
  c = null
})

describe('etcd alarms', () => {
  it('none, then NOSPACE on the member under the fault, listed through any control plane; disarm answers it, it lasts while the fault does and stays after it until disarmed', async () => {
    c = await startOn('127.39.1', { cps: 2, workers: 1, image: 'disk', vip: false, speed: 50 })
    const sim = c.sim
    for (const n of ['cp-1', 'cp-2', 'wrkr-1']) await applyInsecure(sim, n)
    expect((await bootstrapWhenReady(sim, 'cp-1')).code).toBe(0)
    await sim.until(() => sim.node('cp-1')!.etcdHealthy && sim.node('cp-2')!.etcdHealthy, 30_000)
    const list = (ip: string) => talosctl(sim, ['etcd', 'alarm', 'list', ...at(ip)])
    const none = await list('127.39.1.11')
    expect(none).toMatchObject({ code: 0, stdout: '' })

    sim.addFault({ node: 'cp-2', kind: 'etcd-nospace' })
    const members = await talosctl(sim, ['etcd', 'members', ...at('127.39.1.11')])
    const cp2 = /([0-9a-f]{16})\s+cp-2\s/.exec(members.stdout)?.[1]
    expect(cp2).toMatch(/^[0-9a-f]{16}$/)
    for (const ip of ['127.39.1.11', '127.39.1.12']) {
      const r = await list(ip)
      expect(r.code, r.stderr).toBe(0)
      expect(r.stdout.split('\n').filter(Boolean)).toEqual([
        expect.stringMatching(/^NODE\s+MEMBER\s+ALARM$/),
        expect.stringMatching(new RegExp(`^${ip.replace(/\./g, '\\.')}\\s+${cp2}\\s+NOSPACE$`)),
      ])
    }
    const disarm = await talosctl(sim, ['etcd', 'alarm', 'disarm', ...at('127.39.1.11')])
    expect(disarm.code, disarm.stderr).toBe(0)
    expect(disarm.stdout).toMatch(new RegExp(`\\s${cp2}\\s+NOSPACE$`, 'm'))
    expect((await list('127.39.1.11')).stdout).toMatch(/NOSPACE/)
    // the cause gone, the alarm stays until disarmed, as etcd keeps it
    sim.clearFault('cp-2', 'etcd-nospace')
    expect((await list('127.39.1.11')).stdout).toMatch(/NOSPACE/)
    expect((await talosctl(sim, ['etcd', 'alarm', 'disarm', ...at('127.39.1.11')])).code).toBe(0)
    expect((await list('127.39.1.11')).stdout).toBe('')

    const worker = await talosctl(sim, ['etcd', 'alarm', 'list', ...at('127.39.1.21')])
    expect(worker.code).not.toBe(0)
    expect(worker.stderr).toMatch(/etcd alarm list is only available on control plane nodes/)
  })
})

// etcd membership as Talos and etcd do it (sim/etcd.js), seen through the real talosctl's `etcd members`. Range 127.34.x.y.
// internal/pkg/etcd/etcd.go (MemberAddAsLearner, promotion): a joining member is a learner whose name
// and client URLs stay empty until it starts; internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go
// (Bootstrap: the only check is an empty etcd data directory; EtcdMemberList through a local client,
// which waits for a connection while etcd is down).
import { afterEach, describe, expect, it } from 'vitest'
import { applyInsecure, at, bootstrapWhenReady, etcdMembers, startOn, talosctl, type Member, type Started } from './helpers.js'

let c: Started | null = null
afterEach(async () => {
  await c?.stop()
  c = null
})

const members = (c: Started, ip: string, timeoutMs?: number): Promise<Member[] | string> =>
  etcdMembers(c.sim, ip, { ...(timeoutMs ? { timeoutMs } : {}) })

describe('learners', () => {
  it('a joining control plane is a learner with an empty name and client URLs, then started, then promoted', async () => {
    c = await startOn('127.34.1', { cps: 2, workers: 0, image: 'disk', vip: false, speed: 4, timings: { boot: 6, etcd: 20 } })
    for (const n of ['cp-1', 'cp-2']) await applyInsecure(c.sim, n)
    expect((await bootstrapWhenReady(c.sim, 'cp-1')).code).toBe(0)
    await c.sim.until(() => c!.sim.node('cp-1')!.etcdHealthy, 20000)
    const seen: string[] = []
    let unstarted: Member | undefined
    while (!c.sim.node('cp-2')!.etcdHealthy) {
      const list = await members(c, '127.34.1.11')
      if (typeof list === 'string') throw new Error(list)
      const m = list.find((x) => x.peerUrls.includes('https://127.34.1.12:2380'))
      if (m) {
        const state = `${m.hostname || '<empty>'} ${m.clientUrls.join(',') || '<empty>'} learner=${m.isLearner}`
        if (seen.at(-1) !== state) seen.push(state)
        if (!m.hostname) unstarted ??= m
      }
      await new Promise((r) => setTimeout(r, 20))
    }
    const last = (await members(c, '127.34.1.11')) as Member[]
    const promoted = last.find((x) => x.hostname === 'cp-2')!
    expect(seen.filter((x) => x.endsWith('learner=true'))).toEqual([
      '<empty> <empty> learner=true',
      'cp-2 https://127.34.1.12:2379 learner=true',
    ])
    expect(promoted).toMatchObject({ isLearner: false, clientUrls: ['https://127.34.1.12:2379'] })
    expect(promoted.id).toBe(unstarted!.id)
    expect(promoted.id).toMatch(/^[0-9a-f]{16}$/)
  })

  it('etcd members on a control plane whose etcd is down waits (no answer), and answers once etcd runs', async () => {
    c = await startOn('127.34.2', { cps: 1, workers: 0, image: 'disk', vip: false, speed: 100 })
    await applyInsecure(c.sim, 'cp-1')
    await c.sim.until(() => c!.sim.node('cp-1')!.services.etcd === 'Preparing')
    expect(await members(c, '127.34.2.11', 1000)).toBe('TIMEOUT')
    const pending = members(c, '127.34.2.11')
    expect((await bootstrapWhenReady(c.sim, 'cp-1')).code).toBe(0)
    const list = (await pending) as Member[]
    expect(list.map((m) => [m.hostname, m.isLearner])).toEqual([['cp-1', false]])
  })
})

describe('bootstrap on a control plane that has not joined', () => {
  it('is accepted while it joins (empty data dir) and starts a second etcd cluster: each side lists only itself', async () => {
    c = await startOn('127.34.3', { cps: 2, workers: 0, image: 'disk', vip: false, speed: 4, timings: { boot: 6, etcd: 20 } })
    for (const n of ['cp-1', 'cp-2']) await applyInsecure(c.sim, n)
    expect((await bootstrapWhenReady(c.sim, 'cp-1')).code).toBe(0)
    // cp-2 was added as a learner but its etcd has not started: nothing in its data dir yet
    await c.sim.until(() => c!.sim.node('cp-2')!.etcdMember !== null && c!.sim.node('cp-2')!.services.etcd === 'Preparing', 20000)
    expect(await talosctl(c.sim, ['bootstrap', ...at('127.34.3.12')])).toMatchObject({ code: 0, stderr: '' })
    await c.sim.until(() => c!.sim.node('cp-2')!.etcdHealthy, 20000)
    const one = (await members(c, '127.34.3.11')) as Member[]
    const two = (await members(c, '127.34.3.12')) as Member[]
    expect(two.map((m) => m.hostname)).toEqual(['cp-2'])
    // cp-1's cluster still holds cp-2's learner that never started (etcd lists its members by ID)
    expect(one.map((m) => [m.hostname, m.isLearner]).sort((a, b) => String(b[0]).localeCompare(String(a[0])))).toEqual([
      ['cp-1', false],
      ['', true],
    ])
    expect(one.find((m) => m.hostname === 'cp-1')!.id).not.toBe(two[0]!.id)
    // talosctl prints the learner's empty cells as blanks in the aligned table
    const lines = (await talosctl(c.sim, ['etcd', 'members', ...at('127.34.3.11')])).stdout.trimEnd().split('\n')
    expect(lines[0]).toMatch(/^NODE +ID +HOSTNAME +PEER URLS +CLIENT URLS +LEARNER$/)
    const row = lines.find((l) => l.includes('127.34.3.12:2380'))!
    expect(row.slice(lines[0]!.indexOf('HOSTNAME'), lines[0]!.indexOf('PEER URLS')).trim()).toBe('')
    expect(row.slice(lines[0]!.indexOf('CLIENT URLS'), lines[0]!.indexOf('LEARNER')).trim()).toBe('')
    expect(row.endsWith('true')).toBe(true)
    // now cp-2 has data: a bootstrap there is refused
    expect((await talosctl(c.sim, ['bootstrap', ...at('127.34.3.12')])).stderr).toBe(
      'error executing bootstrap: 1 error occurred:\n\t* 127.34.3.12: rpc error: code = AlreadyExists desc = etcd data directory is not empty\n\n\n',
    )
  })
})

// etcd membership as Talos and etcd do it. Range 127.34.x.y.
// internal/pkg/etcd/etcd.go (MemberAddAsLearner, promotion): a joining member is a learner whose name
// and client URLs stay empty until it starts; internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go
// (Bootstrap: the only check is an empty etcd data directory; EtcdMemberList through a local client,
// which waits for a connection while etcd is down).
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { applyInsecure, bootstrapWhenReady, startOn, talosCall, type Started } from './helpers.js'

let c: Started | null = null
afterEach(async () => { await c?.stop(); c = null })

interface Member { id: string; hostname: string; peerUrls: string[]; clientUrls: string[]; isLearner: boolean }
const members = async (c: Started, ip: string, timeoutMs?: number): Promise<Member[] | string> => {
  const r = await talosCall(c.sim, ip, 'machine.EtcdMemberList', { queryLocal: true }, { secure: true, nodes: ip, ...(timeoutMs ? { timeoutMs } : {}) })
  return r.socketError ?? r.messages?.[0]?.error?.message ?? r.messages![0]!.data.members
}
// the real talosctl (`task tools`), as .sim/env puts it on PATH
const talosctl = (c: Started, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((done) => execFile(join(c.sim.binDir, 'talosctl'), args,
    { env: { PATH: process.env.PATH!, HOME: c.dir, TALOSCONFIG: c.sim.env.TALOSCONFIG } },
    (err: any, stdout, stderr) => done({ code: err ? err.code : 0, stdout, stderr })))

describe('learners', () => {
  it('a joining control plane is a learner with an empty name and client URLs, then started, then promoted', async () => {
    c = await startOn('127.34.1', { cps: 2, workers: 0, image: 'disk', vip: false, speed: 4, timings: { boot: 6, etcd: 20 } })
    for (const n of ['cp-1', 'cp-2']) await applyInsecure(c.sim, n)
    expect((await bootstrapWhenReady(c.sim, 'cp-1', 4000)).messages?.[0]?.error).toBeNull()
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
    const last = await members(c, '127.34.1.11') as Member[]
    const promoted = last.find((x) => x.hostname === 'cp-2')!
    expect(seen.filter((x) => x.endsWith('learner=true'))).toEqual(['<empty> <empty> learner=true', 'cp-2 https://127.34.1.12:2379 learner=true'])
    expect(promoted).toMatchObject({ isLearner: false, clientUrls: ['https://127.34.1.12:2379'] })
    expect(promoted.id).toBe(unstarted!.id)
    expect(promoted.id).toMatch(/^[0-9a-f]{16}$/)
  })

  it('etcd members on a control plane whose etcd is down waits (no answer), and answers once etcd runs', async () => {
    c = await startOn('127.34.2', { cps: 1, workers: 0, image: 'disk', vip: false, speed: 100 })
    await applyInsecure(c.sim, 'cp-1')
    await c.sim.until(() => c!.sim.node('cp-1')!.services.etcd === 'Preparing')
    expect(await members(c, '127.34.2.11', 300)).toBe('TIMEOUT')
    const pending = members(c, '127.34.2.11')
    expect((await bootstrapWhenReady(c.sim, 'cp-1')).messages?.[0]?.error).toBeNull()
    const list = await pending as Member[]
    expect(list.map((m) => [m.hostname, m.isLearner])).toEqual([['cp-1', false]])
  })
})

describe('bootstrap on a control plane that has not joined', () => {
  it('is accepted while it joins (empty data dir) and starts a second etcd cluster: each side lists only itself', async () => {
    c = await startOn('127.34.3', { cps: 2, workers: 0, image: 'disk', vip: false, speed: 4, timings: { boot: 6, etcd: 20 } })
    for (const n of ['cp-1', 'cp-2']) await applyInsecure(c.sim, n)
    expect((await bootstrapWhenReady(c.sim, 'cp-1', 4000)).messages?.[0]?.error).toBeNull()
    // cp-2 was added as a learner but its etcd has not started: nothing in its data dir yet
    await c.sim.until(() => c!.sim.node('cp-2')!.etcdMember !== null && c!.sim.node('cp-2')!.services.etcd === 'Preparing', 20000)
    const second = await talosCall(c.sim, '127.34.3.12', 'machine.Bootstrap', {}, { secure: true, nodes: '127.34.3.12' })
    expect(second.messages?.[0]?.error).toBeNull()
    await c.sim.until(() => c!.sim.node('cp-2')!.etcdHealthy, 20000)
    const one = await members(c, '127.34.3.11') as Member[]
    const two = await members(c, '127.34.3.12') as Member[]
    expect(two.map((m) => m.hostname)).toEqual(['cp-2'])
    // cp-1's cluster still holds cp-2's learner that never started
    expect(one.map((m) => [m.hostname, m.isLearner])).toEqual([['cp-1', false], ['', true]])
    expect(one.find((m) => m.hostname === 'cp-1')!.id).not.toBe(two[0]!.id)
    // talosctl prints the learner's empty cells as blanks in the aligned table
    const lines = (await talosctl(c, ['etcd', 'members', '-e', '127.34.3.11', '-n', '127.34.3.11'])).stdout.trimEnd().split('\n')
    expect(lines[0]).toMatch(/^NODE +ID +HOSTNAME +PEER URLS +CLIENT URLS +LEARNER$/)
    const row = lines.find((l) => l.includes('127.34.3.12:2380'))!
    expect(row.slice(lines[0]!.indexOf('HOSTNAME'), lines[0]!.indexOf('PEER URLS')).trim()).toBe('')
    expect(row.slice(lines[0]!.indexOf('CLIENT URLS'), lines[0]!.indexOf('LEARNER')).trim()).toBe('')
    expect(row.endsWith('true')).toBe(true)
    // now cp-2 has data: a bootstrap there is refused
    const third = await talosCall(c.sim, '127.34.3.12', 'machine.Bootstrap', {}, { secure: true, nodes: '127.34.3.12' })
    expect(third.messages?.[0]?.error).toEqual({ code: 'AlreadyExists', message: 'etcd data directory is not empty' })
  })
})

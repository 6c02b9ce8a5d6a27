// Real etcd behind the simulated control planes (sim/etcd.js): one etcd process
// per control plane, joined as Talos joins them, answering talosctl's etcd calls itself. Range 127.32.x.y.
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { applyInsecure, at, bootstrapWhenReady, etcdMembers, kubectl, startOn, talosctl, type Member, type Started } from './helpers.js'

let c: Started | null = null
afterEach(async () => {
  await c?.stop()
  c = null
})

const listening = (ip: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect({ host: ip, port }, () => {
      s.destroy()
      resolve(true)
    })
    s.on('error', () => resolve(false))
  })

async function threeMembers(range: string): Promise<Started> {
  const s = await startOn(range, { cps: 3, workers: 0, image: 'disk', vip: false, speed: 20, timings: { boot: 6 } })
  for (const n of ['cp-1', 'cp-2', 'cp-3']) await applyInsecure(s.sim, n)
  expect((await bootstrapWhenReady(s.sim, 'cp-1')).code).toBe(0)
  await s.sim.until(() => ['cp-1', 'cp-2', 'cp-3'].every((n) => s.sim.node(n)!.etcdHealthy), 60_000)
  return s
}

describe('real etcd', () => {
  it('bootstraps on one control plane, the others join as learners and are promoted: the real member list', async () => {
    c = await threeMembers('127.32.1')
    const list = (await etcdMembers(c.sim, '127.32.1.11')) as Member[]
    expect(list.map((m) => [m.hostname, m.isLearner, m.clientUrls.join(',')]).sort()).toEqual([
      ['cp-1', false, 'https://127.32.1.11:2379'],
      ['cp-2', false, 'https://127.32.1.12:2379'],
      ['cp-3', false, 'https://127.32.1.13:2379'],
    ])
    // the IDs are the real members' (the nodes know theirs), and each member keeps its data in the simulator's directory
    for (const n of ['cp-1', 'cp-2', 'cp-3']) {
      expect(list.find((m) => m.hostname === n)!.id).toBe(c.sim.node(n)!.etcdMember)
      expect(existsSync(join(c.dir, 'etcd', n, 'data', 'member'))).toBe(true)
    }
    // every member answers from the same cluster
    const fromThree = (await etcdMembers(c.sim, '127.32.1.13')) as Member[]
    expect(fromThree.map((m) => m.id).sort()).toEqual(list.map((m) => m.id).sort())
  })

  it('quorum loss is real: with one member crashing, etcd refuses to remove another; back up, the removal goes through', async () => {
    c = await threeMembers('127.32.2')
    const sim = c.sim
    const list = (await etcdMembers(sim, '127.32.2.11')) as Member[]
    const cp2 = list.find((m) => m.hostname === 'cp-2')!.id
    sim.addFault({ node: 'cp-3', kind: 'etcd-crash', message: 'open /var/lib/etcd/member/wal: input/output error' })
    // its member exits and keeps exiting at each restart: nothing listens on its client port
    await sim.until(() => !sim.node('cp-3')!.etcdHealthy)
    for (let i = 0; i < 50 && (await listening('127.32.2.13', 2379)); i++) await new Promise((r) => setTimeout(r, 100))
    expect(await listening('127.32.2.13', 2379)).toBe(false)
    // killed first (exit code 137), then each restart exits at once (1)
    let svc = await talosctl(sim, ['service', 'etcd', ...at('127.32.2.13')])
    for (let i = 0; i < 50 && !svc.stdout.includes('exit code 1 '); i++)
      svc = await talosctl(sim, ['service', 'etcd', ...at('127.32.2.13')])
    expect(svc.stdout).toMatch(/STATE\s+Waiting/)
    expect(svc.stdout).toMatch(/HEALTH\s+Fail/)
    expect(svc.stdout).toContain('going to restart forever: task "etcd" failed: exit code 1 (last log')
    // its log ends each start with the fatal line: what the hint on an unhealthy etcd points at
    const log = await talosctl(sim, ['logs', 'etcd', ...at('127.32.2.13')])
    expect(log.stdout).toContain('"level":"fatal"')
    expect(log.stdout).toContain('open /var/lib/etcd/member/wal: input/output error')
    const refused = await talosctl(sim, ['etcd', 'remove-member', cp2, ...at('127.32.2.11')])
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain('etcdserver: unhealthy cluster')
    expect(((await etcdMembers(sim, '127.32.2.11')) as Member[]).map((m) => m.hostname).sort()).toEqual(['cp-1', 'cp-2', 'cp-3'])
    // the cause gone, Talos's next restart runs it from its data: the same member, and the removal is accepted
    sim.clearFault('cp-3', 'etcd-crash')
    await sim.until(() => sim.node('cp-3')!.etcdHealthy, 30_000)
    let removed = await talosctl(sim, ['etcd', 'remove-member', cp2, ...at('127.32.2.11')])
    // etcd also refuses while the restarted member has been connected for less than its health window
    for (let i = 0; i < 40 && removed.stderr.includes('unhealthy cluster'); i++) {
      await new Promise((r) => setTimeout(r, 250))
      removed = await talosctl(sim, ['etcd', 'remove-member', cp2, ...at('127.32.2.11')])
    }
    expect(removed).toMatchObject({ code: 0, stderr: '' })
    expect(((await etcdMembers(sim, '127.32.2.11')) as Member[]).map((m) => m.hostname).sort()).toEqual(['cp-1', 'cp-3'])
    expect(sim.node('cp-2')!.etcdMember).toBeNull()
  })

  it('etcd cannot be stopped or started through the API, as on Talos; a member killed from outside is restarted by its runner', async () => {
    c = await threeMembers('127.32.5')
    const sim = c.sim
    const member = sim.node('cp-2')!.etcdMember
    for (const action of ['stop', 'restart']) {
      const r = await talosctl(sim, ['service', 'etcd', action, ...at('127.32.5.12')])
      expect(r.code).not.toBe(0)
      expect(r.stderr).toContain(`rpc error: code = Unknown desc = service "etcd" doesn't support ${action} operation via API`)
    }
    // a start of a service that runs does nothing (system.go APIStart)
    expect(await talosctl(sim, ['service', 'etcd', 'start', ...at('127.32.5.12')])).toMatchObject({ code: 0 })
    expect(sim.node('cp-2')!.etcdHealthy).toBe(true)
    // the kubelet's stop is refused too; its restart is not
    const kubeletStop = await talosctl(sim, ['service', 'kubelet', 'stop', ...at('127.32.5.12')])
    expect(kubeletStop.stderr).toContain(`service "kubelet" doesn't support stop operation via API`)

    const pid = await new Promise<string>((resolve) =>
      execFile('pgrep', ['-f', `data-dir=${join(c!.dir, 'etcd', 'cp-2', 'data')}`], (_e, out) => resolve(out.trim())),
    )
    expect(pid).toMatch(/^\d+$/)
    process.kill(Number(pid), 'SIGKILL')
    await sim.until(() => !sim.node('cp-2')!.etcdHealthy, 10_000)
    const svc = await talosctl(sim, ['service', 'etcd', ...at('127.32.5.12')])
    expect(svc.stdout).toContain('Error running Containerd(etcd), going to restart forever: task "etcd" failed: exit code 137')
    // started again from its data (restart.Forever): the same member, healthy
    await sim.until(() => sim.node('cp-2')!.etcdHealthy, 30_000)
    expect(sim.node('cp-2')!.etcdMember).toBe(member)
    expect(((await etcdMembers(sim, '127.32.5.11')) as Member[]).map((m) => m.hostname).sort()).toEqual(['cp-1', 'cp-2', 'cp-3'])
  })
})

describe('real etcd: a member that crashes from its start', () => {
  it('a control plane joining under etcd-crash: its member is written, then crash-loops; cleared, the same member runs', async () => {
    c = await startOn('127.32.6', {
      cps: 3,
      workers: 0,
      image: 'disk',
      vip: false,
      speed: 20,
      timings: { boot: 6 },
      faults: [{ node: 'cp-3', kind: 'etcd-crash' }],
    })
    const sim = c.sim
    for (const n of ['cp-1', 'cp-2', 'cp-3']) await applyInsecure(sim, n)
    expect((await bootstrapWhenReady(sim, 'cp-1')).code).toBe(0)
    await sim.until(() => ['cp-1', 'cp-2'].every((n) => sim.node(n)!.etcdHealthy), 60_000)
    // cp-3 joined (its member listed, its WAL written), then exits at each start
    await sim.until(
      () => sim.node('cp-3')!.etcdMember !== null && existsSync(join(c!.dir, 'etcd', 'cp-3', 'data', 'member', 'wal')),
      60_000,
    )
    const member = sim.node('cp-3')!.etcdMember
    let svc = await talosctl(sim, ['service', 'etcd', ...at('127.32.6.13')])
    for (let i = 0; i < 100 && !svc.stdout.includes('going to restart forever'); i++)
      svc = await talosctl(sim, ['service', 'etcd', ...at('127.32.6.13')])
    expect(svc.stdout).toMatch(/STATE\s+Waiting/)
    expect(sim.node('cp-3')!.etcdHealthy).toBe(false)
    sim.clearFault('cp-3', 'etcd-crash')
    await sim.until(() => sim.node('cp-3')!.etcdHealthy, 60_000)
    expect(sim.node('cp-3')!.etcdMember).toBe(member)
    const list = (await etcdMembers(sim, '127.32.6.11')) as Member[]
    expect(list.map((m) => [m.hostname, m.isLearner]).sort()).toEqual([
      ['cp-1', false],
      ['cp-2', false],
      ['cp-3', false],
    ])
  })
})

describe("real etcd: a running control plane's member goes down", () => {
  it('its own :6443 fails /readyz, /livez and /healthz on the etcd checks (its API server has that member alone); the others pass; back, so does it', async () => {
    c = await threeMembers('127.32.7')
    const sim = c.sim
    const k = await talosctl(sim, ['kubeconfig', join(c.dir, 'kubeconfig'), '--merge=false', '--force', ...at('127.32.7.11')])
    expect(k.code, k.stderr).toBe(0)
    const raw = (ip: string, path: string) => kubectl(c!, ['--server', `https://${ip}:6443`, 'get', '--raw', path])
    expect(await raw('127.32.7.12', '/readyz')).toMatchObject({ code: 0, stdout: 'ok' })

    sim.addFault({ node: 'cp-2', kind: 'etcd-crash' })
    await sim.until(() => !sim.node('cp-2')!.etcdHealthy, 10_000)
    // the API server checks etcd at most once a second, answering its last result in between
    for (let i = 0; i < 20 && (await raw('127.32.7.12', '/readyz')).code === 0; i++) await new Promise((r) => setTimeout(r, 250))
    for (const path of ['/readyz', '/livez', '/healthz', '/readyz?verbose']) {
      const r = await raw('127.32.7.12', path)
      expect(r.code, path).toBe(1)
      expect(r.stderr, path).toMatch(/^Error from server \(InternalError\): an error on the server \("\[\+\]ping ok\\n/)
      expect(r.stderr, path).toContain('[-]etcd failed: reason withheld')
    }
    expect((await raw('127.32.7.12', '/readyz')).stderr).toContain('[-]etcd-readiness failed: reason withheld')
    // etcd-readiness is /readyz's own; what the client excludes passes
    expect((await raw('127.32.7.12', '/livez')).stderr).not.toContain('etcd-readiness')
    expect(await raw('127.32.7.12', '/livez?exclude=etcd')).toMatchObject({ code: 0, stdout: 'ok' })
    expect(await raw('127.32.7.11', '/readyz')).toMatchObject({ code: 0, stdout: 'ok' })

    sim.clearFault('cp-2', 'etcd-crash')
    await sim.until(() => sim.node('cp-2')!.etcdHealthy, 30_000)
    for (let i = 0; i < 20 && (await raw('127.32.7.12', '/readyz')).code !== 0; i++) await new Promise((r) => setTimeout(r, 250))
    expect(await raw('127.32.7.12', '/readyz')).toMatchObject({ code: 0, stdout: 'ok' })
  })
})

describe('real etcd: the local member answers talosctl', () => {
  it('etcd status and etcd snapshot from the local member; etcd leave removes it, stops its etcd and empties its data', async () => {
    c = await threeMembers('127.32.3')
    const list = (await etcdMembers(c.sim, '127.32.3.11')) as Member[]
    const ids = list.map((m) => m.id)
    const status = await talosctl(c.sim, ['etcd', 'status', ...at('127.32.3.12')])
    expect(status.code, status.stderr).toBe(0)
    const [header, row] = status.stdout.split('\n').filter(Boolean)
    expect(header).toMatch(/^NODE\s+MEMBER\s+DB SIZE\s+IN USE\s+LEADER\s+RAFT INDEX\s+RAFT TERM\s+RAFT APPLIED INDEX\s+LEARNER\s+/)
    const cells = row!.split(/\s{2,}/)
    // the member answering is cp-2's own, the leader one of the three, the protocol etcd's own version
    expect(cells[0]).toBe('127.32.3.12')
    expect(cells[1]).toBe(c.sim.node('cp-2')!.etcdMember)
    expect(ids).toContain(cells.find((x, i) => i > 1 && /^[0-9a-f]{16}$/.test(x)))
    expect(row).toMatch(/\s3\.6\.11\s/)

    const file = join(c.dir, 'etcd.snapshot')
    const snap = await talosctl(c.sim, ['etcd', 'snapshot', file, ...at('127.32.3.11')])
    expect(snap.code, snap.stderr).toBe(0)
    // the real talosctl checked the trailing sha256 and read the database with etcd's snapshot manager
    expect(snap.stdout).toMatch(new RegExp(`etcd snapshot saved to "${file}" \\(\\d+ bytes\\)`))
    expect(snap.stdout).toMatch(/snapshot info: hash [0-9a-f]{8}, revision \d+, total keys \d+, total size \d+/)
    expect(existsSync(file)).toBe(true)

    const leave = await talosctl(c.sim, ['etcd', 'leave', ...at('127.32.3.13')])
    expect(leave.code, leave.stderr).toBe(0)
    const after = (await etcdMembers(c.sim, '127.32.3.11')) as Member[]
    expect(after.map((m) => m.hostname).sort()).toEqual(['cp-1', 'cp-2'])
    expect(c.sim.node('cp-3')!.etcdMember).toBeNull()
    expect(await listening('127.32.3.13', 2379)).toBe(false)
    expect(existsSync(join(c.dir, 'etcd', 'cp-3', 'data', 'member'))).toBe(false)
    const svc = await talosctl(c.sim, ['service', 'etcd', ...at('127.32.3.13')])
    expect(svc.stdout).toMatch(/STATE\s+Finished/)
  })

  it('a control plane cut off the network stops its member: quorum loss turns the others unhealthy; back, every member is healthy again', async () => {
    c = await threeMembers('127.32.4')
    const sim = c.sim
    const k = await talosctl(sim, ['kubeconfig', join(c.dir, 'kubeconfig'), '--merge=false', '--force', ...at('127.32.4.11')])
    expect(k.code, k.stderr).toBe(0)
    for (const n of ['cp-2', 'cp-3']) sim.addFault({ node: n, kind: 'unreachable' })
    const open = async () => (await listening('127.32.4.12', 2379)) || (await listening('127.32.4.13', 2379))
    for (let i = 0; i < 50 && (await open()); i++) await new Promise((r) => setTimeout(r, 100))
    expect(await listening('127.32.4.12', 2379)).toBe(false)
    expect(await listening('127.32.4.13', 2379)).toBe(false)
    // cp-1 alone has no quorum: its health check's quorum read fails, and its service says so
    await sim.until(() => !sim.node('cp-1')!.etcdHealthy, 60_000)
    const svc = await talosctl(sim, ['service', 'etcd', ...at('127.32.4.11')])
    expect(svc.stdout).toMatch(/HEALTH\s+Fail/)
    expect(svc.stdout).toMatch(/Health check failed: /)
    // and its own API server's etcd check (a quorum read on that member, 2 s) fails its /readyz
    const readyz = await kubectl(c, ['--server', 'https://127.32.4.11:6443', 'get', '--raw', '/readyz'])
    expect(readyz.code).toBe(1)
    expect(readyz.stderr).toContain('[-]etcd failed: reason withheld')
    for (const n of ['cp-2', 'cp-3']) sim.clearFault(n, 'unreachable')
    await sim.until(() => ['cp-1', 'cp-2', 'cp-3'].every((n) => sim.node(n)!.etcdHealthy), 60_000)
    expect(await listening('127.32.4.12', 2379)).toBe(true)
    // the same members: started again from their data, not joined anew
    expect(((await etcdMembers(sim, '127.32.4.11')) as Member[]).map((m) => m.hostname).sort()).toEqual(['cp-1', 'cp-2', 'cp-3'])
  })
})

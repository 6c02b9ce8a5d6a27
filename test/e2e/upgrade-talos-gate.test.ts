// upgrade:talos against an etcd that is not fit for an upgrade (issue 31: a control plane down, a
// learner stuck, an alarm) and a gate command that fails once: the quorum gate refuses before any
// node is touched, names the member and the cause, and the hint printed runs as printed once the cause
// is gone; a gate that fails once is tried again and the run goes on. One simulated cluster of three
// control planes and a worker (real talosctl v1.12.11), each case upgrading one node to v1.13.9.
// Range 127.228.1.0/24.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { hintOf, nodeIn, runInFreshShell, sharedCluster } from './harness.js'
import { fastWith } from '../faults/helpers.js'
import { at, talosctl } from '../sim/helpers.js'

const R = '127.228.1'
const IP: Record<string, string> = { 'cp-1': `${R}.11`, 'cp-2': `${R}.12`, 'cp-3': `${R}.13`, 'wrkr-1': `${R}.21` }
const CASE_TIMEOUT = 420_000
const TARGET = 'v1.13.9'
const SLOW_OK = fastWith('--ready-timeout', '60s', fastWith('--call-timeout', '20s'))
const FLAGS = [...SLOW_OK, '--upgrade-timeout', '2m']
/** a refusal waits the ready timeout for etcd to become fit: a short one, the refusal is the same */
const REFUSED_FLAGS = [...fastWith('--ready-timeout', '3s', fastWith('--call-timeout', '20s')), '--upgrade-timeout', '2m']

describe('upgrade:talos: the quorum gate refuses an etcd unfit for an upgrade; a gate command failing once is tried again', () => {
  const shared = sharedCluster(R, { cps: 3, workers: 1, image: 'disk', speed: 60, kube: 'model' }, SLOW_OK)
  async function tag(name: string): Promise<string> {
    const r = await talosctl(shared().sim, ['version', '--short', ...at(IP[name]!)])
    return /Server:\s+NODE:\s+\S+\s+Tag:\s+(\S+)/.exec(r.stdout)?.[1] ?? `${r.stdout}${r.stderr}`
  }
  /** the Upgrade calls the simulator saw after `from`, node names in order */
  const upgradesSince = (from: number): string[] =>
    shared()
      .calls()
      .slice(from)
      .filter((c) => c.call === 'upgrade')
      .map((c) => c.node ?? '')

  /** a refused run: exit 1, no Upgrade sent, the gate's failure naming `what`; returns its stderr */
  async function refused(node: string, what: RegExp): Promise<string> {
    const from = shared().calls().length
    const r = await shared().task('upgrade:talos', { TALOS_VERSION: TARGET, NODES: node }, REFUSED_FLAGS)
    expect(r.code, r.stdout + r.stderr).toBe(1)
    expect(upgradesSince(from)).toEqual([])
    expect(r.stdout + r.stderr).toMatch(what)
    expect(shared().report().ok).toBe(false)
    expect(await tag(node)).toBe('v1.12.11')
    return r.stderr
  }
  /** the hint printed for the refusal, run verbatim in a fresh shell once `clear` removed the cause, upgrades `node` */
  async function hintUpgrades(stderr: string, node: string, clear: () => Promise<void> | void): Promise<void> {
    // the failure line the hint follows: `error: <node or phase/step> …`
    const who = /^error: (\S+?):? /m.exec(stderr)?.[1]
    expect(who, stderr).toBeDefined()
    const { command } = hintOf(stderr, who!)
    expect(command).toMatch(/^task -d \S+ upgrade:talos CLUSTER_DIR=\S+ TALOS_VERSION=v1\.13\.9/)
    await clear()
    const from = shared().calls().length
    const recovered = await runInFreshShell(shared(), command)
    expect(recovered.code, `${command}\n${recovered.stdout}\n${recovered.stderr}`).toBe(0)
    expect(upgradesSince(from)).toEqual([node])
    expect(await tag(node)).toBe(TARGET)
  }

  it(
    'a control plane down: refused before any node (the node named, etcd status unanswered); once it is back, the hint upgrades cp-1',
    async () => {
      shared().sim.addFault({ node: 'cp-3', on: 'any', kind: 'unreachable' })
      const stderr = await refused('cp-1', /Q1 cp-3: etcd status/)
      await hintUpgrades(stderr, 'cp-1', () => shared().sim.clearFault('cp-3', 'unreachable'))
    },
    CASE_TIMEOUT,
  )

  it(
    'an etcd alarm: refused naming NOSPACE and its member; once space is freed and the alarm disarmed, the hint upgrades cp-2',
    async () => {
      shared().sim.addFault({ node: 'cp-2', kind: 'etcd-nospace' })
      const stderr = await refused('cp-2', /Q3 cp-2: etcd alarm NOSPACE on member [0-9a-f]{16}/)
      await hintUpgrades(stderr, 'cp-2', async () => {
        shared().sim.clearFault('cp-2', 'etcd-nospace')
        // the alarm stays until disarmed, as etcd keeps it
        const disarm = await talosctl(shared().sim, ['etcd', 'alarm', 'disarm', ...at(IP['cp-2']!)])
        expect(disarm.code, disarm.stderr).toBe(0)
      })
    },
    CASE_TIMEOUT,
  )

  it(
    'a learner stuck (added, never started): refused naming the member; once it is removed, the hint upgrades cp-3',
    async () => {
      // etcd refuses a member add until every peer has been connected 5 s (strict reconfiguration):
      // cp-2 rebooted in the case before
      let id = ''
      for (let i = 0; i < 300 && !id; i++)
        id = await shared()
          .sim.addUnstartedMember('cp-1', `https://${R}.99:2380`)
          .catch(async (e: Error) => {
            expect(e.message).toBe('etcdserver: unhealthy cluster')
            await new Promise((r) => setTimeout(r, 200))
            return ''
          })
      expect(id).toMatch(/^[0-9a-f]{16}$/)
      const stderr = await refused('cp-3', new RegExp(`${id}`))
      await hintUpgrades(stderr, 'cp-3', async () => {
        const removed = await talosctl(shared().sim, ['etcd', 'remove-member', id, ...at(IP['cp-1']!)])
        expect(removed.code, removed.stderr).toBe(0)
      })
    },
    CASE_TIMEOUT,
  )

  it(
    'a gate command failing once: tried again after GATE_INTERVAL, then the run goes on; the gate ran before the node and after it',
    async () => {
      const marks = join(shared().dir, 'gate-marks')
      const gate = `n=$(wc -l < ${marks} 2>/dev/null || echo 0); echo "try $n node=$NODE" >> ${marks}; [ "$n" -ge 1 ]`
      const from = shared().calls().length
      const r = await shared().task('upgrade:talos', { TALOS_VERSION: TARGET, NODES: 'wrkr-1', GATE_COMMAND: gate }, [
        ...FLAGS,
        '--gate-timeout',
        '60s',
        '--gate-interval',
        '500ms',
      ])
      expect(r.code, r.stdout + r.stderr).toBe(0)
      expect(upgradesSince(from)).toEqual(['wrkr-1'])
      const lines = readFileSync(marks, 'utf8').trim().split('\n')
      // the first try fails, the second passes (both before wrkr-1), then the gate after wrkr-1
      expect(lines[0]).toBe('try 0 node=')
      expect(lines[1]).toBe('try 1 node=')
      expect(lines.at(-1)).toMatch(/^try \d+ node=wrkr-1$/)
      expect(nodeIn(shared().report(), 'upgrade-talos', 'wrkr-1').day2?.state).toBe('upgraded')
      expect(await tag('wrkr-1')).toBe(TARGET)
    },
    CASE_TIMEOUT,
  )
})

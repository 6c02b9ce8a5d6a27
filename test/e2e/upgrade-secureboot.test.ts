// A secure-boot node's upgrade (docs/day2-design.md, the installer image): Talos does not check that
// the installer is a secure-boot one, and a plain one writes a boot loader the machine's keys do not
// sign, so the node never boots again. upgrade:talos reads each node's SecurityState and refuses a
// plain installer for it (nothing touched), naming the signed one of its schematic; the hint runs as
// printed. The last case shows the simulator is not kinder: the same image sent with talosctl alone
// leaves the node down. One control plane and one secure-boot worker on a schematic (real talosctl
// v1.12.11). Range 127.248.2.0/24.
import { describe, expect, it } from 'vitest'
import { hintOf, nodeIn, runInFreshShell, sharedCluster } from './harness.js'
import { fastWith } from '../faults/helpers.js'
import { at, talosctl } from '../sim/helpers.js'

const R = '127.248.2'
const WORKER = `${R}.21`
const CASE_TIMEOUT = 300_000
const TARGET = 'v1.13.9'
const SLOW_OK = fastWith('--ready-timeout', '60s', fastWith('--call-timeout', '20s'))
const FLAGS = [...SLOW_OK, '--upgrade-timeout', '2m']
const plain = (schematic: string): string => `factory.talos.dev/installer/${schematic}:${TARGET}`
const signed = (schematic: string): string => `factory.talos.dev/installer-secureboot/${schematic}:${TARGET}`

describe('upgrade:talos on a secure-boot node', () => {
  const shared = sharedCluster(
    R,
    {
      cps: 1,
      workers: 1,
      image: 'disk',
      speed: 60,
      kube: 'model',
      nodeOverrides: { 'wrkr-1': { secureBoot: true, schematic: { extensions: ['qemu-guest-agent'] } } },
    },
    SLOW_OK,
  )
  async function tag(): Promise<string> {
    const r = await talosctl(shared().sim, ['version', '--short', ...at(WORKER)])
    return /Server:\s+NODE:\s+\S+\s+Tag:\s+(\S+)/.exec(r.stdout)?.[1] ?? `${r.stdout}${r.stderr}`
  }
  /** the schematic the worker runs (Image Factory's virtual extension `schematic`: its version is the ID) */
  async function schematic(): Promise<string> {
    const r = await talosctl(shared().sim, ['get', 'extensions', '-o', 'json', ...at(WORKER)])
    const id = /"name":\s*"schematic",\s*"version":\s*"([0-9a-f]{64})"/.exec(r.stdout)?.[1]
    expect(id, r.stdout + r.stderr).toBeDefined()
    return id as string
  }
  const upgradesSent = (from: number): string[] =>
    shared()
      .calls()
      .slice(from)
      .filter((c) => c.tool === 'talosctl' && c.call === 'upgrade')
      .map((c) => c.args.find((a) => a.startsWith('factory.talos.dev/')) ?? c.args.join(' '))

  it(
    'a plain installer in IMAGE is refused before anything is touched; the hint sends the signed one and the node comes back',
    async () => {
      const id = await schematic()
      const [PLAIN, SIGNED] = [plain(id), signed(id)]
      const from = shared().calls().length
      const refused = await shared().task('upgrade:talos', { IMAGE: PLAIN, NODES: 'wrkr-1' }, FLAGS)
      expect(refused.code, refused.stdout + refused.stderr).toBe(1)
      const err = nodeIn(shared().report(), 'upgrade-talos', 'wrkr-1').error
      expect(err?.kind).toBe('version-skew')
      expect(refused.stderr).toContain(`${PLAIN} is not a secure-boot installer, but the node boots with secure boot on`)
      expect(upgradesSent(from)).toEqual([])
      expect(await tag()).toBe('v1.12.11')

      const { command } = hintOf(refused.stderr, 'upgrade-talos/plan')
      expect(command).toContain(`IMAGE=${SIGNED}`)
      expect(command).toContain('NODES=wrkr-1')
      const recovered = await runInFreshShell(shared(), command)
      expect(recovered.code, `${command}\n${recovered.stdout}\n${recovered.stderr}`).toBe(0)
      expect(upgradesSent(from)).toEqual([SIGNED])
      expect(await tag()).toBe(TARGET)
    },
    CASE_TIMEOUT,
  )

  it(
    'the same plain installer sent with talosctl alone: the upgrade is accepted and the node never boots again',
    async () => {
      const sent = await talosctl(shared().sim, ['upgrade', '--image', plain(await schematic()), '--wait=false', ...at(WORKER)])
      expect(sent.code, sent.stdout + sent.stderr).toBe(0)
      // it goes down for its reboot (the upgrade ran) and stays down: 20 s here are 20 simulated minutes, far
      // past any reboot, where a node that booted would answer
      const node = () => shared().sim.node('wrkr-1')
      const deadline = Date.now() + 60_000
      while (node()?.stage !== 'rebooting' && Date.now() < deadline) await new Promise((res) => setTimeout(res, 250))
      expect(node()?.stage).toBe('rebooting')
      await new Promise((res) => setTimeout(res, 20_000))
      expect(node()).toMatchObject({ stage: 'rebooting', listener: 'off' })
      const version = await talosctl(shared().sim, ['version', '--short', '--timeout', '3s', ...at(WORKER)])
      expect(version.code).not.toBe(0)
    },
    CASE_TIMEOUT,
  )
})

// upgrade:talos plans every node at its start and reaches a node minutes later: a node another
// client upgraded meanwhile is read again before anything is done to it, and left alone (skipped,
// `already at target`), not cordoned, drained and sent the same upgrade a second time (a second
// reboot for nothing). The other client here is GATE_COMMAND after wrkr-1, which upgrades wrkr-2 with
// talosctl itself. One control plane and two workers (real talosctl v1.12.11). Range 127.248.3.0/24.
import { describe, expect, it } from 'vitest'
import { nodeIn, sharedCluster } from './harness.js'
import { fastWith } from '../faults/helpers.js'

const R = '127.248.3'
const CASE_TIMEOUT = 300_000
const TARGET = 'v1.13.9'
const SLOW_OK = fastWith('--ready-timeout', '60s', fastWith('--call-timeout', '20s'))

describe('upgrade:talos reads a node again at its turn', () => {
  const shared = sharedCluster(R, { cps: 1, workers: 2, image: 'disk', speed: 60, kube: 'model' }, SLOW_OK)

  it(
    'a worker upgraded by another client after the plan is skipped as already at target, its upgrade sent once',
    async () => {
      const other = `talosctl -e ${R}.22 -n ${R}.22 upgrade --image ghcr.io/siderolabs/installer:${TARGET} --wait --timeout 2m`
      const from = shared().calls().length
      const r = await shared().task(
        'upgrade:talos',
        { TALOS_VERSION: TARGET, NODES: 'wrkr-1,wrkr-2', CONCURRENCY: '1', GATE_COMMAND: `if [ "$NODE" = wrkr-1 ]; then ${other}; fi` },
        [...SLOW_OK, '--upgrade-timeout', '2m', '--gate-timeout', '3m'],
      )
      expect(r.code, r.stdout + r.stderr).toBe(0)
      const sentTo = (ip: string): number =>
        shared()
          .calls()
          .slice(from)
          .filter((c) => c.tool === 'talosctl' && c.call === 'upgrade' && c.ip === ip).length
      // wrkr-1 by this run, wrkr-2 by the other client only
      expect([sentTo(`${R}.21`), sentTo(`${R}.22`)]).toEqual([1, 1])
      const second = nodeIn(shared().report(), 'upgrade-talos', 'wrkr-2')
      expect(second.detail).toBe(`already at target (${TARGET}): upgraded since the plan, not by this run`)
      expect(second.day2?.state).toBe('already at target')
      expect(nodeIn(shared().report(), 'upgrade-talos', 'wrkr-1').day2?.state).toBe('upgraded')
      // never cordoned by this run: no cordon of wrkr-2 among the product's kubectl calls
      const node = JSON.parse((await shared().kubectl(['get', 'node', 'wrkr-2', '-o', 'json'])).stdout) as {
        spec?: { unschedulable?: boolean }
        metadata: { annotations?: Record<string, string> }
      }
      expect(node.spec?.unschedulable).not.toBe(true)
    },
    CASE_TIMEOUT,
  )
})

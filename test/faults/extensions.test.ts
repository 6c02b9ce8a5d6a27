// Fault matrix, system extensions after the install (issue 28, item 4): a node whose image's schematic
// asks for extensions it does not run fails in wait-ready (read while its kubelet is waited for) naming what is missing; a node that runs them
// all passes; once the node runs them the hint's command recovers it. 127.238.3.0/24.
import { describe, expect, it } from 'vitest'
import { hintOf, nodeIn, runInFreshShell } from '../e2e/harness.js'
import { expectPhase, FAST, nodeRecovery, ROW_TIMEOUT, withCluster } from './helpers.js'

const SCHEMATIC = { extensions: ['iscsi-tools', 'qemu-guest-agent'] }

describe.concurrent('extension faults', () => {
  it(
    'an extension of the schematic not running: the node fails naming it; the one running them all passes; the hint recovers',
    () =>
      withCluster(
        '127.238.3',
        {
          workers: 1,
          vip: false,
          nodeOverrides: {
            'cp-1': { schematic: SCHEMATIC },
            'wrkr-1': { schematic: SCHEMATIC, extensions: ['qemu-guest-agent'] },
          },
        },
        async (cluster) => {
          const result = await cluster.task('bootstrap:talos', {}, FAST)
          expect(result.code, result.stderr).toBe(1)
          const report = cluster.report()
          expectPhase(report, 'wait-ready', { 'cp-1': 'ok', 'wrkr-1': 'failed:extensions' }, nodeRecovery)
          const failure = nodeIn(report, 'wait-ready', 'wrkr-1').error
          expect(failure?.message).toMatch(
            /^runs without the system extension iscsi-tools that its schematic [0-9a-f]{64} asks for \(iscsi-tools, qemu-guest-agent\); running: qemu-guest-agent$/,
          )
          expect(failure?.hint).toMatch(/talosctl --talosconfig \S+ -e 127\.238\.3\.21 -n 127\.238\.3\.21 get extensions/)
          expect(failure?.hint).toContain('upgrade --image ghcr.io/siderolabs/installer:v1.12.11')

          // the operator's upgrade to the schematic's installer: the node runs them all
          cluster.sim.setExtensions('wrkr-1', SCHEMATIC.extensions)
          const { command } = hintOf(result.stderr, 'wrkr-1')
          const recovered = await runInFreshShell(cluster, command)
          expect(recovered.code, `${command}\n${recovered.stderr}`).toBe(0)
          expect(cluster.sim.node('wrkr-1')?.stage).toBe('running')
        },
      ),
    ROW_TIMEOUT,
  )
})

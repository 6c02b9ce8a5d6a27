// Issue 12 item 9: after Ctrl-C or SIGTERM the summary and last-run.json show where each node stood
// when the run stopped (done, interrupted, not run) and the phases reached, not `ok` everywhere and
// `phases: []`. Range 127.184.x.
import { afterEach, describe, expect, it } from 'vitest'
import { E2eCluster, nodeIn, statuses, waitFor } from './harness.js'

let cluster: E2eCluster | undefined
afterEach(async () => {
  await cluster?.stop()
  cluster = undefined
})

describe('the state of every node when the run stopped', () => {
  for (const [signal, range] of [
    ['SIGINT', '127.184.1'],
    ['SIGTERM', '127.184.2'],
  ] as const) {
    it(`${signal} inside wrkr-1's apply: cp-1 done, wrkr-1 interrupted, wrkr-2 not run; phases reached preflight and apply`, async () => {
      // wrkr-1's first apply never answers: the run is caught inside it
      cluster = await E2eCluster.start(range, { workers: 2, faults: [{ node: 'wrkr-1', on: 'apply', kind: 'timeout', times: 1 }] })
      const c = cluster
      const { child, done } = c.spawnTask('bootstrap:talos', { CONCURRENCY: '1' }, ['--call-timeout', '120s'])
      await waitFor(() => c.calls().some((call) => call.node === 'wrkr-1' && call.call === 'apply'), 60_000, "wrkr-1's apply")
      process.kill(-(child.pid as number), signal)
      const result = await done
      expect(result.code, result.stderr).toBe(130)

      const report = c.report()
      expect(report).toMatchObject({ ok: false, interrupted: true })
      expect(report.phases.map((p) => [p.name, p.ok])).toEqual([
        ['preflight', true],
        ['apply', false],
      ])
      expect(statuses(report, 'apply')).toEqual({ 'cp-1': 'ok', 'wrkr-1': 'failed', 'wrkr-2': 'not-run' })
      expect(nodeIn(report, 'apply', 'wrkr-1').error).toMatchObject({
        kind: 'interrupted',
        message: expect.stringMatching(new RegExp(`interrupted by ${signal} during: `)),
      })
      expect(nodeIn(report, 'apply', 'wrkr-2').detail).toBe('interrupted before it ran')

      expect(result.stdout).toMatch(/^NODE\s+IP\s+ROLE\s+PREFLIGHT\s+APPLY\s+RESULT$/m)
      expect(result.stdout).toMatch(new RegExp(`^cp-1\\s+${range.replace(/\./g, '\\.')}\\.11\\s+controlplane\\s+ok\\s+ok\\s+ok$`, 'm'))
      // its apply was in flight: the node may have taken it (issue 27 item 15)
      expect(result.stdout).toMatch(/^wrkr-1\s+\S+\s+worker\s+ok\s+unknown outcome\s+interrupted \(unknown outcome\)$/m)
      expect(result.stdout).toMatch(/^wrkr-2\s+\S+\s+worker\s+ok\s+not-run \(interrupted\)\s+not run$/m)
    })
  }
})

// Issue 19 item 7: no noise or contradictions in what the operator reads.
import { describe, expect, it } from 'vitest'
import type { PhaseResult } from '../../lib/core/results.js'
import { summaryLine } from '../../lib/engine/runner.js'
import { parseMachineStatuses } from '../../lib/tools/talosctl.js'

const node = (name: string, status: 'ok' | 'failed' | 'not-run' | 'skipped', detail?: string) => ({
  name,
  ip: '127.0.0.1',
  role: 'worker' as const,
  status,
  attempts: 1,
  durationMs: 0,
  ...(detail ? { detail } : {}),
})

describe('the words an operator reads', () => {
  it('a phase that failed with nothing failed in it says why its nodes did not run', () => {
    const phase: PhaseResult = {
      name: 'wait-ready',
      ok: false,
      durationMs: 0,
      nodes: [node('wrkr-1', 'not-run', 'failed in verify')],
      steps: [],
    }
    expect(summaryLine(phase, false)).toBe('wait-ready: 0 ok, 0 skipped, 0 failed, 1 not run (wrkr-1: failed in verify)')
  })

  it('a step that could not run is named once, not again for every node it blocked', () => {
    const phase: PhaseResult = {
      name: 'bootstrap',
      ok: false,
      durationMs: 0,
      nodes: [
        node('cp-1', 'not-run', 'etcd-bootstrap not run: cp-1 failed in preflight'),
        node('cp-2', 'not-run', 'etcd-bootstrap not run: cp-1 failed in preflight'),
      ],
      steps: [{ name: 'etcd-bootstrap', status: 'not-run', durationMs: 0, detail: 'cp-1 failed in preflight' }],
    }
    expect(summaryLine(phase, false)).toBe(
      'bootstrap: 0 ok, 0 skipped, 0 failed, 2 not run (etcd-bootstrap not run: cp-1 failed in preflight)',
    )
  })

  it('says a required service that is not running once, where Talos lists it twice', () => {
    const doc = {
      node: '127.0.0.1',
      spec: {
        stage: 'booting',
        status: {
          ready: false,
          unmetConditions: [{ name: 'services', reason: 'etcd not running, kubelet not running, etcd not running' }],
        },
      },
    }
    expect(parseMachineStatuses(JSON.stringify(doc))[0]?.unmetConditions).toEqual([
      { name: 'services', reason: 'etcd not running, kubelet not running' },
    ])
  })
})

// verify's inference that a worker behind the VIP waits for the control plane (lib/phases/shared/
// node-verification.ts): two silent reads, no control plane still being verified. Once none is, the
// second read comes a moment after the first instead of a whole poll interval later: at 300 nodes
// and 16 at once, the workers verified after the control planes each held a slot an interval for it.
import { describe, expect, it } from 'vitest'
import { NodeError } from '../../lib/core/errors.js'
import type { ClusterNode } from '../../lib/core/model.js'
import type { StepReporter } from '../../lib/engine/phase.js'
import type { Run } from '../../lib/engine/run.js'
import { ControlPlaneVerifications, verifyNode } from '../../lib/phases/shared/node-verification.js'
import type { PollAnswer } from '../../lib/wait/poll.js'
import { SharedReading } from '../../lib/wait/shared-reading.js'
import type { StatusReads } from '../../lib/wait/status-reads.js'

const worker = { name: 'wrkr-1', address: '10.5.0.21', role: 'worker' } as ClusterNode
const controlPlane = { name: 'cp-1', address: '10.5.0.11', role: 'controlplane' } as ClusterNode

/** a run whose worker took its config, behind a VIP that does not answer yet */
function fakeRun(): Run {
  const facts = new Map<string, Record<string, unknown>>()
  return {
    inventory: { vip: '10.5.0.10', endpoint: 'https://10.5.0.10:6443' },
    settings: { verifyTimeoutMs: 60_000, pollIntervalMs: 5000 },
    facts: { of: (name: string) => facts.get(name) ?? facts.set(name, { applied: true }).get(name)! },
    journal: { tookConfig: () => true },
    options: {},
  } as unknown as Run
}

/** every read of the worker fails as a node that installs or waits for trustd does */
const silentReads = {
  read: () => Promise.reject(new NodeError('unreachable', 'rpc error: code = Unavailable desc = connection refused', 'h')),
} as unknown as StatusReads

/**
 * verify of the worker, its check asked by hand up to five times (`beforeRead(i)` first): how each
 * answer asked to be asked again ('interval', or its `againInMs`), 'done' for the one that concluded
 */
async function answersOf(
  controlPlanes: ControlPlaneVerifications,
  beforeRead?: (i: number) => Promise<void>,
): Promise<Array<string | number>> {
  const answers: Array<string | number> = []
  const report = {
    poll: async (check: (elapsed: number) => Promise<PollAnswer<string>>) => {
      for (let i = 0; i < 5; i++) {
        await beforeRead?.(i)
        const answer = await check(i * 1000)
        answers.push(answer.done ? 'done' : (answer.againInMs ?? 'interval'))
        if (answer.done) {
          expect(answer.value).toMatch(/^config accepted, out of maintenance; waiting for the control plane: /)
          return answer.value
        }
      }
      return 'not done'
    },
  } as unknown as StepReporter
  await verifyNode(worker, fakeRun(), report, silentReads, new SharedReading(async () => false, 0), controlPlanes)
  return answers
}

/** a control plane's verify in flight until the returned function is called */
function controlPlaneInFlight(controlPlanes: ControlPlaneVerifications): () => Promise<void> {
  let finish: () => void = () => undefined
  const inFlight = controlPlanes.track(controlPlane, () => new Promise<void>((r) => (finish = r)))
  return async () => {
    finish()
    await inFlight
  }
}

describe('verify: a worker taken to wait for the control plane', () => {
  it('once no control plane is being verified: the second silent read is asked for 500 ms later, and concludes', async () => {
    expect(await answersOf(new ControlPlaneVerifications())).toEqual([500, 'done'])
  })

  it('while a control plane is still verified: the reads keep the interval, and none concludes', async () => {
    const controlPlanes = new ControlPlaneVerifications()
    const finish = controlPlaneInFlight(controlPlanes)
    expect(await answersOf(controlPlanes)).toEqual(Array(5).fill('interval'))
    await finish()
  })

  it('a control plane verified while the worker waited: concluded at its next read, no sooner read needed', async () => {
    const controlPlanes = new ControlPlaneVerifications()
    const finish = controlPlaneInFlight(controlPlanes)
    expect(await answersOf(controlPlanes, async (i) => (i === 2 ? finish() : undefined))).toEqual(['interval', 'interval', 'done'])
  })
})

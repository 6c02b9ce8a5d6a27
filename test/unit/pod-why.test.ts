// Why a pod is not ready, in its own words (lib/phases/shared/health.ts podWhy): the scheduler's, a
// container's waiting or terminated reason and message, its newest Warning event; and whether
// waiting can clear it.
import { describe, expect, it } from 'vitest'
import { podWhy } from '../../lib/phases/shared/health.js'
import type { KubeObject } from '../../lib/tools/kubectl.js'

const pod = (spec: KubeObject['spec'], status: KubeObject['status']): KubeObject => ({
  metadata: { name: 'p-1', namespace: 'kube-system' },
  spec,
  status,
})

const event = (reason: string, message: string, at: string): KubeObject =>
  ({ metadata: { name: `p-1.${at}` }, involvedObject: { name: 'p-1' }, reason, message, lastTimestamp: at }) as unknown as KubeObject

describe('podWhy', () => {
  it("a pod the scheduler cannot place says the scheduler's message", () => {
    const why = podWhy(
      pod(
        {},
        {
          phase: 'Pending',
          conditions: [
            {
              type: 'PodScheduled',
              status: 'False',
              reason: 'Unschedulable',
              message: '0/3 nodes are available: 3 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }.',
            },
          ],
        },
      ),
    )
    expect(why).toEqual({
      why: 'Pending, not scheduled: Unschedulable: 0/3 nodes are available: 3 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }.',
      permanent: false,
    })
  })

  it('an unbound pod no scheduler spoke of says so', () => {
    expect(podWhy(pod({}, { phase: 'Pending' })).why).toBe(
      'Pending, not bound to a node and no scheduler has said why (is kube-scheduler running?)',
    )
  })

  it("an image the registry does not have: the registry's text, and no wait clears it", () => {
    const why = podWhy(
      pod(
        { nodeName: 'w-1' },
        {
          phase: 'Pending',
          containerStatuses: [
            {
              name: 'agent',
              ready: false,
              state: { waiting: { reason: 'ImagePullBackOff', message: 'Back-off pulling image "x:1": ErrImagePull: x:1: not found' } },
            },
          ],
        },
      ),
    )
    expect(why).toEqual({
      why: 'Pending, container agent ImagePullBackOff: Back-off pulling image "x:1": ErrImagePull: x:1: not found',
      permanent: true,
    })
  })

  it('a pull that times out may clear: not permanent', () => {
    const why = podWhy(
      pod(
        { nodeName: 'w-1' },
        {
          phase: 'Pending',
          containerStatuses: [{ name: 'agent', state: { waiting: { reason: 'ErrImagePull', message: 'dial tcp: i/o timeout' } } }],
        },
      ),
    )
    expect(why.permanent).toBe(false)
  })

  it('a container that cannot be created, and a crash-looping init container with its last exit', () => {
    const created = podWhy(
      pod(
        { nodeName: 'w-1' },
        {
          phase: 'Pending',
          containerStatuses: [{ name: 'c', state: { waiting: { reason: 'CreateContainerError', message: 'no command specified' } } }],
        },
      ),
    )
    expect(created).toEqual({ why: 'Pending, container c CreateContainerError: no command specified', permanent: true })
    const init = podWhy(
      pod(
        { nodeName: 'w-1' },
        {
          phase: 'Pending',
          initContainerStatuses: [
            {
              name: 'mount-cgroup',
              restartCount: 4,
              state: { waiting: { reason: 'CrashLoopBackOff', message: 'back-off 1m20s' } },
              lastState: { terminated: { reason: 'Error', exitCode: 1, message: 'first line\nmount: permission denied' } },
            },
          ],
          containerStatuses: [{ name: 'agent', state: { waiting: { reason: 'PodInitializing' } } }],
        },
      ),
    )
    expect(init.why).toBe(
      'Pending, init container mount-cgroup CrashLoopBackOff: back-off 1m20s; last exit Error: mount: permission denied; 4 restarts, container agent PodInitializing',
    )
  })

  it('the newest Warning event about it, not an old FailedScheduling once it is bound', () => {
    const why = podWhy(
      pod({ nodeName: 'w-1' }, { phase: 'Running', containerStatuses: [{ name: 'coredns', ready: false, state: { running: {} } }] }),
      [
        event('Unhealthy', 'Readiness probe failed: HTTP probe failed with statuscode: 503', '2026-01-01T00:00:09Z'),
        event('FailedScheduling', '0/0 nodes are available', '2026-01-01T00:00:10Z'),
        event('Unhealthy', 'Readiness probe failed: older', '2026-01-01T00:00:01Z'),
      ],
    )
    expect(why.why).toBe(
      'Running, container coredns running, not ready, event Unhealthy: Readiness probe failed: HTTP probe failed with statuscode: 503',
    )
  })
})

// Conformance: `on: kube` faults (sim/listeners.js kubeRequestFault, sim/faults.js takeKube). refused:
// the connection is reset before TLS, as while kube-apiserver restarts; unavailable: the 503 Status
// kube-apiserver answers while its storage is unavailable (reason and message as
// k8s.io/apimachinery pkg/api/errors/errors.go gives them for StatusServiceUnavailable); `times` counts
// connections (refused) or requests (the others), `path` narrows to URL paths. Range 127.183.1.
import https from 'node:https'
import { afterAll, describe, expect, it } from 'vitest'
import { loadScenario } from '../../sim/scenario.js'
import { applyInsecure, bootstrapWhenReady, scenarioOn, startOn, type Started } from './helpers.js'

let c: Started | undefined
afterAll(async () => {
  await c?.stop()
})

function kubeGet(s: Started['sim'], host: string, path: string): Promise<{ status?: number; body?: string; socketError?: string }> {
  const p = s.pki.kube
  return new Promise((resolve) => {
    const req = https.request({ host, port: 6443, path, agent: false, ca: p.ca.cert, cert: p.admin.cert, key: p.admin.key }, (res) => {
      let b = ''
      res.on('data', (d) => (b += d))
      res.on('end', () => resolve({ status: res.statusCode, body: b }))
    })
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ socketError: e.code }))
    req.end()
  })
}

describe('on: kube faults', () => {
  it('refused resets connections, unavailable answers 503 on matching paths only, each for its `times`', async () => {
    c = await startOn('127.183.1', { cps: 1, workers: 0, image: 'disk', vip: false, kube: 'model' })
    const { sim } = c
    await applyInsecure(sim, 'cp-1')
    await bootstrapWhenReady(sim, 'cp-1')
    await sim.until(() => sim.node('cp-1')!.apiServerUp)
    const ip = '127.183.1.11'
    expect((await kubeGet(sim, ip, '/api/v1/nodes')).status).toBe(200)

    sim.addFault({ on: 'kube', kind: 'refused', times: 2 })
    expect((await kubeGet(sim, ip, '/api/v1/nodes')).socketError).toBe('ECONNRESET')
    expect((await kubeGet(sim, ip, '/version')).socketError).toBe('ECONNRESET')
    expect((await kubeGet(sim, ip, '/version')).status).toBe(200)

    sim.addFault({ on: 'kube', kind: 'unavailable', times: 1, path: '/api/v1/nodes' })
    expect((await kubeGet(sim, ip, '/version')).status).toBe(200)
    const failed = await kubeGet(sim, ip, '/api/v1/nodes')
    expect(failed.status).toBe(503)
    expect(JSON.parse(failed.body ?? '{}')).toMatchObject({
      kind: 'Status',
      status: 'Failure',
      reason: 'ServiceUnavailable',
      code: 503,
      message: 'the server is currently unable to handle the request',
    })
    expect((await kubeGet(sim, ip, '/api/v1/nodes')).status).toBe(200)
    expect(
      sim
        .calls()
        .filter((r) => r.call === 'kube' && r.outcome.startsWith('fault'))
        .map((r) => r.outcome),
    ).toEqual(['fault unavailable'])
  })

  it('the scenario schema: a kube fault may omit the node, names a control plane if any, and only request kinds take path', () => {
    const base = scenarioOn('127.183.2', { cps: 1, workers: 1 })
    expect(loadScenario({ ...base, faults: [{ on: 'kube', kind: 'latency', ms: 200, path: '/apis' }] }).faults[0]).toMatchObject({
      node: null,
      on: 'kube',
      kind: 'latency',
      ms: 200,
      path: '/apis',
    })
    expect(() => loadScenario({ ...base, faults: [{ node: 'wrkr-1', on: 'kube', kind: 'unavailable' }] })).toThrow(
      /serves no Kubernetes API/,
    )
    expect(() => loadScenario({ ...base, faults: [{ on: 'kube', kind: 'refused', path: '/api' }] })).toThrow(
      /only kube faults acting on requests/,
    )
    expect(() => loadScenario({ ...base, faults: [{ on: 'apply', kind: 'refused' }] })).toThrow(/needs a node/)
  })
})

// Kubernetes listeners: <cp>:6443 once its API server is up, the VIP per `vip.up`. Range 127.23.20+.
import { afterEach, describe, expect, it } from 'vitest'
import https from 'node:https'
import { startOn, applyInsecure, bootstrapWhenReady, type Started } from './helpers.js'
import { startSimulator } from '../../sim/index.js'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

let c: Started | null = null
afterEach(async () => {
  await c?.stop()
  c = null
})

function kubeGet(
  sim: Started['sim'],
  host: string,
  path: string,
  withCert = true,
): Promise<{ status?: number; body?: string; socketError?: string }> {
  const p = sim.pki.kube
  return new Promise((resolve) => {
    const req = https.request(
      { host, port: 6443, path, agent: false, ca: p.ca.cert, ...(withCert ? { cert: p.admin.cert, key: p.admin.key } : {}) },
      (res) => {
        let b = ''
        res.on('data', (d) => {
          b += d
        })
        res.on('end', () => resolve({ status: res.statusCode, body: b }))
      },
    )
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ socketError: e.code }))
    req.end()
  })
}

describe('Kubernetes API listeners', () => {
  it('6443 opens on each control plane when its etcd is healthy, and on the VIP after bootstrap; the serving cert names them', async () => {
    c = await startOn('127.23.20', { cps: 2, workers: 0, image: 'disk', kube: 'model' })
    const { sim } = c
    await applyInsecure(sim, 'cp-1')
    await applyInsecure(sim, 'cp-2')
    expect((await kubeGet(sim, '127.23.20.10', '/version')).socketError).toBe('ECONNREFUSED')
    expect((await kubeGet(sim, '127.23.20.11', '/version')).socketError).toBe('ECONNREFUSED')
    await bootstrapWhenReady(sim, 'cp-1')
    await sim.until(() => sim.node('cp-1')!.apiServerUp && sim.node('cp-2')!.apiServerUp)
    for (const host of ['127.23.20.10', '127.23.20.11', '127.23.20.12']) {
      const r = await kubeGet(sim, host, '/version') // verified against the Kubernetes CA with the host as IP SAN
      expect(r.socketError, host).toBeUndefined()
      expect([200, 503]).toContain(r.status) // 503 only when sim/kube is absent
    }
    const anon = await kubeGet(sim, '127.23.20.11', '/api/v1/nodes', false)
    expect(anon.status).toBe(401)
    expect(JSON.parse(anon.body!)).toMatchObject({ kind: 'Status', reason: 'Unauthorized', code: 401 })
    // the kubeconfig Talos hands out points at the endpoint with the admin (system:masters) cert
    expect(sim.kubeconfigYaml()).toMatch(/server: https:\/\/127\.23\.20\.10:6443/)
  })

  it('vip.up never: the VIP never answers, node addresses do', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sim-test-'))
    const sim = await startSimulator({
      dir,
      kube: 'model',
      scenario: {
        cluster: { name: 'test', endpoint: 'https://127.23.21.10:6443', vip: { address: '127.23.21.10', up: 'never' } },
        speed: 1000,
        timings: { maintenance: 2, boot: 30, etcd: 20 },
        nodes: [{ name: 'cp-1', ip: '127.23.21.11', role: 'controlplane', image: 'disk' }],
      },
    })
    c = {
      sim,
      dir,
      async stop() {
        await sim.stop()
        rmSync(dir, { recursive: true, force: true })
      },
    }
    await applyInsecure(sim, 'cp-1')
    await bootstrapWhenReady(sim, 'cp-1')
    await sim.until(() => sim.node('cp-1')!.apiServerUp)
    expect((await kubeGet(sim, '127.23.21.11', '/version')).status).toBe(200)
    expect((await kubeGet(sim, '127.23.21.10', '/version')).socketError).toBe('ECONNREFUSED')
  })
})

// The node listener is a real TLS server: handshakes, not strings. Range 127.22.x.y.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { X509Certificate } from 'node:crypto'
import { startOn, tlsHandshake, talosCreds, applyInsecure, machineStatus, type Started } from './helpers.js'

describe('node API TLS', () => {
  let c: Started
  beforeAll(async () => {
    c = await startOn('127.22.1', {
      cps: 1,
      workers: 1,
      image: 'disk',
      vip: false,
      faults: [{ node: 'wrkr-1', on: 'any', kind: 'pki-mismatch' }],
    })
  })
  afterAll(() => c.stop())

  it('maintenance: handshake succeeds without a client cert; self-signed cert with an empty subject', async () => {
    const r = await tlsHandshake('127.22.1.11', { rejectUnauthorized: false })
    expect(r.result).toBe('ok')
    const cert = new X509Certificate(c.sim.pki.maintenance.get('cp-1')!.cert)
    expect(cert.subject ?? '').toBe('')
    // a client that verifies against the cluster CA refuses it
    const v = await tlsHandshake('127.22.1.11', { ca: talosCreds(c.sim).ca })
    expect(v.result).toBe('DEPTH_ZERO_SELF_SIGNED_CERT')
  })

  it('configured: no client cert -> certificate required alert; the talosconfig cert works', async () => {
    expect((await applyInsecure(c.sim, 'cp-1')).code).toBe(0)
    await c.sim.until(() => c.sim.node('cp-1')!.listener === 'secure')
    const anon = await tlsHandshake('127.22.1.11', { ca: talosCreds(c.sim).ca })
    expect(anon.result).toBe('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED')
    const creds = talosCreds(c.sim)
    expect((await tlsHandshake('127.22.1.11', creds)).result).toBe('ok')
    expect((await machineStatus(c.sim, '127.22.1.11')).stage).toMatch(/booting|running/)
    // a cert from another CA is refused by the server
    const other = c.sim.pki.kube.admin
    const wrong = await tlsHandshake('127.22.1.11', { ca: creds.ca, cert: other.cert, key: other.key })
    expect(wrong.result).toMatch(/ERR_SSL_TLSV13_ALERT_UNKNOWN_CA|ECONNRESET|ERR_SSL_SSL\/TLS_ALERT_BAD_CERTIFICATE|closed/)
  })

  it('a client that does not speak gRPC (no ALPN h2) is closed after the handshake', async () => {
    const r = await tlsHandshake('127.22.1.11', { ...talosCreds(c.sim), ALPNProtocols: [] })
    expect(r.result).toMatch(/closed|ECONNRESET/)
  })

  it('pki-mismatch: the configured node presents a cert that fails verification against the cluster CA', async () => {
    await applyInsecure(c.sim, 'wrkr-1')
    await c.sim.until(() => c.sim.node('wrkr-1')!.listener === 'pki')
    const r = await tlsHandshake('127.22.1.21', { ...talosCreds(c.sim) })
    expect(r.result).toMatch(/SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|CERT_SIGNATURE_FAILURE/)
    // same issuer name as the cluster's CA ("talos"), another key: Go then names the candidate authority
    const other = await (c.sim.pki as any).otherIdentity({ name: 'wrkr-1', ip: '127.22.1.21' })
    const leaf = new X509Certificate(other.cert)
    expect(leaf.issuer).toBe('O=talos')
    expect(leaf.verify(new X509Certificate(c.sim.pki.talos.ca.cert).publicKey)).toBe(false)
    expect(leaf.verify(new X509Certificate(other.ca).publicKey)).toBe(true)
  })
})

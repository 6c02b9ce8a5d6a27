// The simulated API behind TLS with client certificates (throwaway CA made with openssl),
// spoken to by the real kubectl through a kubeconfig with inline cert data.
// Addresses: 127.42.0.0/16.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestKube, type TestKube } from '../../sim/kube/testing.js'

function makePki(dir: string) {
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' })
  ssl(
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '1',
    '-subj',
    '/CN=kubernetes',
  )
  ssl(
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    'server.key',
    '-out',
    'server.csr',
    '-subj',
    '/CN=kube-apiserver',
  )
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.42.0.1,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n')
  ssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.crt',
    '-days',
    '1',
    '-extfile',
    'server.ext',
  )
  ssl(
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    'client.key',
    '-out',
    'client.csr',
    '-subj',
    '/O=system:masters/CN=admin',
  )
  writeFileSync(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n')
  ssl(
    'x509',
    '-req',
    '-in',
    'client.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'client.crt',
    '-days',
    '1',
    '-extfile',
    'client.ext',
  )
  const read = (f: string) => readFileSync(join(dir, f), 'utf8')
  return {
    ca: read('ca.crt'),
    cert: read('server.crt'),
    key: read('server.key'),
    clientCert: read('client.crt'),
    clientKey: read('client.key'),
  }
}

describe('kube API over TLS', () => {
  let k: TestKube
  let dir: string
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sim-kube-pki-'))
    const pki = makePki(dir)
    k = await startTestKube({ host: '127.42.0.1', speed: 2000, timings: { cni: 20 }, tls: { ...pki, requestCert: true } })
    k.kube.registerNode({ name: 'cp-1', ip: '127.42.0.11', role: 'controlplane' })
  })
  afterAll(async () => {
    await k?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('serves kubectl with a client certificate', async () => {
    expect(k.url).toBe('https://127.42.0.1:6443')
    const r = await k.kubectl(['get', 'nodes', '-o', 'name'])
    expect(r).toMatchObject({ code: 0, stdout: 'node/cp-1\n' })
    expect(await k.kubectl(['get', '--raw', '/healthz'])).toMatchObject({ code: 0, stdout: 'ok' })
  })

  it('refuses a client without a certificate at the handshake', async () => {
    const r = await k.kubectl([
      'get',
      'nodes',
      '--kubeconfig',
      await k.writeManifest(
        'nocert',
        `apiVersion: v1
kind: Config
clusters: [{name: sim, cluster: {server: "${k.url}", certificate-authority-data: ${Buffer.from(readFileSync(join(dir, 'ca.crt'))).toString('base64')}}}]
contexts: [{name: sim, context: {cluster: sim, user: sim}}]
current-context: sim
users: [{name: sim, user: {token: not-a-certificate}}]
`,
      ),
    ])
    expect(r.code).toBe(1)
    // kubectl's Go client sometimes names the read loop that saw the alert
    expect(r.stderr).toMatch(/Unable to connect to the server: (readLoopPeekFailLocked: )?remote error: tls: certificate required/)
  })
})

// One RPC over HTTPS to a node's :50000 listener, with socket/TLS outcomes mapped to grpc-go texts.
import { io } from '../cli-io.js'
import https from 'node:https'
import { X509Certificate } from 'node:crypto'
import { RpcError, unavailable, fromWire } from './errors.js'

import { inflight } from './inflight.js'

/** "host", "host:port", "https://host[:port]" -> {host, port} (talosctl's default port 50000). */
export function parseEndpoint(ep) {
  let s = ep
  let port = 50000
  if (s.startsWith('https://')) { s = s.slice(8).replace(/\/.*$/, ''); port = 443 }
  const m = s.match(/^\[(.*)\](?::(\d+))?$/) || s.match(/^([^:]+)(?::(\d+))?$/)
  if (!m) return { host: s, port }
  return { host: m[1], port: m[2] ? parseInt(m[2], 10) : port }
}

const alertTexts = {
  ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED: 'certificate required',
  ERR_SSL_TLSV1_ALERT_UNKNOWN_CA: 'unknown certificate authority',
  ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE: 'bad certificate',
  ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED: 'expired certificate',
  ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE: 'handshake failure',
  ERR_SSL_TLSV1_ALERT_ACCESS_DENIED: 'access denied',
  ERR_SSL_TLSV1_ALERT_DECRYPT_ERROR: 'error decrypting message',
}

function mapSocketError(e, host, port, handshaken) {
  const addr = `${host}:${port}`
  if (e instanceof RpcError) return e
  const dial = (what) => unavailable(`transport: Error while dialing: dial tcp ${addr}: ${what}`)
  switch (e.code) {
    case 'ECONNREFUSED': return dial('connect: connection refused')
    case 'ETIMEDOUT': return dial('i/o timeout')
    case 'EHOSTUNREACH': return dial('connect: no route to host')
    case 'ENETUNREACH': return dial('connect: network is unreachable')
    case 'EADDRNOTAVAIL': return dial('connect: cannot assign requested address')
  }
  if (alertTexts[e.code]) return unavailable(`error reading server preface: remote error: tls: ${alertTexts[e.code]}`)
  if (e.code === 'ECONNRESET' || e.code === 'EPIPE') {
    return unavailable(handshaken ? 'error reading server preface: EOF' : `transport: authentication handshake failed: read tcp ${addr}: read: connection reset by peer`)
  }
  if (String(e.code || '').startsWith('ERR_SSL')) return unavailable(`transport: authentication handshake failed: ${e.message}`)
  return unavailable(handshaken ? 'error reading server preface: EOF' : 'transport: authentication handshake failed: EOF')
}

/** Go's x509 chain check against the trusted CA(s), with its "possibly because of" hint. */
function verifyPeer(socket, caPem) {
  const peer = socket.getPeerX509Certificate?.()
  if (!peer) return 'x509: certificate signed by unknown authority'
  const cas = caPem.split(/(?=-----BEGIN CERTIFICATE-----)/).filter((p) => p.includes('BEGIN CERTIFICATE')).map((p) => new X509Certificate(p))
  let hint = null
  for (const ca of cas) {
    if (peer.fingerprint256 === ca.fingerprint256) return null
    if (peer.issuer !== ca.subject) continue
    if (peer.verify(ca.publicKey)) {
      const now = Date.now()
      if (now < Date.parse(peer.validFrom) || now > Date.parse(peer.validTo)) {
        return `x509: certificate has expired or is not yet valid: current time ${new Date(now).toISOString().replace(/\.\d+Z$/, 'Z')} is after ${new Date(Date.parse(peer.validTo)).toISOString().replace(/\.\d+Z$/, 'Z')}`
      }
      return null
    }
    const kt = ca.publicKey.asymmetricKeyType
    const algo = kt === 'ed25519' ? 'x509: Ed25519 verification failure' : kt === 'ec' ? 'x509: ECDSA verification failure' : 'crypto/rsa: verification error'
    // Go: CommonName, else the first Organization, else "serial:<decimal>"
    const cn = (ca.subject.match(/^CN=(.*)$/m) || [])[1]
    const org = (ca.subject.match(/^O=(.*)$/m) || [])[1]
    hint = { algo, name: cn || org || `serial:${BigInt('0x' + ca.serialNumber).toString()}` }
  }
  let msg = 'x509: certificate signed by unknown authority'
  if (hint) msg += ` (possibly because of ${JSON.stringify(hint.algo)} while trying to verify candidate authority certificate ${JSON.stringify(hint.name)})`
  return msg
}

/**
 * POST /<method> to the endpoint. conn: {host, port, insecure, creds:{ca,cert,key}}.
 * headers: x-talos-nodes (optional). onLine: for streamed replies, called per JSON line.
 * Resolves the parsed JSON reply; rejects with RpcError (transport or top-level errors).
 */
export function call(conn, method, body, { nodes, onLine, purpose } = {}) {
  return new Promise((resolve, reject) => {
    const headers = { 'content-type': 'application/json', 'x-sim-argv': JSON.stringify(io().argv) }
    if (nodes && nodes.length) headers['x-talos-nodes'] = nodes.join(',')
    if (purpose) headers['x-sim-purpose'] = purpose
    let handshaken = false
    let done = false
    const calls = inflight()
    const finish = (fn, v) => { if (!done) { done = true; calls.delete(cancel); fn(v) } }
    const opts = {
      host: conn.host, port: conn.port, method: 'POST', path: '/' + method, headers, agent: false,
      rejectUnauthorized: false, servername: undefined, minVersion: 'TLSv1.2',
    }
    if (!conn.insecure) {
      if (conn.creds.cert) { opts.cert = conn.creds.cert; opts.key = conn.creds.key }
    }
    const req = https.request(opts)
    const cancel = () => { finish(reject, new RpcError('Canceled', 'context canceled')); req.destroy() }
    calls.add(cancel)
    req.on('socket', (sock) => {
      sock.once('secureConnect', () => {
        handshaken = true
        if (!conn.insecure) {
          const bad = conn.creds.ca ? verifyPeer(sock, conn.creds.ca) : 'x509: certificate signed by unknown authority'
          if (bad) {
            finish(reject, unavailable(`transport: authentication handshake failed: tls: failed to verify certificate: ${bad}`))
            req.destroy()
          }
        }
      })
    })
    req.on('error', (e) => finish(reject, mapSocketError(e, conn.host, conn.port, handshaken)))
    req.on('response', (res) => {
      let buf = ''
      let streamErr = null
      res.setEncoding('utf8')
      res.on('data', (chunk) => {
        buf += chunk
        if (!onLine) return
        let nl
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim()
          buf = buf.slice(nl + 1)
          if (!line) continue
          try { onLine(JSON.parse(line)) } catch (e) { streamErr = e; req.destroy() }
        }
      })
      res.on('end', () => {
        if (streamErr) return finish(reject, streamErr)
        if (onLine) {
          if (buf.trim()) try { onLine(JSON.parse(buf)) } catch (e) { return finish(reject, e) }
          return finish(resolve, null)
        }
        let reply
        try { reply = JSON.parse(buf) } catch {
          return finish(reject, new RpcError('Internal', `server closed the stream without sending trailers`))
        }
        if (reply.transportError === 'refused') return finish(reject, mapSocketError({ code: 'ECONNREFUSED' }, conn.host, conn.port))
        if (reply.error) return finish(reject, fromWire(reply.error))
        finish(resolve, reply)
      })
      res.on('error', (e) => finish(reject, streamErr ?? mapSocketError(e, conn.host, conn.port, true)))
    })
    req.end(JSON.stringify(body ?? {}))
  })
}

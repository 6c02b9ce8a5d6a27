// Real keys and certificates for one simulator start (@peculiar/x509 over Node's webcrypto).
// Talos OS CA is Ed25519 (as Talos generates it); Kubernetes, etcd and aggregator CAs are ECDSA P-256.
// Private keys are PKCS#8 PEM ("PRIVATE KEY"), which Node's tls and Go's client-go both load.
import 'reflect-metadata'
import * as x509 from '@peculiar/x509'
import { createPrivateKey, webcrypto, randomBytes, randomInt } from 'node:crypto'

x509.cryptoProvider.set(webcrypto)
const ED = { name: 'Ed25519' }
const EC = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' }
const YEAR = 365 * 86400e3
let serial = 1

const genKey = (alg) => webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])
const b64lines = (buf) =>
  Buffer.from(buf)
    .toString('base64')
    .match(/.{1,64}/g)
    .join('\n')
async function keyPem(privateKey) {
  return `-----BEGIN PRIVATE KEY-----\n${b64lines(await webcrypto.subtle.exportKey('pkcs8', privateKey))}\n-----END PRIVATE KEY-----\n`
}
const validity = () => ({ notBefore: new Date(Date.now() - 3600e3), notAfter: new Date(Date.now() + 10 * YEAR) })
// Talos's default certificate validity (siderolabs/crypto x509 DefaultCertificateValidityDuration)
const DAY = 86400e3
const nextSerial = () => (serial++).toString(16).padStart(2, '0') + randomBytes(8).toString('hex')

async function makeCA(name, alg) {
  const keys = await genKey(alg)
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: nextSerial(),
    name,
    keys,
    signingAlgorithm: alg,
    ...validity(),
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  })
  return { alg, keys, cert: cert.toString('pem'), key: await keyPem(keys.privateKey), x509: cert }
}

/** the CA's key identifier as the CA states it (a config's CA may compute it differently from here) */
async function authorityKeyId(ca) {
  const ski = ca.x509.getExtension(x509.SubjectKeyIdentifierExtension)
  return ski ? new x509.AuthorityKeyIdentifierExtension(ski.keyId) : x509.AuthorityKeyIdentifierExtension.create(ca.keys.publicKey)
}

/** issue a leaf cert from `ca`; sans: [{type:'ip'|'dns', value}], usages: ['server','client'] */
async function issue(ca, { subject, sans = [], usages, keys, valid = validity() }) {
  keys ??= await genKey(ca.alg)
  const eku = usages.map((u) => (u === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth))
  const extensions = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(
      x509.KeyUsageFlags.digitalSignature | (ca.alg.name === 'ECDSA' ? x509.KeyUsageFlags.keyEncipherment : 0),
      true,
    ),
    new x509.ExtendedKeyUsageExtension(eku),
    await authorityKeyId(ca),
  ]
  if (sans.length) extensions.push(new x509.SubjectAlternativeNameExtension(sans))
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: nextSerial(),
    subject,
    // the CA's own encoding of its name: a CA from a config (Go's PrintableString) must match byte for byte
    issuer: ca.x509.subjectName,
    publicKey: keys.publicKey,
    signingKey: ca.keys.privateKey,
    signingAlgorithm: ca.alg,
    ...valid,
    extensions,
  })
  return { cert: cert.toString('pem'), key: await keyPem(keys.privateKey) }
}

const token = (a, b) => {
  const abc = 'abcdefghijklmnopqrstuvwxyz0123456789'
  const pick = (n) => Array.from({ length: n }, () => abc[randomInt(abc.length)]).join('')
  return `${pick(a)}.${pick(b)}`
}

/**
 * Everything a scenario start needs.
 * nodes: [{name, ip, role}], vip: address or null.
 */
export async function generatePki({ nodes, vip, role = 'os:admin' }) {
  let [talosCA, kubeCA, etcdCA, aggregatorCA, saKeys, maintKeys] = await Promise.all([
    makeCA('O=talos', ED),
    makeCA('O=kubernetes', EC),
    makeCA('O=etcd', EC),
    makeCA('CN=aggregator', EC),
    genKey(EC),
    genKey(ED),
  ])
  const cps = nodes.filter((n) => n.role === 'controlplane')
  const ipSan = (ip) => ({ type: 'ip', value: ip })
  const dnsSan = (d) => ({ type: 'dns', value: d })
  // one apid serving cert naming every node (fast for 300 nodes; Talos gives each node its own)
  const kubeServerFor = (ca) =>
    issue(ca, {
      subject: 'CN=kube-apiserver',
      usages: ['server'],
      sans: [
        dnsSan('kubernetes'),
        dnsSan('kubernetes.default'),
        dnsSan('kubernetes.default.svc'),
        dnsSan('kubernetes.default.svc.cluster.local'),
        dnsSan('localhost'),
        ipSan('127.0.0.1'),
        ...cps.map((n) => ipSan(n.ip)),
        ...(vip ? [ipSan(vip)] : []),
      ],
    })
  const kubeAdminFor = (ca) => issue(ca, { subject: 'CN=admin, O=system:masters', usages: ['client'] })
  const [apid, talosAdmin, kubeServer, kubeAdmin] = await Promise.all([
    issue(talosCA, {
      subject: 'CN=apid',
      usages: ['server', 'client'],
      sans: [...nodes.flatMap((n) => [dnsSan(n.name), ipSan(n.ip)]), ...(vip ? [ipSan(vip)] : [])],
    }),
    issue(talosCA, { subject: `O=${role}`, usages: ['client'] }), // the talosconfig's role (scenario cluster.talosconfigRole)
    kubeServerFor(kubeCA),
    kubeAdminFor(kubeCA),
  ])
  // maintenance mode: a self-signed cert with an empty subject per node (shared key, for speed)
  const maintenance = new Map()
  await Promise.all(
    nodes.map(async (n) => {
      const cert = await x509.X509CertificateGenerator.createSelfSigned({
        serialNumber: nextSerial(),
        name: '',
        keys: maintKeys,
        signingAlgorithm: ED,
        ...validity(),
        extensions: [
          new x509.SubjectAlternativeNameExtension([ipSan(n.ip)]),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        ],
      })
      maintenance.set(n.name, { cert: cert.toString('pem') })
    }),
  )
  const maintKey = await keyPem(maintKeys.privateKey)
  // the chart repository (sim/charts/repo.js) on 127.0.0.1: its own CA, given to helm with --ca-file
  const chartsCA = await makeCA('O=charts', EC)
  const chartsServer = await issue(chartsCA, { subject: 'CN=charts', usages: ['server'], sans: [ipSan('127.0.0.1')] })
  for (const m of maintenance.values()) m.key = maintKey

  // pki-mismatch: the node's identity and trust come from another CA (made on demand)
  const others = new Map()
  async function otherIdentity(node) {
    if (!others.has(node.name)) {
      others.set(
        node.name,
        (async () => {
          const ca = await makeCA('O=talos', ED)
          const leaf = await issue(ca, { subject: 'CN=apid', usages: ['server', 'client'], sans: [dnsSan(node.name), ipSan(node.ip)] })
          return { ca: ca.cert, ...leaf }
        })(),
      )
    }
    return others.get(node.name)
  }

  // each node's own apid serving certificate (secrets/api_cert_sans.go: the node's addresses, its
  // hostname and machine.certSANs; here its address, its name and, on a control plane, the VIP).
  // opts.offsetS (fault clock): issued by the node's own clock, valid from its "now" for a day
  // (secrets/api.go: NotAfter now + DefaultCertificateValidityDuration, NotBefore now);
  // opts.address (fault cert-sans): the certificate names that address instead of the node's.
  const apids = new Map()
  function apidFor(node, { offsetS = null, address = null } = {}) {
    const key = `${node.name}|${offsetS}|${address}`
    if (!apids.has(key)) {
      const ips = address ? [address] : [node.ip, ...(vip && node.role === 'controlplane' ? [vip] : [])]
      const nodeNow = Date.now() + (offsetS ?? 0) * 1000
      const valid = offsetS == null ? validity() : { notBefore: new Date(nodeNow), notAfter: new Date(nodeNow + DAY) }
      apids.set(
        key,
        issue(talosCA, { subject: 'CN=apid', usages: ['server', 'client'], sans: [dnsSan(node.name), ...ips.map(ipSan)], valid }),
      )
    }
    return apids.get(key)
  }

  // a control plane's etcd certificates, as Talos makes them from the etcd CA (internal/pkg/etcd/certs.go):
  // the server certificate names the node's address, 127.0.0.1, ::1, its hostname and localhost; the
  // peer certificate its address and hostname (and 127.0.0.1, below); both serve and authenticate clients. Made on demand
  // (when a member starts: sim/etcd.js).
  const etcds = new Map()
  function etcdFor(node) {
    if (!etcds.has(node.name)) {
      const both = ['server', 'client']
      etcds.set(
        node.name,
        Promise.all([
          issue(etcdCA, {
            subject: `CN=${node.name}`,
            usages: both,
            sans: [dnsSan(node.name), dnsSan('localhost'), ipSan(node.ip), ipSan('127.0.0.1'), ipSan('::1')],
          }),
          // + 127.0.0.1: etcd checks a peer's certificate against the address it connects from
          // (client/pkg/transport/listener_tls.go checkCertSAN), and every loopback connection here
          // comes from 127.0.0.1, whichever 127.x address it goes to (on a real network, the node's own)
          issue(etcdCA, { subject: `CN=${node.name}`, usages: both, sans: [dnsSan(node.name), ipSan(node.ip), ipSan('127.0.0.1')] }),
        ]).then(([server, peer]) => ({ server, peer })),
      )
    }
    return etcds.get(node.name)
  }
  // machined's own etcd client certificate (GenerateClientCert: client auth only)
  let etcdClient = null
  const etcdClientCert = () => (etcdClient ??= issue(etcdCA, { subject: 'CN=talos', usages: ['client'] }))

  const b64 = () => randomBytes(32).toString('base64')
  const talos = { ca: pair(talosCA), apid, admin: talosAdmin }
  const kube = { ca: pair(kubeCA), server: kubeServer, admin: kubeAdmin }

  // scenario cluster.configs: external. The cluster's CAs are the ones in the configs applied to it,
  // as on a real node (machine.ca: the Talos API's, apid's certificate and trustd's; cluster.ca: the
  // Kubernetes API's). A worker's config carries the certificates only; a control plane's the keys.
  // Returns false for a config of another cluster (its CA differs from the one adopted).
  let adopted = null
  async function adopt(config) {
    const crt = decode(config.machine?.ca?.crt)
    if (!crt) return false
    if (adopted && adopted.trim() !== crt.trim()) return false
    const key = decode(config.machine?.ca?.key)
    const kubeCrt = decode(config.cluster?.ca?.crt)
    const kubeKey = decode(config.cluster?.ca?.key)
    if (!adopted || (key && !talosCA.imported)) {
      adopted = crt
      talosCA = await importCA(crt, key, ED)
      apids.clear()
      talos.ca = { cert: crt, key: key ?? '' }
    }
    if (kubeCrt && kubeKey && !kubeCA.imported) {
      kubeCA = await importCA(kubeCrt, kubeKey, EC)
      ;[kube.server, kube.admin] = await Promise.all([kubeServerFor(kubeCA), kubeAdminFor(kubeCA)])
      kube.ca = { cert: kubeCrt, key: kubeKey }
    }
    return true
  }

  // the real control plane's certificates (sim/kube-real.js, SIM_KUBE=real), issued from the
  // cluster's current CAs as Talos issues them (secrets/kubernetes.go): the API server's serving
  // certificate, the front proxy's client, the API server's etcd client, the controllers' clients
  const leaf = {
    kube: (spec) => issue(kubeCA, spec),
    aggregator: (spec) => issue(aggregatorCA, spec),
    etcd: (spec) => issue(etcdCA, spec),
  }

  return {
    talos,
    kube,
    adopt,
    leaf,
    etcd: { ca: pair(etcdCA), etcdFor, client: etcdClientCert },
    aggregator: { ca: pair(aggregatorCA) },
    charts: { ca: pair(chartsCA), server: chartsServer },
    serviceAccount: { key: await keyPem(saKeys.privateKey) },
    maintenance,
    otherIdentity,
    apidFor,
    secrets: {
      machineToken: token(6, 16),
      bootstrapToken: token(6, 16),
      clusterId: b64(),
      clusterSecret: b64(),
      secretboxEncryptionSecret: b64(),
    },
  }
}
const pair = (ca) => ({ cert: ca.cert, key: ca.key })

/**
 * The kubelet's own serving certificate when none is configured (kubelet.go with client-go
 * cert.GenerateSelfSignedCertKey): a CA `<host>-ca@<unix time>` made for it, and a leaf `<host>@<unix
 * time>` for the host name and address. Nobody checks it (the API server dials kubelets without a CA).
 */
export async function kubeletSelfSigned(host, ip) {
  const now = Math.floor(Date.now() / 1000)
  const ca = await makeCA(`CN=${host}-ca@${now}`, EC)
  const leaf = await issue(ca, {
    subject: `CN=${host}@${now}`,
    usages: ['server'],
    sans: [
      { type: 'dns', value: host },
      { type: 'ip', value: ip },
    ],
  })
  return { cert: `${leaf.cert.trimEnd()}\n${ca.cert.trimEnd()}\n`, key: leaf.key }
}

/** a kubelet's certificate request (PKCS#10 PEM) and its new P-256 key, as the kubelet's
 *  bootstrap makes them (k8s.io/client-go/util/certificate/csr): subject e.g. `CN=system:node:cp-1, O=system:nodes` */
export async function certificateRequest(subject, { ips = [], names = [] } = {}) {
  const keys = await genKey(EC)
  const sans = [...names.map((value) => ({ type: 'dns', value })), ...ips.map((value) => ({ type: 'ip', value }))]
  const extensions = sans.length ? [new x509.SubjectAlternativeNameExtension(sans)] : []
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({ name: subject, keys, signingAlgorithm: EC, extensions })
  return { csr: csr.toString('pem'), key: await keyPem(keys.privateKey) }
}
const decode = (b64) => (typeof b64 === 'string' && b64 !== '' ? Buffer.from(b64, 'base64').toString('utf8') : undefined)

/** A CA from a Talos config's PEMs: Talos writes Ed25519 keys as PKCS#8 under the label `ED25519 PRIVATE KEY`
 *  and ECDSA keys as SEC1 (`EC PRIVATE KEY`); both become a signing key here. Without a key it only verifies. */
async function importCA(certPem, keyPem, alg) {
  const cert = new x509.X509Certificate(certPem)
  const publicKey = await cert.publicKey.export(alg, ['verify'], webcrypto)
  let privateKey
  if (keyPem) {
    const pkcs8 = createPrivateKey(keyPem.replace(/(-----(BEGIN|END)) ED25519 PRIVATE KEY-----/g, '$1 PRIVATE KEY-----')).export({
      type: 'pkcs8',
      format: 'der',
    })
    privateKey = await webcrypto.subtle.importKey('pkcs8', pkcs8, alg, true, ['sign'])
  }
  return { alg, keys: { publicKey, privateKey }, cert: certPem, key: keyPem ?? '', x509: cert, imported: Boolean(privateKey) }
}

/** an ed25519 private key in OpenSSH format (for the flux deploy key file) */
export function openSshEd25519(comment = 'flux') {
  const seed = randomBytes(32)
  // derive the public key through node:crypto from the raw seed (PKCS#8 wrapper of an Ed25519 seed)
  return import('node:crypto').then(({ createPrivateKey, createPublicKey }) => {
    const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed])
    const pub = createPublicKey(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }))
      .export({ format: 'der', type: 'spki' })
      .subarray(-32)
    const str = (b) => {
      const x = Buffer.from(b)
      const l = Buffer.alloc(4)
      l.writeUInt32BE(x.length)
      return Buffer.concat([l, x])
    }
    const u32 = (n) => {
      const l = Buffer.alloc(4)
      l.writeUInt32BE(n)
      return l
    }
    const pubBlob = Buffer.concat([str('ssh-ed25519'), str(pub)])
    const check = randomBytes(4)
    let priv = Buffer.concat([check, check, str('ssh-ed25519'), str(pub), str(Buffer.concat([seed, pub])), str(comment)])
    const pad = []
    for (let i = 1; priv.length % 8; i++) {
      pad.push(i)
      priv = Buffer.concat([priv, Buffer.from([i])])
    }
    const body = Buffer.concat([Buffer.from('openssh-key-v1\0'), str('none'), str('none'), str(''), u32(1), str(pubBlob), str(priv)])
    return {
      privateKey: `-----BEGIN OPENSSH PRIVATE KEY-----\n${body
        .toString('base64')
        .match(/.{1,70}/g)
        .join('\n')}\n-----END OPENSSH PRIVATE KEY-----\n`,
      publicKey: `ssh-ed25519 ${pubBlob.toString('base64')} ${comment}\n`,
    }
  })
}

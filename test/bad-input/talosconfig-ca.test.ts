// Issue 27, item 16: a talosconfig that does not belong to the machine configs is found offline,
// before any config is applied (otherwise every authenticated call after the apply fails, with the
// nodes already configured): its CA must be the configs' machine.ca.crt and its client certificate
// signed by that CA and within its validity. Exit 2 naming the talosconfig and the config. Range 127.237.1.x.
import { webcrypto } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import 'reflect-metadata'
import * as x509 from '@peculiar/x509'
import { parse, stringify } from 'yaml'
import { beforeEach, describe, expect, it } from 'vitest'
import { BadInputBed, expectBadInput, lineOf, useBed } from './helpers.js'

x509.cryptoProvider.set(webcrypto)
type CryptoKeyPair = webcrypto.CryptoKeyPair
const ED25519 = { name: 'Ed25519' }

const bedOf = useBed('127.237.1')
let bed: BadInputBed
beforeEach(() => {
  bed = bedOf()
})

interface Talosconfig {
  context: string
  contexts: Record<string, { ca: string; crt: string; key: string }>
}

const b64 = (pem: string): string => Buffer.from(pem).toString('base64')
const pemOf = (b: string): string => Buffer.from(b, 'base64').toString('utf8')

function talosconfigPath(): string {
  return bed.path('clusterconfig', 'talosconfig')
}

function readTalosconfig(): Talosconfig {
  return parse(readFileSync(talosconfigPath(), 'utf8')) as Talosconfig
}

/** Rewrites the current context's fields. */
function setContext(fields: Partial<{ ca: string; crt: string; key: string }>): void {
  const config = readTalosconfig()
  const context = config.contexts[config.context]
  if (!context) throw new Error('no context')
  Object.assign(context, fields)
  writeFileSync(talosconfigPath(), stringify(config))
}

async function newCa(name: string): Promise<{ cert: x509.X509Certificate; keys: CryptoKeyPair }> {
  const keys = (await webcrypto.subtle.generateKey(ED25519, true, ['sign', 'verify'])) as CryptoKeyPair
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name,
    keys,
    signingAlgorithm: ED25519,
    notBefore: new Date(Date.now() - 3600e3),
    notAfter: new Date(Date.now() + 365 * 86400e3),
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
  })
  return { cert, keys }
}

/** The cluster's own Talos CA, with its key, from the control plane's machine config. */
async function clusterCa(): Promise<{ cert: x509.X509Certificate; keys: CryptoKeyPair }> {
  const config = parse(bed.read('clusterconfig/e2e-cp-1.yaml')) as { machine: { ca: { crt: string; key: string } } }
  const keyDer = Buffer.from(
    pemOf(config.machine.ca.key)
      .replace(/-----[^-]+-----/g, '')
      .replace(/\s/g, ''),
    'base64',
  )
  const privateKey = await webcrypto.subtle.importKey('pkcs8', keyDer, ED25519, true, ['sign'])
  const cert = new x509.X509Certificate(pemOf(config.machine.ca.crt))
  return { cert, keys: { privateKey, publicKey: await cert.publicKey.export() } }
}

async function clientCert(
  ca: { cert: x509.X509Certificate; keys: CryptoKeyPair },
  valid: { notBefore: Date; notAfter: Date },
): Promise<{ crt: string; key: string }> {
  const keys = (await webcrypto.subtle.generateKey(ED25519, true, ['sign', 'verify'])) as CryptoKeyPair
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: '02',
    subject: 'O=os:admin',
    issuer: ca.cert.subject,
    publicKey: keys.publicKey,
    signingKey: ca.keys.privateKey,
    signingAlgorithm: ED25519,
    ...valid,
  })
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)).toString('base64')
  return { crt: b64(cert.toString('pem')), key: b64(`-----BEGIN PRIVATE KEY-----\n${pkcs8}\n-----END PRIVATE KEY-----\n`) }
}

const caLine = (): number => lineOf(talosconfigPath(), /^\s+ca: /)
const crtLine = (): number => lineOf(talosconfigPath(), /^\s+crt: /)

describe('a talosconfig that does not belong to the machine configs', () => {
  it("another cluster's talosconfig (its own CA and client certificate): exit 2 before any apply, naming both files", async () => {
    const other = await newCa('O=talos')
    const client = await clientCert(other, { notBefore: new Date(Date.now() - 3600e3), notAfter: new Date(Date.now() + 86400e3) })
    setContext({ ca: b64(other.cert.toString('pem')), ...client })
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file: talosconfigPath(),
      line: caLine(),
      what: /^talosconfig context "e2e" trusts another CA .* than machine\.ca\.crt of cp-1 in .*\/clusterconfig\/e2e-cp-1\.yaml: it is another cluster's talosconfig/,
      fix: /talosconfig generated with these machine configs/,
    })
  })

  it('the configs regenerated from new secrets, the talosconfig kept (bootstrap:apply)', async () => {
    // the same failure seen from the other side: the configs' CA changed under an old talosconfig
    const other = await newCa('O=talos')
    const ca = readTalosconfig().contexts.e2e?.ca ?? ''
    for (const name of ['cp-1', 'wrkr-1', 'wrkr-2']) bed.edit(`clusterconfig/e2e-${name}.yaml`, ca, b64(other.cert.toString('pem')))
    const result = await bed.cluster.task('bootstrap:apply')
    expectBadInput(result, bed, {
      file: talosconfigPath(),
      line: caLine(),
      what: /trusts another CA .* than machine\.ca\.crt of cp-1 in /,
      fix: /regenerate the configs and the talosconfig together/,
    })
  })

  it("the configs' CA in the talosconfig, but a client certificate another CA signed", async () => {
    const other = await newCa('O=talos')
    const client = await clientCert(other, { notBefore: new Date(Date.now() - 3600e3), notAfter: new Date(Date.now() + 86400e3) })
    setContext(client)
    const result = await bed.cluster.task('bootstrap:talos')
    expectBadInput(result, bed, {
      file: talosconfigPath(),
      line: crtLine(),
      what: /^talosconfig context "e2e": its client certificate is not signed by its CA, the machine\.ca\.crt of .*e2e-cp-1\.yaml/,
      fix: /talosconfig generated with these machine configs/,
    })
  })

  it('a client certificate of this cluster that expired', async () => {
    const client = await clientCert(await clusterCa(), {
      notBefore: new Date(Date.now() - 400 * 86400e3),
      notAfter: new Date(Date.now() - 35 * 86400e3),
    })
    setContext(client)
    const result = await bed.cluster.task('bootstrap:preflight')
    expectBadInput(result, bed, {
      file: talosconfigPath(),
      line: crtLine(),
      what: /^talosconfig context "e2e": its client certificate expired on \d{4}-\d\d-\d\dT.*: the nodes of .*e2e-cp-1\.yaml would refuse it/,
      fix: /new client certificate .*talhelper genconfig/,
    })
  })

  it('a fresh client certificate signed by the cluster CA passes (the check is not a blanket refusal)', async () => {
    const client = await clientCert(await clusterCa(), {
      notBefore: new Date(Date.now() - 3600e3),
      notAfter: new Date(Date.now() + 86400e3),
    })
    setContext(client)
    const result = await bed.cluster.task('bootstrap:preflight', { NODES: 'wrkr-1' })
    expect(result.code, result.stderr).toBe(0)
  })
})

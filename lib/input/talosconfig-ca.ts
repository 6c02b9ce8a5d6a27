// A talosconfig of another cluster (or one kept from before the configs were regenerated) would be
// found out only after the configs were applied: every authenticated call then fails with an unknown
// authority or `tls: certificate required`, and the nodes already run configs nobody can reach. Talos's
// talosconfig carries the OS CA of the machine configs (`machine.ca.crt`) and a client certificate that
// CA signed (pkg/machinery/config/generate/talosconfig.go), so both are checked offline, before any call.
import { X509Certificate } from 'node:crypto'
import type { ClusterNode } from '../core/model.ts'
import { InputError } from '../core/errors.ts'
import { MachineConfig } from './machine-config.ts'
import type { YamlFile } from './yaml-file.ts'

const FIX =
  'use the talosconfig generated with these machine configs (talhelper genconfig writes it as clusterconfig/talosconfig), or regenerate the configs and the talosconfig together from the same secrets'

function certificate(base64: string): X509Certificate | undefined {
  try {
    return new X509Certificate(Buffer.from(base64, 'base64'))
  } catch {
    return undefined
  }
}

/** machine.ca.crt of a node's config (base64 PEM), when it has one. */
function machineCa(node: ClusterNode): string | undefined {
  for (const value of MachineConfig.of(node.configFile).values()) {
    const crt = (value as { machine?: { ca?: { crt?: unknown } } } | null)?.machine?.ca?.crt
    if (typeof crt === 'string' && crt.trim()) return crt.trim()
  }
  return undefined
}

/**
 * The problem with a talosconfig context's `ca` and `crt` against the configs' CA, if any: its CA is
 * not every config's machine.ca.crt, or its client certificate is not signed by that CA, expired or
 * not yet valid. Configs without a CA (none to compare) are not checked.
 */
export function talosconfigCaProblem(
  file: YamlFile,
  contextName: string,
  context: { ca: string; crt: string },
  nodes: readonly ClusterNode[],
  now = new Date(),
): InputError | undefined {
  const at = (key: string, message: string, fix = FIX): InputError => file.error(['contexts', contextName, key], message, fix)
  const renew =
    'generate a new client certificate from the same secrets: talhelper genconfig (it writes a fresh clusterconfig/talosconfig), or talosctl config new --roles os:admin against a node you can still reach'
  const withCa = nodes.flatMap((node) => {
    const ca = machineCa(node)
    return ca ? [{ node, ca }] : []
  })
  if (withCa.length === 0) return undefined
  const ca = certificate(context.ca)
  if (!ca) return at('ca', `talosconfig context "${contextName}": ca is not an X.509 certificate`)
  for (const { node, ca: configCa } of withCa) {
    const theirs = certificate(configCa)
    if (theirs && theirs.fingerprint256 === ca.fingerprint256) continue
    return at(
      'ca',
      `talosconfig context "${contextName}" trusts another CA (${ca.subject.replace(/\n/g, ', ') || 'no subject'}, SHA-256 ${ca.fingerprint256.slice(0, 23)}…) than machine.ca.crt of ${node.name} in ${node.configFile}: it is another cluster's talosconfig, and every call after the apply would fail`,
    )
  }
  const client = certificate(context.crt)
  if (!client) return at('crt', `talosconfig context "${contextName}": crt is not an X.509 certificate`)
  const configFile = withCa[0]?.node.configFile ?? ''
  if (!client.checkIssued(ca) || !client.verify(ca.publicKey)) {
    return at(
      'crt',
      `talosconfig context "${contextName}": its client certificate is not signed by its CA, the machine.ca.crt of ${configFile}: the nodes would refuse it`,
    )
  }
  const notAfter = new Date(client.validTo)
  const notBefore = new Date(client.validFrom)
  if (notAfter.getTime() <= now.getTime()) {
    return at(
      'crt',
      `talosconfig context "${contextName}": its client certificate expired on ${notAfter.toISOString()}: the nodes of ${configFile} would refuse it`,
      renew,
    )
  }
  if (notBefore.getTime() > now.getTime()) {
    return at(
      'crt',
      `talosconfig context "${contextName}": its client certificate is valid only from ${notBefore.toISOString()}: the nodes of ${configFile} would refuse it`,
      "set this machine's clock right (or wait until then), or generate a new client certificate with talhelper genconfig",
    )
  }
  return undefined
}

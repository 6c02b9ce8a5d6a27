import type { ClusterNode } from '../../core/model.ts'
import type { EtcdMember } from '../../tools/talosctl.ts'

/** The host of a peer URL (`https://10.0.0.1:2380`, `https://[fd00::1]:2380`), brackets dropped. */
function hostOf(url: string): string | undefined {
  try {
    return new URL(url).hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase()
  } catch {
    return undefined
  }
}

/**
 * The member is this node's only when one of its peer URLs carries the node's inventory address:
 * a hostname is what the node calls itself, and another machine (or the same one at an address the
 * inventory does not know) can carry it.
 */
export function isMemberOf(node: ClusterNode, member: EtcdMember): boolean {
  const addresses = (node.addresses ?? [node.address]).map((a) => a.toLowerCase())
  return member.peerUrls.some((u) => addresses.includes(hostOf(u) ?? ''))
}

/**
 * A member carrying the node's name but none of its addresses: the inventory and the cluster disagree
 * about where the node runs. Nothing may act on such a member as the node's (a removal could throw a
 * running control plane out of etcd), nor call the node absent from etcd.
 */
export function namedElsewhere(node: ClusterNode, members: EtcdMember[]): EtcdMember | undefined {
  return members.find((m) => m.hostname === node.name && !isMemberOf(node, m))
}

/** The contradiction in words: which member, at which address, against which inventory address. */
export function describeElsewhere(node: ClusterNode, member: EtcdMember): string {
  const at = member.peerUrls.map((u) => hostOf(u) ?? u).join(', ') || 'no peer URL'
  return `etcd member ${member.id} is named ${node.name} but its peer URL is at ${at}, not ${node.name}'s inventory address ${node.address}`
}

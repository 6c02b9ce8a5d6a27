import type { ClusterNode } from '../../core/model.js'
import type { EtcdMember } from '../../tools/talosctl.js'

/** The member is this node's: the same hostname, or a peer URL at the node's address. */
export function isMemberOf(node: ClusterNode, member: EtcdMember): boolean {
  return member.hostname === node.name || member.peerUrls.some((u) => u.includes(`//${node.address}:`))
}

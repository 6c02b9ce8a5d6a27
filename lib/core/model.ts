// The cluster as the inventory describes it: what every layer talks about.

export type Role = 'controlplane' | 'worker'

export interface ClusterNode {
  /** the hostname as written (talhelper accepts FQDNs) */
  name: string
  /** the address the tool talks to: the first of the node's addresses (an IP address or a DNS name) */
  address: string
  /** every address of the node (talhelper's comma-separated ipAddress), `address` first; absent: just `address` */
  addresses?: string[]
  role: Role
  /** absolute path of the node's machine config */
  configFile: string
  installDisk?: string
  installDiskSelector?: Record<string, unknown>
  /**
   * the config enables cluster discovery with the service registry: the node finds the control
   * planes without the endpoint (a worker's apid then gets its certificate before the bootstrap)
   */
  discovery?: boolean
  /** the Kubernetes node name when it is not `name` (an FQDN hostname registers by its first label) */
  kubeName?: string
}

/** The name the node registers under in Kubernetes. */
export function kubeNodeName(node: ClusterNode): string {
  return node.kubeName ?? node.name
}

export interface Inventory {
  clusterDir: string
  /** the file the nodes came from (talconfig.yaml or nodes.yaml) */
  source: string
  clusterName: string
  endpoint: string
  /** the Talos version the configs were generated for (talconfig talosVersion), when known */
  talosVersion?: string
  /** host of the endpoint when it is not a node address (a VIP or a DNS name) */
  vip?: string
  talosconfig: string
  nodes: ClusterNode[]
}

/**
 * The control plane that bootstraps etcd: the one `wanted` names (bootstrapNode, by name or address),
 * else the first in the inventory; undefined when `wanted` names no control plane.
 */
export function bootstrapControlPlane(inventory: Pick<Inventory, 'nodes'>, wanted: string | undefined): ClusterNode | undefined {
  const cps = controlPlanes(inventory)
  return wanted ? cps.find((n) => n.name === wanted || n.address === wanted) : cps[0]
}

/** The control planes of the inventory, in its order. */
export function controlPlanes(inventory: Pick<Inventory, 'nodes'>): ClusterNode[] {
  return inventory.nodes.filter((n) => n.role === 'controlplane')
}

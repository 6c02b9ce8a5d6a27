// COSI resource definitions the node serves and how `resources.Get` resolves a typed name.
import { rpc } from './errors.js'

const def = (type, displayType, namespace, aliases, columns = [], extra = {}) => ({
  type,
  displayType,
  namespace,
  aliases,
  columns: columns.map(([name, jsonPath]) => ({ name, jsonPath })),
  ...extra,
})

// canonical type -> definition (aliases are matched case-insensitively, as talosctl does)
export const DEFINITIONS = [
  def(
    'MachineStatuses.runtime.talos.dev',
    'MachineStatus',
    'runtime',
    ['machinestatus', 'machinestatuses', 'ms'],
    [
      ['STAGE', '{.stage}'],
      ['READY', '{.status.ready}'],
    ],
  ),
  def('MountStatuses.runtime.talos.dev', 'MountStatus', 'runtime', ['mountstatus', 'mountstatuses', 'ms']),
  def('ManifestStatuses.kubernetes.talos.dev', 'ManifestStatus', 'controlplane', ['manifeststatus', 'manifeststatuses', 'ms']),
  def('MemoryStats.perf.talos.dev', 'MemoryStat', 'perf', ['memorystat', 'memorystats', 'ms']),
  def(
    'Members.cluster.talos.dev',
    'Member',
    'cluster',
    ['member', 'members'],
    [
      ['HOSTNAME', '{.hostname}'],
      ['MACHINE TYPE', '{.machineType}'],
      ['OS', '{.operatingSystem}'],
      ['ADDRESSES', '{.addresses}'],
    ],
  ),
  def(
    'Disks.block.talos.dev',
    'Disk',
    'runtime',
    ['disk', 'disks'],
    [
      ['SIZE', '{.pretty_size}'],
      ['READ ONLY', '{.readonly}'],
      ['TRANSPORT', '{.transport}'],
      ['ROTATIONAL', '{.rotational}'],
      ['WWID', '{.wwid}'],
      ['MODEL', '{.model}'],
      ['SERIAL', '{.serial}'],
    ],
  ),
  // pkg/machinery/resources/runtime/platform_metadata.go (id platformmetadata; no aliases)
  def(
    'PlatformMetadatas.talos.dev',
    'PlatformMetadata',
    'runtime',
    ['platformmetadata', 'platformmetadatas'],
    [
      ['PLATFORM', '{.platform}'],
      ['TYPE', '{.instanceType}'],
      ['REGION', '{.region}'],
      ['ZONE', '{.zone}'],
    ],
  ),
  // pkg/machinery/resources/block/volume_status.go (no aliases: talosctl matches volumestatus/volumestatuses)
  def(
    'VolumeStatuses.block.talos.dev',
    'VolumeStatus',
    'runtime',
    ['volumestatus', 'volumestatuses'],
    [
      ['TYPE', '{.type}'],
      ['PHASE', '{.phase}'],
      ['LOCATION', '{.location}'],
      ['SIZE', '{.prettySize}'],
    ],
  ),
  def('SystemDisks.block.talos.dev', 'SystemDisk', 'runtime', ['systemdisk', 'systemdisks', 'sd', 'sds'], [['DISK', '{.diskID}']]),
  def('Nodenames.kubernetes.talos.dev', 'Nodename', 'k8s', ['nodename', 'nodenames'], [['NODENAME', '{.nodename}']]),
  def('MachineConfigs.config.talos.dev', 'MachineConfig', 'config', ['machineconfig', 'machineconfigs', 'mc', 'mcs'], [], {
    sensitive: true,
  }),
  def('MachineTypes.config.talos.dev', 'MachineType', 'config', ['machinetype', 'machinetypes', 'mt', 'mts'], [['TYPE', '{@}']]),
  def('EtcdMembers.etcd.talos.dev', 'EtcdMember', 'etcd', ['etcdmember', 'etcdmembers', 'em', 'ems'], [['MEMBER ID', '{.memberID}']]),
  def(
    'Services.v1alpha1.talos.dev',
    'Service',
    'runtime',
    ['service', 'services', 'svc'],
    [
      ['RUNNING', '{.running}'],
      ['HEALTHY', '{.healthy}'],
      ['HEALTH UNKNOWN', '{.unknown}'],
    ],
  ),
  def(
    'HostnameStatuses.net.talos.dev',
    'HostnameStatus',
    'network',
    ['hostname', 'hostnamestatus', 'hostnamestatuses'],
    [
      ['HOSTNAME', '{.hostname}'],
      ['DOMAINNAME', '{.domainname}'],
    ],
  ),
  // pkg/machinery/resources/network/link_status.go, address_status.go (non-sensitive: the maintenance API serves them)
  def(
    'LinkStatuses.net.talos.dev',
    'LinkStatus',
    'network',
    ['link', 'links', 'linkstatus', 'linkstatuses'],
    [
      ['ALIAS', '{.alias}'],
      ['TYPE', '{.type}'],
      ['KIND', '{.kind}'],
      ['HW ADDR', '{.hardwareAddr}'],
      ['OPER STATE', '{.operationalState}'],
    ],
  ),
  def(
    'AddressStatuses.net.talos.dev',
    'AddressStatus',
    'network',
    ['address', 'addresses', 'addressstatus', 'addressstatuses'],
    [
      ['ADDRESS', '{.address}'],
      ['LINK', '{.linkName}'],
    ],
  ),
  // pkg/machinery/resources/time/status.go (served to the maintenance API too: non-sensitive)
  def('TimeStatuses.v1alpha1.talos.dev', 'TimeStatus', 'runtime', ['timestatus', 'timestatuses', 'ts'], [['SYNCED', '{.synced}']]),
  // pkg/machinery/resources/runtime/security_status.go (id securitystate; non-sensitive: the maintenance API serves it)
  def('SecurityStates.talos.dev', 'SecurityState', 'runtime', ['securitystate', 'securitystates'], [['SECUREBOOT', '{.secureBoot}']]),
  // pkg/machinery/resources/runtime/extension_status.go (alias extensions; columns from the layer's metadata)
  def(
    'ExtensionStatuses.runtime.talos.dev',
    'ExtensionStatus',
    'runtime',
    ['extensions', 'extensionstatus', 'extensionstatuses'],
    [
      ['NAME', '{.metadata.name}'],
      ['VERSION', '{.metadata.version}'],
    ],
  ),
  // pkg/machinery/resources/k8s/static_pod_status.go: one per static pod the kubelet runs, id
  // <namespace>/<pod>, its spec the pod's status as the kubelet reports it
  def(
    'StaticPodStatuses.kubernetes.talos.dev',
    'StaticPodStatus',
    'k8s',
    ['staticpodstatus', 'staticpodstatuses'],
    [['READY', '{.conditions[?(@.type=="Ready")].status}']],
  ),
  // pkg/machinery/resources/k8s: what Talos's Kubernetes controllers derive from the config
  // (sim/talos/k8s.js; `talosctl upgrade-k8s` reads them typed, as proto_spec: sim/grpc/cosi.js)
  def('KubeletSpecs.kubernetes.talos.dev', 'KubeletSpec', 'k8s', [], [], { sensitive: true }),
  def('APIServerConfigs.kubernetes.talos.dev', 'APIServerConfig', 'controlplane', [], [], { sensitive: true }),
  def('ControllerManagerConfigs.kubernetes.talos.dev', 'ControllerManagerConfig', 'controlplane', []),
  def('SchedulerConfigs.kubernetes.talos.dev', 'SchedulerConfig', 'controlplane', []),
  def('StaticPods.kubernetes.talos.dev', 'StaticPod', 'k8s', []),
  def('Manifests.kubernetes.talos.dev', 'Manifest', 'controlplane', []),
  // pkg/machinery/resources/runtime/diagnostic.go: what Talos found wrong (kubelet-csr, address-overlap, …)
  def(
    'Diagnostics.runtime.talos.dev',
    'Diagnostic',
    'runtime',
    ['diagnostic', 'diagnostics'],
    [
      ['MESSAGE', '{.message}'],
      ['DETAILS', '{.details}'],
    ],
  ),
  def(
    'Versions.runtime.talos.dev',
    'Version',
    'runtime',
    ['version', 'versions'],
    [
      ['NAME', '{.name}'],
      ['VERSION', '{.version}'],
    ],
  ),
]

/** resolve a user-typed type; throws the NotFound / ambiguity errors talosctl prints */
export function resolveType(typed) {
  const t = String(typed).toLowerCase()
  const matches = DEFINITIONS.filter((d) => {
    const canon = d.type.toLowerCase()
    const base = canon.split('.')[0]
    const prefixes = canon.split('.').map((_, i, a) => a.slice(0, i + 1).join('.'))
    return canon === t || prefixes.includes(t) || d.aliases.some((a) => a === t || prefixes.map((p) => p.replace(base, a)).includes(t))
  })
  if (!matches.length) throw rpc('NotFound', `resource "${typed}" is not registered`)
  if (matches.length > 1) throw rpc('InvalidArgument', `resource type "${typed}" is ambiguous: [${matches.map((m) => m.type).join(' ')}]`)
  return matches[0]
}

export function notFound(d, namespace, id) {
  return rpc('NotFound', `resource ${d.type}(${namespace ?? d.namespace}/${id}@undefined) doesn't exist`)
}

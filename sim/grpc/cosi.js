// COSI resources as talosctl reads them: `spec.yaml_spec` (what every output renders) and, for the
// `meta` ResourceDefinitions it resolves type names through and the typed resources a client decodes
// (MachineConfig, Service, the k8s specs upgrade-k8s reads), `spec.proto_spec` too
// (cosi-project/runtime pkg/resource/meta/spec/resource_definition.go: Fill makes the aliases).
import { fileURLToPath } from 'node:url'
import protobuf from 'protobufjs'
import { stringify } from 'yaml'

export const RD_TYPE = 'ResourceDefinitions.meta.cosi.dev'
// the definitions' own definition (cosi-project/runtime pkg/resource/meta/resource_definition.go)
export const RD_DEFINITION = {
  type: RD_TYPE,
  displayType: 'ResourceDefinition',
  namespace: 'meta',
  aliases: ['api-resources', 'resourcedefinition', 'rd', 'rds'],
  columns: [{ name: 'Aliases', jsonPath: '{.aliases[:]}' }],
}
const RDSpec = new protobuf.Root()
  .loadSync(fileURLToPath(new URL('./proto/cosi-meta.proto', import.meta.url)), { keepCase: true })
  .lookupType('cosi.resource.meta.ResourceDefinitionSpec')

const specs = new protobuf.Root().loadSync(fileURLToPath(new URL('./proto/resource-specs.proto', import.meta.url)), { keepCase: true })
const specType = (name) => specs.lookupType(`talos.resource.definitions.${name}`)

/** a JSON value as google.protobuf.Value / Struct (protoenc encodes a map[string]any so; protobufjs names its fields in camelCase) */
const value = (v) => {
  if (v == null) return { nullValue: 0 }
  if (typeof v === 'number') return { numberValue: v }
  if (typeof v === 'boolean') return { boolValue: v }
  if (typeof v === 'string') return { stringValue: v }
  if (Array.isArray(v)) return { listValue: { values: v.map(value) } }
  return { structValue: struct(v) }
}
const struct = (o) => ({ fields: Object.fromEntries(Object.entries(o ?? {}).map(([k, v]) => [k, value(v)])) })
const argValues = (args, v13) =>
  v13 ? Object.fromEntries(Object.entries(args ?? {}).map(([k, v]) => [k, { values: String(v).split(',') }])) : (args ?? {})
const volumes = (x) => (x ?? []).map((v) => ({ name: v.name, host_path: v.hostPath, mount_path: v.mountPath, read_only: !!v.readOnly }))

/**
 * The proto_spec of the typed resources a client decodes (protoenc, pkg/machinery/resources): by
 * type, from the spec as methods.js lists it; `minor` the node's Talos minor (extra_args moved at v1.13)
 */
const PROTO_SPECS = {
  'MachineConfigs.config.talos.dev': (s) => ['MachineConfigSpec', { yaml_marshalled: Buffer.from(String(s)) }],
  'Services.v1alpha1.talos.dev': (s) => ['ServiceSpec', { running: !!s.running, healthy: !!s.healthy, unknown: !!s.unknown }],
  'KubeletSpecs.kubernetes.talos.dev': (s) => [
    'KubeletSpecSpec',
    { image: s.image, args: s.args, expected_nodename: s.expectedNodename, config: struct(s.config) },
  ],
  'APIServerConfigs.kubernetes.talos.dev': (s, m) => [
    m >= 13 ? 'APIServerConfigSpec13' : 'APIServerConfigSpec',
    {
      image: s.image,
      cloud_provider: s.cloudProvider,
      control_plane_endpoint: s.controlPlaneEndpoint,
      etcd_servers: s.etcdServers,
      local_port: s.localPort,
      service_cid_rs: s.serviceCIDRs,
      extra_args: argValues(s.extraArgs, m >= 13),
      extra_volumes: volumes(s.extraVolumes),
      environment_variables: s.environmentVariables,
      advertised_address: s.advertisedAddress,
      resources: s.resources,
    },
  ],
  'ControllerManagerConfigs.kubernetes.talos.dev': (s, m) => [
    m >= 13 ? 'ControllerManagerConfigSpec13' : 'ControllerManagerConfigSpec',
    {
      enabled: s.enabled,
      image: s.image,
      cloud_provider: s.cloudProvider,
      pod_cid_rs: s.podCIDRs,
      service_cid_rs: s.serviceCIDRs,
      extra_args: argValues(s.extraArgs, m >= 13),
      extra_volumes: volumes(s.extraVolumes),
      environment_variables: s.environmentVariables,
      resources: s.resources,
    },
  ],
  'SchedulerConfigs.kubernetes.talos.dev': (s, m) => [
    m >= 13 ? 'SchedulerConfigSpec13' : 'SchedulerConfigSpec',
    {
      enabled: s.enabled,
      image: s.image,
      extra_args: argValues(s.extraArgs, m >= 13),
      extra_volumes: volumes(s.extraVolumes),
      environment_variables: s.environmentVariables,
      resources: s.resources,
      config: struct(s.config),
    },
  ],
  'StaticPods.kubernetes.talos.dev': (s) => ['StaticPodSpec', { pod: struct(s) }],
  'StaticPodStatuses.kubernetes.talos.dev': (s) => ['StaticPodStatusSpec', { pod_status: struct(s) }],
  'Manifests.kubernetes.talos.dev': (s) => ['ManifestSpec', { items: s.map((o) => ({ object: struct(o) })) }],
}
function protoSpecOf(type, spec, minor) {
  const enc = PROTO_SPECS[type]
  if (!enc) return undefined
  const [name, msg] = enc(spec, minor ?? 12)
  const T = specType(name)
  return T.encode(T.fromObject(msg)).finish()
}

export const timestamp = (iso) => {
  const ms = Date.parse(iso)
  return Number.isNaN(ms) ? undefined : { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 }
}
const yamlOf = (spec) => (typeof spec === 'string' ? spec : stringify(spec, { lineWidth: 0 }))

/** a resource as sim/talos/methods.js lists it ({metadata, spec}) as cosi.resource.Resource */
export function toResource({ metadata: m, spec, minor }) {
  const proto = protoSpecOf(m.type, spec, minor)
  return {
    metadata: {
      namespace: m.namespace,
      type: m.type,
      id: m.id,
      version: String(m.version),
      owner: m.owner ?? '',
      phase: m.phase ?? 'running',
      created: timestamp(m.created),
      updated: timestamp(m.updated),
      finalizers: [],
      ...(m.annotations ? { annotations: m.annotations } : {}),
    },
    spec: { yaml_spec: yamlOf(spec), ...(proto ? { proto_spec: proto } : {}) },
  }
}

/**
 * a tombstone as the watch of a missing resource carries it (cosi runtime resource.NewTombstone: the
 * metadata alone, its version undefined, its spec nil, marshalled as YAML `null`)
 */
export function tombstone(namespace, type, id) {
  return {
    metadata: { namespace, type, id, version: 'undefined', owner: '', phase: 'running', finalizers: [] },
    spec: { yaml_spec: 'null\n' },
  }
}

/** what ResourceDefinitionSpec.Fill derives from a definition's type and explicit aliases */
export function definitionSpec(d) {
  const [name, ...suffix] = d.type.split('.')
  const plural = name.toLowerCase()
  const prefixes = suffix.slice(0, -1).map((_, i) => [plural, ...suffix.slice(0, i + 1)].join('.'))
  const aliases = d.aliases.filter((a) => a !== plural)
  return {
    resource_type: d.type,
    display_type: d.displayType,
    default_namespace: d.namespace,
    aliases,
    all_aliases: [plural, ...prefixes, ...aliases],
    print_columns: d.columns.map((c) => ({ name: c.name, json_path: c.jsonPath })),
    sensitivity: d.sensitive ? 1 : 0,
  }
}

export function resourceDefinition(d, sim) {
  const spec = definitionSpec(d)
  const yaml = {
    type: spec.resource_type,
    displayType: spec.display_type,
    defaultNamespace: spec.default_namespace,
    aliases: spec.aliases,
    allAliases: spec.all_aliases,
    printColumns: d.columns.map((c) => ({ name: c.name, jsonPath: c.jsonPath })),
    sensitivity: d.sensitive ? 'sensitive' : 'non-sensitive',
  }
  const created = timestamp(sim.displayTime(0).toISOString())
  return {
    metadata: {
      namespace: 'meta',
      type: RD_TYPE,
      id: d.type.toLowerCase(),
      version: '1',
      owner: '',
      phase: 'running',
      created,
      updated: created,
      finalizers: [],
    },
    spec: { proto_spec: RDSpec.encode(RDSpec.fromObject(spec)).finish(), yaml_spec: stringify(yaml) },
  }
}

// COSI resources as talosctl reads them: `spec.yaml_spec` (what every output renders) and, for the
// `meta` ResourceDefinitions it resolves type names through, `spec.proto_spec` too
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

export const timestamp = (iso) => {
  const ms = Date.parse(iso)
  return Number.isNaN(ms) ? undefined : { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 }
}
const yamlOf = (spec) => (typeof spec === 'string' ? spec : stringify(spec, { lineWidth: 0 }))

/** a resource as sim/talos/methods.js lists it ({metadata, spec}) as cosi.resource.Resource */
export function toResource({ metadata: m, spec }) {
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
    spec: { yaml_spec: yamlOf(spec) },
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

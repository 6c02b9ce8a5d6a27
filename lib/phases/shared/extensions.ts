// After the install: the system extensions a node runs against what the schematic of its image asks
// for. A missing one (iscsi-tools, a guest agent, tailscale) would otherwise surface later as storage
// or networking that fails.
import { parse as parseYaml } from 'yaml'
import { NodeError } from '../../core/errors.ts'
import type { ClusterNode } from '../../core/model.ts'
import { hintForExtensions } from '../../cli/hints.ts'
import { MachineConfig } from '../../input/machine-config.ts'
import { schematicOfImage } from '../../input/versions.ts'
import type { Run } from '../../engine/run.ts'
import type { StepReporter } from '../../engine/phase.ts'
import { extensionOf, type NodeAnswer } from '../../tools/talosctl.ts'
import type { SharedReading } from '../../wait/shared-reading.ts'

/** Image Factory's virtual extension that carries the schematic (its ID as version, the schematic as extraInfo). */
const SCHEMATIC = 'schematic'

/** `siderolabs/iscsi-tools` -> `iscsi-tools`: the schematic names an extension by its image, the node by its manifest name. */
const extensionName = (ref: string): string => ref.replace(/^.*\//, '')

/** The extensions a schematic asks for (`customization.systemExtensions.officialExtensions`). */
export function schematicExtensions(extraInfo: string): string[] {
  try {
    const schematic = parseYaml(extraInfo) as { customization?: { systemExtensions?: { officialExtensions?: unknown } } } | null
    const list = schematic?.customization?.systemExtensions?.officialExtensions
    return Array.isArray(list) ? list.filter((x): x is string => typeof x === 'string').map(extensionName) : []
  } catch {
    return []
  }
}

/**
 * Fails the node when an extension its running image's schematic asks for is not running; returns a
 * note when it runs another schematic than its config's installer image names (a disk image booted
 * as it is, whose install was skipped), else undefined. `batched`: the nodes' extensions read in one
 * call (`talosctl get extensions -n a,b,…`) instead of one call per node.
 */
export async function checkExtensions(
  node: ClusterNode,
  run: Run,
  report: StepReporter,
  batched?: SharedReading<Map<string, NodeAnswer<unknown[]>>>,
): Promise<string | undefined> {
  // the node's answer in the batched read; one the batch could not tell, or that answered with an error, is asked alone
  const docs = (await batched?.get().catch(() => undefined))?.get(node.address)?.value
  const running = docs?.map(extensionOf) ?? (await report.retry(() => run.talosctl.extensions(node)))
  const schematic = running.find((e) => e.name === SCHEMATIC)
  const image = MachineConfig.of(node.configFile).installImage()
  const configured = schematicOfImage(image)
  const other =
    configured && schematic?.version !== configured
      ? `it runs ${schematic ? `schematic ${schematic.version}` : 'no Image Factory schematic'}, not ${configured} of machine.install.image`
      : undefined
  if (!schematic) return other
  const have = new Set(running.filter((e) => e.name !== SCHEMATIC).map((e) => e.name))
  const wanted = schematicExtensions(schematic.extraInfo)
  const missing = wanted.filter((name) => !have.has(name))
  if (missing.length === 0) return other
  throw new NodeError(
    'extensions',
    `runs without ${missing.length === 1 ? 'the system extension' : 'the system extensions'} ${missing.join(', ')} that its schematic ${schematic.version} asks for (${wanted.join(', ')}); running: ${[...have].join(', ') || 'none'}${other ? `; ${other}` : ''}`,
    hintForExtensions(node, image),
  )
}

// The versions every node of the cluster runs, read at the end of each day-2 command
// (docs/day2-design.md 2.8): Talos (`talosctl version`'s Tag, one batched call), the schematic (the
// `schematic` extension, one batched `get extensions`) and Kubernetes (each Node's kubelet version,
// one `kubectl get nodes`). The report carries them as `versions`, and the summary ends with the
// line of lib/report/versions.ts. A day-2 phase ends with `versionsStep()`.
import { controlPlanes, kubeNodeName, type ClusterNode } from '../../core/model.ts'
import type { ClusterVersions } from '../../core/results.ts'
import type { ClusterStep } from '../../engine/phase.ts'
import type { Run } from '../../engine/run.ts'
import { groupVersions, versionsLine, type NodeVersions } from '../../report/versions.ts'
import { kubeletVersionOf, type KubeObject } from '../../tools/kubectl.ts'
import { CONTROL_PLANE_COMPONENTS } from './health.ts'
import type { NodeAnswer } from '../../tools/talosctl.ts'

/** The schematic among a node's ExtensionStatus documents: its ID, or null when it runs none. */
function schematicIn(docs: unknown[]): string | null {
  for (const doc of docs) {
    const meta = (doc as { spec?: { metadata?: { name?: unknown; version?: unknown } } }).spec?.metadata
    if (meta?.name === 'schematic' && typeof meta.version === 'string' && meta.version) return meta.version
  }
  return null
}

/**
 * What each of `nodes` runs, read once for all of them: `talosctl version` and `get extensions`
 * batched through the first control plane, `kubectl get nodes`. A read that fails leaves its map
 * empty (kube: undefined), and a node it could not tell is absent: its caller reads it alone, or
 * leaves it unknown.
 */
export async function readNodesAtOnce(
  run: Run,
  nodes: ClusterNode[],
): Promise<{
  talos: Map<string, NodeAnswer<string>>
  extensions: Map<string, NodeAnswer<unknown[]>>
  kube: Map<string, KubeObject> | undefined
}> {
  const via: ClusterNode | undefined = controlPlanes(run.inventory)[0] ?? nodes[0]
  if (!via) return { talos: new Map(), extensions: new Map(), kube: undefined }
  const [talos, extensions, kube] = await Promise.all([
    run.talosctl.versions(nodes, via).catch(() => new Map<string, never>()),
    // the first node resolves the type: the endpoint itself first
    run.talosctl.resources([via, ...nodes.filter((n) => n !== via)], via, 'extensions').catch(() => new Map<string, never>()),
    run.kubectl.list('nodes').catch(() => undefined),
  ])
  return { talos, extensions, kube: kube ? new Map(kube.map((o) => [o.metadata.name, o])) : undefined }
}

/** Every node's versions, each read once for all nodes; what could not be read stays unknown. */
export async function readClusterVersions(run: Run): Promise<ClusterVersions> {
  const all = run.inventory.nodes
  if (all.length === 0) return groupVersions([])
  // a read that fails leaves its versions unknown: it never fails the command it ends
  const { talos, extensions, kube } = await readNodesAtOnce(run, all)
  const byName = kube ?? new Map<string, KubeObject>()
  return groupVersions(
    all.map((node): NodeVersions => {
      const ext = extensions.get(node.address)
      return {
        name: node.name,
        ...(talos.get(node.address)?.value ? { talos: talos.get(node.address)?.value } : {}),
        ...(kubeletVersionOf(byName.get(kubeNodeName(node))) ? { kubernetes: kubeletVersionOf(byName.get(kubeNodeName(node))) } : {}),
        ...(ext?.value ? { schematic: schematicIn(ext.value) } : {}),
      }
    }),
  )
}

/**
 * The last step of a day-2 phase: the versions read (kept for the report) and printed. It runs
 * after failures too (a cluster left at mixed versions is what a failed upgrade must say); not in a
 * DRY_RUN, which changed nothing.
 */
export function versionsStep(): ClusterStep {
  return {
    kind: 'cluster',
    name: 'versions',
    title: 'The versions the nodes run',
    ready: (run) => (run.options.planOnly || run.options.dryRun ? { skip: 'DRY_RUN: nothing changed' } : true),
    run: async (run) => {
      const versions = await readClusterVersions(run)
      run.facts.cluster.versions = versions
      return versionsLine(versions)
    },
  }
}

/** A control plane's mirror pods by component, the three read in one kubectl call (a component without one absent). */
export async function mirrorPods(run: Run, node: ClusterNode): Promise<Map<string, KubeObject>> {
  const name = (component: string): string => `${component}-${kubeNodeName(node)}`
  const pods = await run.kubectl.getMany('pod', CONTROL_PLANE_COMPONENTS.map(name), 'kube-system')
  const out = new Map<string, KubeObject>()
  for (const component of CONTROL_PLANE_COMPONENTS) {
    const pod = pods.get(name(component))
    if (pod) out.set(component, pod)
  }
  return out
}

/** The first container's image of a pod spec. */
export function firstImage(podSpec: unknown): string | undefined {
  return (podSpec as { containers?: Array<{ image?: string }> } | undefined)?.containers?.[0]?.image
}

export const podImage = (pod: KubeObject | undefined): string | undefined => firstImage(pod?.spec)

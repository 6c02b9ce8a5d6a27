import type { CommandArgs } from '../cli/args.ts'
import type { Facts } from './facts.ts'
import type { Journal } from '../state/journal.ts'
import type { ClusterNode, Inventory } from '../core/model.ts'
import type { Redactor } from '../input/redact.ts'
import type { Settings } from '../input/settings.ts'
import type { ToolRunner } from '../tools/exec.ts'
import type { Flux } from '../tools/flux.ts'
import type { Sops } from '../tools/sops.ts'
import type { Helm } from '../tools/helm.ts'
import type { Helmfile } from '../tools/helmfile.ts'
import type { Kubectl } from '../tools/kubectl.ts'
import type { Talosctl } from '../tools/talosctl.ts'

export interface RunOptions {
  dryRun: boolean
  failFast: boolean
  /** apply again, over the authenticated API, to nodes that already have a config */
  reapply: boolean
  /**
   * recovering nodes of a running cluster (bootstrap:node): never bootstrap etcd, only rejoin;
   * keep an existing kubeconfig
   */
  recover: boolean
  /** wipe the selected node back to maintenance first (bootstrap:node RESET=true) */
  reset: boolean
  /** confirmation for destructive steps given on the command line */
  yes: boolean
  /**
   * DRY_RUN of a command whose plan reads the nodes (cluster:apply): the reads and the nodes' own
   * dry runs run, nothing is changed, and the steps after the plan are skipped
   */
  planOnly?: boolean
  /** cluster:apply: MODE as given (the phase checks it) */
  mode?: string
  /** cluster:apply: configs carrying an older Kubernetes than a node runs are applied (--allow-k8s-downgrade) */
  allowK8sDowngrade?: boolean
  /** upgrade:talos, cluster:apply: the only control plane may go down, after an etcd snapshot (--accept-downtime) */
  acceptDowntime?: boolean
  /** upgrade:talos: the target and what the operator allows (the phase checks it) */
  upgrade?: CommandArgs['upgrade']
  /** upgrade:k8s: TO and --endpoint (the phase checks them) */
  k8s?: CommandArgs['k8s']
}

/** Everything a phase may use: settings, the selected nodes, the tools, the facts, the abort signal. */
export interface Run {
  command: string
  settings: Settings
  inventory: Inventory
  nodes: ClusterNode[]
  options: RunOptions
  signal: AbortSignal
  facts: Facts
  redactor: Redactor
  tools: ToolRunner
  talosctl: Talosctl
  kubectl: Kubectl
  helm: Helm
  helmfile: Helmfile
  flux: Flux
  sops: Sops
  /** absolute path of the kubeconfig the bootstrap phase writes and later phases use */
  kubeconfig: string
  /** what earlier runs achieved per node (re-checked against the live state, which wins) */
  journal: Journal
  /** node name -> the phase it failed in (filled by the runner; later phases skip these nodes) */
  failed: Map<string, string>
  /** prints a warning line (stderr) */
  warn: (message: string) => void
}

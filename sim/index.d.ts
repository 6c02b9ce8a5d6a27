// Types for TypeScript tests; the implementation is plain ESM JavaScript (index.js).
export interface ScenarioNode {
  name: string
  ip: string
  role: 'controlplane' | 'worker'
  image?: 'iso' | 'disk'
  /** the Talos this node runs (a cluster mid-upgrade runs two); default the cluster's */
  talosVersion?: string
  disks?: {
    dev: string
    size?: string | number
    model?: string
    serial?: string
    transport?: string
    rotational?: boolean
    readonly?: boolean
  }[]
  installDisk?: string
  installDiskSelector?: Record<string, unknown>
  /** the machine's memory (default 4GiB); MemTotal is this less 100 MiB the kernel keeps */
  memory?: string | number
  /** the firmware boots with secure boot on (SecurityState secureBoot) */
  secureBoot?: boolean
  /** the system extensions the node runs (default: the schematic's) */
  extensions?: string[]
  /** the Image Factory schematic of the image it runs: the extensions it asks for */
  schematic?: { extensions: string[] }
}
export interface Fault {
  node?: string | null
  on?: string
  kind: string
  times?: number | null
  ms?: number | null
  message?: string | null
  path?: string | null
  /** fault clock: the node's clock minus the real time, in seconds */
  offsetS?: number
  /** fault cert-sans: the address the node's certificate names instead of its inventory address; node-ip: the InternalIP its Node registers with */
  address?: string
  /** fault chart: the chart (its name) whose pods crash-loop */
  chart?: string
  /** fault static-pod: the control plane component that does not run */
  pod?: 'kube-apiserver' | 'kube-controller-manager' | 'kube-scheduler'
  /** fault static-pod: it starts and exits (CrashLoopBackOff) instead of never starting */
  restarts?: boolean
  /** fault image-pull: the image no pull gets; image-missing: the installer the registry lacks (default: every one); static-pod,
   * kubelet-crashloop: only while the component runs this image (a version its config moved to: upgrade-k8s) */
  image?: string
}
/** the scenario's timings (simulated seconds; sim/README.md "Scenario schema") */
export type TimingName =
  'maintenance' | 'install' | 'reboot' | 'boot' | 'etcd' | 'kubelet' | 'cni' | 'drain' | 'nodeMonitorGrace' | 'apply' | 'pull' | 'upgrade'
export interface ScenarioInput {
  cluster: {
    name: string
    endpoint?: string
    talosVersion?: string
    kubernetesVersion?: string
    vip?: { address: string; up?: 'after-bootstrap' | 'never' }
    discovery?: 'enabled' | 'disabled'
    /** the generated control planes' cluster.allowSchedulingOnControlPlanes (default false: tainted NoSchedule) */
    allowSchedulingOnControlPlanes?: boolean
    talosconfigRole?: 'os:admin' | 'os:operator' | 'os:reader' | 'os:etcd:backup'
    /** external: no configs or talosconfig written; each node takes its PKI and settings from the config applied to it */
    configs?: 'generated' | 'external'
  }
  speed?: number
  timings?: Partial<Record<TimingName, number>>
  /** the installer images the registry holds (default: every ghcr.io/siderolabs/installer and factory.talos.dev tag of v1.11 to v1.13) */
  installers?: string[]
  nodes: ScenarioNode[]
  faults?: Fault[]
  /** what the Git repository's root Kustomization applies, and the age identity its SOPS secrets are encrypted to */
  flux?: { repository?: FluxRepoEntry[]; ageKey?: string; git?: { hostKeyScan?: 'ok' | 'refused'; deployKey?: 'accepted' | 'refused' } }
}
export interface FluxRepoEntry {
  kind: 'Kustomization' | 'HelmRelease'
  name: string
  namespace?: string
  parent?: string
  wait?: boolean
  decryption?: boolean
  fail?: string
}
export interface Scenario {
  cluster: Required<ScenarioInput['cluster']> & { vip: { address: string; up: string } | null }
  talosMinor: number
  speed: number
  timings: Record<TimingName, number>
  installers: string[] | null
  nodes: Required<ScenarioNode>[]
  faults: Fault[]
}
export interface CallRecord {
  time: string
  node: string | null
  ip: string | null
  tool: string
  call: string
  command: string
  args: string[]
  outcome: string
  purpose?: string
  /** a talosctl call the node answered (outcome `ok…`): the boot ID of the node's boot that answered it */
  boot?: string
}
export interface NodeView {
  name: string
  ip: string
  role: string
  image: string
  stage: string
  ready: boolean
  unmetConditions: { name: string; reason: string }[]
  configured: boolean
  installed: boolean
  listener: 'off' | 'maintenance' | 'secure' | 'pki' | 'hang'
  etcdMember: string | null
  etcdHealthy: boolean
  apiServerUp: boolean
  registered: boolean
  bootId: string
  services: Record<string, string>
}
export interface Pki {
  talos: { ca: { cert: string; key: string }; apid: { cert: string; key: string }; admin: { cert: string; key: string } }
  kube: { ca: { cert: string; key: string }; server: { cert: string; key: string }; admin: { cert: string; key: string } }
  maintenance: Map<string, { cert: string; key: string }>
  /** the chart repository's CA (helm --ca-file) and its server certificate for 127.0.0.1 */
  charts: { ca: { cert: string; key: string }; server: { cert: string; key: string } }
}
/** sim/charts/repo.js: the chart repository real helm installs the CNI from */
export interface ChartRepo {
  url: string
  /** host:port of the OCI registry on the same listener (sim/charts/oci.js) */
  registry: string
  requests: string[]
  close(): Promise<void>
}
/** sim/kube-real.js: the real control plane of a simulated cluster (SIM_KUBE=real) */
export interface RealKube {
  /** the API server's own address (https://<address>:6443), behind every control plane's :6443 and the VIP */
  readonly address: string
  /** the API server answers /readyz and Talos's manifests are applied */
  readonly serving: boolean
  /** ms since the epoch: the start of the control plane, the API server's first ready /readyz */
  readonly t0?: number
  readonly readyAt?: number
  /** ms since the epoch: kube-apiserver spawned, its port answering (not ready yet) */
  readonly spawnedAt?: number
  readonly answeringAt?: number
  /** why the control plane did not start (logged) */
  readonly error?: Error
  /** resident memory (kB) per running process (kube-apiserver, kube-controller-manager, kube-scheduler, etcd-<node>) */
  rss(): Record<string, number>
  /** CPU time (ms, user + system) so far per running process (the same names), and as it was at the API server's first ready */
  cpu(): Record<string, number>
  readonly cpuAtReady?: Record<string, number>
  /** the node's Node reads Ready (its kubelet's last list) */
  nodeReady(name: string): boolean
  pids(): number[]
  /** stop one real component until startComponent (a leader-elected one is otherwise restarted when it exits) */
  stopComponent(name: 'kube-apiserver' | 'kube-controller-manager' | 'kube-scheduler'): Promise<void>
  startComponent(name: 'kube-apiserver' | 'kube-controller-manager' | 'kube-scheduler'): Promise<void>
}
export interface Simulator {
  scenario: Scenario
  pki: Pki
  dir: string
  binDir: string
  clusterDir: string
  talosMinor: number
  /** TALOSCONFIG is absent with cluster.configs: external */
  env: { PATH: string; TALOSCONFIG: string; KUBECONFIG: string; CLUSTER_DIR: string; SIM_OCI_REGISTRY?: string; SSL_CERT_FILE?: string }
  kube: unknown
  /** SIM_KUBE=real: the real control plane (sim/kube-real.js), else null */
  realKube: RealKube | null
  chartRepo: ChartRepo
  calls(): CallRecord[]
  node(name: string): NodeView | null
  /** the critical path in real seconds, with what this run measured of the joins and the real API server's start (sim/critical-path.js) */
  criticalPathSeconds(): number
  /** the real etcd members (sim/etcd.js) */
  etcd: { joinsSeconds(): number | null }
  addFault(fault: Fault): void
  /** tests: the node runs these system extensions from now on (what an upgrade to its schematic's installer does) */
  setExtensions(node: string, extensions: string[]): void
  /** tests: a VIP that never came up is fixed (it comes up once etcd and an API server run) */
  fixVip(): void
  /** tests: the VIP goes down (nothing answers at its address) while the control planes' own API servers run on */
  breakVip(): void
  /** tests: another etcd session holds Talos's upgrade mutex through `node`'s member; resolves with its release */
  holdUpgradeMutex(node: string): Promise<() => Promise<void>>
  /** tests: a learner that never starts, added through `node`'s member; resolves with its hex member ID */
  addUnstartedMember(node: string, peerUrl: string): Promise<string>
  clearFault(node: string | null, kind: string): void
  watch(fn: (n: NodeView) => void): () => void
  until(pred: () => boolean, timeoutMs?: number): Promise<void>
  settle(): Promise<void>
  kubeconfigYaml(): string
  stop(): Promise<void>
}
export class ScenarioError extends Error {
  field?: string
  line?: number
}
/** every reboot keeps a node's API down at least this long in wall-clock ms, whatever the speed (sim/node.js afterDown) */
export const REBOOT_FLOOR_MS: number
/** the earliest finish of a clean bootstrap, real seconds, with the control planes' joins as measured if known (sim/critical-path.js) */
export function criticalPathSeconds(
  scenario: Pick<Scenario, 'timings' | 'nodes'>,
  speed: number,
  measured?: { joinsS?: number | null; apiAnsweringS?: number; apiReadyS?: number },
): number
/** the earliest finish of a rolling Talos upgrade: control planes one after another, then ceil(workers/concurrency) worker batches (sim/critical-path.js) */
export function upgradeCriticalPathSeconds(scenario: Pick<Scenario, 'timings' | 'nodes'>, speed: number, concurrency: number): number
export function loadScenario(input: string | ScenarioInput): Scenario
export function parseScenario(text: string, file?: string): Scenario
export function startSimulator(opts: {
  scenario: string | ScenarioInput
  dir?: string
  speed?: number
  log?: (msg: string) => void
  /** 'model' (sim/kube) or 'real' (sim/kube-real.js: the real kube-apiserver, controller-manager and scheduler, the
   *  simulator's kubelets); default SIM_KUBE, else 'real' */
  kube?: 'model' | 'real'
  /** the talosctl <dir>/bin links (tests: talosctl v1.13.9 against v1.13 nodes); default the one `task tools` provides */
  talosctl?: string
}): Promise<Simulator>

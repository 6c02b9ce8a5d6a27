// Types for the TypeScript tests; the implementation is plain ESM JavaScript (index.js).
import type { IncomingMessage, Server, ServerResponse } from 'node:http'

export interface SimClock {
  now(): Date
  after(simSeconds: number, fn: () => void): () => void
}
export interface KubeFaults {
  has(node: string | null, kind: string): boolean
  message(kind: string): string | undefined
  reason?(kind: string): string | undefined
  /** a scenario `chart` fault: the crash message of the pods annotated with that chart, while it lasts */
  chartCrash?(chart: string): string | undefined
}
export interface CallRecord {
  time: string
  node: string | null
  ip?: string | null
  tool: string
  call: string
  command: string
  args: string[]
  outcome: string
  [k: string]: unknown
}
export interface KubeObject {
  apiVersion: string
  kind: string
  metadata: {
    name: string
    namespace?: string
    uid: string
    resourceVersion: string
    generation?: number
    labels?: Record<string, string>
    annotations?: Record<string, string>
    creationTimestamp: string
    [k: string]: unknown
  }
  spec?: any
  status?: any
  [k: string]: any
}
export interface ResourceDef {
  key: string
  group: string
  version: string
  plural: string
  kind: string
  namespaced: boolean
  apiVersion: string
}

export interface Kube {
  handle(req: IncomingMessage, res: ServerResponse): void
  /** coreDNS false: a config with cluster.coreDNS.disabled (no kube-dns Service, no coredns Deployment) */
  bootstrap(options?: { coreDNS?: boolean }): void
  registerNode(node: {
    name: string
    ip: string
    role?: 'controlplane' | 'worker' | string
    kubeletVersion?: string
    osImage?: string
    bootId?: string
  }): void
  removeNode(name: string): void
  kubeletStopped(name: string, graceSeconds: number): void
  cordon(name: string): void
  uncordon(name: string): void
  drain(name: string, opts?: { blocked?: boolean }): { evicted: number; blocked: Array<{ pod: string; pdb: string }> }
  nodeLost(name: string): void
  nodeReady(name: string): boolean
  readonly apiUp: boolean
  setApiUp(up: boolean): void
  stop(): void
  store: {
    readonly rv: string
    get(def: ResourceDef, ns: string | undefined, name: string): KubeObject | undefined
    list(def: ResourceDef, ns?: string): KubeObject[]
    create(def: ResourceDef, obj: object): KubeObject
    update(def: ResourceDef, obj: object, opts?: { checkVersion?: boolean }): KubeObject
    remove(def: ResourceDef, ns: string | undefined, name: string): KubeObject
  }
  registry: { get(group: string, version: string, plural: string): ResourceDef | undefined }
  clock: SimClock
}

export const NOT_READY_MESSAGE: string
export const CNI_ANNOTATION: string
export const CORDONED: string
export function createRealtimeClock(opts?: { speed?: number; start?: Date }): SimClock & { speed: number }
export function createKube(opts?: {
  clock?: SimClock
  kubernetesVersion?: string
  timings?: { cni?: number; [k: string]: number | undefined }
  faults?: KubeFaults
  record?: (c: CallRecord) => void
  historyLimit?: number
}): Kube
export function createKubeServer(opts: {
  kube: Kube
  tls?: { key: string | Buffer; cert: string | Buffer; ca?: string | Buffer; requestCert?: boolean }
  host?: string
  port?: number
}): Promise<{ server: Server; url: string; close(): Promise<void> }>

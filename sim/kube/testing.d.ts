import type { CallRecord, Kube, KubeFaults, SimClock } from './index.js'

export interface TestFaults extends KubeFaults {
  add(node: string | null, kind: string, message?: string): void
  clear(node: string | null, kind: string): void
}
export interface KubectlResult {
  code: number
  stdout: string
  stderr: string
  ms: number
}
export interface TestKube {
  kube: Kube
  clock: SimClock
  faults: TestFaults
  calls: CallRecord[]
  url: string
  kubeconfig: string
  dir: string
  kubectl(args: string[], opts?: { input?: string; timeoutMs?: number }): Promise<KubectlResult>
  writeManifest(name: string, text: string): Promise<string>
  stop(): Promise<void>
}
export function createTestFaults(): TestFaults
export function startTestKube(opts: {
  host: string
  port?: number
  speed?: number
  timings?: Record<string, number>
  kubernetesVersion?: string
  tls?: { key: string; cert: string; ca?: string; requestCert?: boolean; clientCert?: string; clientKey?: string }
  bootstrap?: boolean
}): Promise<TestKube>

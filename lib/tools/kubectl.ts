import { classify } from './classify.ts'
import { NodeError } from '../core/errors.ts'
import { phaseHint, taskCommand } from '../cli/hints.ts'
import type { ToolResult, ToolRunner } from './exec.ts'
import { kubeArgs, kubeCacheFlag, type KubeAccess } from './kube-access.ts'

export interface KubeCondition {
  type: string
  status: string
  reason?: string
  message?: string
  lastTransitionTime?: string
}

export interface KubeObject {
  metadata: {
    name: string
    namespace?: string
    labels?: Record<string, string>
    annotations?: Record<string, string>
    generation?: number
    uid?: string
    resourceVersion?: string
    deletionTimestamp?: string
    ownerReferences?: Array<{ kind: string; name: string; controller?: boolean }>
  }
  spec?: Record<string, unknown> & { nodeName?: string }
  status?: Record<string, unknown> & { conditions?: KubeCondition[]; phase?: string; observedGeneration?: number }
}

const KUBECTL_TIMEOUT = '--request-timeout=20s'
/** what kubectl says for a kind the API does not serve (its CRD is not installed) */
const NOT_SERVED = /the server doesn't have a resource type/
/** reads and patches of a Node before a Conflict (it changed in between, each time) is given up */
const NODE_PATCH_ATTEMPTS = 5
/** the annotation that says this tool cordoned the Node (its value: the command that did) */
export const CORDONED_BY = 'talos-bootstrap.dev/cordoned'
/** the field manager of what this tool applies server-side */
export const FIELD_MANAGER = 'talos-bootstrap'
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration'

/** kubectl verbs that change the cluster (the others read) */
const KUBECTL_CHANGES = new Set([
  'apply',
  'create',
  'delete',
  'patch',
  'replace',
  'annotate',
  'label',
  'cordon',
  'uncordon',
  'drain',
  'taint',
])

/** The kubectl wrapper: always an explicit --kubeconfig, JSON out, a request timeout. */
export class Kubectl {
  private readonly runner: ToolRunner
  private readonly access: KubeAccess
  /** node names, for the happy answers a dry run plans with */
  private readonly nodeNames: string[]
  /** the task a failure's hint tells the user to run again */
  private readonly recoveryTask: string
  /** the API server every call goes to (`--server`), instead of the kubeconfig's (the endpoint) */
  private readonly server: string | undefined
  constructor(runner: ToolRunner, access: KubeAccess, nodeNames: string[] = [], recoveryTask = 'bootstrap:wait-ready', server?: string) {
    this.runner = runner
    this.access = access
    this.nodeNames = nodeNames
    this.recoveryTask = recoveryTask
    this.server = server
  }

  /** The same client, its failures hinting `task` (the phase using it). */
  withRecovery(task: string): Kubectl {
    return new Kubectl(this.runner, this.access, this.nodeNames, task, this.server)
  }

  /** The same client through `server` (a control plane's own API server, while the endpoint does not answer). */
  through(server: string): Kubectl {
    return new Kubectl(this.runner, this.access, this.nodeNames, this.recoveryTask, server)
  }

  /** The kubeconfig and this cluster's context in it, and the server when one is set. */
  private target(server = this.server): string[] {
    return [...kubeArgs(this.access, '--context'), ...(server ? ['--server', server] : [])]
  }

  /** What a healthy cluster would answer, so a dry run walks every step once. */
  private dryItems(resource: string): KubeObject[] {
    const ready = { conditions: [{ type: 'Ready', status: 'True' }] }
    if (resource === 'nodes') return this.nodeNames.map((name) => ({ metadata: { name }, status: ready }))
    if (resource === 'pods')
      return this.nodeNames.map((name) => ({
        metadata: { name: `pod-${name}` },
        spec: { nodeName: name },
        status: { ...ready, phase: 'Running' },
      }))
    return []
  }

  private async call(args: string[], dryRunStdout = '', input?: string): Promise<ToolResult> {
    const result = await this.runner.run({
      tool: 'kubectl',
      args: [...this.target(), KUBECTL_TIMEOUT, ...args],
      dryRunStdout,
      ...(input !== undefined ? { input } : {}),
      ...(KUBECTL_CHANGES.has(args[0] ?? '') ? { mutates: true } : {}),
    })
    if (result.ok) return result
    const { kind, message } = classify(result)
    throw new NodeError(
      kind,
      message,
      kind === 'unreachable' || kind === 'timeout'
        ? `the Kubernetes API does not answer yet; run again once the control planes are up: ${taskCommand(this.recoveryTask)}`
        : phaseHint(this.recoveryTask, 'see the message'),
    )
  }

  async clientVersion(): Promise<string> {
    const result = await this.runner.run({
      tool: 'kubectl',
      args: [kubeCacheFlag(this.access), 'version', '--client', '-o', 'json'],
      local: true,
      reusable: { key: ['version', '--client', '-o', 'json'] },
      dryRunStdout: '{"clientVersion":{"gitVersion":"(dry run)"}}',
    })
    return (JSON.parse(result.stdout || '{}') as { clientVersion?: { gitVersion?: string } }).clientVersion?.gitVersion ?? 'unknown'
  }

  /**
   * `get --raw /readyz` through `server` (a node address or the endpoint): true when ready, false
   * while it does not answer or answers not ready. A failure no wait clears (a certificate the
   * kubeconfig does not trust, credentials refused) throws, instead of passing for "not ready yet".
   */
  async readyz(server?: string): Promise<boolean> {
    const result = await this.runner.run({
      tool: 'kubectl',
      args: [...this.target(server), '--request-timeout=5s', 'get', '--raw', '/readyz'],
      dryRunStdout: 'ok',
    })
    if (result.ok) return result.stdout.trim() === 'ok'
    const { kind, message } = classify(result)
    if (kind === 'interrupted') throw new NodeError(kind, message, `run again to resume: ${taskCommand('bootstrap:wait-ready')}`)
    const text = `${result.stderr}\n${result.stdout}`
    if (/x509:|tls: |certificate/i.test(text)) {
      throw new NodeError(
        'pki-mismatch',
        `the Kubernetes API at ${server ?? 'the kubeconfig server'} presented a certificate the kubeconfig does not accept: ${message}`,
        `the kubeconfig is from another cluster or stale: write it again with ${taskCommand('bootstrap:etcd')} (or fix certificate-authority-data), then run: ${taskCommand('bootstrap:wait-ready')}`,
      )
    }
    if (
      /error loading config file|invalid configuration|no configuration has been provided|server localhost:8080 was refused/i.test(text)
    ) {
      throw new NodeError(
        'config-invalid',
        `kubectl cannot use the kubeconfig ${this.access.kubeconfig}: ${message}`,
        `write it again with ${taskCommand('bootstrap:etcd')} (or fix the file), then run: ${taskCommand('bootstrap:wait-ready')}`,
      )
    }
    if (/\(Unauthorized\)|\(Forbidden\)|must be logged in/i.test(text)) {
      throw new NodeError(
        'unauthorized',
        `the Kubernetes API refused the kubeconfig's credentials: ${message}`,
        `write the kubeconfig again with ${taskCommand('bootstrap:etcd')}, then run: ${taskCommand('bootstrap:wait-ready')}`,
      )
    }
    // refused, timed out, 5xx or "readyz check failed": not ready yet
    return false
  }

  async list(
    resource: string,
    options: { namespace?: string; selector?: string; fieldSelector?: string; allNamespaces?: boolean } = {},
  ): Promise<KubeObject[]> {
    const args = ['get', resource, '-o', 'json']
    if (options.allNamespaces) args.push('-A')
    else if (options.namespace) args.push('-n', options.namespace)
    if (options.selector) args.push('-l', options.selector)
    if (options.fieldSelector) args.push('--field-selector', options.fieldSelector)
    const result = await this.call(args, JSON.stringify({ items: this.dryItems(resource) }))
    return (JSON.parse(result.stdout) as { items: KubeObject[] }).items
  }

  /** Lists a kind the API may not serve (its CRD not installed yet): undefined then, any other failure thrown. */
  async listServed(
    resource: string,
    options: { namespace?: string; selector?: string; allNamespaces?: boolean } = {},
  ): Promise<KubeObject[] | undefined> {
    try {
      return await this.list(resource, options)
    } catch (err) {
      if (err instanceof NodeError && NOT_SERVED.test(err.message)) return undefined
      throw err
    }
  }

  /**
   * Server-side apply of manifests given on stdin (never written to disk). Unlike client-side
   * apply it keeps no last-applied-configuration copy of the object (for a Secret: its values in
   * plain text); one left by an earlier client-side apply is removed. The settings own these
   * objects, so their fields are taken over from another manager (--force-conflicts).
   */
  async applyServerSide(manifests: string): Promise<KubeObject[]> {
    const result = await this.call(
      ['apply', '--server-side', `--field-manager=${FIELD_MANAGER}`, '--force-conflicts', '-o', 'json', '-f', '-'],
      '{"items":[]}',
      manifests,
    )
    const out = JSON.parse(result.stdout || '{}') as KubeObject & { items?: KubeObject[]; kind?: string }
    const objects = out.items ?? (out.metadata ? [out] : [])
    for (const o of objects) {
      const annotations = (o.metadata as { annotations?: Record<string, string> }).annotations
      if (annotations?.[LAST_APPLIED] === undefined) continue
      const kind = (o as { kind?: string }).kind ?? ''
      await this.call([
        'annotate',
        kind.toLowerCase(),
        o.metadata.name,
        ...(o.metadata.namespace ? ['-n', o.metadata.namespace] : []),
        `${LAST_APPLIED}-`,
      ])
    }
    return objects
  }

  async get(resource: string, name: string, namespace?: string): Promise<KubeObject | undefined> {
    const args = ['get', resource, name, '-o', 'json', '--ignore-not-found', ...(namespace ? ['-n', namespace] : [])]
    const dry: KubeObject = {
      metadata: { name, ...(namespace ? { namespace } : {}) },
      spec: { selector: { matchLabels: { app: name } } },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    }
    const result = await this.call(args, JSON.stringify(dry))
    return result.stdout.trim() ? (JSON.parse(result.stdout) as KubeObject) : undefined
  }

  /**
   * Several objects of one kind by name in one kubectl process (`get <kind> a b c`: a List, or the
   * object alone when one name is given), by name; a name that does not exist is absent from the map.
   */
  async getMany(resource: string, names: readonly string[], namespace?: string): Promise<Map<string, KubeObject>> {
    const args = ['get', resource, ...names, '-o', 'json', '--ignore-not-found', ...(namespace ? ['-n', namespace] : [])]
    const dry = {
      kind: 'List',
      items: names.map((name) => ({
        metadata: { name, ...(namespace ? { namespace } : {}) },
        status: { conditions: [{ type: 'Ready', status: 'True' }] },
      })),
    }
    const result = await this.call(args, JSON.stringify(dry))
    if (!result.stdout.trim()) return new Map()
    const parsed = JSON.parse(result.stdout) as KubeObject & { kind?: string; items?: KubeObject[] }
    const items = parsed.kind === 'List' ? (parsed.items ?? []) : [parsed]
    return new Map(items.map((item) => [item.metadata.name, item]))
  }

  /**
   * Cordons the Node and marks it as this tool's in one merge patch (unschedulable and the annotation
   * CORDONED_BY), so the mark cannot be lost between two calls and survives a lost journal. A Node
   * already unschedulable without our mark is someone else's cordon: left as it is (false). The patch
   * carries the resourceVersion read, so a cordon that lands in between fails the patch (Conflict)
   * instead of being taken over. True: the Node is cordoned by us (now or by an earlier run). `read`:
   * the Node as the caller just read it, decided on first (as uncordonOwned's).
   */
  async cordonOwned(node: string, owner: string, read?: KubeObject): Promise<boolean> {
    return this.patchNodeAsRead(
      node,
      (current) => {
        if (!current)
          throw new NodeError('node-not-ready', `no Node ${node} in the cluster`, phaseHint(this.recoveryTask, 'see the message'))
        if (current.metadata.annotations?.[CORDONED_BY] !== undefined) return { result: true }
        if (current.spec?.unschedulable === true) return { result: false }
        return { result: true, patch: { metadata: { annotations: { [CORDONED_BY]: owner } }, spec: { unschedulable: true } } }
      },
      read,
    )
  }

  /**
   * Uncordons the Node only when it carries our mark, removing both in one patch; false when it was not
   * ours. `read`: the Node as the caller just read it, decided on first (its resourceVersion guards the
   * patch: a Node changed since answers Conflict, and is read again).
   */
  async uncordonOwned(node: string, read?: KubeObject): Promise<boolean> {
    return this.patchNodeAsRead(
      node,
      (current) =>
        current?.metadata.annotations?.[CORDONED_BY] === undefined
          ? { result: false }
          : { result: true, patch: { metadata: { annotations: { [CORDONED_BY]: null } }, spec: { unschedulable: null } } },
      read,
    )
  }

  /**
   * A merge patch decided on the Node as read, sent with that read's resourceVersion: a Node changed
   * in between (its kubelet's status, another client's cordon) answers Conflict, and is read and
   * decided on again (a few times: a Node's status changes every few seconds).
   */
  private async patchNodeAsRead<T>(
    node: string,
    decide: (current: KubeObject | undefined) => {
      result: T
      patch?: { metadata: Record<string, unknown>; spec: Record<string, unknown> }
    },
    read?: KubeObject,
  ): Promise<T> {
    // a Node the caller read counts as no attempt of ours: it may be a few seconds old
    for (let attempt = read ? 0 : 1; ; attempt++) {
      const current = attempt === 0 ? read : await this.get('node', node)
      const { result, patch } = decide(current)
      if (!patch) return result
      const body = { ...patch, metadata: { ...patch.metadata, resourceVersion: current?.metadata.resourceVersion } }
      try {
        await this.call(['patch', 'node', node, '--type', 'merge', '-p', JSON.stringify(body)])
        return result
      } catch (err) {
        if (!(err instanceof NodeError) || !/\(Conflict\)/.test(err.message) || attempt >= NODE_PATCH_ATTEMPTS) throw err
      }
    }
  }

  /**
   * `kubectl drain`: evictions through the eviction API, so PodDisruptionBudgets hold (a 429 is retried
   * every 5 s until --timeout: k8s.io/kubectl pkg/drain); DaemonSet pods stay, emptyDir data goes, each
   * pod's own grace period. The call's deadline is the drain's timeout plus a margin for kubectl itself.
   */
  async drain(node: string, timeoutMs: number): Promise<void> {
    const seconds = Math.max(1, Math.ceil(timeoutMs / 1000))
    const result = await this.runner.run({
      tool: 'kubectl',
      args: [
        ...this.target(),
        KUBECTL_TIMEOUT,
        'drain',
        node,
        '--ignore-daemonsets',
        '--delete-emptydir-data',
        '--grace-period=-1',
        `--timeout=${seconds}s`,
      ],
      mutates: true,
      timeoutMs: timeoutMs + 30_000,
    })
    if (result.ok) return
    const { kind, message } = classify(result)
    const blocked = /global timeout reached|Cannot evict pod as it would violate the pod's disruption budget/.test(result.stderr)
    throw new NodeError(blocked ? 'drain-blocked' : kind, message, phaseHint(this.recoveryTask, 'see the message'))
  }

  async applyFile(file: string): Promise<string> {
    const result = await this.call(['apply', '-f', file], 'applied (dry run)')
    return result.stdout.trim()
  }
}

export function condition(obj: KubeObject | undefined, type: string): KubeCondition | undefined {
  return obj?.status?.conditions?.find((c) => c.type === type)
}

/** The boot ID a Node's kubelet last reported: a new one means the kubelet registered it again. */
/** The Node's kubelet version (`status.nodeInfo.kubeletVersion`). */
export function kubeletVersionOf(node: KubeObject | undefined): string | undefined {
  return (node?.status as { nodeInfo?: { kubeletVersion?: string } } | undefined)?.nodeInfo?.kubeletVersion || undefined
}

export function bootIdOf(node: KubeObject | undefined): string | undefined {
  return (node?.status as { nodeInfo?: { bootID?: string } } | undefined)?.nodeInfo?.bootID
}
